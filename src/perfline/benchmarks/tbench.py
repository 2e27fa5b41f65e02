"""tbench: dbench's network half, clients against tbench_srv over loopback TCP."""

from __future__ import annotations

import errno
import os
import re
import signal
import socket
import subprocess
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from perfline.benchmarks.base import (
    BenchmarkFailed,
    BenchmarkUnavailable,
    CommandBenchmark,
    CommandOutput,
    GuestSetup,
    Param,
)
from perfline.records.metric import Direction, Measurement, Metric
from perfline.system.process import ToolMissing, child_setup, require_tool, tail

# dbench 4.0 compiles the port into tbench and tbench_srv; neither has an option for it.
PORT = 7003
PORT_IN_USE = (
    f"TCP port {PORT} is in use, and tbench_srv can only listen there; "
    f"find the owner with `ss -ltnp 'sport = :{PORT}'` (a leftover tbench_srv?)"
)
SERVER_READY_TIMEOUT = 10.0
SERVER_STOP_TIMEOUT = 5.0
# A client that cannot connect makes tbench wait 30 s before it gives up.
CLIENT_START_GRACE = 60
# tbench's default loadfile, compiled in: the operations each client replays.
LOADFILE = Path("/usr/share/dbench/client.txt")
# In a guest: loopback up, the server in its own session (it outlives the set-up
# request, and the VM's power-off ends it), then wait until it listens: port 7003 is
# 1B5B in /proc/net/tcp, state 0A is LISTEN. Busybox has no `nc -z` to ask instead.
GUEST_SETUP = f"""ip link set lo up || exit 1
setsid "$1" > /tmp/tbench_srv.log 2>&1 < /dev/null &
waited=0
until grep -q ':{PORT:04X} 00000000:0000 0A' /proc/net/tcp; do
    [ "$waited" -lt 100 ] || {{ echo "tbench_srv did not listen on port {PORT}:"; cat /tmp/tbench_srv.log; exit 1; }}
    sleep 0.1
    waited=$((waited + 1))
done
"""

_RESULT = re.compile(
    r"^Throughput ([0-9.eE+-]+) MB/sec.*\s(\d+) clients\s.*max_latency=([0-9.]+) ms\s*$",
    re.MULTILINE,
)


@dataclass(frozen=True)
class TbenchResult:
    throughput_mb_s: float
    clients: int
    max_latency_ms: float


def parse_tbench(output: str) -> TbenchResult:
    """The final 'Throughput X MB/sec  N clients  N procs  max_latency=Y ms' line.

    tbench exits 0 even when clients failed to start, printing 'Throughput 0', so a
    zero throughput is an error, not a measurement.
    """
    if "FAILED TO START" in output:
        raise ValueError("tbench clients failed to start")
    found = _RESULT.search(output)
    if found is None:
        raise ValueError("no 'Throughput ... MB/sec' line in tbench output")
    result = TbenchResult(float(found.group(1)), int(found.group(2)), float(found.group(3)))
    if result.throughput_mb_s <= 0:
        # tbench only counts whole seconds after warm-up; runs under 2 s report nothing.
        raise ValueError("tbench reported 0 MB/sec (no full second was measured)")
    return result


def _port_in_use() -> bool:
    # Same socket options as tbench_srv, so TIME_WAIT leftovers do not count as in use.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", PORT))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def _accepts_connections() -> bool:
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
    except OSError:
        return False
    return True


