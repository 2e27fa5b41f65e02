"""Reports: terminal tables and JSON documents of runs."""
