"""`perfline serve`: the dashboard."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from perfline.cli.common import errors, open_store


def serve(
    host: Annotated[str, typer.Option(help="Address to bind; loopback unless you say otherwise.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port.")] = 8080,
    token_file: Annotated[Path | None, typer.Option(
        help="Tokens allowed to triage, one per line: NAME TOKEN (or TOKEN). Without it nothing can be changed.")
    ] = None,
) -> None:
    """Serve the dashboard: trackers, series, regressions with triage, runs, compare, bisections, /api.

    Example: perfline serve --port 8080 --token-file tokens.txt
    """
    import uvicorn

    from perfline.web.app import create_app
    from perfline.web.assets import vendor_dir
    from perfline.web.auth import Tokens

    tokens = Tokens.load(token_file)
    vendor = vendor_dir()
    if host not in ("127.0.0.1", "localhost", "::1") and not tokens:
        errors.print(f"[yellow]warning:[/yellow] serving on {host} without --token-file: anyone who can reach it "
                     "reads every result (nothing can be changed without a token)")
    app = create_app(open_store(), tokens, vendor)
    errors.print(f"perfline dashboard on http://{host}:{port}/ (Ctrl-C stops it)", highlight=False)
    uvicorn.run(app, host=host, port=port, log_level="warning")
