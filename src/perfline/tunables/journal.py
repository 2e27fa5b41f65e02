"""The restore journal: old values written (and fsync'd) before anything is changed.

One file per perfline process, so two perfline processes never restore each other's
live changes; a file whose process is gone is a crashed run's leftover.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from perfline.system.files import write_durably


@dataclass(frozen=True)
class Entry:
    path: str
    old: str
    new: str


def state_dir() -> Path:
    configured = os.environ.get("PERFLINE_STATE_DIR")
    if configured:
        return Path(configured)
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "perfline"


class Journal:
    def __init__(self, directory: Path, pid: int, boot_id: str) -> None:
        self.path = directory / f"tunables.{pid}.json"
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
        self.entries = [e for e in self.entries if e not in entries]
        if self.entries:
            self.record([])
        else:
            self.path.unlink(missing_ok=True)


def leftovers(
    directory: Path, boot_id: str, alive: Callable[[int], bool]
) -> list[tuple[Path, list[Entry]]]:
    """Journals of dead perfline processes of this boot, with what they had changed.

    A journal from an earlier boot is stale: the reboot already reset every value, and
    writing the old ones back could undo the administrator's boot-time settings.
    """
    found = []
    for path in sorted(directory.glob("tunables.*.json")):
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
