"""Names for the series of one chart: each by what varies between them, the rest once.

A case key is `k=v,k=v,kind:v,...` (records.job.Case.key), values with separators
JSON-quoted. Two series of a chart that differ only in `cpus` are named `cpus=0` and
`cpus=0,1`, and everything they share (`loops=20000`, the machine) is said once above
the chart instead of in every legend entry.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

_DECODER = json.JSONDecoder()


def key_parts(case_key: str) -> dict[str, str]:
    """The key's parts by name (`cpus=0,1` stays one part when JSON-quoted, as keys
    write values holding a separator); a part without `=` is named by itself."""
    parts: dict[str, str] = {}
    at = 0
    while at < len(case_key):
        equals = case_key.find("=", at)
        comma = case_key.find(",", at)
        if equals != -1 and (comma == -1 or equals < comma) and case_key.startswith('"', equals + 1):
            try:
                _, end = _DECODER.raw_decode(case_key, equals + 1)
            except json.JSONDecodeError:  # not a key perfline wrote: read to the next comma
                end = comma if comma != -1 else len(case_key)
        else:
            end = comma if comma != -1 else len(case_key)
        part = case_key[at:end]
        name = part.split("=", 1)[0] if "=" in part else part
        parts[name] = part
        at = end + 1
    return parts


def name_series(series: Sequence[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """(case key, host name) of each series -> (what every series shares, each one's
    name: the parts that vary, `on HOST` when hosts differ). A lone series shares all."""
    parsed = [{**key_parts(case), " host": f"on {host}"} for case, host in series]
    names = list(dict.fromkeys(name for parts in parsed for name in parts))
    shared = [name for name in names if all(parts.get(name) == parsed[0].get(name) for parts in parsed)]
    varying = [name for name in names if name not in shared]
    common = [parsed[0][name] for name in shared]
    return common, [", ".join(parts.get(name, f"no {name}") for name in varying) or "default" for parts in parsed]
