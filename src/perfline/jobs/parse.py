"""Job files: YAML → validated JobSpec; every error names the file and line.

The file is read with PyYAML's node API (`yaml.compose` with the safe loader) so each
key and value keeps its position; scalars are then typed with the safe constructor.
Parsing reads the file and imports the benchmark module for its parameter specs; it
writes nothing.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from perfline.benchmarks import Benchmark, Param
from perfline.jobs.lookup import benchmark_class
from perfline.jobs.matrix import check_size
from perfline.jobs.vm import (
    BOOT_WAYS,
    KEXEC_KEYS,
    VM_KEYS,
    boot_kernel,
    check_guest_job,
    vm_spec,
    watchdog_seconds,
    with_target,
)
from perfline.monitors import DEFAULT_MONITORS, MONITORS
from perfline.records.job import (
    AUTO_MAX_REPEAT,
    AUTO_MIN_REPEAT,
    AUTO_PRECISION_PCT,
    COMMAND_LINE,
    TARGETS,
    TUNABLE_KINDS,
    AxisValue,
    JobError,
    JobSpec,
    ParamValue,
)

TOP_KEYS = (
    "name",
    "benchmark",
    "params",
    "repeat",
    "precision",
    "max_repeat",
    "warmup",
    "monitors",
    "tunables",
    "load",
    "target",
    "tune",
    "boot",
    "watchdog",
    *VM_KEYS,
)
DEFAULT_REPEAT = 5
DEFAULT_WARMUP = 1
# cpufreq governors in the mainline kernel.
GOVERNORS = ("conservative", "ondemand", "performance", "powersave", "schedutil", "userspace")

_SYSCTL_NAME = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+")
_CPU_LIST = re.compile(r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*")
_CLI_TRUE = ("1", "true", "yes", "on")
_CLI_FALSE = ("0", "false", "no", "off")


def load_job(path: Path | str) -> JobSpec:
    """Read and validate a job file. Raises JobError (`file:line: message`)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise JobError(path, None, f"cannot read job file: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise JobError(path, line, "job file is not UTF-8 text") from None
    return _Parser(path, text).parse()


def job_from_node(path: Path, text: str, node: Node, name: str) -> JobSpec:
    """An inline job: `node`, a mapping within the YAML file `path` (whose `text` it was
    composed from), read like a job file of its own named `name`; errors name its lines."""
    return _Parser(path, text).job(node, name, "the job")


def job_from_benchmark(
    benchmark: str,
    params: Mapping[str, Any] | None = None,
    repeat: int | str = DEFAULT_REPEAT,
    warmup: int | str = DEFAULT_WARMUP,
    monitors: Iterable[str] | None = None,
    *,
    target: str = "local",
    precision: float | str | None = None,
    max_repeat: int | str | None = None,
) -> JobSpec:
    """A job for `perfline run BENCHMARK --param k=v ...`, validated like a job file.

    Parameter values may be strings as typed on the command line (converted to the
    parameter's type: `loops=1000` → 1000) or already typed values; a list is a matrix
    axis. `monitors=None` means DEFAULT_MONITORS. Errors are JobError with the file
    `command line` and no line.
    """

    def fail(message: str) -> JobError:
        return JobError(COMMAND_LINE, None, message)

    cls = benchmark_class(benchmark, fail)
    names = [p.name for p in cls.params]
    converted: dict[str, AxisValue] = {}
    for name, value in (params or {}).items():
        param = cls.param(name)
        if param is None:
            raise fail(f"--param {name}: {_unknown_param(benchmark, name, names)}")
        if isinstance(value, (list, tuple)):
            if not value:
                raise fail(f"--param {name}: empty list of values")
            values = [_cli_value(param, v, fail) for v in value]
            def twice(v: Any, name: str = name) -> JobError:
                return fail(f"--param {name}: {v!r} is given twice")

            _check_unique(values, twice)
            converted[name] = values
        else:
            converted[name] = _cli_value(param, value, fail)
    monitor_names = DEFAULT_MONITORS if monitors is None else tuple(monitors)
    for monitor in monitor_names:
        if monitor not in MONITORS:
            raise fail(f"unknown monitor {monitor!r}: {MONITORS.suggestion(monitor)}")
    _check_unique(list(monitor_names), lambda m: fail(f"monitor {m!r} is named twice"))
    repeat_count, precision_pct = repeat_policy(
        _cli_int(repeat),
        precision,
        None if max_repeat is None else _cli_int(max_repeat),
        lambda what: fail,
    )
    spec = JobSpec(
        name=benchmark,
        benchmark=benchmark,
        params=converted,
        repeat=repeat_count,
        precision_pct=precision_pct,
        warmup=_count("warmup", _cli_int(warmup), 0, fail),
        monitors=monitor_names,
    )
    check_size(spec)
    return with_target(spec, cls, target=target)


def parse_param_args(items: Iterable[str]) -> dict[str, str]:
    """`["loops=1000", "mode=x"]` (repeated `--param` options) → {"loops": "1000", ...}."""
    result: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise JobError(COMMAND_LINE, None, f"--param {item!r}: expected NAME=VALUE")
        if name in result:
            raise JobError(COMMAND_LINE, None, f"--param {name} is given twice")
        result[name] = value.strip()
    return result


# -- shared helpers -------------------------------------------------------------------


def _unknown(kind: str, name: str, options: Iterable[str]) -> str:
    options = list(options)
    close = difflib.get_close_matches(name, options, n=3, cutoff=0.6)
    if close:
        return f"unknown {kind} {name!r}: did you mean {' or '.join(map(repr, close))}?"
    if not options:
        return f"unknown {kind} {name!r}"
    return f"unknown {kind} {name!r}: expected one of {', '.join(options)}"


def _unknown_param(benchmark: str, name: str, names: list[str]) -> str:
    if not names:
        return f"unknown parameter {name!r}: benchmark {benchmark!r} takes no parameters"
    return _unknown("parameter", name, names) + f" (benchmark {benchmark!r})"


def _check_unique(values: list[Any], fail: Callable[[Any], JobError]) -> None:
    seen: list[Any] = []
    for value in values:
        if any(type(value) is type(s) and value == s for s in seen):
            raise fail(value)
        seen.append(value)


def repeat_policy(
    repeat: Any,
    precision: Any,
    max_repeat: Any,
    fail_for: Callable[[str], Callable[[str], JobError]],
) -> tuple[int, float | None]:
    """(runs or cap, precision % or None) from `repeat`, `precision` and `max_repeat`.

    `fail_for(key)` gives the error factory for that key, so job files can point at
    the offending line.
    """
    if repeat != "auto":
        for key, value in (("precision", precision), ("max_repeat", max_repeat)):
            if value is not None:
                raise fail_for(key)(f"{key} applies only to `repeat: auto`")
        return _count("repeat", repeat, 1, fail_for("repeat")), None
    cap = AUTO_MAX_REPEAT
    if max_repeat is not None:
        cap = _count("max_repeat", max_repeat, AUTO_MIN_REPEAT, fail_for("max_repeat"))
    if precision is None:
        return cap, AUTO_PRECISION_PCT
    return cap, _percent(precision, fail_for("precision"))


def _percent(value: Any, fail: Callable[[str], JobError]) -> float:
    """`1%`, `"0.5%"` or a plain number of percent → float > 0."""
    text = str(value).strip().removesuffix("%").strip()
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or number <= 0:
        raise fail(f"precision must be a positive percentage such as 1% or 0.5, got {value!r}")
    return number


def _count(what: str, value: Any, minimum: int, fail: Callable[[str], JobError]) -> int:
    if value == "auto":
        raise fail(f"{what} must be an integer >= {minimum}; only repeat may be 'auto'")
    if not isinstance(value, int) or isinstance(value, bool):
        raise fail(f"{what} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise fail(f"{what} must be an integer >= {minimum}, got {value}")
    return value


def _cli_int(value: int | str) -> int | str:
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value):
        return int(value)
    return value


def _normalize(param: Param, value: ParamValue) -> ParamValue:
    """An int given for a float parameter becomes a float, so `5` and `5.0` are one case."""
    if param.type is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _cli_value(param: Param, value: Any, fail: Callable[[str], JobError]) -> ParamValue:
    """Convert a command-line string to the parameter's type and check it."""
    if isinstance(value, str) and param.type is not str:
        text = value.strip()
        converted: ParamValue | None = None
        try:
            if param.type is bool:
                if text.lower() in _CLI_TRUE:
                    converted = True
                elif text.lower() in _CLI_FALSE:
                    converted = False
            elif param.type is int:
                converted = int(text)
            elif param.type is float:
                converted = float(text)
        except ValueError:
            converted = None
        if converted is None or (isinstance(converted, float) and not math.isfinite(converted)):
            expected = {
                bool: "true or false",
                int: "an integer",
                float: "a number",
            }[param.type]
            raise fail(f"--param {param.name}={value}: {param.name} must be {expected}")
        value = converted
    problem = param.check(value)
    if problem:
        raise fail(f"--param {param.name}={value}: {problem}")
    return _normalize(param, value)


# -- the YAML parser ------------------------------------------------------------------


class _Parser:
    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text
        self.constructor = yaml.constructor.SafeConstructor()
        # Line of each list-valued axis, for the matrix-size error.
        self.axis_lines: list[int] = []

    # errors

    def error(self, node: Node | None, message: str) -> JobError:
        return JobError(self.path, _line(node), message)

    def at(self, node: Node) -> Callable[[str], JobError]:
        return lambda message: self.error(node, message)

    def key_or(
        self, top: dict[str, tuple[ScalarNode, Node]], fallback: Node
    ) -> Callable[[str], Callable[[str], JobError]]:
        """Errors about a key at its value's line, or at `fallback` when it is missing."""
        return lambda key: self.at(top[key][1] if key in top else fallback)

    # structure

    def parse(self) -> JobSpec:
        root = compose_yaml(self.path, self.text)
        if root is None or (isinstance(root, ScalarNode) and self.scalar_or_none(root) is None):
            raise JobError(
                self.path, 1, "empty job file: expected a mapping with a 'benchmark' key"
            )
        return self.job(root, self.path.stem, "the job file")

    def job(self, root: Node, name: str, what: str) -> JobSpec:
        top = self.mapping(root, what)
        for key, (key_node, _) in top.items():
            if key not in TOP_KEYS:
                raise self.error(key_node, _unknown("key", key, TOP_KEYS))
        if "benchmark" not in top:
            raise self.error(root, "missing required key 'benchmark'")

        benchmark_node = top["benchmark"][1]
        benchmark = self.string(benchmark_node, "benchmark")
        cls = benchmark_class(benchmark, self.at(benchmark_node))

        if "name" in top:
            name = self.string(top["name"][1], "name").strip()
            if not name:
                raise self.error(top["name"][1], "name must not be empty")

        params: dict[str, AxisValue] = {}
        if "params" in top:
            params = self.params(top["params"][1], cls)

        def given(key: str) -> Any:
            return self.scalar(top[key][1], key) if key in top else None

        repeat, precision_pct = repeat_policy(
            given("repeat") if "repeat" in top else DEFAULT_REPEAT,
            given("precision"),
            given("max_repeat"),
            lambda key: self.at(top[key][1] if key in top else root),
        )
        warmup = DEFAULT_WARMUP
        if "warmup" in top:
            node = top["warmup"][1]
            warmup = _count("warmup", self.scalar(node, "warmup"), 0, self.at(node))

        monitors: tuple[str, ...] = DEFAULT_MONITORS
        if "monitors" in top:
            monitors = self.monitors(top["monitors"][1])

        tunables: dict[str, dict[str, AxisValue]] = {}
        if "tunables" in top:
            tunables = self.tunables(top["tunables"][1])
        if "load" in top:
            tunables["load"] = {"load": self.axis(top["load"][1], "load", self.hog_count)}

        tune = False
        if "tune" in top:
            given_tune = self.scalar(top["tune"][1], "tune")
            if not isinstance(given_tune, bool):
                raise self.error(top["tune"][1], f"tune must be true or false, got {given_tune!r}")
            tune = given_tune

        target = "local"
        if "target" in top:
            node = top["target"][1]
            target = self.string(node, "target")
            if target not in TARGETS:
                raise self.error(node, _unknown("target", target, TARGETS))
        vm = None
        if target == "qemu":
            where = self.key_or(top, top["target"][1])
            vm = vm_spec(given("kernel"), given("vm_cpus"), given("vm_memory"), given("accel"), where)
            if "cmdline" in top:
                tunables["cmdline"] = {"cmdline": self.axis(top["cmdline"][1], "cmdline", self.kernel_parameters)}
            check_guest_job(cls, tunables, where)
        boot = None
        if target == "kexec":
            boot = boot_kernel(given("kernel"), self.key_or(top, top["target"][1]))
            if "cmdline" in top:
                tunables["cmdline"] = {"cmdline": self.axis(top["cmdline"][1], "cmdline", self.kernel_parameters)}
        for key in VM_KEYS:
            if key in top and target != "qemu" and not (target == "kexec" and key in KEXEC_KEYS):
                raise self.error(top[key][0], f"{key} applies only to `target: qemu`")
        boot_way = "kexec"
        if "boot" in top:
            node = top["boot"][1]
            boot_way = self.string(node, "boot")
            if target != "kexec":
                raise self.error(top["boot"][0], "boot applies only to `target: kexec`")
            if boot_way not in BOOT_WAYS:
                raise self.error(node, _unknown("boot", boot_way, BOOT_WAYS))
        watchdog = None
        if "watchdog" in top:
            if target != "kexec":
                raise self.error(top["watchdog"][0], "watchdog applies only to `target: kexec`")
            node = top["watchdog"][1]
            watchdog = watchdog_seconds(self.scalar(node, "watchdog"), self.at(node))

        spec = JobSpec(
            name=name,
            benchmark=benchmark,
            params=params,
            repeat=repeat,
            precision_pct=precision_pct,
            warmup=warmup,
            monitors=tuple(monitors),
            tunables=tunables,
            target=target,
            path=self.path,
            vm=vm,
            tune=tune,
            boot_kernel=boot,
            boot=boot_way,
            watchdog=watchdog,
        )
        check_size(spec, line=self.axis_lines[0] if self.axis_lines else None)
        return spec

    def mapping(self, node: Node, what: str) -> dict[str, tuple[ScalarNode, Node]]:
        """Keys (names) → (key node, value node), in file order; duplicates are errors."""
        if not isinstance(node, MappingNode):
            raise self.error(
                node, f"{what} must be a mapping of names to values, got {_kind(node)}"
            )
        result: dict[str, tuple[ScalarNode, Node]] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise self.error(key_node, f"keys in {what} must be names, got {_kind(key_node)}")
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise self.error(key_node, "merge keys ('<<') are not supported in job files")
            key = self.construct(key_node)
            if not isinstance(key, str) or not key:
                raise self.error(key_node, f"keys in {what} must be names, got {key!r}")
            if key in result:
                first = _line(result[key][0])
                raise self.error(
                    key_node, f"duplicate key {key!r} in {what} (first at line {first})"
                )
            result[key] = (key_node, value_node)
        return result

    def construct(self, node: ScalarNode) -> Any:
        return construct_value(node, self.constructor, self.at(node))

    def scalar_or_none(self, node: Node) -> ParamValue | None:
        assert isinstance(node, ScalarNode)
        value = self.construct(node)
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise self.error(node, f"{node.value!r} is not a finite number")
            return value
        raise self.error(
            node,
            f"unsupported value {node.value!r} ({type(value).__name__}); quote it for a string",
        )

    def scalar(self, node: Node, what: str) -> ParamValue:
        if not isinstance(node, ScalarNode):
            raise self.error(node, f"{what} must be a single value, got {_kind(node)}")
        value = self.scalar_or_none(node)
        if value is None:
            raise self.error(node, f"{what} has no value")
        return value

    def string(self, node: Node, what: str) -> str:
        value = self.scalar(node, what)
        if not isinstance(value, str):
            raise self.error(node, f"{what} must be a string, got {value!r}")
        return value

    def axis(
        self, node: Node, what: str, convert: Callable[[ScalarNode, ParamValue], ParamValue]
    ) -> AxisValue:
        """A single value, or a non-empty list of distinct values (a matrix axis)."""
        if isinstance(node, SequenceNode):
            if not node.value:
                raise self.error(node, f"{what}: empty list; give at least one value")
            values: list[ParamValue] = []
            for item in node.value:
                if not isinstance(item, ScalarNode):
                    raise self.error(
                        item, f"{what}: list items must be single values, got {_kind(item)}"
                    )
                value = convert(item, self.scalar(item, what))
                def twice(v: Any, item: Node = item) -> JobError:
                    return self.error(item, f"{what}: value {v!r} is listed twice")

                _check_unique([*values, value], twice)
                values.append(value)
            self.axis_lines.append(_line(node) or 1)
            return values
        if isinstance(node, MappingNode):
            raise self.error(node, f"{what} must be a value or a list of values, got a mapping")
        assert isinstance(node, ScalarNode)
        return convert(node, self.scalar(node, what))

    # sections

    def params(self, node: Node, cls: type[Benchmark]) -> dict[str, AxisValue]:
        names = [p.name for p in cls.params]
        result: dict[str, AxisValue] = {}
        for name, (key_node, value_node) in self.mapping(node, "params").items():
            param = cls.param(name)
            if param is None:
                raise self.error(key_node, _unknown_param(cls.name, name, names))

            def convert(item: ScalarNode, value: ParamValue, param: Param = param) -> ParamValue:
                # PyYAML reads `1e3` as a string; YAML 1.2 and people read it as a number.
                if param.type is float and isinstance(value, str) and item.style is None:
                    with contextlib.suppress(ValueError):
                        value = float(value)
                problem = param.check(value)
                if problem:
                    raise self.error(item, problem)
                return _normalize(param, value)

            result[name] = self.axis(value_node, f"params.{name}", convert)
        return result

    def monitors(self, node: Node) -> tuple[str, ...]:
        if not isinstance(node, SequenceNode):
            raise self.error(node, f"monitors must be a list of monitor names, got {_kind(node)}")
        names: list[str] = []
        for item in node.value:
            name = self.string(item, "monitor")
            if name not in MONITORS:
                raise self.error(item, f"unknown monitor {name!r}: {MONITORS.suggestion(name)}")
            if name in names:
                raise self.error(item, f"monitor {name!r} is named twice")
            names.append(name)
        return tuple(names)

    def tunables(self, node: Node) -> dict[str, dict[str, AxisValue]]:
        result: dict[str, dict[str, AxisValue]] = {}
        for kind, (key_node, value_node) in self.mapping(node, "tunables").items():
            if kind not in TUNABLE_KINDS:
                raise self.error(key_node, _unknown("tunable kind", kind, TUNABLE_KINDS))
            if kind == "sysctl":
                result[kind] = self.settings(value_node, kind, self.sysctl_name)
            elif kind == "sysfs":
                result[kind] = self.settings(value_node, kind, self.sysfs_path)
            elif kind == "governor":
                result[kind] = {kind: self.axis(value_node, kind, self.governor)}
            else:
                result[kind] = {kind: self.axis(value_node, kind, self.cpu_list)}
        return result

    def settings(
        self, node: Node, kind: str, check_key: Callable[[ScalarNode, str], None]
    ) -> dict[str, AxisValue]:
        result: dict[str, AxisValue] = {}
        for key, (key_node, value_node) in self.mapping(node, f"tunables.{kind}").items():
            check_key(key_node, key)

            def convert(item: ScalarNode, value: ParamValue, key: str = key) -> ParamValue:
                if isinstance(value, bool):
                    raise self.error(
                        item,
                        f"{kind} {key}: {item.value!r} reads as true/false; write the text the "
                        f"kernel takes (e.g. 1, 0, Y, N), quoted if needed",
                    )
                return value

            result[key] = self.axis(value_node, f"{kind} {key}", convert)
        return result

    def sysctl_name(self, node: ScalarNode, name: str) -> None:
        if _SYSCTL_NAME.fullmatch(name):
            return
        hint = ""
        if name.startswith("/proc/sys/"):
            hint = f"; did you mean {name.removeprefix('/proc/sys/').replace('/', '.')!r}?"
        elif name.startswith("/sys/"):
            hint = "; paths under /sys go under tunables.sysfs"
        elif "/" in name:
            hint = f"; did you mean {name.strip('/').replace('/', '.')!r}?"
        raise self.error(
            node,
            f"sysctl name {name!r} must be dotted, like 'kernel.sched_autogroup_enabled'{hint}",
        )

    def sysfs_path(self, node: ScalarNode, path: str) -> None:
        check_sysfs_path(path, self.at(node), sysctl_where="under tunables.sysctl")

    def governor(self, node: ScalarNode, value: ParamValue) -> ParamValue:
        return check_governor(value, self.at(node))

    def kernel_parameters(self, node: ScalarNode, value: ParamValue) -> ParamValue:
        if not isinstance(value, str):
            raise self.error(node, f"cmdline must be a string of kernel parameters, got {value!r}")
        return value.strip()

    def hog_count(self, node: ScalarNode, value: ParamValue) -> ParamValue:
        return check_hog_count(value, self.at(node))

    def cpu_list(self, node: ScalarNode, value: ParamValue) -> ParamValue:
        return check_cpu_list(value, self.at(node))


# -- tunable values, checked alike in job files and on the command line ---------------


def check_sysfs_path(path: str, fail: Callable[[str], JobError], sysctl_where: str) -> None:
    """A normalized absolute path under /sys/; a /proc/sys path is pointed to the sysctls
    (`sysctl_where`: where those are given, e.g. `under tunables.sysctl`)."""
    if path.startswith("/proc/sys/"):
        dotted = path.removeprefix("/proc/sys/").replace("/", ".")
        raise fail(f"{path!r} is a sysctl: write it {sysctl_where} as {dotted!r}")
    if not path.startswith("/sys/") or os.path.normpath(path) != path or path == "/sys/":
        raise fail(f"sysfs path {path!r} must be a normalized absolute path under /sys/")


def check_governor(value: ParamValue, fail: Callable[[str], JobError]) -> ParamValue:
    if value not in GOVERNORS:
        raise fail(_unknown("governor", str(value), GOVERNORS))
    return value


def check_hog_count(value: ParamValue, fail: Callable[[str], JobError]) -> ParamValue:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise fail(f"load must be a number of CPU hogs (0 or more), got {value!r}")
    return value


def check_cpu_list(value: ParamValue, fail: Callable[[str], JobError]) -> str:
    """`0-1`, `0,2` or `3` (kernel cpulist syntax) → the list as text, spaces removed."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise fail(f"pin must be a CPU list like '0-1' or '0,2', got {value!r}")
    text = str(value).replace(" ", "")
    if not _CPU_LIST.fullmatch(text):
        raise fail(f"pin must be a CPU list like '0-1' or '0,2', got {value!r}")
    for part in text.split(","):
        low, _, high = part.partition("-")
        if high and int(high) < int(low):
            raise fail(f"pin: CPU range {part!r} runs backwards")
    return text


def _line(node: Node | None) -> int | None:
    return None if node is None else node.start_mark.line + 1


def _kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    if node.tag == "tag:yaml.org,2002:null":
        return "no value"
    return repr(node.value)


def compose_yaml(path: Path, text: str) -> Node | None:
    """A job or tracker file's node tree (lines kept), or a JobError naming the line:
    every YAML error, a NUL byte's ReaderError included, is the user's to fix."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        message = " ".join(p for p in (exc.context, exc.problem) if p)
        raise JobError(path, line, f"invalid YAML: {message}") from None
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        raise JobError(path, line, f"invalid YAML: {exc.reason} {exc.character!r}") from None
    except yaml.YAMLError as exc:
        raise JobError(path, None, f"invalid YAML: {exc}") from None


def construct_value(node: Node, constructor: yaml.constructor.SafeConstructor,
                    fail: Callable[[str], JobError]) -> Any:
    """A node's value by the safe constructor; a tag it refuses (`!!python/object`) or a
    malformed value (`!!int x`) is the user's error at the node's line."""
    try:
        return constructor.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:  # `!!int x`: int('x')
        problem = getattr(exc, "problem", None) or str(exc)
        raise fail(f"invalid value: {problem}") from None
