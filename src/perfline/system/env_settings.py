"""Numbers given to perfline in environment variables: a bad one is the user's to fix,
said in one line (exit 2) by the command that reads it, not a traceback."""

from __future__ import annotations

import math
import os

from perfline.records.errors import UserError


def env_number(name: str, default: float) -> float:
    """$name as a number of at least 0, `default` when it is unset."""
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise UserError(f"{name}={text!r} must be a number of at least 0: unset it, or set e.g. {name}={default:g}")
    return value
