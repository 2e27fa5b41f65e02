"""A private, throwaway PostgreSQL server, for pgbench and for testing the PostgreSQL store.

It never touches the system cluster: it has its own data directory, listens only on a
loopback port, keeps its unix sockets in a private directory, and everything it
created except its log is removed when it stops. Authentication is `trust`, so while
it runs any local user can connect to it; it holds nothing but benchmark and test data.
"""

from __future__ import annotations

import logging
import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from perfline.system.process import CommandFailed, ToolMissing, require_tool, run, tail

log = logging.getLogger(__name__)

# Debian installs each major version side by side under here, e.g. 15/bin.
DEBIAN_ROOT = Path("/usr/lib/postgresql")
HOST = "127.0.0.1"
# initdb and postgres refuse to run as root; the Debian package creates this user.
ROOT_SERVER_USER = "postgres"
SERVER_TOOLS = ("initdb", "postgres", "pg_ctl", "pg_isready")
STOP_TIMEOUT = 60.0


class ServerFailed(RuntimeError):
    """The server did not start; `reason` says how, `output_tail` is the end of its log."""

    def __init__(self, reason: str, log_path: Path | None = None) -> None:
        self.reason = reason
        self.output_tail = ""
        message = reason
        if log_path is not None and log_path.exists():
            self.output_tail = tail(log_path.read_text(errors="replace"))
            message += f"\n--- last lines of {log_path} ---\n{self.output_tail}"
        super().__init__(message)


def find_bindir() -> Path:
    """Where the server binaries are: newest Debian version, else pg_config, else PATH."""
    versions = [
        d
        for d in DEBIAN_ROOT.glob("*/bin")
        if re.fullmatch(r"\d+(\.\d+)*", d.parent.name) and _has_server_tools(d)
    ]
    if versions:
        return max(versions, key=lambda d: tuple(int(n) for n in d.parent.name.split(".")))
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        try:
            candidates.append(Path(run([pg_config, "--bindir"], timeout=30).stdout.strip()))
        except CommandFailed as exc:
            log.debug("pg_config --bindir failed: %s", exc)
    postgres = shutil.which("postgres")
    if postgres is not None:
        candidates.append(Path(postgres).parent)
    for bindir in candidates:
        if _has_server_tools(bindir):
            return bindir
    raise ToolMissing(
        f"PostgreSQL server binaries ({', '.join(SERVER_TOOLS)}) not found in "
        f"{DEBIAN_ROOT}/*/bin, pg_config --bindir or PATH: install the Debian package "
        "postgresql (`make install-deps` installs everything perfline uses)"
    )


def _has_server_tools(bindir: Path) -> bool:
    return all(os.access(bindir / tool, os.X_OK) for tool in SERVER_TOOLS)


def client_args(port: int, user: str) -> list[str]:
    """Connection options for libpq tools (psql, createdb, pgbench, pg_isready)."""
    return ["-h", HOST, "-p", str(port), "-U", user]


def initdb_options(user: str) -> list[str]:
    """initdb's options after `-D DATA`: a trust-only, throwaway cluster."""
    # The data is thrown away with the server, so syncing it to disk only costs time.
    return ["-U", user, "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"]


def server_options(port: int, socket_dir: str, settings: Mapping[str, str]) -> dict[str, str]:
    """postgres's `-c` settings: loopback only, sockets in a private directory."""
    return {"listen_addresses": HOST, "port": str(port), "unix_socket_directories": socket_dir, **settings}


def start_script(home: str, port: int, settings: Mapping[str, str], start_timeout: float) -> str:
    """PrivateServer.start as a shell script, for a machine perfline does not run on (a
    VM guest, as root): in `home`, the newest Debian server version, run as the
    postgres user. It leaves that version's bin directory in $bindir."""
    data, sockets, log_file = f"{home}/data", f"{home}/run", f"{home}/postgres.log"
    options = " ".join(f"-c {name}={value}" for name, value in server_options(port, sockets, settings).items())
    as_server = shlex.join(as_user("setpriv", ROOT_SERVER_USER, ROOT_SERVER_USER))
    return f"""set -e
bindir=$(ls -d {DEBIAN_ROOT}/*/bin | sort -V | tail -n 1)
install -d -m 0700 -o {ROOT_SERVER_USER} -g {ROOT_SERVER_USER} {home} {data} {sockets}
cd {home}
{as_server} "$bindir/initdb" -D {data} {shlex.join(initdb_options(ROOT_SERVER_USER))} > {home}/initdb.log 2>&1 \
    || {{ tail -n 20 {home}/initdb.log >&2; exit 1; }}
{as_server} "$bindir/pg_ctl" start -w -t {start_timeout:.0f} -D {data} -l {log_file} -o {shlex.quote(options)} > /dev/null \
    || {{ tail -n 20 {log_file} >&2; exit 1; }}
"""


