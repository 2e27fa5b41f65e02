"""The report of one regression, in the shape of the 0-day robot's e-mail.

Kernel developers already act on LKP's reports, so the layout is theirs: the subject,
the commit, the test case and machine, the two commits' columns with %stddev and
%change. What its readers miss is added: every row's 95% CI, p-value and verdict,
%stddev always (LKP hides it below 2%), the fingerprint differences, the bisection's
probes and its A/B against the parent, the symbols and call chains whose share of CPU
time moved (marked when the culprit's diff touches them), and the commands that
reproduce it.

`build` gathers everything from the store (git only for what the store lacks) into a
`RegressionReport`;
`text`, `html` and `as_json` render it. `perfline regressions --report ID` and
`perfline report regression ID` print the same text.
"""

from __future__ import annotations

import base64
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfline import git
from perfline.analysis.comparison import CaseComparison, MetricRow, Side, compare_sides, side_profile
from perfline.analysis.regressions import why_label
from perfline.records.fingerprint import Difference
from perfline.report.figures import new_axes, save, style_axes
from perfline.report.profile_shifts import chain_text, shift_json
from perfline.report.templates import TEMPLATES
from perfline.stats.profile_diff import ChainShift, SymbolShift, moved, shifts, top_shares
from perfline.store import Regression, RunDetail, Store
from perfline.store.bisections import BisectionNotFound, BisectionRecord

if TYPE_CHECKING:
    from perfline.stats.two_sample import Comparison

# The why section's longest lists: what moved most is what explains the change.
_WHY_TOP = 10
# `sched/eevdf: Allow shorter ...` -> `sched/eevdf`: LKP's [SUBSYSTEM] is the prefix.
_SUBSYSTEM = re.compile(r"^([\w./+-]+(?:: [\w./+-]+)*):\s")


@dataclass(frozen=True)
class Probe:
    commit: str
    subject: str
    phase: str
    value: float
    culprit_then: str | None
    probability: float


@dataclass(frozen=True)
class RegressionReport:
    regression: Regression
    name: str  # the tracker, else the runs' label, else "perfline"
    branch: str  # the tracker's branch, else "-"
    repo: str | None
    build: str | None
    job_file: str | None
    culprit: git.Commit | None
    good: git.Commit | None
    bad: git.Commit | None
    before: RunDetail
    after: RunDetail
    comparison: CaseComparison
    bisection: BisectionRecord | None
    probes: list[Probe]
    # Why: symbols and call chains whose share moved beyond noise between the culprit's
    # parent and the culprit, from their profiled A/B, else from the two runs' own
    # profiles; strongest first. Unjudged (`why_judged` False: a side with one profile),
    # the largest shifts as they are.
    why: list[SymbolShift]
    why_chains: list[ChainShift]
    why_runs: tuple[int, int] | None
    why_judged: bool
    why_shares: list[SymbolShift]  # the top symbols' shares of both sides
    touched: list[str]  # functions the culprit's diff touches
    url: str | None

    @property
    def subsystem(self) -> str | None:
        commit = self.culprit or self.bad
        match = _SUBSYSTEM.match(commit.subject) if commit else None
        return match.group(1) if match else None

    @property
    def subject(self) -> str:
        r = self.regression
        commit = self.culprit.sha if self.culprit else r.bad or self.after.info.kernel_commit
        sha = commit[:10] if commit else f"run{r.after_run_id}"
        if r.culprits:  # a range: the commits the change may be in, never one of them
            sha = f"{r.culprits[0].sha[:10]}..{r.culprits[-1].sha[:10]} ({len(r.culprits)} commits)"
        subsystem = f"[{self.subsystem}] " if self.subsystem else ""
        kind = r.kind if r.kind in ("regression", "improvement") else "change"
        return f"[{self.name}:{self.branch}] {subsystem}{sha}: {r.metric} {r.change_pct:+.1f}% {kind}"

    @property
    def primary(self) -> MetricRow:
        return next(row for row in self.comparison.rows if row.metric.name == self.regression.metric)

    def changed(self) -> list[MetricRow]:
        """Every other row whose change is significant after the table's multiplicity
        control, the benchmark's metrics first, then the monitors."""
        return [row for row in self.comparison.rows
                if row.metric.name != self.regression.metric and row.others[0] is not None
                and row.others[0].significant]

    def touched_frames(self, chain: ChainShift) -> list[str]:
        """The chain's functions that the culprit's diff touches."""
        return [frame for frame in chain.key.frames if frame in self.touched]

    def machine(self) -> str:
        f = self.after.fingerprint
        memory = f.get("memory_bytes", 0) / 2**30
        return f"{f.get('cpu_count', '?')} CPUs {f.get('cpu_model', '?')} with {memory:.1f}G memory ({f.get('hostname')})"

    def differences(self) -> list[Difference]:
        return self.comparison.differences[0] if self.comparison.differences else []

    @property
    def direction(self) -> str:
        """Which way is better for the metric, as the runs stored it."""
        for sample in self.after.samples:
            if sample.metric.name == self.regression.metric:
                return sample.metric.direction.value
        return "lower"

    @property
    def job_text(self) -> str | None:
        """The job the change was measured with, to save on another machine as job.yaml."""
        if self.job_file is None:
            return None
        try:
            return Path(self.job_file).read_text()
        except OSError:
            return None

    def reproduce(self) -> list[str]:
        """Shell commands that measure the change again on another machine, with the
        job saved as job.yaml (the report shows it)."""
        r = self.regression
        commands = []
        job = "job.yaml" if self.job_text is not None else None
        if self.repo and self.build and r.good and r.bad and job:
            commands.append(
                f"perfline bisect start --repo {shlex.quote(self.repo)} --good {r.good} --bad {r.bad} "
                f"--build {shlex.quote(self.build)} --job {job} --metric {r.metric} --direction {self.direction}")
        elif job:
            commands.append(f"perfline run {job} --label before   # on the old setup")
            commands.append(f"perfline run {job} --label after    # on the new one")
            commands.append("perfline compare --label before --label after")
        commands.append(f"perfline compare {r.before_run_id} {r.after_run_id}   # the runs of this report, here")
        return commands


