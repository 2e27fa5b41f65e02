"""The perfline command line."""

import sys

from perfline.cli.app import app
from perfline.cli.errors import guarded


def main() -> None:
    guarded(app, sys.argv)