def as_user(setpriv: str, user: str | int, group: str | int) -> list[str]:
    """The prefix that runs a command as another user; setpriv execs in place, so the
    pid started is the command's own."""
    return [setpriv, f"--reuid={user}", f"--regid={group}", "--init-groups", "--"]


def free_port() -> int:
    """A loopback TCP port nobody is bound to right now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass(frozen=True)
class _ServerUser:
    """The OS user the server runs as; also the name of its superuser role."""

    name: str
    uid: int
    gid: int
    # Prepended to server-side commands; empty when we already are this user.
    argv_prefix: tuple[str, ...]

    @classmethod
    def for_current_process(cls) -> _ServerUser:
        if os.geteuid() != 0:
            me = pwd.getpwuid(os.geteuid())
            return cls(me.pw_name, me.pw_uid, me.pw_gid, ())
        try:
            pw = pwd.getpwnam(ROOT_SERVER_USER)
        except KeyError:
            raise ToolMissing(
                f"running as root, the PostgreSQL server must run as the system user "
                f"{ROOT_SERVER_USER}, which does not exist: install postgresql "
                "(the Debian package creates that user)"
            ) from None
        prefix = as_user(require_tool("setpriv", "util-linux"), pw.pw_uid, pw.pw_gid)
        return cls(pw.pw_name, pw.pw_uid, pw.pw_gid, tuple(prefix))

    def command(self, argv: Sequence[str | Path]) -> list[str]:
        return [*self.argv_prefix, *map(str, argv)]

    def give(self, path: Path) -> None:
        if os.geteuid() != self.uid:
            os.chown(path, self.uid, self.gid)

    def can_enter(self, directory: Path) -> bool:
        if not self.argv_prefix:
            return os.access(directory, os.X_OK)
        try:
            run(self.command(["test", "-x", directory]), timeout=30)
        except CommandFailed:
            return False
        return True


class PrivateServer:
    """A PostgreSQL server of our own, in `base_dir`; a context manager, or `start`/`stop`.

    `settings` are passed to postgres as `-c name=value` (e.g. {"fsync": "off"}); the
    server's defaults apply otherwise.
    """

    def __init__(
        self,
        base_dir: Path,
        port: int | None = None,
        *,
        settings: Mapping[str, str] | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        self.base_dir = base_dir
        self.settings = dict(settings or {})
        self.start_timeout = start_timeout
        self.bindir = find_bindir()
        self._user = _ServerUser.for_current_process()
        self.log_path = base_dir / "postgres.log"
        self._requested_port = port
        self._port: int | None = None
        self._home = base_dir
        self._created: list[Path] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._argv: list[str | Path] = []

    @property
    def user(self) -> str:
        """The superuser role clients connect as."""
        return self._user.name

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the PostgreSQL server has not been started")
        return self._port

    @property
    def data_dir(self) -> Path:
        return self._home / "data"

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while it runs."""
        return self._proc.pid if self._proc is not None else None

    def bin(self, tool: str) -> Path:
        path = self.bindir / tool
        if not os.access(path, os.X_OK):
            raise ToolMissing(
                f"{tool} not found in {self.bindir}: install the Debian package postgresql"
            )
        return path

    def version(self) -> str:
        """e.g. "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"."""
        return run([str(self.bin("postgres")), "--version"], timeout=30).stdout.strip()

    def client_args(self) -> list[str]:
        """Connection options for libpq tools (psql, createdb, pgbench, pg_isready)."""
        return client_args(self.port, self.user)

    def url(self, dbname: str) -> str:
        """SQLAlchemy URL of database `dbname` on this server."""
        return f"postgresql+psycopg://{self.user}@{HOST}:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """Create database `name`; returns its SQLAlchemy URL."""
        run([str(self.bin("createdb")), *self.client_args(), name], timeout=60)
        return self.url(name)

    def start(self) -> None:
        """initdb, start postgres and wait until it accepts connections; cleans up on failure."""
        if self._proc is not None:
            raise RuntimeError("the PostgreSQL server is already running")
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._home = self._server_home()
        socket_dir = self._home / "run"
        for directory in (self.data_dir, socket_dir):
            try:
                directory.mkdir(mode=0o700)
            except FileExistsError:
                # Left by a crashed run, it may still belong to a live server: never reuse it.
                raise ServerFailed(
                    f"{directory} already exists; remove it if no postgres process uses it"
                ) from None
            self._created.append(directory)
            self._user.give(directory)
        run(
            self._user.command([self.bin("initdb"), "-D", self.data_dir, *initdb_options(self.user)]),
            timeout=300,
            cwd=self._home,
        )
        self._port = self._requested_port or free_port()
        options = server_options(self._port, str(socket_dir), self.settings)
        argv: list[str | Path] = [self.bin("postgres"), "-D", self.data_dir]
        for name, value in options.items():
            argv += ["-c", f"{name}={value}"]
        self._argv = argv
        self._launch()

    def restart(self, down_s: float = 0.0) -> None:
        """Stop the server (fast shutdown: every session is cut, as when the service
        restarts under its clients), wait `down_s`, start it again: same port and data."""
        if self._proc is None:
            raise RuntimeError("the PostgreSQL server is not running")
        self._shut_down(self._proc)
        time.sleep(down_s)
        self._launch()

    def _launch(self) -> None:
        with self.log_path.open("ab") as log_file:
            self._proc = subprocess.Popen(
                self._user.command(self._argv),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=self._home,
                # A terminal's Ctrl-C (SIGINT: fast shutdown) must not stop it behind our back.
                start_new_session=True,
            )
        self._wait_until_ready(self._proc)

    def _server_home(self) -> Path:
        """Where data and sockets go: base_dir, unless the server user cannot reach it.

        As root, base_dir is often under a 0700 directory (/root, pytest's tmp dirs) that
        the postgres user cannot enter; the server then lives in a fresh temp directory.
        """
        if self._user.can_enter(self.base_dir):
            return self.base_dir
        home = Path(tempfile.mkdtemp(prefix="perfline-pg-"))
        self._created.append(home)
        self._user.give(home)
        if not self._user.can_enter(home):
            raise ServerFailed(f"user {self.user} can enter neither {self.base_dir} nor {home}")
        log.info("user %s cannot enter %s; the server lives in %s", self.user, self.base_dir, home)
        return home

    def _wait_until_ready(self, proc: subprocess.Popen[bytes]) -> None:
        isready = [str(self.bin("pg_isready")), "-q", "-t", "1", *self.client_args()]
        isready += ["-d", "postgres"]
        deadline = time.monotonic() + self.start_timeout
        while True:
            status = proc.poll()
            if status is not None:
                raise ServerFailed(
                    f"postgres exited with status {status} while starting", self.log_path
                )
            if subprocess.run(isready, stdin=subprocess.DEVNULL, check=False).returncode == 0:
                return
            if time.monotonic() > deadline:
                raise ServerFailed(
                    f"postgres did not accept connections on {HOST}:{self.port} "
                    f"within {self.start_timeout:g}s",
                    self.log_path,
                )
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server and remove what start created. Idempotent; never raises."""
        if self._proc is not None:
            self._shut_down(self._proc)
            self._proc = None
        for path in reversed(self._created):
            try:
                shutil.rmtree(path)
            except OSError as exc:
                log.warning("could not remove %s: %s", path, exc)
        self._created.clear()

    def _shut_down(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            try:
                run(
                    self._user.command(
                        [self.bin("pg_ctl"), "stop", "-D", self.data_dir, "-m", "fast", "-w",
                         "-t", f"{STOP_TIMEOUT:.0f}"]
                    ),
                    timeout=STOP_TIMEOUT + 10,
                    cwd=self._home,
                )
                proc.wait(timeout=STOP_TIMEOUT)
            except (CommandFailed, ToolMissing, subprocess.TimeoutExpired) as exc:
                log.warning("pg_ctl stop failed (%s); killing postgres (pid %d)", exc, proc.pid)
        if proc.poll() is None:
            # Backends notice their postmaster's death and exit by themselves.
            proc.kill()
            proc.wait()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
