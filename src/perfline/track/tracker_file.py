"""The tracker file: which tree and branch, which commits, how to build, which jobs.

Errors are `FILE:LINE: message` (JobError), raised before anything runs, so a typo
never costs a night of testing. Paths in the file are relative to the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from perfline import git
from perfline.jobs import JobError, JobSpec, load_job
from perfline.jobs.parse import compose_yaml, construct_value, job_from_node

KEYS = ("name", "repo", "branch", "select", "since", "build", "jobs", "narrow", "budget", "reference", "floor",
        "report", "fleet", "number")
# `number:` which series make the daily number: every one, the counted (instructions,
# estimated cycles) or the timed.
NUMBER_OF = ("all", "counted", "timed")
REPORT_KEYS = ("mail_to", "smtp", "from", "url")
SELECT_KEYS = ("every", "tags", "daily")
DEFAULT_RUNS_PER_DAY = 400
DEFAULT_FLOOR_PCT = 1.0
# `narrow:` true narrows regressions; `all` improvements too (which commit made it
# faster: to credit it, and a change too good to be true is often a broken benchmark).
NARROW = {False: (), True: ("regression",), "all": ("regression", "improvement")}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_TIME = re.compile(r"([01]\d|2[0-3]):[0-5]\d")
# `repo` is a URL when git would take it as one (scheme://, or scp-like user@host:path).


@dataclass(frozen=True)
class Selection:
    """Exactly one of: every Nth first-parent commit (and the head), the commits of
    matching tags, or the head once a day after a time of day."""

    every: int | None = None
    tags: str | None = None
    daily: str | None = None  # "HH:MM", local time


@dataclass(frozen=True)
class TrackedJob:
    spec: JobSpec
    # The job as a file of its own, for the bisections that narrow its regressions;
    # None for an inline job until the tracker writes one (track.narrow).
    file: Path | None
    # The inline job's YAML text, to write that file from.
    text: str | None = None


@dataclass(frozen=True)
class MailSettings:
    """`report:`: who gets each bisected regression's report and the daily summary."""

    mail_to: tuple[str, ...]
    smtp: str | None = None  # HOST:PORT; else PERFLINE_SMTP_HOST/_PORT
    sender: str | None = None
    url: str | None = None  # the dashboard, for the reports' links


@dataclass(frozen=True)
class TrackerSpec:
    path: Path
    name: str
    repo: str  # a directory (absolute) or a URL to clone
    branch: str
    select: Selection
    since: str | None
    build: str | None
    kernel_config: Path | None
    jobs: tuple[TrackedJob, ...]
    narrow: tuple[str, ...]  # the kinds of record narrowed (NARROW); () for none
    runs_per_day: int
    reference: str | None
    floor_pct: float
    report: MailSettings | None = None
    # `fleet: {class: CLASS}`: tests, confirmations and bisections run on the fleet's
    # machines of this class (docs/fleet.md); None: on this machine.
    fleet_class: str | None = None
    number: str = "all"  # NUMBER_OF
    # The line of each top-level key, for errors found later (a `since` git does not know).
    lines: dict[str, int] = field(default_factory=dict)

    def error(self, key: str, message: str) -> JobError:
        return JobError(self.path, self.lines.get(key), message)

    @property
    def is_url(self) -> bool:
        return git.is_url(self.repo)


def load_tracker(path: Path) -> TrackerSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise JobError(path, None, f"cannot read the tracker file: {reason}") from None
    return _Reader(path, text).tracker(compose_yaml(path, text))


