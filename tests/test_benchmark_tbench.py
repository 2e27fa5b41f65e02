"""tbench against a real tbench_srv on loopback, and its parser on captured dbench 4.0 output."""

from __future__ import annotations

import math
import shutil
import socket
import time
from pathlib import Path

import pytest
from processes import Found, assert_gone, children, kill_leftovers, sigkill_once_started
from test_cli import start

from perfline.benchmarks import BENCHMARKS, BenchmarkUnavailable
from perfline.benchmarks.tbench import (
    PORT,
    Tbench,
    TbenchResult,
    _port_in_use,
    parse_tbench,
)

# `tbench -t 2 1 127.0.0.1` (dbench 4.00, Debian 12); operation table shortened.
OUTPUT = """\
dbench version 4.00 - Copyright Andrew Tridgell 1999-2004

Running for 2 seconds with load '/usr/share/dbench/client.txt' and minimum warmup 0 secs
failed to create barrier semaphore
0 of 1 processes prepared for launch   0 sec
1 of 1 processes prepared for launch   0 sec
releasing clients
   1     12547    83.74 MB/sec  execute   1 sec  latency 2.376 ms
   1  cleanup   2 sec
   0  cleanup   2 sec

 Operation      Count    AvgLat    MaxLat
 ----------------------------------------
 NTCreateX       4139     0.079     1.548
 Close           3099     0.078     1.206
 ReadX           6400     0.083     4.129
 Flush            293     0.080     0.455

Throughput 83.7375 MB/sec  1 clients  1 procs  max_latency=2.376 ms
"""
# Without a server; tbench still exits 0. 300 identical "-1 of 1" lines left out.
NO_SERVER_OUTPUT = """\
dbench version 4.00 - Copyright Andrew Tridgell 1999-2004

Running for 1 seconds with load '/usr/share/dbench/client.txt' and minimum warmup 0 secs
0 of 1 processes prepared for launch   0 sec
failed to connect to 127.0.0.1 - Connection refused
client 0 failed to start
-1 of 1 processes prepared for launch   0 sec
-1 of 1 processes prepared for launch  30 sec
FAILED TO START 1 CLIENTS (started -1)
Throughput 0 MB/sec  1 clients  1 procs  max_latency=0.000 ms
"""
# `tbench -t 1 2 127.0.0.1`: one second is too short to measure anything.
ONE_SECOND_OUTPUT = """\
dbench version 4.00 - Copyright Andrew Tridgell 1999-2004

Running for 1 seconds with load '/usr/share/dbench/client.txt' and minimum warmup 0 secs
0 of 2 processes prepared for launch   0 sec
2 of 2 processes prepared for launch   0 sec
releasing clients
   2  cleanup   1 sec
   0  cleanup   1 sec

Throughput 0 MB/sec  2 clients  2 procs  max_latency=0.000 ms
"""


def server_listening() -> bool:
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
    except ConnectionRefusedError:
        return False
    return True


def test_registered() -> None:
    assert BENCHMARKS.get("tbench") is Tbench


def test_parse() -> None:
    assert parse_tbench(OUTPUT) == TbenchResult(83.7375, 1, 2.376)


def test_parse_large_throughput_in_g_format() -> None:
    line = "Throughput 1.23457e+06 MB/sec  64 clients  64 procs  max_latency=12.500 ms\n"
    assert parse_tbench(line) == TbenchResult(1.23457e06, 64, 12.5)


@pytest.mark.parametrize(
    ("output", "error"),
    [
        (NO_SERVER_OUTPUT, "failed to start"),
        (ONE_SECOND_OUTPUT, "0 MB/sec"),
        ("dbench version 4.00\n", "no 'Throughput"),
    ],
)
def test_parse_rejects_runs_without_a_result(output: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_tbench(output)


def test_real_run_and_server_stopped(tmp_path: Path) -> None:
    with Tbench({"clients": 1, "duration": 2}, tmp_path) as bench:
        assert server_listening()
        measurements = bench.run_once()
    assert [m.metric.name for m in measurements] == ["tbench.throughput", "tbench.latency_max"]
    assert all(math.isfinite(m.value) and m.value > 0 for m in measurements)
    assert not server_listening()


def test_port_in_use_is_unavailable(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", PORT))
        squatter.listen()
        with pytest.raises(BenchmarkUnavailable, match=f"port {PORT} is in use"):
            with Tbench({"clients": 1, "duration": 2}, tmp_path):
                pass
    assert not server_listening()


def test_sigkilled_perfline_leaves_no_tbench_behind(tmp_path: Path) -> None:
    """The server dies with perfline; the client finishes its -t seconds and stops its
    forked clients, so the server's per-connection children end and the port is free."""
    server, client = shutil.which("tbench_srv"), shutil.which("tbench")
    assert server is not None and client is not None
    proc = start(tmp_path / "db", "run", "tbench", "-p", "duration=3", "-p", "clients=1",
                 "--repeat", "3", "--warmup", "0", "--no-monitors")
    servers: Found = {}

    def both_started() -> Found:
        servers.update(children(proc.pid, server))
        clients = children(proc.pid, f"{client} -t 3 1 127.0.0.1")
        return servers | clients if servers and clients else {}

    started = sigkill_once_started(proc, both_started, "tbench_srv and tbench client")
    try:
        assert_gone(servers, "tbench_srv")
        deadline = time.monotonic() + 60
        while _port_in_use():  # probed by binding: connecting would pile up in the backlog
            assert time.monotonic() < deadline, f"port {PORT} still in use after 60 s"
            time.sleep(0.1)
    finally:
        kill_leftovers(started)
