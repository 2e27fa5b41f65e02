"""Where the browser libraries are: the npm packages `make web-assets` installs."""

from __future__ import annotations

import os
from pathlib import Path

from perfline.records.errors import UserError

# web/node_modules in a checkout (an editable install: src/perfline/web -> ../../../web).
CHECKOUT = Path(__file__).resolve().parents[3] / "web" / "node_modules"
NEEDED = ("uplot/dist/uPlot.iife.min.js", "uplot/dist/uPlot.min.css", "htmx.org/dist/htmx.min.js")


def vendor_dir() -> Path:
    """$PERFLINE_WEB_ASSETS, else the checkout's web/node_modules; every file needed
    there, or a UserError that says how to install them."""
    configured = os.environ.get("PERFLINE_WEB_ASSETS")
    where = Path(configured) if configured else CHECKOUT
    missing = [name for name in NEEDED if not (where / name).is_file()]
    if missing:
        raise UserError(f"the dashboard's browser libraries are missing ({', '.join(missing)}): run `make web-assets` "
                        "(npm ci in web/), or point PERFLINE_WEB_ASSETS at a node_modules that has uplot and htmx.org",
                        where)
    return where