class _Reader:
    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text
        self.here = path.resolve().parent

    def error(self, node: Node | None, message: str) -> JobError:
        return JobError(self.path, node.start_mark.line + 1 if node is not None else 1, message)

    def mapping(self, node: Node | None, what: str, allowed: tuple[str, ...]) -> dict[str, Node]:
        if not isinstance(node, MappingNode):
            raise self.error(node, f"{what} must be a mapping")
        found: dict[str, Node] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, ScalarNode) else None
            if name not in allowed:
                raise self.error(key, f"unknown key {name!r} in {what}; known: {', '.join(allowed)}")
            if name in found:
                raise self.error(key, f"duplicate key {name!r} in {what}")
            found[name] = value
        return found

    def scalar(self, node: Node, what: str) -> Any:
        if not isinstance(node, ScalarNode):
            raise self.error(node, f"{what} must be a single value")
        return construct_value(node, yaml.constructor.SafeConstructor(), lambda message: self.error(node, message))

    def string(self, node: Node, what: str) -> str:
        value = self.scalar(node, what)
        if not isinstance(value, str | int) or isinstance(value, bool) or not str(value).strip():
            raise self.error(node, f"{what} must be a non-empty string")
        return str(value).strip()

    def count(self, node: Node, what: str, minimum: int) -> int:
        value = self.scalar(node, what)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.error(node, f"{what} must be a whole number of at least {minimum}")
        return value

    def tracker(self, root: Node | None) -> TrackerSpec:
        top = self.mapping(root, "the tracker file", KEYS)
        for required in ("name", "repo", "jobs"):
            if required not in top:
                raise self.error(root, f"missing required key {required!r}")
        name = self.string(top["name"], "name")
        if not _NAME.fullmatch(name):
            raise self.error(top["name"], "name: letters, digits, '.', '_' and '-' (it labels the runs)")
        repo = self.string(top["repo"], "repo")
        if not git.is_url(repo):
            local = (self.here / repo).resolve()
            if not (local / ".git").exists() and not (local / "HEAD").is_file():
                raise self.error(top["repo"], f"repo: {local} is not a git repository")
            repo = str(local)
        build, config = self.build(top.get("build"), root)
        narrow: tuple[str, ...] = ()
        if "narrow" in top:
            value = self.scalar(top["narrow"], "narrow")
            if not isinstance(value, bool | str) or value not in NARROW:
                raise self.error(top["narrow"], "narrow must be true (regressions), all (improvements too) or false")
            narrow = NARROW[value]
        runs_per_day = DEFAULT_RUNS_PER_DAY
        if "budget" in top:
            budget = self.mapping(top["budget"], "budget", ("runs_per_day",))
            if "runs_per_day" in budget:
                runs_per_day = self.count(budget["runs_per_day"], "budget.runs_per_day", 1)
        floor = DEFAULT_FLOOR_PCT
        if "floor" in top:
            value = self.scalar(top["floor"], "floor")
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise self.error(top["floor"], "floor must be a percentage, e.g. 1")
            floor = float(value)
        number = "all"
        if "number" in top:
            number = self.string(top["number"], "number")
            if number not in NUMBER_OF:
                raise self.error(top["number"], f"number must be one of {', '.join(NUMBER_OF)}, got {number!r}")
        return TrackerSpec(
            path=self.path,
            name=name,
            repo=repo,
            branch=self.string(top["branch"], "branch") if "branch" in top else "HEAD",
            select=self.selection(top.get("select")),
            since=self.string(top["since"], "since") if "since" in top else None,
            build=build,
            kernel_config=config,
            jobs=self.jobs(top["jobs"], name),
            narrow=narrow,
            runs_per_day=runs_per_day,
            reference=self.string(top["reference"], "reference") if "reference" in top else None,
            floor_pct=floor,
            report=self.report(top["report"]) if "report" in top else None,
            fleet_class=self.fleet(top["fleet"]) if "fleet" in top else None,
            lines={key: node.start_mark.line + 1 for key, node in top.items()},
            number=number,
        )

    def build(self, node: Node | None, root: Node | None) -> tuple[str | None, Path | None]:
        if node is None:
            raise self.error(root, "missing required key 'build': a command (make -s), or kernel: {config: FILE}")
        if isinstance(node, MappingNode):
            kernel = self.mapping(node, "build", ("kernel",))
            if "kernel" not in kernel:
                raise self.error(node, "build: give a command, or kernel: {config: FILE}")
            options = self.mapping(kernel["kernel"], "build.kernel", ("config",))
            if "config" not in options:
                raise self.error(kernel["kernel"], "build.kernel needs config: FILE (the .config to build with)")
            config = (self.here / self.string(options["config"], "config")).resolve()
            if not config.is_file():
                raise self.error(options["config"], f"build.kernel.config: no such file {config}")
            return None, config
        return self.string(node, "build"), None

    def fleet(self, node: Node) -> str:
        found = self.mapping(node, "fleet", ("class",))
        if "class" not in found:
            raise self.error(node, "fleet needs class: the machines' class (`perfline fleet status` lists them)")
        return self.string(found["class"], "fleet.class")

    def report(self, node: Node) -> MailSettings:
        found = self.mapping(node, "report", REPORT_KEYS)
        if "mail_to" not in found:
            raise self.error(node, "report needs mail_to: an address or a list of them")
        value = found["mail_to"]
        items = value.value if isinstance(value, SequenceNode) else [value]
        recipients = tuple(self.string(item, "report.mail_to") for item in items)
        for item, address in zip(items, recipients, strict=True):
            if "@" not in address:
                raise self.error(item, f"report.mail_to: {address!r} is not a mail address")
        smtp = self.string(found["smtp"], "report.smtp") if "smtp" in found else None
        if smtp is not None and not re.fullmatch(r"[^:\s]+(:\d+)?", smtp):
            raise self.error(found["smtp"], "report.smtp must be HOST or HOST:PORT")
        return MailSettings(recipients, smtp, self.string(found["from"], "report.from") if "from" in found else None,
                            self.string(found["url"], "report.url") if "url" in found else None)

    def selection(self, node: Node | None) -> Selection:
        if node is None:
            return Selection(every=1)
        found = self.mapping(node, "select", SELECT_KEYS)
        if len(found) != 1:
            raise self.error(node, "select takes one of every: N, tags: 'GLOB', daily: 'HH:MM'")
        [(key, value)] = found.items()
        if key == "every":
            return Selection(every=self.count(value, "select.every", 1))
        text = self.string(value, f"select.{key}")
        if key == "daily" and not _TIME.fullmatch(text):
            raise self.error(value, "select.daily must be a time of day, HH:MM (e.g. '02:00')")
        return Selection(tags=text) if key == "tags" else Selection(daily=text)

    def jobs(self, node: Node, tracker: str) -> tuple[TrackedJob, ...]:
        if not isinstance(node, SequenceNode) or not node.value:
            raise self.error(node, "jobs must be a list of job files or inline jobs")
        from perfline.stats.two_sample import MIN_SAMPLES

        jobs = []
        for i, item in enumerate(node.value):
            if isinstance(item, ScalarNode):
                file = (self.here / self.string(item, "a job file")).resolve()
                if not file.is_file():
                    raise self.error(item, f"no such job file: {file}")
                jobs.append(TrackedJob(load_job(file), file))
            else:
                name = f"{tracker}-job{i + 1}"
                spec = job_from_node(self.path, self.text, item, name)
                jobs.append(TrackedJob(spec, None, yaml.serialize(item)))
            repeat = jobs[-1].spec.repeat
            # A count repeats exactly: its noise is measured from the history (stats.counted).
            counted = jobs[-1].spec.benchmark == "command" and "count" in jobs[-1].spec.params
            if jobs[-1].spec.precision_pct is None and repeat < MIN_SAMPLES and not counted:
                raise self.error(item, f"repeat {repeat}: a tested commit is compared with the one before it, "
                                       f"which needs {MIN_SAMPLES} repetitions a commit; set repeat: {MIN_SAMPLES} "
                                       "or more in this job")
        return tuple(jobs)