def build(store: Store, regression_id: int, url: str | None = None) -> RegressionReport:
    """Everything the report shows, from the store and the tracker's repository."""
    r = store.get_regression(regression_id)
    before, after = store.get_run(r.before_run_id), store.get_run(r.after_run_id)
    tracker = None
    if r.tracker:
        try:
            tracker = store.tracker(r.tracker)
        except LookupError:
            tracker = None  # forgotten: the record keeps its commits
    bisection = _bisection(store, r)
    repo = Path(tracker.repo) if tracker else Path(bisection.spec.repo) if bisection else None
    comparison = compare_sides([Side(f"run {before.info.id}", [before]), Side(f"run {after.info.id}", [after])],
                               store)

    # The store keeps what a tracker saw of each commit; git is asked only for the rest
    # (a bisection of a repository no tracker follows), and only while it is there.
    kept = store.stored_commits(sha for sha in (r.culprit, r.good, r.bad) if sha)

    def commit(sha: str | None) -> git.Commit | None:
        if not sha:
            return None
        if sha in kept:
            return kept[sha]
        if repo is None:
            return git.Commit(sha, "", "")
        try:
            return git.commit_info(repo, sha)
        except git.GitError:
            return git.Commit(sha, "", "")

    culprit = commit(r.culprit)
    touched = []
    if culprit and repo is not None:
        try:
            touched = git.changed_functions(repo, culprit.sha)
        except git.GitError:
            touched = []
    why, why_chains, why_runs, why_judged, why_shares = _why(store, r, before, after)
    return RegressionReport(
        regression=r,
        name=r.tracker or before.info.label or "perfline",
        branch=tracker.branch if tracker else "-",
        repo=tracker.repo if tracker else bisection.spec.repo if bisection else None,
        build=bisection.spec.build if bisection else None,
        job_file=bisection.spec.job if bisection else None,
        culprit=culprit,
        good=commit(r.good),
        bad=commit(r.bad),
        before=before,
        after=after,
        comparison=comparison,
        bisection=bisection,
        probes=_probes(store, bisection, repo) if bisection else [],
        touched=touched,
        why=why,
        why_chains=why_chains,
        why_runs=why_runs,
        why_judged=why_judged,
        why_shares=why_shares,
        url=url.rstrip("/") + f"/regressions/{r.id}" if url else None,
    )


