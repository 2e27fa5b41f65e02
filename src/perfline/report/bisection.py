"""A bisection as the terminal shows it: its kind, probes, builds, most probable
commits and result. The result's JSON document is the one stored with the bisection
(`bisect.driver.Outcome.to_json`), so `--json` prints exactly what the store keeps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from perfline.bisect.bisection import Bisection
from perfline.bisect.driver import Outcome, trace
from perfline.builds import kernel
from perfline.git import Commit
from perfline.records.status import BisectionStatus
from perfline.store import Store
from perfline.store.bisections import BisectionRecord, BisectionSpec


def kind_line(spec: BisectionSpec) -> Text:
    """Which kind of bisection: the build command alone does not say it plainly."""
    if spec.kernel_config is None:
        return Text(f"builds with: {spec.build}")
    source = f" (copied from {spec.kernel_config_source})" if spec.kernel_config_source else ""
    return Text(f"kernel bisection: each commit's bzImage built with config {spec.kernel_config}{source}, "
                "booted with the job")


def probes_table(store: Store, record: BisectionRecord, commits: list[Commit]) -> Table:
    """Every sample, and the most probable first bad commit after it: what it concluded."""
    table = Table(title=f"bisection {record.id} probes", title_justify="left")
    for column in ("#", "commit", "subject", "phase", "value", "run", "then most probable", "P"):
        table.add_column(column)
    for number, step in enumerate(trace(store, record), start=1):
        sample = step.sample
        commit = commits[sample.commit_index]
        concluded = ("", "") if step.culprit is None else (commits[step.culprit].sha[:12], f"{step.probability:.3f}")
        table.add_row(str(number), commit.sha[:12], commit.subject, sample.phase, f"{sample.value:.6g}",
                      str(sample.run_id or ""), *concluded)
    return table


def builds_table(store: Store, record: BisectionRecord, commits: list[Commit]) -> Table:
    kernel_logs = record.spec.kernel_config is not None
    builder = kernel.KernelBuilder(Path(record.spec.repo), record.spec.build) if kernel_logs else None
    builds = Table(title="builds", title_justify="left")
    for column in ("commit", "result", "seconds", "log (tail)", *(("full log",) if kernel_logs else ())):
        builds.add_column(column, overflow="fold")
    for build in store.bisect_builds(record.id):
        sha = commits[build.commit_index].sha
        row = [sha[:12], "ok" if build.ok else "failed: untestable", f"{build.seconds:.1f}",
               "" if build.ok else build.log_tail[-300:]]
        if builder is not None:
            full = builder.log_path(sha)
            row.append(str(full) if full.is_file() else "")
        builds.add_row(*row)
    return builds


def status_view(store: Store, record: BisectionRecord, bisection: Bisection, commits: list[Commit]) -> Group:
    """Runs so far, the five most probable first bad commits, and the next probe."""
    posterior = bisection.posterior()
    head = Text(f"bisection {record.id} ({record.status}): {len(commits)} commits, {bisection.runs} runs "
                f"of at most {record.spec.max_runs}, {len(store.bisect_builds(record.id))} builds")
    table = Table(title="most probable first bad commits", title_justify="left")
    for column in ("commit", "subject", "P(first bad)", "samples"):
        table.add_column(column)
    for index in np.argsort(posterior)[::-1][:5]:
        if posterior[index] <= 0:
            break
        commit = commits[int(index)]
        table.add_row(commit.sha[:12], commit.subject, f"{posterior[index]:.3f}",
                      str(len(bisection.samples_at(int(index)))))
    probe = bisection.next_probe()
    following = Text("next probe: " + (f"{commits[probe].sha[:12]} {commits[probe].subject}" if probe is not None
                                       else "none, the bisection has concluded"))
    return Group(head, kind_line(record.spec), table, following)


def outcome_lines(outcome: Outcome, commits: list[Commit]) -> list[RenderableType]:
    """The result in words: the culprit, the change with its CI, how sure, what it cost."""
    document = outcome.to_json()
    status = outcome.result.status
    if status is BisectionStatus.NO_CHANGE:
        return [(f"[yellow]no change to bisect:[/yellow] after {document['runs']} runs the good and bad "
                "commits do not differ beyond their noise")]
    culprit = commits[outcome.result.culprit]
    if outcome.result.exact:
        lines: list[RenderableType] = [
            f"[bold]first bad commit:[/bold] {culprit.sha}\n  {escape(culprit.subject)}  ({escape(culprit.author)})"]
    else:
        suspects = [commits[i] for i in outcome.result.suspects]
        lines = [f"[bold]the first bad commit could be any of:[/bold] {' '.join(c.sha[:12] for c in suspects)}"]
        lines += [f"  {c.sha[:12]} {escape(c.subject)}  ({escape(c.author)}): "
                  + outcome.untestable.get(i, "measured bad") for i, c in zip(outcome.result.suspects, suspects,
                                                                              strict=True)]
    low, high = document["ci_pct"]
    lines.append(f"  {outcome.result.kind.value}: {document['change_pct']:+.2f}% [{low:+.2f}, {high:+.2f}] "
                 f"(95% CI), posterior probability {outcome.result.probability:.4f}, status {status.value}")
    if outcome.confirmation is not None:
        c = outcome.confirmation
        against = ("its parent" if outcome.result.exact else
                   f"the last good tested commit {commits[outcome.result.parent].sha[:12]} (of "
                   f"{commits[outcome.result.culprit].sha[:12]}, the first bad one tested)")
        lines.append(f"  A/B of fresh samples against {against}: {c.decision.value}, {c.change_pct:+.2f}% "
                     f"[{c.ci_pct[0]:+.2f}, {c.ci_pct[1]:+.2f}], p={c.p_value:.2g} (anytime-valid), "
                     f"{c.samples} samples")
    if status is BisectionStatus.UNCONFIRMED:
        parent = commits[outcome.result.parent].sha[:12]
        lines.append(f"  [yellow]not confirmed:[/yellow] the model is sure, but the A/Bs of fresh samples did not "
                     f"show the step; check with `perfline ab` on {parent} and {culprit.sha[:12]} "
                     "before acting on it (a wrong culprit, e.g. after the machine drifted, or a step small "
                     "against the noise)")
    elif status is BisectionStatus.BUDGET:
        lines.append(f"  [yellow]budget spent:[/yellow] the best guess after {document['runs']} runs; "
                     f"`perfline bisect status {outcome.record.id}` lists the most probable commits")
    again = f", {outcome.unsteady} more taken again with the machine running slow" if outcome.unsteady else ""
    lines.append(f"  {document['runs']} benchmark runs, {outcome.builds} builds{again}")
    return lines
