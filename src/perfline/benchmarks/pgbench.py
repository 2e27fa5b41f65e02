"""pgbench: PostgreSQL's own TPC-B-like load generator, against a private, throwaway server.

A database workload exercises the kernel's scheduler, IPC between client and backend
processes, and (unless fsync is off) the block layer and the page cache's writeback.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfline.benchmarks.base import (
    BenchmarkFailed,
    BenchmarkUnavailable,
    CommandBenchmark,
    CommandOutput,
    GuestSetup,
    Param,
    ParamValue,
)
from perfline.records.metric import Direction, Measurement, Metric
from perfline.system.pgserver import (
    ROOT_SERVER_USER,
    PrivateServer,
    ServerFailed,
    client_args,
    start_script,
)
from perfline.system.process import CommandFailed, ToolMissing, tail

DATABASE = "pgbench"
SCRIPTS = ("tpcb-like", "simple-update", "select-only")
# Bounds that only catch a hung tool. Loading runs at well under a second per scale unit
# on a small VM; a repetition adds a VACUUM and connection set-up to its duration.
INIT_SECONDS_PER_SCALE = 10
RUN_OVERHEAD_SECONDS = 300
# Spare server connections beyond the clients: pgbench's own, and superuser-reserved slots.
SPARE_CONNECTIONS = 10
SERVER_DEFAULT_MAX_CONNECTIONS = 100
# In a VM guest the server is the only one, so it takes the default port, in a
# directory of its own on the guest's disk.
GUEST_PORT = 5432
GUEST_HOME = "/var/lib/perfline/postgres"
# Emulation (TCG) runs the server's start and the data load ~10x slower than the host.
GUEST_SLOWDOWN = 10

TPS = Metric(
    "pgbench.tps",
    "transactions/s",
    Direction.HIGHER,
    "transactions per second, without the initial connection time",
)
LATENCY_AVG = Metric(
    "pgbench.latency_avg", "ms", Direction.LOWER, "average transaction latency"
)

# PostgreSQL 14 and later print the first form, older versions the second (next to an
# "including connections establishing" line, which counts connection set-up).
_TPS_RE = re.compile(
    r"^tps = ([0-9.]+) \((?:without initial connection time|excluding connections establishing)\)$",
    re.MULTILINE,
)
_LATENCY_RE = re.compile(r"^latency average = ([0-9.]+) ms$", re.MULTILINE)


def parse_output(stdout: str) -> list[Measurement]:
    """tps and average latency from the summary pgbench prints at the end of a run."""
    tps = _TPS_RE.search(stdout)
    latency = _LATENCY_RE.search(stdout)
    if tps is None or latency is None:
        raise BenchmarkFailed("pgbench printed no tps or latency average line", tail(stdout))
    return [
        Measurement(TPS, float(tps.group(1))),
        Measurement(LATENCY_AVG, float(latency.group(1))),
    ]


class Pgbench(CommandBenchmark):
    name = "pgbench"
    summary = "PostgreSQL pgbench transactions/s and latency on a private, throwaway server"
    params = (
        Param("scale", int, 1, "data set size (pgbench -i -s): 100,000 accounts each", minimum=1),
        Param("duration", int, 5, "seconds per repetition (pgbench -T)", minimum=1),
        Param("clients", int, 2, "concurrent database sessions (pgbench -c)", minimum=1),
        Param("threads", int, 1, "pgbench worker threads (pgbench -j)", minimum=1),
        Param(
            "script", str, "tpcb-like", "built-in transaction script (pgbench -b)", choices=SCRIPTS
        ),
        Param("fsync", bool, True, "false sets fsync=off: measures CPU and locking, not the disk"),
    )
    metrics = (TPS, LATENCY_AVG)
    packages = ("postgresql",)
    needs_rootfs = True

    def __init__(self, params: Mapping[str, ParamValue], workdir: Path) -> None:
        super().__init__(params, workdir)
        self.server: PrivateServer | None = None
        self.postgres_version = ""
        self._guest_bindir = ""

    def setup(self) -> None:
        try:
            self.server = PrivateServer(self.workdir / "postgres", settings=self._server_settings())
            self.postgres_version = self.server.version()
            self.server.start()
            self.server.create_database(DATABASE)
            pgbench = str(self.server.bin("pgbench"))
            self.run_here([pgbench, *self.server.client_args(), *self._init_args()], self._init_timeout())
        except ToolMissing as exc:
            raise BenchmarkUnavailable(str(exc)) from exc
        except ServerFailed as exc:
            raise BenchmarkFailed(f"PostgreSQL server: {exc.reason}", exc.output_tail) from exc
        except CommandFailed as exc:
            raise BenchmarkFailed(str(exc), exc.output_tail) from exc

    def argv(self) -> list[str]:
        if self.server is None:
            raise BenchmarkFailed("pgbench: no PostgreSQL server (setup did not run)")
        return [str(self.server.bin("pgbench")), *self.server.client_args(), *self._run_args()]

    def guest_setup(self) -> GuestSetup:
        """Start the guest's server, load the data, and print the bin directory and version."""
        client = " ".join(client_args(GUEST_PORT, ROOT_SERVER_USER))
        script = start_script(GUEST_HOME, GUEST_PORT, self._server_settings(), 60 * GUEST_SLOWDOWN)
        script += (
            f'"$bindir/createdb" {client} {DATABASE}\n'
            f'"$bindir/pgbench" {client} {" ".join(self._init_args())} > /dev/null\n'
            'echo "$bindir"\n'
            '"$bindir/postgres" --version\n'
        )
        return GuestSetup(["sh", "-c", script], 60 * GUEST_SLOWDOWN + GUEST_SLOWDOWN * self._init_timeout())

    def guest_ready(self, output: CommandOutput) -> None:
        self._guest_bindir, self.postgres_version = output.stdout.strip().splitlines()[-2:]

    def guest_argv(self) -> list[str]:
        pgbench = f"{self._guest_bindir}/pgbench"
        return [pgbench, *client_args(GUEST_PORT, ROOT_SERVER_USER), *self._run_args()]

    def timeout(self) -> float:
        return int(self.values["duration"]) + RUN_OVERHEAD_SECONDS

    def parse(self, output: CommandOutput) -> list[Measurement]:
        return parse_output(output.stdout)

    def _server_settings(self) -> dict[str, str]:
        clients = int(self.values["clients"])
        connections = max(SERVER_DEFAULT_MAX_CONNECTIONS, clients + SPARE_CONNECTIONS)
        settings = {"max_connections": str(connections)}
        if not self.values["fsync"]:
            settings["fsync"] = "off"
        return settings

    def _init_args(self) -> list[str]:
        return ["-i", "-q", "-s", str(self.values["scale"]), DATABASE]

    def _init_timeout(self) -> float:
        return 60 + INIT_SECONDS_PER_SCALE * int(self.values["scale"])

    def _run_args(self) -> list[str]:
        return [
            "-T", str(self.values["duration"]),
            "-c", str(self.values["clients"]),
            "-j", str(self.values["threads"]),
            "-b", str(self.values["script"]),
            DATABASE,
        ]  # fmt: skip

    def teardown(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def settings(self) -> dict[str, Any]:
        return {"postgres_version": self.postgres_version}

    def guest_settings(self) -> dict[str, Any]:
        return self.settings()