def _why(store: Store, r: Regression, before: RunDetail, after: RunDetail
         ) -> tuple[list[SymbolShift], list[ChainShift], tuple[int, int] | None, bool, list[SymbolShift]]:
    """The profiled A/B of culprit and parent if a tracker ran one, else the report's two
    runs' profiles (if they were profiled): what moved beyond noise, and the top shares."""
    runs = [store.get_run(i) for i in store.find_runs(label=why_label(r.id))]
    sides = {run.settings.get("interleaved"): run for run in runs}
    if "A" in sides and "B" in sides:
        base, other = Side("A", [sides["A"]]), Side("B", [sides["B"]])
        why_runs: tuple[int, int] | None = (sides["A"].info.id, sides["B"].info.id)
    else:
        base, other = Side(f"run {before.info.id}", [before]), Side(f"run {after.info.id}", [after])
        why_runs = None
    parent, culprit = side_profile(base, store), side_profile(other, store)
    symbols, chains = moved(parent.symbols, culprit.symbols), moved(parent.chains, culprit.chains)
    shares = top_shares(parent.symbols, culprit.symbols)
    if symbols is None:  # one profile a side: the largest shifts, unjudged
        return shifts(parent.symbols, culprit.symbols), shifts(parent.chains, culprit.chains), why_runs, False, shares
    return symbols[:_WHY_TOP], (chains or [])[:_WHY_TOP], why_runs, True, shares


def _bisection(store: Store, r: Regression) -> BisectionRecord | None:
    if r.bisection_id is None:
        return None
    try:
        return store.bisection(r.bisection_id)
    except BisectionNotFound:
        return None


def _probes(store: Store, record: BisectionRecord, repo: Path | None) -> list[Probe]:
    from perfline.bisect.driver import trace  # scipy: only for a bisected regression

    subjects = {sha: c.subject for sha, c in store.stored_commits(record.spec.commits).items()}
    if repo is not None and len(subjects) < len(set(record.spec.commits)):
        try:
            commits = git.first_parent_range(repo, record.spec.commits[0], record.spec.commits[-1])
            subjects |= {c.sha: c.subject for c in commits if c.sha not in subjects}
        except git.GitError:
            pass  # the repository is gone: the probes are named by sha alone
    probes = []
    for step in trace(store, record):
        sha = record.spec.commits[step.sample.commit_index]
        then = record.spec.commits[step.culprit] if step.culprit is not None else None
        probes.append(Probe(sha, subjects.get(sha, ""), step.sample.phase, step.sample.value, then,
                            step.probability))
    return probes


# ---- text -------------------------------------------------------------------------


def _mean(value: float) -> str:
    return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.0f}"


def _row(row: MetricRow) -> str:
    c: Comparison | None = row.others[0]
    base = f"{_mean(row.base.mean):>12} ±{row.base.cv_pct:3.0f}%"
    if c is None:
        return f"{base}  {'':>8}  {'':>16}  {row.metric.name}"
    other = f"{_mean(c.other.mean):>12} ±{c.other.cv_pct:3.0f}%"
    ci = f"[{c.ci_pct[0]:+.1f}, {c.ci_pct[1]:+.1f}]"
    return (f"{base}  {c.change_pct:+7.1f}%  {other}  {ci:>16}  {c.p_value:8.2g}  {c.verdict:<12}  "
            f"{row.metric.name}")


def _shift(s: SymbolShift | ChainShift) -> str:
    ci = f"[{s.ci_pct[0]:+.2f}, {s.ci_pct[1]:+.2f}]" if s.ci_pct else ""
    return f"{s.delta_pct:+6.2f} points {ci:>16}  {s.base_pct:6.2f}% -> {s.other_pct:6.2f}%"


