"""The perfline command line."""

from perfline.cli.app import app


def main() -> None:
    app()
