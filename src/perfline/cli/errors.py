"""The command line's one error boundary.

A failure the user caused and can fix (a `UserError`: a job file, a CSV, a store URL;
a `ToolMissing`: a program or native helper the machine lacks; a command line Typer
cannot parse: an unknown option, a value of the wrong type) prints one line
`error: WHERE: what` and exits 2. Anything else is perfline's fault: one
line names the exception and where its full traceback was written, so a user can send
it without the screen filling up; `--debug` (or PERFLINE_DEBUG=1) prints it instead.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from rich.markup import escape
from typer import Abort

# Typer (0.29) parses with its own copy of click; its exceptions are the ones raised.
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

from perfline.cli.common import EXIT_FAILED, EXIT_USAGE, errors
from perfline.records.errors import UserError
from perfline.system.process import ToolMissing

DEBUG_ENV = "PERFLINE_DEBUG"


def debugging(argv: list[str]) -> bool:
    # Read before Typer parses anything: an exception can come from the parsing itself.
    return "--debug" in argv or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def guarded(command: Callable[[], object], argv: list[str]) -> None:
    """Run the CLI; turn every exception into one line and an exit code.

    `command` runs Typer without its standalone mode (`app(standalone_mode=False)`):
    a parse error is raised here instead of printed by Typer as a boxed usage panel, and
    an exit code (`typer.Exit`, `--help`'s 0) is returned.
    """
    try:
        code = command()
    except NoArgsIsHelpError as exc:  # `perfline track`: the group's help, as for --help, but exit 2
        # Rich printed the help while the exception was made; plain click carries it as the message.
        if help_text := exc.format_message().strip():
            print(help_text)
        sys.exit(EXIT_USAGE)
    except UsageError as exc:
        if exc.ctx is None:
            _error(exc.format_message())
        else:
            _error(f"{exc.ctx.command_path}: {exc.format_message()} (see {exc.ctx.command_path} --help)")
        sys.exit(EXIT_USAGE)
    except ClickException as exc:  # click's other refusals (a file option that cannot be opened)
        _error(exc.format_message())
        sys.exit(exc.exit_code)
    except Abort:  # end of input at a prompt
        _error("aborted")
        sys.exit(EXIT_FAILED)
    except (UserError, ToolMissing) as exc:  # a missing tool is the machine's to fix, not a bug to report
        _error(str(exc))
        sys.exit(EXIT_USAGE)
    except Exception as exc:  # the boundary: nothing may reach the user as a traceback
        # SQLAlchemy: only on this path, not at every start (0.5 s of CPU for `perfline --help`).
        from sqlalchemy.exc import OperationalError

        if isinstance(exc, OperationalError):
            # The store went away during the command (a server restarted, a disk filled).
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc)
            _error(f"the store failed: {reason}")
            sys.exit(EXIT_USAGE)
        if debugging(argv):
            raise
        where = _write_traceback(exc)
        _error(f"internal error: {type(exc).__name__}: {exc} (traceback in {where}; "
               f"--debug prints it; please report it)")
        sys.exit(EXIT_FAILED)
    if isinstance(code, int) and code != 0:
        sys.exit(code)


def _error(message: str) -> None:
    errors.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)


def _write_traceback(exc: BaseException) -> Path:
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "perfline"
    text = "".join(traceback.format_exception(exc))
    for folder in (state, Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"traceback-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.txt"
            path.write_text(f"perfline {' '.join(sys.argv[1:])}\n\n{text}")
            return path
        except OSError:
            continue
    return Path("(nowhere: no writable state or temporary directory)")
