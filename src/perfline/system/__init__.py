"""Talking to the host: external processes, durable files, the native helpers, the machine's speed,
a private PostgreSQL server. Floor 0: imports nothing else of perfline but `records`."""
