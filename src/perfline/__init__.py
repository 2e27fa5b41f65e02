"""perfline: a performance regression tracker for the Linux kernel."""

__version__ = "0.1.0"
