"""The fleet on a real PostgreSQL server with real worker processes, killed for real.

The module has a server of its own: one test restarts it under busy workers. Each test
has its own database, so every job and run counted is that test's.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from noise import SET_NOISE
from perfline.fleet.health import off_class
from perfline.fleet.queue import FleetQueue
from perfline.fleet.status import fleet_status
from perfline.records.status import RunStatus
from perfline.store import Store
from perfline.store.fleet import MachineFacts
from perfline.system.measuring import LOCK_ENV
from perfline.system.pgserver import PrivateServer

pytestmark = pytest.mark.postgres

STALLED_S = 3.0
CLASS = "test-class"
_names = itertools.count(1)


@pytest.fixture(scope="module")
def fleet_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateServer]:
    with PrivateServer(tmp_path_factory.mktemp("fleet-pg"), settings={"fsync": "off"}) as server:
        yield server


@pytest.fixture
def db(fleet_server: PrivateServer) -> str:
    return fleet_server.create_database(f"fleet{next(_names)}")


class Fleet:
    """Worker processes on one database, and the CLI beside them."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.url, self.tmp = url, tmp
        self.workers: dict[str, subprocess.Popen[str]] = {}
        # Two workers on one small test host measure their pace at the same moment: a class
        # tolerance of 300% keeps them in class; the health test's peer is 10x off.
        self.env = {**os.environ, "PERFLINE_DB": url, "PERFLINE_FLEET_STALLED_S": str(STALLED_S),
                    "PERFLINE_FLEET_SPEED_TOLERANCE": "3"}

    def start(self, name: str, *extra: str) -> subprocess.Popen[str]:
        log = (self.tmp / f"{name}.log").open("a")
        # Each worker stands for a machine of its own: its own measuring lock, so two of
        # them on this host measure at once, as two machines do.
        env = {**self.env, LOCK_ENV: str(self.tmp / f"{name}.measure.lock")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "perfline", "worker", "--machine", name, "--class", CLASS, *extra],
            env=env, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.workers[name] = proc
        return proc

    def gated(self, then: str) -> str:
        """A job command whose repetitions wait until the test opens the gate, so the test
        sees a machine busy however slowly its `fleet status` polls run (seconds each on a
        loaded machine: each is a process)."""
        return f"while [ ! -e {self.tmp / 'gate'} ]; do sleep 0.05; done; {then}"

    def open_gate(self) -> None:
        (self.tmp / "gate").touch()

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text()

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "perfline", *args], env=self.env, capture_output=True,
                              text=True, timeout=120, check=False)
        if check:
            assert done.returncode == 0, done.stderr
        return done

    def submit(self, cmd: str, *extra: str) -> int:
        done = self.cli("fleet", "submit", "command", "-p", f"cmd={cmd}", "--warmup", "0", "--no-monitors",
                        "--class", CLASS, "--json", *extra)
        return int(json.loads(done.stdout)[0]["id"])

    def status(self) -> dict[str, list[dict[str, object]]]:
        """What `fleet status --json` prints, computed in this process by the command's
        own function: the tests poll it every 0.2 s, and a poll that starts perfline
        (a second of CPU) kept one of this host's two CPUs from the workers it waits
        for. The command itself is run by `cli_status`."""
        store = Store.open(self.url)
        try:
            with FleetQueue(self.url) as queue:
                found = fleet_status(store, queue, float(self.env["PERFLINE_FLEET_STALLED_S"]))
        finally:
            store.close()
        return json.loads(json.dumps(found.to_json()))

    def cli_status(self) -> dict[str, list[dict[str, object]]]:
        return json.loads(self.cli("fleet", "status", "--json").stdout)

    def job_states(self) -> dict[int, str]:
        return {int(str(j["id"])): str(j["state"]) for j in self.status()["jobs"]}

    def wait_until(self, what: str, done: Callable[[], bool], timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {n}\n{self.log(n)}" for n in self.workers)
                pytest.fail(f"not within {timeout:g} s: {what}\n{logs}")
            time.sleep(0.2)

    def stop_all(self) -> None:
        for proc in self.workers.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def fleet(db: str, tmp_path: Path) -> Iterator[Fleet]:
    fleet = Fleet(db, tmp_path)
    yield fleet
    fleet.stop_all()


def _running_on(fleet: Fleet, name: str) -> int | None:
    """The job the machine runs once its run is stored. A machine is busy from the moment
    it claims an attempt; stopped, killed or cancelled before its run is stored it rightly
    stores none, and the tests that look at the run left behind would find nothing (CI
    once froze a machine in that gap)."""
    for machine in fleet.status()["machines"]:
        if machine["name"] == name and machine["state"] == "busy":
            job = int(str(machine["job"]))
            return job if _run_of(fleet, job, name) is not None else None
    return None


def _run_of(fleet: Fleet, job: int, machine: str) -> int | None:
    store = Store.open(fleet.url)
    try:
        return next((a.run_id for a in store.attempts([job]) if a.machine == machine and a.state == "running"),
                    None)
    finally:
        store.close()


def _completed_runs_per_job(url: str, jobs: list[int]) -> dict[int, list[int]]:
    store = Store.open(url)
    try:
        completed: dict[int, list[int]] = {job: [] for job in jobs}
        for attempt in store.attempts(jobs):
            if attempt.run_id is not None and store.get_run(attempt.run_id).info.status == RunStatus.COMPLETED:
                completed[attempt.job_id].append(attempt.run_id)
        return completed
    finally:
        store.close()


def _idle(fleet: Fleet, *names: str) -> Callable[[], bool]:
    def check() -> bool:
        states = {m["name"]: m["state"] for m in fleet.status()["machines"]}
        return all(states.get(n) == "idle" for n in names)

    return check


def test_a_sigkilled_machines_job_is_run_again_on_another_and_each_job_completes_once(fleet: Fleet) -> None:
    fleet.start("m1")
    fleet.start("m2")
    fleet.wait_until("both machines idle", _idle(fleet, "m1", "m2"))
    jobs = [fleet.submit(fleet.gated(f"echo {i}"), "--repeat", "10") for i in range(4)]
    fleet.wait_until("m1 busy", lambda: _running_on(fleet, "m1") is not None)
    killed_at = time.monotonic()
    os.killpg(fleet.workers["m1"].pid, signal.SIGKILL)
    fleet.open_gate()

    fleet.wait_until("every job succeeded", lambda: all(s == "succeeded" for s in fleet.job_states().values()),
                     timeout=120)
    status = fleet.cli_status()
    by_id = {j["id"]: j for j in status["jobs"]}
    assert sorted(by_id) == sorted(jobs)
    assert {m["name"]: m["state"] for m in status["machines"]}["m1"] == "offline"
    assert all(len(runs) == 1 for runs in _completed_runs_per_job(fleet.url, jobs).values())
    store = Store.open(fleet.url)
    killed = [a for a in store.attempts(jobs) if a.machine == "m1" and a.state != "succeeded"]
    assert len(killed) == 1 and killed[0].state == "stale"
    victim_job = killed[0].job_id
    assert by_id[victim_job]["machine"] == "m2" and by_id[victim_job]["attempts"] == 2
    assert killed[0].run_id is not None
    interrupted = store.get_run(killed[0].run_id).info
    assert interrupted.status == RunStatus.INTERRUPTED and interrupted.finished_at is not None
    # Taken back (its run ended interrupted, in the take-back's transaction) within the
    # stalled timeout plus a sweep's interval and a loaded host's slack, measured from the
    # kill. Not the retry's start: m2 takes the job once it is free, after the job it runs
    # and maybe one more queued before the take-back (at a load of 5, seconds each).
    taken_back_after = (interrupted.finished_at.timestamp() - time.time()) + (time.monotonic() - killed_at)
    assert taken_back_after < STALLED_S + 6.0, taken_back_after
    store.close()


def test_a_stale_attempt_that_finishes_late_adds_no_completed_run(fleet: Fleet) -> None:
    """SIGSTOP freezes a machine mid-job (heartbeats stop too); its job is taken back and
    done elsewhere; SIGCONT lets it finish its run, which must stay interrupted."""
    fleet.start("m1")
    fleet.wait_until("m1 idle", _idle(fleet, "m1"))
    job = fleet.submit(fleet.gated("echo 7"), "--repeat", "12")
    fleet.wait_until("m1 busy", lambda: _running_on(fleet, "m1") == job)
    os.killpg(fleet.workers["m1"].pid, signal.SIGSTOP)
    fleet.open_gate()
    fleet.start("m2")
    fleet.wait_until("the job done by m2", lambda: fleet.job_states()[job] == "succeeded")
    os.killpg(fleet.workers["m1"].pid, signal.SIGCONT)
    fleet.wait_until("m1 back", lambda: "was taken back while this machine was silent" in fleet.log("m1"),
                     timeout=30)
    assert [len(r) for r in _completed_runs_per_job(fleet.url, [job]).values()] == [1]
    store = Store.open(fleet.url)
    stale = next(a for a in store.attempts([job]) if a.machine == "m1")
    assert stale.state == "stale"
    assert stale.run_id is not None and store.get_run(stale.run_id).info.status == RunStatus.INTERRUPTED
    assert fleet.job_states()[job] == "succeeded"
    store.close()


def test_sigterm_interrupts_the_run_and_queues_the_job_again(fleet: Fleet) -> None:
    worker = fleet.start("m1")
    fleet.wait_until("m1 idle", _idle(fleet, "m1"))
    job = fleet.submit(fleet.gated("echo 1"))
    fleet.wait_until("m1 busy", lambda: _running_on(fleet, "m1") == job)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 130
    fleet.open_gate()
    assert fleet.job_states()[job] == "queued"
    store = Store.open(fleet.url)
    (attempt,) = store.attempts([job])
    assert attempt.state == "interrupted"
    assert attempt.run_id is not None and store.get_run(attempt.run_id).info.status == RunStatus.INTERRUPTED
    store.close()
    fleet.start("m1")
    fleet.wait_until("the job done after the restart", lambda: fleet.job_states()[job] == "succeeded")


def test_drain_finishes_the_job_and_takes_no_more_bad_machines_are_skipped(fleet: Fleet) -> None:
    worker = fleet.start("m1")
    fleet.wait_until("m1 idle", _idle(fleet, "m1"))
    first = fleet.submit(fleet.gated("echo 1"), "--repeat", "20")
    fleet.wait_until("m1 busy", lambda: _running_on(fleet, "m1") == first)
    second = fleet.submit("echo 2")
    fleet.cli("fleet", "drain", "m1")
    fleet.open_gate()
    assert worker.wait(timeout=60) == 0
    states = fleet.job_states()
    assert states[first] == "succeeded" and states[second] == "queued"

    fleet.cli("fleet", "enable", "m1")
    bad = fleet.start("m1")
    fleet.wait_until("m1 idle again", _idle(fleet, "m1"))
    fleet.wait_until("the queued job done", lambda: fleet.job_states()[second] == "succeeded")
    fleet.cli("fleet", "drain", "m1")
    bad.wait(timeout=60)

    store = Store.open(fleet.url)
    store.set_hold("m1", None)
    store.set_hold("m1", "bad", "marked by the test")
    store.close()
    fleet.start("m1")
    fleet.start("m2")
    fleet.wait_until("m2 idle", _idle(fleet, "m2"))
    jobs = [fleet.submit(f"echo {i}", "--repeat", "1") for i in range(3)]
    fleet.wait_until("the jobs done", lambda: all(fleet.job_states()[j] == "succeeded" for j in jobs))
    status = fleet.cli_status()
    machines = {j["id"]: j["machine"] for j in status["jobs"]}
    assert {machines[j] for j in jobs} == {"m2"}
    assert {m["name"]: m["state"] for m in status["machines"]}["m1"] == "bad"


def test_cancel_and_priority_order(fleet: Fleet) -> None:
    low = fleet.submit("echo 1", "--repeat", "1", "--priority", "0")
    high = fleet.submit("echo 2", "--repeat", "1", "--priority", "10")
    dropped = fleet.submit("echo 3", "--repeat", "1", "--priority", "5")
    fleet.cli("fleet", "cancel", str(dropped))
    assert "ended already" in fleet.cli("fleet", "cancel", str(dropped), check=False).stderr
    fleet.start("m1")
    fleet.wait_until("both done", lambda: fleet.job_states()[low] == "succeeded")
    states = fleet.job_states()
    assert states[high] == "succeeded" and states[dropped] == "cancelled"
    store = Store.open(fleet.url)
    started = {a.job_id: a.started_at for a in store.attempts([low, high])}
    assert started[high] < started[low]
    assert store.attempts([dropped]) == []

    # Cancelling is seen between repetitions: after the gate, 20 x 0.5 s leave it time.
    running = fleet.submit(fleet.gated("sleep 0.5; echo 3"), "--repeat", "20")
    fleet.wait_until("m1 busy", lambda: _running_on(fleet, "m1") == running)
    fleet.cli("fleet", "cancel", str(running))
    fleet.open_gate()
    fleet.wait_until("the running job cancelled", lambda: fleet.job_states()[running] == "cancelled", timeout=30)
    (attempt,) = store.attempts([running])
    assert attempt.state == "cancelled"
    assert attempt.run_id is not None and store.get_run(attempt.run_id).info.status == RunStatus.INTERRUPTED
    store.close()


def test_postgres_restarting_under_busy_workers_loses_and_duplicates_nothing(
        fleet: Fleet, fleet_server: PrivateServer) -> None:
    # A stalled timeout longer than the outage: live machines are not taken for dead.
    fleet.env["PERFLINE_FLEET_STALLED_S"] = "30"
    jobs = [fleet.submit(fleet.gated(f"sleep 0.2; echo {i}"), "--repeat", "8") for i in range(8)]
    fleet.start("m1")
    fleet.start("m2")
    # Both machines in a job, its run stored, when the server goes: "all machines busy"
    # held at once while no machine had registered yet (all() of none), and the outage
    # then met workers still starting, or none at all when their start outlasted it.
    fleet.wait_until("both busy", lambda: all(_running_on(fleet, name) is not None for name in ("m1", "m2")))
    fleet.open_gate()
    fleet_server.restart(down_s=10)
    fleet.wait_until("every job succeeded", lambda: all(fleet.job_states()[j] == "succeeded" for j in jobs),
                     timeout=180)
    assert all(w.poll() is None for w in fleet.workers.values()), "a worker died with the database"
    completed = _completed_runs_per_job(fleet.url, jobs)
    assert all(len(runs) == 1 for runs in completed.values()), completed
    store = Store.open(fleet.url)
    for runs in completed.values():
        detail = store.get_run(runs[0])
        assert sorted(s.repetition for s in detail.samples) == list(range(8))
    store.close()
    logs = fleet.log("m1") + fleet.log("m2")
    assert "the database does not answer" in logs and "the database answers again" in logs


def test_a_machine_far_off_its_class_is_marked_bad_by_its_health_job(fleet: Fleet) -> None:
    store = Store.open(fleet.url)
    # A machine of the class that ran the pace loop ten times faster than this one can.
    peer = MachineFacts("fast-peer", CLASS, "cpu", 2, 1 << 30, "6.1", "elsewhere", "0" * 32)
    store.register_machine(peer, worker_id=0)
    store.record_health("fast-peer", 30_000, None)
    store.close()
    fleet.start("m1")
    fleet.wait_until("m1 bad", lambda: any(m["name"] == "m1" and m["state"] == "bad"
                                           for m in fleet.status()["machines"]))
    machine = next(m for m in fleet.cli_status()["machines"] if m["name"] == "m1")
    assert "off its class" in str(machine["hold_reason"])


def test_off_class_judges_the_pace_against_the_class_median() -> None:
    assert off_class(500_000, []) is None
    assert off_class(500_000, [480_000, 510_000, 900_000]) is None
    assert "off its class" in str(off_class(700_000, [480_000, 500_000, 510_000]))


def test_fleet_commands_need_a_postgresql_store_and_known_machines(tmp_path: Path, db: str) -> None:
    sqlite = {**os.environ, "PERFLINE_DB": str(tmp_path / "x.db")}
    done = subprocess.run([sys.executable, "-m", "perfline", "fleet", "status"], env=sqlite, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "error:" in done.stderr and "PostgreSQL" in done.stderr
    fleet = Fleet(db, tmp_path)
    unknown = fleet.cli("fleet", "drain", "nosuch", check=False)
    assert unknown.returncode == 2 and "no fleet machine named 'nosuch'" in unknown.stderr
    assert fleet.cli("fleet", "cancel", "999", check=False).returncode == 2
    units = tmp_path / "units"
    fleet.cli("fleet", "install-worker", "--machine", "lab1", "--dir", str(units))
    unit = (units / "perfline-worker-lab1.service").read_text()
    assert "worker --machine lab1" in unit and f"PERFLINE_DB={db}" in unit


def test_queue_survives_being_opened_by_many_at_once(db: str) -> None:
    """Two workers starting together install procrastinate's schema once (advisory lock)."""
    import threading

    errors: list[BaseException] = []

    def open_queue() -> None:
        try:
            FleetQueue(db).close()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=open_queue) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


ROOT = Path(__file__).resolve().parents[1]
CULPRIT = 41  # examples/bisect/make-repo.sh: commit 41 does 8% more work


def test_a_fleet_tracker_tests_confirms_and_bisects_on_the_class_machines(fleet: Fleet, tmp_path: Path) -> None:
    """examples/track/demo.yaml with `fleet: {class: ...}`: the tested commits spread over
    two machines of the class, one series of the class, the regression confirmed and
    bisected to its commit on the fleet."""
    subprocess.run([str(ROOT / "examples" / "bisect" / "make-repo.sh"), str(tmp_path / "src")], check=True)
    text = (ROOT / "examples" / "track" / "demo.yaml").read_text()
    (tmp_path / "tracker.yaml").write_text(f"{text}fleet:\n  class: {CLASS}\n")
    fleet.env["PERFLINE_CACHE_DIR"] = str(tmp_path / "cache")
    fleet.env.update(SET_NOISE)  # the loop's logic under test, not this machine's noise of the day
    fleet.start("m1")
    fleet.start("m2")
    fleet.wait_until("both idle", _idle(fleet, "m1", "m2"))
    tracked = subprocess.run([sys.executable, "-m", "perfline", "track", "run", str(tmp_path / "tracker.yaml"),
                              "--once"], env=fleet.env, capture_output=True, text=True,
                             timeout=900, cwd=tmp_path, check=False)
    assert tracked.returncode == 0, tracked.stderr
    commits = subprocess.run(["git", "-C", str(tmp_path / "src"), "rev-list", "--reverse", "main"],
                             capture_output=True, text=True, check=True).stdout.split()
    listed = json.loads(fleet.cli("regressions", "--json").stdout)
    [regression] = [r for r in listed if r["kind"] == "regression"]
    # The tested commits around the culprit, or a tested commit more on a side where the
    # noise cannot tell two splits apart (track.judging.change_span): the range holds the
    # culprit, and the bisection names it exactly.
    assert commits.index(regression["good"]) < CULPRIT <= commits.index(regression["bad"]), regression
    assert regression["status"] == "bisected", tracked.stderr
    assert regression["culprit"] == commits[CULPRIT]
    store = Store.open(fleet.url)
    tests = [r for r in store.get_runs(store.find_runs(label="demo")).runs
             if not r.settings.get("interleaved") and r.info.status == RunStatus.COMPLETED]
    assert sorted(r.info.kernel_commit or "" for r in tests) == sorted(commits[23::8])
    machines = {a.machine for a in store.attempts() if a.state == "succeeded"}
    assert machines == {"m1", "m2"}
    store.close()


def test_each_machine_gets_its_own_job_and_wait_prints_the_results(fleet: Fleet) -> None:
    fleet.start("m1")
    fleet.start("m2")
    fleet.wait_until("both idle", _idle(fleet, "m1", "m2"))
    done = fleet.cli("fleet", "submit", "command", "-p", "cmd=echo 3", "--repeat", "3", "--warmup", "0",
                     "--no-monitors", "--class", CLASS, "--each-machine", "--label", "each", "--wait", "--json")
    result = json.loads(done.stdout)
    assert [j["state"] for j in result["jobs"]] == ["succeeded", "succeeded"]
    assert [r["label"] for r in result["runs"]] == ["each", "each"]
    store = Store.open(fleet.url)
    machines = sorted(a.machine for a in store.attempts([j["id"] for j in result["jobs"]]))
    store.close()
    assert machines == ["m1", "m2"]
    table = fleet.cli("fleet", "submit", "command", "-p", "cmd=echo 4", "--repeat", "2", "--warmup", "0",
                      "--no-monitors", "--machine", "m2", "--wait")
    assert "command.value" in table.stdout
