"""The fleet under load, with machines killed at random, against issue 16.

    .venv/bin/python bench/fleet_load.py [--jobs 2000] [--workers 8] [--kill-every 20]
                                         [--stalled 5] [--rate 0] [--restart-postgres]

Starts a private PostgreSQL server, `--workers` real `perfline worker` processes on this
host (one class), and queues `--jobs` jobs of the `command` benchmark running a 50 ms
command once (`sleep 0.05`, one repetition, no warm-up, no monitors). Every
`--kill-every` finished jobs, one busy worker is SIGKILLed and started again under its
name: its job is taken back after `--stalled` seconds of silence and runs again
elsewhere. With `--restart-postgres`, the server is stopped for 10 s half-way through.

Prints jobs per second (all jobs, from the first queued to the last done), queue
latency (queued -> its successful attempt started, p50/p99; with `--rate 0` every job
is queued at once, so the latency is mostly the backlog: give `--rate` below the
fleet's capacity to see the queue's own), the most connections PostgreSQL saw, and
whether every job was done exactly once, counted in the store: one succeeded attempt
and one completed run per job, and no other completed run of any job.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

from perfline.fleet.queue import FleetQueue, class_queue
from perfline.records.job import Case, case_to_json
from perfline.records.status import RunStatus
from perfline.store import Store
from perfline.system.pgserver import PrivateServer

CLASS = "bench"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--kill-every", type=int, default=20, help="finished jobs between two SIGKILLs (0: none)")
    parser.add_argument("--stalled", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=0.0, help="jobs queued per second (0: all at once)")
    parser.add_argument("--restart-postgres", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="perfline-fleet-load-") as tmp, \
            PrivateServer(Path(tmp) / "pg", settings={"fsync": "off", "max_connections": "200"}) as server:
        url = server.create_database("fleet_load")
        Store.open(url).close()  # the schema, before the workers race for it
        env = {**os.environ, "PERFLINE_DB": url, "PERFLINE_FLEET_STALLED_S": str(args.stalled)}
        logs = Path(tmp) / "logs"
        logs.mkdir()
        workers = {f"w{i}": _start(f"w{i}", env, logs) for i in range(args.workers)}
        queue = FleetQueue(url, outage_wait_s=120)
        store = Store.open(url, outage_wait_s=120)
        _wait_idle(store, len(workers), logs)

        peak = _PeakConnections(server)
        peak.start()
        case = Case(job="fleet-load", benchmark="command", params={"cmd": "sleep 0.05; echo 1"}, tunables={},
                    repeat=1, warmup=0, monitors=(), target="local")
        started = time.time()
        submitter = threading.Thread(target=_submit, args=(queue, case, args.jobs, args.rate), daemon=True)
        submitter.start()
        kills, restarted = 0, False
        done = 0
        while done < args.jobs:
            time.sleep(0.5)
            done = sum(1 for a in store.attempts() if a.state == "succeeded")
            if args.kill_every and done // args.kill_every > kills:
                kills += 1
                name = random.choice(sorted(workers))
                os.killpg(workers[name].pid, signal.SIGKILL)
                workers[name].wait()
                workers[name] = _start(name, env, logs)
            if args.restart_postgres and not restarted and done >= args.jobs // 2:
                restarted = True
                print(f"restarting PostgreSQL (10 s down) at {done} jobs done", flush=True)
                server.restart(down_s=10)
            print(f"\r{done}/{args.jobs} done, {kills} workers killed", end="", flush=True)
        finished = time.time()
        print()
        submitter.join()
        peak.stop()
        for proc in workers.values():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        _report(store, queue, args, started, finished, kills, peak.most)
        queue.close()
        store.close()
    return 0


def _start(name: str, env: dict[str, str], logs: Path) -> subprocess.Popen[bytes]:
    log = (logs / f"{name}.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "perfline", "worker", "--machine", name, "--class", CLASS, "--health-every",
         "1000000"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_idle(store: Store, count: int, logs: Path) -> None:
    deadline = time.monotonic() + 180
    while len([m for m in store.fleet_machines() if m.worker_id is not None]) < count:
        if time.monotonic() > deadline:
            tails = "\n".join(f"{log.name}: {log.read_text()[-500:]}" for log in sorted(logs.iterdir()))
            raise SystemExit(f"the workers did not all register within 180 s\n{tails}")
        time.sleep(0.5)


def _submit(queue: FleetQueue, case: Case, jobs: int, rate: float) -> None:
    batch = 1 if rate else jobs
    for first in range(0, jobs, batch):
        queue.submit(class_queue(CLASS), [{"case": case_to_json(case), "label": "fleet-load",
                                           "queued_at": time.time()}] * min(batch, jobs - first))
        if rate:
            time.sleep(1.0 / rate)


class _PeakConnections(threading.Thread):
    """The most client connections PostgreSQL had at once, sampled every 0.5 s."""

    def __init__(self, server: PrivateServer) -> None:
        super().__init__(daemon=True)
        self.server, self.most, self._halt = server, 0, threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.5):
            try:
                with psycopg.connect(self.server.url("postgres").replace("postgresql+psycopg", "postgresql")) as c:
                    row = c.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
                                    ).fetchone()
                    self.most = max(self.most, int(row[0]) - 1 if row else 0)
            except psycopg.OperationalError:
                continue

    def stop(self) -> None:
        self._halt.set()
        self.join()


def _report(store: Store, queue: FleetQueue, args: argparse.Namespace, started: float, finished: float,
            kills: int, connections: int) -> None:
    jobs = queue.jobs()
    attempts = store.attempts()
    succeeded: dict[int, list[int]] = {}
    for attempt in attempts:
        if attempt.state == "succeeded":
            succeeded.setdefault(attempt.job_id, []).append(attempt.id)
    completed_runs: dict[int, int] = {}
    for attempt in attempts:
        if attempt.run_id is not None and store.get_run(attempt.run_id).info.status == RunStatus.COMPLETED:
            completed_runs[attempt.job_id] = completed_runs.get(attempt.job_id, 0) + 1
    once = (len(jobs) == args.jobs and all(j.status == "succeeded" for j in jobs)
            and all(len(succeeded.get(j.id, [])) == 1 for j in jobs)
            and all(completed_runs.get(j.id, 0) == 1 for j in jobs))
    latency = []
    starts = {a.job_id: a.started_at.timestamp() for a in attempts if a.state == "succeeded"}
    for job in jobs:
        if job.id in starts and "queued_at" in job.args:
            latency.append(starts[job.id] - float(job.args["queued_at"]))
    latency.sort()
    retried = sum(1 for j in jobs if len([a for a in attempts if a.job_id == j.id]) > 1)
    print(f"\nfleet load: {args.workers} workers, {args.jobs} jobs of 50 ms, a SIGKILL every "
          f"{args.kill_every} jobs done, stalled after {args.stalled:g} s"
          + (", PostgreSQL restarted once (10 s down)" if args.restart_postgres else ""))
    print(f"  jobs per second        {args.jobs / (finished - started):8.1f}")
    print(f"  queue latency p50      {statistics.median(latency):8.2f} s")
    print(f"  queue latency p99      {latency[int(0.99 * (len(latency) - 1))]:8.2f} s")
    print(f"  workers SIGKILLed      {kills:8d}   (jobs run again: {retried})")
    print(f"  most connections       {connections:8d}   ({connections / args.workers:.1f} per worker)")
    print(f"  every job done once    {'yes' if once else 'NO':>8}   (target: yes; "
          f"{sum(completed_runs.values())} completed runs for {len(jobs)} jobs)")


if __name__ == "__main__":
    raise SystemExit(main())
