"""perfline's settings of this machine, written by its administrator: `/etc/perfline/machine.yaml`.

What only the machine's owner may decide lives here, never in a job or a store: that
perfline may replace the running kernel (`kexec: allowed`, written by `perfline kernels
allow-kexec`), and where the unit that resumes a job after such a boot was installed
(`resume_unit:`, written by `perfline kernels install-resume`). A job file cannot opt a
machine in, and neither can a store shared by a fleet.

$PERFLINE_MACHINE_SETTINGS names another file: the tests point it into a temporary
directory, so that no test can opt the machine it runs on in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from perfline.records.errors import UserError
from perfline.system.files import write_durably

SETTINGS_ENV = "PERFLINE_MACHINE_SETTINGS"
DEFAULT_PATH = Path("/etc/perfline/machine.yaml")
ALLOWED = "allowed"
OPT_IN = "perfline kernels allow-kexec"


@dataclass(frozen=True)
class MachineSettings:
    path: Path
    kexec_allowed: bool = False
    resume_unit: Path | None = None


def settings_path() -> Path:
    override = os.environ.get(SETTINGS_ENV)
    return Path(override) if override else DEFAULT_PATH


def load(path: Path | None = None) -> MachineSettings:
    """The settings; a missing file is a machine that opted into nothing."""
    path = path or settings_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return MachineSettings(path)
    except OSError as exc:
        raise UserError(f"cannot read the machine settings: {exc.strerror}", path) from None
    data = _mapping(text, path)
    kexec = data.get("kexec")
    if kexec not in (None, ALLOWED, "refused"):
        raise UserError(f"kexec: {kexec!r}: write `kexec: allowed` (or run `{OPT_IN}`), or `kexec: refused`",
                        path, _line(text, "kexec"))
    unit = data.get("resume_unit")
    if unit is not None and not isinstance(unit, str):
        raise UserError(f"resume_unit: {unit!r}: give the unit file's path (`perfline kernels install-resume` "
                        "writes it)", path, _line(text, "resume_unit"))
    return MachineSettings(path, kexec == ALLOWED, None if unit is None else Path(unit))


def allow_kexec(path: Path | None = None) -> MachineSettings:
    """The administrator's opt-in: `kexec: allowed`, with who and when for the record."""
    return _update(path, kexec=ALLOWED, kexec_allowed_at=datetime.now(UTC).isoformat(timespec="seconds"),
                   kexec_allowed_by=os.environ.get("SUDO_USER") or os.environ.get("USER") or str(os.geteuid()))


def set_resume_unit(unit: Path, path: Path | None = None) -> MachineSettings:
    return _update(path, resume_unit=str(unit))


def _update(path: Path | None, **values: str) -> MachineSettings:
    import yaml  # only when the file is read or written: `perfline` imports this module at start-up

    path = path or settings_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        text = ""
    data = {**_mapping(text, path), **values}
    path.parent.mkdir(parents=True, exist_ok=True)
    header = "# perfline's settings of this machine (docs/kexec.md); only its administrator edits them.\n"
    write_durably(path, header + yaml.safe_dump(data, sort_keys=False))
    return load(path)


def _mapping(text: str, path: Path) -> dict[str, object]:
    import yaml  # only when the file is read or written

    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UserError(f"not valid YAML: {getattr(exc, 'problem', exc)}", path,
                        None if mark is None else mark.line + 1) from None
    if not isinstance(data, dict):
        raise UserError("expected a mapping such as `kexec: allowed`", path, 1)
    return data


def _line(text: str, key: str) -> int | None:
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(f"{key}:"):
            return number
    return None