def text(report: RegressionReport) -> str:
    r = report.regression
    out = [f"Subject: {report.subject}", ""]
    kind = r.kind if r.kind in ("regression", "improvement") else "change"
    out.append(f"perfline noticed a {r.change_pct:+.1f}% {kind} of {r.metric} on:")
    out.append("")
    if report.culprit:
        c = report.culprit
        out.append(f'commit: {c.sha} ("{c.subject}")')
        out.append(f"author: {c.author}" + (f", {c.date.isoformat()}" if c.date else ""))
    if r.culprits:
        out.append("the first bad commit could be any of: " + " ".join(c.sha[:12] for c in r.culprits))
        out += [f'  {c.sha[:12]} ("{c.subject}"): {c.why}' for c in r.culprits]
    if report.good and report.bad:
        out.append(f"range: {report.good.sha[:12]}..{report.bad.sha[:12]} (the tested commits around the change)")
    if report.url:
        out.append(f"url: {report.url}")
    info = report.after.info
    out += ["", f"testcase: {info.benchmark}", f"test machine: {report.machine()}",
            f"kernel: {report.after.fingerprint.get('kernel_release')} (target {info.target})"]
    out.append("parameters:")
    out += [f"\t{k}: {v}" for k, v in sorted(report.after.params.items())]
    tunables = [f"\t{kind}:{k}={v}" for kind, values in sorted(report.after.tunables.items())
                for k, v in sorted(values.items())]
    out += ["tunables:", *(tunables or ["\t-"])]
    left, right = (report.good, report.bad) if report.good and report.bad else (None, None)
    out += ["", "commit:"]
    for commit, run in ((left, report.before), (right, report.after)):
        sha = commit.sha if commit else run.info.kernel_commit or f"run {run.info.id}"
        subject = f' ("{commit.subject}")' if commit and commit.subject else ""
        out.append(f"  {sha[:10]}{subject}   (run {run.info.id})")
    heads = [(left.sha if left else f"run {report.before.info.id}")[:16],
             (right.sha if right else f"run {report.after.info.id}")[:16]]
    out += ["", f"{heads[0]:>18}                    {heads[1]:>18}",
            f"{'-' * 18}                    {'-' * 18}",
            f"{'%stddev':>18}  {'%change':>8}  {'%stddev':>17}  {'95% CI':>16}  {'p':>8}  {'verdict':<12}",
            _row(report.primary)]
    changed = report.changed()
    benchmark = [row for row in changed if row.source == "benchmark"]
    monitors = [row for row in changed if row.source != "benchmark"]
    if benchmark:
        out += ["", "other benchmark metrics that changed:"] + [_row(row) for row in benchmark]
    if monitors:
        out += ["", "monitors that changed (judged together, Benjamini-Hochberg):"] + [_row(row) for row in monitors]
    out += ["", *(f"note: {n}" for n in report.comparison.notes)]
    diffs = report.differences()
    if diffs:
        out += ["", "what differs between the two runs' systems:"]
        out += [f"  {d.key}: {d.base} -> {d.other}" for d in diffs]
    out += _why_text(report)
    if report.bisection:
        b = report.bisection
        result = b.result or {}
        out += ["", f"bisection {b.id}: {b.status}, {result.get('runs', '?')} runs, {len(b.spec.commits)} commits"]
        confirmation = result.get("confirmation")
        if confirmation:
            low, high = confirmation["ci_pct"]
            pair = ("the culprit against its parent" if not r.culprits else
                    f"{str(result.get('first_bad_tested', '?'))[:12]} (the first bad commit tested) against "
                    f"{str(result.get('parent', '?'))[:12]} (the last good one)")
            out.append(f"A/B of {pair}: {confirmation['decision']}, "
                       f"{confirmation['change_pct']:+.2f}% [{low:+.2f}, {high:+.2f}], p={confirmation['p_value']:.2g}, "
                       f"{confirmation['samples']} samples")
        out.append(f"  {'#':>3} {'commit':<12} {'phase':<8} {'value':>10}  most probable then (P)")
        for i, p in enumerate(report.probes, start=1):
            then = f"{p.culprit_then[:12]} ({p.probability:.3f})" if p.culprit_then else "-"
            out.append(f"  {i:>3} {p.commit[:12]:<12} {p.phase:<8} {p.value:>10.5g}  {then}")
    out += ["", "to reproduce:"] + [f"  {command}" for command in report.reproduce()]
    if report.job_text is not None:
        out += ["", "job.yaml:"] + [f"  {line}" for line in report.job_text.splitlines()]
    return "\n".join(out).rstrip() + "\n"


def _why_text(report: RegressionReport) -> list[str]:
    source = (f"the culprit's parent and the culprit interleaved with perf-profile, runs {report.why_runs[0]} "
              f"and {report.why_runs[1]}" if report.why_runs else "the two runs' profiles")
    touched = (f"  * marks a function the culprit's diff touches ({', '.join(report.touched)})"
               if report.touched else None)
    if report.why:
        moved_what = "moved beyond noise, strongest first" if report.why_judged else \
            "moved most (one profile a side: not told from noise)"
        out = ["", f"why: symbols whose share of busy CPU time {moved_what} ({source})"]
        if report.why_judged:
            out.append("  each 95% interval is Bonferroni's over every symbol compared")
        out += [touched] if touched else []
        for s in report.why:
            mark = "*" if s.key.symbol in report.touched else " "
            out.append(f"  {mark} {_shift(s)}  {s.key.symbol} ({s.key.dso})")
        if report.why_chains:
            out += ["", "  call chains whose share moved (sampled function <- its callers):"]
            for chain in report.why_chains:
                mark = "*" if report.touched_frames(chain) else " "
                out.append(f"  {mark} {_shift(chain)}  {chain_text(chain.key.frames)} ({chain.key.dso})")
        return out
    if report.why_shares:
        who = "the culprit" if report.culprit else "the change"
        out = ["", (f"why: no function's share of CPU time moved beyond noise: {who} makes the same code do more "
                    f"or slower work ({source})"),
               "  the top symbols' shares of busy CPU time, before -> after:"]
        out += [touched] if touched else []
        for s in report.why_shares:
            mark = "*" if s.key.symbol in report.touched else " "
            out.append(f"  {mark} {s.base_pct:6.2f}% -> {s.other_pct:6.2f}%  {s.key.symbol} ({s.key.dso})")
        return out
    if report.touched:
        return ["", (f"functions the culprit's diff touches: {', '.join(report.touched)} (no profile was "
                     "recorded: add the perf-profile monitor to the job to see where the time went)")]
    return []


