"""Mutations of the example job and tracker files: each loads or is the user's error
(`UserError`: one `error: FILE:LINE: ...` line, exit 2), never an internal one. Random
bytes flipped, cut or inserted, with YAML's sharp edges among the insertions: a NUL byte
(yaml's ReaderError), `!!python/object` and other tags (ConstructorError), anchors,
huge numbers. 300 mutations a file here, PERFLINE_FUZZ in the slow suite."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from perfline.jobs import load_job
from perfline.records.errors import UserError
from perfline.track.tracker_file import load_tracker

ROOT = Path(__file__).resolve().parents[1]
INSERTS = [b"\x00", b"!!python/object:os.system x", b"!!python/name:os.system", b"!!int x", b"!!binary ?",
           b"&a", b"*a", b"*b", b"<<: *a", b"{", b"}", b"[", b"]", b"- ", b": ", b"\t", b"'", b'"', b"\\",
           b"\n", b"  ", b"#", b"99999999999999999999999999", b"-1", b"0", b"~", b"null", b"\xff\xfe", b"%YAML 9.9\n"]
FILES: list[tuple[Path, Callable[[Path], object]]] = [
    (ROOT / "examples" / "track" / "demo.yaml", load_tracker),
    *((path, load_job) for path in sorted((ROOT / "examples" / "jobs").glob("*.yaml"))),
]


def mutations(original: bytes, seed: str, count: int) -> list[bytes]:
    rng = random.Random(seed)
    found = []
    for _ in range(count):
        data = bytearray(original)
        for _ in range(rng.randint(1, 3)):
            kind, at = rng.random(), rng.randrange(len(data) + 1)
            if kind < 0.3 and at < len(data):
                data[at] = rng.randrange(256)
            elif kind < 0.4:
                data = data[:at]
            else:
                data[at:at] = rng.choice(INSERTS)
        found.append(bytes(data))
    return found


@pytest.mark.parametrize(("source", "load"), FILES, ids=lambda v: v.name if isinstance(v, Path) else "")
def test_mutated_files_load_or_are_one_user_error(source: Path, load: Callable[[Path], object],
                                                  tmp_path: Path) -> None:
    # The tracker's repo (./src) must exist for the file to get past its first checks.
    (tmp_path / "src").mkdir()
    subprocess.run(["git", "init", "-q", str(tmp_path / "src")], check=True)
    target = tmp_path / source.name
    count = int(os.environ.get("PERFLINE_FUZZ", "300"))
    errors = 0
    for data in mutations(source.read_bytes(), source.name, count):
        target.write_bytes(data)
        try:
            load(target)
        except UserError:
            errors += 1
    assert errors > count // 4  # the mutations reach the error paths, not only comments


@pytest.mark.parametrize(("good", "bad"), [(b"select:", b"\x00select:"),
                                           (b"branch: main", b"branch: !!python/object:os.system main")],
                         ids=["NUL", "python-tag"])
def test_the_command_line_says_one_error_line_for_a_tracker_file_yaml_refuses(good: bytes, bad: bytes,
                                                                              tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path / "src")], check=True)
    text = (ROOT / "examples" / "track" / "demo.yaml").read_bytes()
    assert good in text
    (tmp_path / "tracker.yaml").write_bytes(text.replace(good, bad, 1))
    proc = subprocess.run([sys.executable, "-m", "perfline", "--db", str(tmp_path / "db"), "track", "run",
                           str(tmp_path / "tracker.yaml"), "--once"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: {tmp_path / 'tracker.yaml'}:") and "invalid" in line, line
