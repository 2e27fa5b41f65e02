"""The perfline command line."""

import gc
import sys

from perfline.cli.app import app
from perfline.cli.errors import guarded


def main() -> None:
    # The objects the imports made (modules, classes, functions) live until exit; frozen,
    # the cyclic collector no longer walks them in its full collections, which reading
    # many samples sets off: 0.16 s of CPU of `compare --label` over 2,000 runs a side
    # (400,000 samples; bench/store_scale.py), as much as switching the collector off.
    gc.freeze()
    guarded(lambda: app(standalone_mode=False), sys.argv)