# ---- HTML and JSON ----------------------------------------------------------------


def series_png(store: Store, report: RegressionReport) -> bytes | None:
    """The metric's series over the tracker's tested commits (or over time), with the
    change's range shaded and the culprit marked: a PNG for the HTML report and mail."""
    from perfline.analysis.series import build_series

    r = report.regression
    values = [v for v in store.metric_values(metric=r.metric, benchmark=r.benchmark, case_key=r.case_key,
                                             machine_id=r.machine_id)
              if r.tracker is None or v.run.label == r.tracker]
    repo = Path(report.repo) if report.repo and r.tracker else None
    try:
        series = build_series(values, repo)
    except git.GitError:
        series = build_series(values)
    if not series:
        return None
    points = series[0].points
    figure, axes = new_axes(7.0, 3.2)
    xs = list(range(len(points)))
    means = [sum(p.values) / len(p.values) for p in points]
    axes.plot(xs, means, marker="o", color="tab:blue", label=r.metric)
    # One scatter for every value: one a point rescales the axes each time (minutes for a
    # long series).
    axes.scatter([x for x, p in zip(xs, points, strict=True) for _ in p.values],
                 [v for p in points for v in p.values], s=6, color="tab:blue", alpha=0.3)
    names = [p.runs[0].kernel_commit or "" for p in points]
    if r.good in names and r.bad in names:
        axes.axvspan(names.index(r.good), names.index(r.bad), color="tab:red", alpha=0.15,
                     label=f"{r.change_pct:+.1f}%" + (f", culprit {r.culprit[:10]}" if r.culprit else ""))
    axes.set_xticks(xs, [p.name for p in points], rotation=60, fontsize=6)
    style_axes(axes, title=f"{r.metric} ({r.case_key})", ylabel=points[0].runs[0].benchmark)
    buffer = io.BytesIO()
    save(figure, buffer)
    return buffer.getvalue()


def html(store: Store, report: RegressionReport) -> str:
    """One self-contained file: the same content as the text, the graph inline as a PNG
    data URL; every value from the store is escaped by the template engine."""
    png = series_png(store, report)
    return TEMPLATES.get_template("regression.html").render(
        report=report, text=text(report), graph=base64.b64encode(png).decode() if png else None)


def as_json(report: RegressionReport) -> dict[str, Any]:
    from perfline.report.comparison_table import comparison_json
    from perfline.report.regressions import regression_json

    return {
        "subject": report.subject,
        "regression": regression_json(report.regression),
        "culprit": None if report.culprit is None else {
            "sha": report.culprit.sha, "subject": report.culprit.subject, "author": report.culprit.author,
            "date": report.culprit.date.isoformat() if report.culprit.date else None},
        "machine": report.machine(),
        "comparison": comparison_json(report.comparison),
        "bisection": None if report.bisection is None else {"id": report.bisection.id,
                                                           "status": report.bisection.status,
                                                           "result": report.bisection.result},
        "touched_functions": report.touched,
        "why": [{**shift_json(w), "touched": w.key.symbol in report.touched} for w in report.why],
        "why_chains": [{**shift_json(c), "touched": report.touched_frames(c)} for c in report.why_chains],
        "why_runs": list(report.why_runs) if report.why_runs else None,
        "why_judged": report.why_judged,
        "why_shares": [{**shift_json(s), "touched": s.key.symbol in report.touched} for s in report.why_shares],
        "reproduce": report.reproduce(),
        "url": report.url,
    }
