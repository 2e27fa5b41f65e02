"""The restore journal: old values written (and fsync'd) before anything is changed.

Every piece of kernel state perfline changes (tunables, tracefs files, a tracefs mount,
the benchmark's cgroup, the watchdog setting of a kexec boot) is recorded here first, by
`system.kernel_state`. One file per perfline process, so two perfline processes never
restore each other's live changes; a file whose process is gone is a crashed run's
leftover, and the next perfline command puts it back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from perfline.system.files import write_durably

# What an entry undoes: a file written (write `old` back), a file system mounted on
# `path` (unmount it; `old` is empty, `new` the file system type), a cgroup directory
# made at `path` (remove it; `old` and `new` are empty), or a drop-in of systemd's manager
# configuration written at `path` (remove it and re-execute systemd; `new` its text).
WRITE, MOUNT, CGROUP, SYSTEMD_DROP_IN = "write", "mount", "cgroup", "systemd-drop-in"
# Journals are named journal.<pid>.json; earlier perfline versions wrote
# tunables.<pid>.json, which a crash may have left behind, so both are read.
PATTERNS = ("journal.*.json", "tunables.*.json")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@dataclass(frozen=True)
class Entry:
    path: str
    old: str
    new: str
    kind: str = WRITE


def state_dir() -> Path:
    configured = os.environ.get("PERFLINE_STATE_DIR")
    if configured:
        return Path(configured)
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "perfline"


def journal_files(directory: Path) -> list[Path]:
    return sorted(path for pattern in PATTERNS for path in directory.glob(pattern))


class Journal:
    def __init__(self, directory: Path, pid: int, boot_id: str) -> None:
        self.path = directory / f"journal.{pid}.json"
        self.pid = pid
        self.boot_id = boot_id
        self.entries: list[Entry] = []

    def record(self, entries: list[Entry]) -> None:
        """Durably add `entries` before the caller changes anything."""
        self.entries += entries
        write_durably(self.path, json.dumps({"pid": self.pid, "boot_id": self.boot_id,
                                             "entries": [asdict(e) for e in self.entries]}))

    def forget(self, entries: list[Entry]) -> None:
        """Drop entries that have been restored; the file goes when none are left."""
        remaining = list(self.entries)
        for entry in entries:
            # One at a time: the same file may be changed twice (journaled twice) and
            # restored once, and only that one record is done with.
            if entry in remaining:
                remaining.remove(entry)
        self.entries = remaining
        if self.entries:
            self.record([])
        else:
            self.path.unlink(missing_ok=True)


def this_boot() -> str:
    """The kernel's boot id: a journal written before the last boot is stale."""
    return BOOT_ID.read_text().strip()


_own: dict[tuple[int, Path], Journal] = {}


def own_journal() -> Journal:
    """This process's journal. One object per process and state directory: two over
    one file would each rewrite it with only their own entries."""
    key = (os.getpid(), state_dir())
    if key not in _own:
        _own[key] = Journal(key[1], key[0], this_boot())
    return _own[key]


def leftovers(
    directory: Path, boot_id: str, alive: Callable[[int], bool]
) -> list[tuple[Path, list[Entry]]]:
    """Journals of dead perfline processes of this boot, with what they had changed.

    A journal from an earlier boot is stale: the reboot already reset every value, and
    writing the old ones back could undo the administrator's boot-time settings.
    """
    found = []
    for path in journal_files(directory):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if data.get("boot_id") != boot_id:
            path.unlink(missing_ok=True)
            continue
        if alive(int(data["pid"])):
            continue
        found.append((path, [Entry(**entry) for entry in data["entries"]]))
    return found