class Tbench(CommandBenchmark):
    name = "tbench"
    # tbench_srv always listens on port 7003, so two servers cannot run at once.
    exclusive = True
    summary = "loopback TCP throughput of dbench's tbench clients against tbench_srv (MB/s)"
    params = (
        Param("clients", int, 2, "concurrent tbench clients", minimum=1),
        Param("duration", int, 5, "seconds each repetition runs (tbench needs 2+)", minimum=2),
    )
    metrics = (
        Metric("tbench.throughput", "MB/s", Direction.HIGHER, "throughput over all clients"),
        Metric("tbench.latency_max", "ms", Direction.LOWER, "largest operation latency"),
    )
    packages = ("dbench",)

    _tbench = "tbench"
    _server: subprocess.Popen[bytes] | None = None

    def setup(self) -> None:
        try:
            self._tbench = require_tool("tbench", "dbench")
            server = require_tool("tbench_srv", "dbench")
        except ToolMissing as exc:
            raise BenchmarkUnavailable(str(exc)) from exc
        # Checked before starting ours: otherwise the readiness probe below could be
        # answered by somebody else's server while ours fails to bind.
        if _port_in_use():
            raise BenchmarkUnavailable(PORT_IN_USE)
        # tbench_srv forks one child per connection; its own session lets teardown
        # signal the whole group. A SIGKILLed perfline takes the server along (its
        # per-connection children end with their clients' connections).
        with open(self._log_path, "wb") as log:
            self._server = subprocess.Popen(
                [server],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                start_new_session=True,
                preexec_fn=child_setup(True, self.cgroup),
            )
        self._wait_until_ready(self._server)

    @property
    def _log_path(self) -> Path:
        return self.workdir / "tbench_srv.log"

    def _wait_until_ready(self, server: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + SERVER_READY_TIMEOUT
        while not _accepts_connections():
            if server.poll() is not None:
                log = self._log_path.read_text(errors="replace")
                reason = PORT_IN_USE if "listen failed" in log else tail(log)
                raise BenchmarkUnavailable(
                    f"tbench_srv exited with status {server.returncode}: {reason}"
                )
            if time.monotonic() > deadline:
                raise BenchmarkUnavailable(
                    f"tbench_srv did not accept connections on port {PORT} "
                    f"within {SERVER_READY_TIMEOUT:g}s"
                )
            time.sleep(0.05)

    def run_once(self) -> list[Measurement]:
        if self._server is None or self._server.poll() is not None:
            # Without a server every client would wait 30 s before failing.
            raise BenchmarkFailed(
                "tbench_srv is no longer running", tail(self._log_path.read_text(errors="replace"))
            )
        output = self._run_client(self.argv(), self.timeout())
        return self.parse(CommandOutput(output, "", 0.0))

    def argv(self) -> list[str]:
        return [self._tbench, "-t", str(self.values["duration"]), str(self.values["clients"]), "127.0.0.1"]

    def timeout(self) -> float:
        return 2 * int(self.values["duration"]) + CLIENT_START_GRACE

    def parse(self, output: CommandOutput) -> list[Measurement]:
        text = output.stdout + output.stderr
        try:
            result = parse_tbench(text)
        except ValueError as exc:
            raise BenchmarkFailed(f"tbench: {exc}", tail(text)) from exc
        throughput, latency = self.metrics
        return [
            Measurement(throughput, result.throughput_mb_s),
            Measurement(latency, result.max_latency_ms),
        ]

    def executables(self) -> list[Path]:
        # The loadfile is read, not run; packed at its path all the same.
        return [Path(require_tool(tool, "dbench")) for tool in ("tbench", "tbench_srv")] + [LOADFILE]

    def guest_setup(self) -> GuestSetup:
        server = require_tool("tbench_srv", "dbench")  # packed at this host's path
        return GuestSetup(["sh", "-c", GUEST_SETUP, "tbench-setup", server], SERVER_READY_TIMEOUT + 30)

    def guest_argv(self) -> list[str]:
        return [require_tool("tbench", "dbench"), *self.argv()[1:]]

    def _run_client(self, argv: list[str], timeout: float) -> str:
        """tbench's output (stdout and stderr).

        tbench forks its clients, which stop only when it tells them to (they check
        that their parent lives, but an orphan's parent is init). So tbench must not
        die early: it writes to a file rather than a pipe to perfline, and runs in
        its own session, so that a SIGKILLed perfline leaves it to finish its `-t`
        seconds and stop its clients (the server's per-connection children then see
        the connections close). A timeout or Ctrl-C kills the whole group instead.
        """
        path = self.workdir / "tbench.out"
        with open(path, "wb") as out:
            client = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.workdir, start_new_session=True, preexec_fn=child_setup(False, self.cgroup),
            )
        try:
            client.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(client)
            output = path.read_text(errors="replace")
            raise BenchmarkFailed(f"tbench: timed out after {timeout:g}s", tail(output)) from None
        except BaseException:  # Ctrl-C, SIGTERM
            _kill_group(client)
            raise
        output = path.read_text(errors="replace")
        if client.returncode != 0:
            raise BenchmarkFailed(f"tbench: exited with status {client.returncode}", tail(output))
        return output

    def teardown(self) -> None:
        if self._server is not None:
            _stop_group(self._server)
            self._server = None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, SIGKILL it if it lingers, and reap the leader."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=SERVER_STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
