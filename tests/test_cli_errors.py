"""The CLI's error boundary: a failure the user caused is one line `error: ...` and exit
2; an internal error is one line naming it and the file holding its traceback. Each
case runs the real command in a subprocess."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest


def perfline(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfline", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got:\n{proc.stderr}"
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_detect_csv_of_a_binary_file(tmp_path: Path) -> None:
    binary = tmp_path / "data.csv"
    binary.write_bytes(b"time,value\n1,2\n" + bytes(range(128, 256)) * 4)
    proc = perfline("--db", str(tmp_path / "s.db"), "detect", "--csv", str(binary))
    assert proc.returncode == 2
    assert one_error_line(proc) == f"error: {binary}:3: not UTF-8 text (a CSV file was expected)"


def test_store_that_is_not_a_database(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.db"
    bogus.write_text("these are my notes, not a database\n" * 100)
    before = bogus.read_bytes()
    proc = perfline("runs", env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PERFLINE_DB": str(bogus)})
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert line.startswith(f"error: {bogus}: cannot open the store: file is not a database")
    assert bogus.read_bytes() == before  # no data lost


def test_postgresql_server_down(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = perfline("--db", f"postgresql+psycopg://perfline:hunter2@127.0.0.1:{port}/perfline", "runs")
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert f"127.0.0.1:{port}" in line and "cannot open the store" in line and "refused" in line.lower()
    assert "hunter2" not in proc.stderr  # the password is hidden


def test_a_job_file_error_names_file_and_line(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: command\nparams:\n  cmd: echo 1\nrepeat: many\n")
    proc = perfline("--db", str(tmp_path / "s.db"), "run", str(job))
    assert proc.returncode == 2
    assert one_error_line(proc).startswith(f"error: {job}:4: ")


def test_internal_error_is_one_line_with_the_traceback_file(tmp_path: Path) -> None:
    """An exception perfline did not expect: one line, the traceback written to a file
    that is named; --debug prints the traceback instead."""
    code = ("import sys; from perfline.cli.errors import guarded\n"
            "def boom(): raise KeyError('surprise')\n"
            "guarded(boom, sys.argv)\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1
    line = one_error_line(proc)
    assert line.startswith("error: internal error: KeyError: 'surprise' (traceback in ")
    written = Path(line.split("traceback in ", 1)[1].split(";", 1)[0])
    assert written.parent == tmp_path / "state" / "perfline"
    assert "KeyError: 'surprise'" in written.read_text() and "def boom" not in line

    debug = subprocess.run([sys.executable, "-c", code, "--debug"], capture_output=True, text=True, env=env,
                           timeout=60)
    assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr


def test_a_store_that_fails_during_a_command_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """SQLAlchemy's OperationalError mid-command (a server restarted, a disk filled): one
    line with the database's reason, exit 2 (cli.errors imports the class only on its
    error path, not at start-up)."""
    from sqlalchemy.exc import OperationalError

    from perfline.cli.errors import guarded

    def lost() -> None:
        raise OperationalError("INSERT INTO samples", {}, sqlite3.OperationalError("disk I/O error\nmore"))

    with pytest.raises(SystemExit) as exited:
        guarded(lost, ["perfline"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip() == "error: the store failed: disk I/O error"


def test_a_store_that_opens_keeps_working(tmp_path: Path) -> None:
    """The boundary does not turn a good store into an error: a fresh file is created."""
    db = tmp_path / "new.db"
    proc = perfline("--db", str(db), "runs")
    assert proc.returncode == 0, proc.stderr
    assert sqlite3.connect(db).execute("select count(*) from runs").fetchone() == (0,)


@pytest.mark.parametrize("args", [["show", "999"], ["compare", "1", "2"]])
def test_missing_runs_are_user_errors(tmp_path: Path, args: list[str]) -> None:
    proc = perfline("--db", str(tmp_path / "s.db"), *args)
    assert proc.returncode == 2
    one_error_line(proc)


def test_a_missing_native_helper_is_the_machines_to_fix_not_an_internal_error(tmp_path: Path) -> None:
    """A checkout where `make native` was not run: the bisection's pace guard needs
    native/build/pace. One `error:` line saying how to build it, exit 2 (it was an
    internal error asking to be reported)."""
    subprocess.run([str(Path(__file__).parents[1] / "examples" / "bisect" / "make-repo.sh"), str(tmp_path / "src")],
                   check=True, capture_output=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PERFLINE_NATIVE_DIR": str(tmp_path / "no-native"),
           "PERFLINE_CACHE_DIR": str(tmp_path / "cache")}
    proc = perfline("--db", str(tmp_path / "s.db"), "bisect", "start", "--repo", str(tmp_path / "src"),
                    "--good", "HEAD~4", "--bad", "HEAD", "--build", "make -s", "--command", "./bench",
                    "--direction", "lower", env=env)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    expected = (f"error: native helper pace not found at {tmp_path / 'no-native' / 'pace'}: run `make native` "
                f"in {Path(__file__).parents[1]} or fix $PERFLINE_NATIVE_DIR")
    assert errors == [expected], proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(("args", "expected"), [
    (["runs", "--limit", "abc"],
     "error: {p} runs: Invalid value for '--limit': Input should be a valid integer, unable to parse "
     "string as an integer (see {p} runs --help)"),
    (["compare", "--nope"], "error: {p} compare: No such option: --nope (see {p} compare --help)"),
    (["bogus"], "error: {p}: No such command 'bogus'. (see {p} --help)"),
    (["bisect", "start"], "error: {p} bisect start: Missing option '--good'. (see {p} bisect start --help)"),
])
def test_a_command_line_typer_cannot_parse_is_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    """A wrong option, value or command is the user's to fix like a bad job file: the one
    `error:` line with the command and where its help is, exit 2, not Typer's usage panel."""
    proc = perfline("--db", str(tmp_path / "s.db"), *args)
    assert proc.returncode == 2
    assert one_error_line(proc) == expected.format(p="python -m perfline")  # the program as it was started
    assert proc.stdout == ""


def test_help_and_exit_codes_pass_through_the_boundary(tmp_path: Path) -> None:
    """Without Typer's standalone mode the boundary gives the exit codes: --help 0, a
    group called without a command its help and 2, a command's own exit code as it was."""
    helped = perfline("runs", "--help")
    assert helped.returncode == 0 and "Usage: python -m perfline runs" in helped.stdout and helped.stderr == ""
    bare = perfline("track")
    assert bare.returncode == 2 and "Usage: python -m perfline track" in bare.stdout and "error" not in bare.stderr
    db = str(tmp_path / "s.db")
    missing = perfline("--db", db, "show", "12345")
    assert missing.returncode == 2 and one_error_line(missing).startswith("error: ")
    assert perfline("--db", db, "runs").returncode == 0
