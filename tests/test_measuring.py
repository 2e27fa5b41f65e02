"""One measurement at a time on a machine (system/measuring.py): real perfline
processes, a real lock file, a holder killed for real."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from perfline.store import Store
from perfline.system.measuring import LOCK_ENV


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PERFLINE_DB": str(tmp_path / "db"), LOCK_ENV: str(tmp_path / "measure.lock")}


def _run(command: str, repeat: int) -> list[str]:
    return [sys.executable, "-m", "perfline", "run", "command", "-p", f"cmd={command}", "--repeat", str(repeat),
            "--warmup", "0", "--no-monitors", "--json"]


def _holding(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    """Until the holder has written its note into the lock file: it measures."""
    deadline = time.monotonic() + 60
    while f"pid {holder.pid} " not in ((tmp_path / "measure.lock").read_text()
                                        if (tmp_path / "measure.lock").exists() else ""):
        assert holder.poll() is None and time.monotonic() < deadline, holder.communicate()
        time.sleep(0.05)


def test_a_run_waits_its_turn_while_another_perfline_measures_and_the_two_never_overlap(tmp_path: Path) -> None:
    env = _env(tmp_path)
    first = subprocess.Popen(_run("sleep 0.4; echo 1", 5), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    _holding(tmp_path, first)
    second = subprocess.run(_run("echo 2", 2), env=env, capture_output=True, text=True, timeout=120)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0 and second.returncode == 0, (err, second.stderr)
    said = " ".join(second.stderr.split())
    assert f"waiting for the machine: perfline is measuring command (no label), pid {first.pid} since" in said, \
        second.stderr
    [ran_first], [ran_second] = json.loads(out), json.loads(second.stdout)
    store = Store.open(f"sqlite:///{tmp_path / 'db'}")
    one, two = (store.get_run(r["id"]).info for r in (ran_first, ran_second))
    # The second run was not even started (no fingerprint, no tunables) before the first ended.
    assert one.finished_at is not None and two.started_at >= one.finished_at


def test_a_killed_holder_leaves_the_machine_free_at_once(tmp_path: Path) -> None:
    env = _env(tmp_path)
    holder = subprocess.Popen(_run("sleep 30; echo 1", 3), env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        _holding(tmp_path, holder)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    started = time.monotonic()
    after = subprocess.run(_run("echo 2", 2), env=env, capture_output=True, text=True, timeout=120)
    assert after.returncode == 0, after.stderr
    assert "waiting for the machine" not in after.stderr
    # Far less than the killed run's 90 s: it did not wait for a dead holder.
    assert time.monotonic() - started < 60


def test_a_run_waits_while_another_perfline_builds(tmp_path: Path) -> None:
    """A build (a `make -j` of a kernel is the heaviest load perfline makes) holds the
    machine too: a run started during it measures after it."""
    src = tmp_path / "src"
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    (src / "README").write_text("x\n")
    git = ["git", "-C", str(src), "-c", "user.name=Dev", "-c", "user.email=dev@example.org"]
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    env = {**_env(tmp_path), "PERFLINE_CACHE_DIR": str(tmp_path / "cache")}
    code = ("import sys, pathlib; from perfline.builds.worktree import Builder; "
            f"b = Builder(pathlib.Path({str(src)!r}), 'sleep 4; date +%s.%N > built-at'); "
            f"sys.exit(0 if b.build({sha!r}).ok else 1)")
    builder = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    _holding(tmp_path, builder)
    run = subprocess.run(_run("date +%s.%N", 1), env=env, capture_output=True, text=True, timeout=120)
    assert builder.wait(timeout=120) == 0 and run.returncode == 0, (builder.communicate(), run.stderr)
    said = " ".join(run.stderr.split())
    assert f"waiting for the machine: perfline is building {sha[:12]} of src, pid {builder.pid} since" in said, said
    [built_at] = list((tmp_path / "cache").rglob("built-at"))
    [ran] = json.loads(run.stdout)
    store = Store.open(f"sqlite:///{tmp_path / 'db'}")
    [measured_at] = [s.value for s in store.get_run(ran["id"]).samples]
    assert measured_at > float(built_at.read_text())


def test_a_lock_file_that_cannot_be_made_is_one_error_line(tmp_path: Path) -> None:
    env = {**_env(tmp_path), LOCK_ENV: str(tmp_path / "not-a-dir-file" / "lock")}
    (tmp_path / "not-a-dir-file").write_text("")
    done = subprocess.run(_run("echo 1", 1), env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()[-1:]
    assert line.startswith(f"error: {LOCK_ENV}: the measuring lock cannot be made: ") and "unset it" in line


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to be another user")
def test_another_users_lock_file_that_this_user_cannot_write_is_still_taken() -> None:
    """The lock is an flock, which needs no write access: a lock file another user made
    with a strict umask is taken read-only (system/files._held). Turning every OSError
    of making the file into an error line must not refuse this one."""
    # Not under tmp_path: pytest's base directory is root's alone, and nobody (the other
    # user) could not reach the file at all.
    with tempfile.TemporaryDirectory() as shared:
        Path(shared).chmod(0o777)
        lock = Path(shared) / "measure.lock"
        lock.write_text("")
        lock.chmod(0o644)
        script = ("import os\nfrom perfline.system.measuring import measuring_alone\n"
                  "os.setgid(65534); os.setuid(65534)\n"
                  "with measuring_alone('test', print):\n    print('held')\n")
        done = subprocess.run([sys.executable, "-c", script], env={**os.environ, LOCK_ENV: str(lock)},
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "held", done.stderr
