"""Catalogues of named plugins (benchmarks, monitors): built-in entries and Python entry points."""

from perfline.plugins.registry import BrokenPlugin, Registry, UnknownName

__all__ = ["BrokenPlugin", "Registry", "UnknownName"]
