"""Regenerate docs/case-studies/: the seeds' experiments, run through perfline's CLI here.

    .venv/bin/python bench/case_studies.py [--quick] [--vm] [--out DIR] [--only rcu,tbench,...] [--db FILE]

(a) rcu        grace-period-bound work (ftrace-events, rcu-gp) with rcutree's
               jiffies_till_first_fqs 1 against 0, without and with one CPU hog:
               interleaved `perfline ab`; plus a sweep of the tunable as a control.
(b) tbench     tbench throughput against 1..2×CPUs clients.
(c) latency    per-CPU scheduling latency (cpu-latency) without and with CPU hogs.
(d) migration  the cache-hot migration cost matrix (`perfline migration-cost`).

With --vm, also in qemu guests booting Debian 12's 6.1 and 6.12 cloud kernels (TCG):
ftrace-vm      the seed's loop itself (ftrace-switch, function <-> nop) with
               rcutree.jiffies_till_first_fqs=0 on the kernel command line or not, on
               each kernel (interleaved `ab`); rcu-gp alike; the cost of a request.
pgbench-vm     pgbench tps at 1, 2, 4 clients, 6.1 against 6.12 (interleaved `ab`).
slab-vm        Linux 6.1 from Debian's linux-source-6.1 built twice through `perfline
               kernels build` (Debian's 6.1 config with CONFIG_SLAB=y, then CONFIG_SLUB=y),
               tbench 1..4 clients in a 2-vCPU guest, SLAB against SLUB (interleaved `ab`)
               with the slabinfo monitor; the builds' times. The first builds take 25-40
               minutes each on 2 CPUs; later runs rebuild incrementally (seconds).
cpus-vm        per-CPU latency (cpu-latency) and the migration cost matrix in a 4-vCPU guest.

Every measurement is a `perfline ... --json` subprocess against a fresh SQLite store (a
temporary file unless --db is given), run from the output directory, where the job
files are written first; the pages quote those commands as they ran. Each page gets
its tables and figures from the numbers, the machine's fingerprint and load, and the
hand-written interpretation in docs/case-studies/notes/<study>.md (not for --quick
runs, whose sizes are for a smoke test only). The full run takes about 7 minutes on a
2-CPU VM (6 min 58 s for the recorded run); --quick about one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from perfline.benchmarks.migration_cost import MigrationResult, PairCost, format_matrix
from perfline.report.figures import (
    Estimate,
    Labelled,
    grouped_bars,
    heatmap,
    sweep_plot,
    value_label,
)
from perfline.report.runs import number
from perfline.targets import local
from perfline.targets.kernels import KernelError, get_kernel

ROOT = Path(__file__).resolve().parents[1]
PERFLINE = ROOT / ".venv" / "bin" / "perfline"
DEFAULT_OUT = ROOT / "docs" / "case-studies"
NOTES = DEFAULT_OUT / "notes"
FQS = "/sys/module/rcutree/parameters/jiffies_till_first_fqs"
CPUS = len(os.sched_getaffinity(0))

Json = dict[str, Any]


@dataclass(frozen=True)
class Sizes:
    ftrace_iterations: int
    ftrace_pairs: int
    rcu_iterations: int
    rcu_pairs: int
    sweep_fqs: tuple[int, ...]  # the first is the baseline of the comparison
    sweep_repeat: int
    tbench_clients: tuple[int, ...]
    tbench_duration: int
    tbench_repeat: int
    latency_ms: int
    latency_repeat: int
    latency_loads: tuple[int, ...]
    migration_sizes: tuple[str, ...]
    migration_repeat: int
    warmup: int
    # The VM studies (--vm): interleaved pairs per comparison, in qemu guests under TCG.
    pgbench_clients: tuple[int, ...]
    pgbench_duration: int
    pgbench_pairs: int
    switch_iterations: int
    switch_pairs: int
    gp_iterations: int
    gp_pairs: int
    overhead_repeat: int
    slab_clients: tuple[int, ...]
    slab_duration: int
    slab_pairs: int
    migration_vm_repeat: int


FULL = Sizes(
    ftrace_iterations=100, ftrace_pairs=10, rcu_iterations=50, rcu_pairs=15,
    sweep_fqs=(1, 0, 3, 10), sweep_repeat=5,
    tbench_clients=tuple(range(1, 2 * CPUS + 1)), tbench_duration=5, tbench_repeat=5,
    latency_ms=500, latency_repeat=20, latency_loads=(0, 1, CPUS),
    migration_sizes=("256K", "4M", "auto"), migration_repeat=20, warmup=1,
    pgbench_clients=(1, 2, 4), pgbench_duration=5, pgbench_pairs=6,
    switch_iterations=1, switch_pairs=6, gp_iterations=20, gp_pairs=8, overhead_repeat=8,
    slab_clients=(1, 2, 3, 4), slab_duration=5, slab_pairs=5, migration_vm_repeat=5,
)
QUICK = Sizes(
    ftrace_iterations=10, ftrace_pairs=2, rcu_iterations=5, rcu_pairs=2,
    sweep_fqs=(1, 0), sweep_repeat=2,
    tbench_clients=(1, 2), tbench_duration=2, tbench_repeat=2,
    latency_ms=50, latency_repeat=2, latency_loads=(0, 1),
    migration_sizes=("64K",), migration_repeat=3, warmup=0,
    pgbench_clients=(1,), pgbench_duration=2, pgbench_pairs=2,
    switch_iterations=1, switch_pairs=2, gp_iterations=5, gp_pairs=2, overhead_repeat=2,
    slab_clients=(1,), slab_duration=2, slab_pairs=2, migration_vm_repeat=2,
)


# --- running perfline ---------------------------------------------------------------


@dataclass
class Perfline:
    """`perfline --db DB ... --json` from the output directory; remembers the commands
    and the job files they use, for the page."""

    out: Path
    db: Path
    commands: list[str] = field(default_factory=list)
    jobs: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, *args: str, record: bool = True, check: bool = True) -> Any:
        """The command's JSON; None when it failed and `check` is off (the failure stays stored)."""
        shown = f'perfline --db "$DB" {shlex.join(args)} --json'
        if record:
            self.commands.append(shown)
            print(f"$ {shown}", file=sys.stderr, flush=True)
        argv = [str(PERFLINE), "--db", str(self.db), *args, "--json"]
        proc = subprocess.run(argv, cwd=self.out, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            message = f"{shown} failed with status {proc.returncode}:\n{proc.stderr[-3000:]}"
            if check:
                raise SystemExit(message)
            print(message, file=sys.stderr, flush=True)
            return None
        return json.loads(proc.stdout)  # perfline writes NaN/Infinity, which json reads

    def job(self, name: str, text: str) -> str:
        """Write jobs/NAME.yaml under the output directory; return its relative path."""
        relative = f"jobs/{name}.yaml"
        text = f"# written by bench/case_studies.py\n{text.strip()}\n"
        (self.out / "jobs").mkdir(parents=True, exist_ok=True)
        (self.out / relative).write_text(text)
        self.jobs.append((relative, text))
        return relative

    def commands_section(self) -> str:
        """The job files and commands used since the last call, as Markdown."""
        parts = ["## Commands", "", "Run from this directory; `$DB` is a fresh SQLite file.", ""]
        for relative, text in self.jobs:
            parts += [f"[{relative}]({relative}):", "", code_block(text.splitlines(), "yaml"), ""]
        parts.append(code_block(self.commands, "sh"))
        self.commands, self.jobs = [], []
        return "\n".join(parts)


def samples(run: Mapping[str, Any], metric: str) -> list[float]:
    """The values of one metric in a `perfline run/show --json` run document."""
    return [s["value"] for s in run["samples"] if s["metric"] == metric]


def hogs(count: int) -> str:
    return "no hog" if count == 0 else f"{count} CPU hog" + ("s" if count > 1 else "")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# --- Markdown --------------------------------------------------------------------------


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def summary_cell(s: Mapping[str, Any]) -> str:
    """mean ±%stddev (n), as perfline's terminal tables print it."""
    noise = f"{s['cv_pct']:.1f}%" if s["mean"] and math.isfinite(s["cv_pct"]) else "-"
    return f"{number(s['mean'])} ±{noise} ({s['n']})"


def change_cell(c: Mapping[str, Any], marker: str = " **\\***") -> str:
    """%change [95% CI], with `marker` when significant."""
    low, high = c["ci_pct"]
    if not all(math.isfinite(v) for v in (c["change_pct"], low, high)):
        return "n/a"
    return f"{c['change_pct']:+.1f}% [{low:+.1f}, {high:+.1f}]" + (marker if c["significant"] else "")


def metric_row(case: Json, metric: str) -> Json:
    return next(m for m in case["metrics"] if m["metric"] == metric)


def comparison_table(case: Json, metrics: Sequence[str], names: Sequence[str]) -> str:
    """One row per metric: the baseline and each other side with change, CI, p, verdict."""
    header = ["metric", names[0]]
    for name in names[1:]:
        header += [name, "%change [95% CI]", "p", "verdict"]
    rows = []
    for metric in metrics:
        row = metric_row(case, metric)
        cells = [f"`{metric}` {row['unit']}", summary_cell(row["base"])]
        for other in row["others"]:
            cells += [summary_cell(other), change_cell(other), f"{other['p_value']:.2g}", other["verdict"]]
        rows.append(cells)
    return table(header, rows)


def cpu_shares(means: Mapping[str, float]) -> str:
    """`idle 12%, steal 0.4%` from the proc-stat monitor's mean shares over the repetitions."""
    return f"idle {means['proc-stat.idle_pct']:.0f}%, steal {means['proc-stat.steal_pct']:.1f}%"


def run_shares(run: Mapping[str, Any]) -> str:
    return cpu_shares({name: s["mean"] for name, s in run["summary"].items()})


def side_shares(case: Json, side: int) -> str:
    """cpu_shares of side `side` (0: the baseline) of a comparison document."""
    return cpu_shares({m["metric"]: (m["base"] if side == 0 else m["others"][side - 1])["mean"]
                       for m in case["metrics"] if m["source"] == "monitor"})


def code_block(lines: Iterable[str], lang: str = "") -> str:
    return f"```{lang}\n" + "\n".join(lines) + "\n```"


def finding(c: Mapping[str, Any]) -> str:
    """`+2.0% [−16.0, +24.0], p 0.89: inconclusive (+12 pairs)` for a comparison."""
    said = c["verdict"]
    if c.get("more_samples") is not None:
        said += f" (+{c['more_samples']} {c['unit']})"
    return f"{change_cell(c, '')}, p {c['p_value']:.2g}: {said}"


# --- the machine -------------------------------------------------------------------------


def config_options(names: Sequence[str], text: str | None = None) -> dict[str, str]:
    """CONFIG_* values ('not set' if absent) of a config, by default the running kernel's
    as perfline reads it; {} without a config."""
    if text is None:
        text, _ = local.kernel_config(Path("/"), platform.release())
    found = dict(re.findall(r"^(CONFIG_\w+)=(.*)$", text or "", re.MULTILINE))
    return {name: found.get(name, "not set") for name in names} if text else {}


def hypervisor() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return "unknown"
    facts = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    vendor = facts.get("Hypervisor vendor", "").strip()
    kind = facts.get("Virtualization type", "").strip()
    return f"{vendor} guest ({kind} virtualization)" if vendor else "bare metal (no hypervisor in lscpu)"


RCU_CONFIG = ("CONFIG_HZ", "CONFIG_NO_HZ_IDLE", "CONFIG_NO_HZ_FULL", "CONFIG_PREEMPT_RCU", "CONFIG_RCU_LAZY",
              "CONFIG_RCU_NOCB_CPU", "CONFIG_RCU_FAST_NO_HZ")


def machine_section(fp: Mapping[str, Any], loads: Sequence[str]) -> str:
    config = config_options(RCU_CONFIG)
    governors = ", ".join(sorted(set(fp.get("governors", {}).values()))) or "none (no cpufreq)"
    rcu = ", ".join(f"{Path(k).name}={v}" for k, v in fp.get("sysfs", {}).items() if "rcutree" in k)
    lines = [
        "## Machine",
        "",
        f"- kernel: `{fp['kernel_release']}` `{fp['kernel_version']}`, config {fp.get('config_hash', '?')[:12]}",
        f"- CPU: {fp['cpu_model']} × {fp['cpu_count']}, {fp['memory_bytes'] / 2**30:.1f} GiB; "
        f"{hypervisor()}; cpufreq governors: {governors}",
        f"- rcutree: {rcu or 'n/a'}",
        f"- kernel command line: `{fp['cmdline']}`",
        "- config: " + ", ".join(f"{k.removeprefix('CONFIG_')}={v}" for k, v in config.items()),
        f"- load average (1, 5, 15 min) before / after this study: {loads[0]} / {loads[1]}",
        f"- host `{fp['hostname']}`, machine id {fp['machine_id'][:12]}",
    ]
    return "\n".join(lines)


def guest_facts(fp: Mapping[str, Any]) -> str:
    """rcutree's parameters and the clock source as a guest's fingerprint read them."""
    wanted = ("jiffies_till_first_fqs", "jiffies_till_next_fqs", "current_clocksource")
    return ", ".join(f"{Path(k).name}={v}" for k, v in fp.get("sysfs", {}).items() if Path(k).name in wanted)


def vm_machine_section(guests: Mapping[str, Mapping[str, Any]], loads: Sequence[str]) -> str:
    """The guests (per kernel name, a run document of a VM that booted it) and the host under them."""
    lines = ["## Machine", ""]
    for name, run in guests.items():
        fp, settings = run["fingerprint"], run["settings"]
        config = config_options(RCU_CONFIG, get_kernel(name).config() or "")
        lines += [
            f"- guest `{name}`: kernel `{fp['kernel_release']}` `{fp['kernel_version']}`, config "
            f"{fp.get('config_hash', '?')[:12]} ({fp.get('config_source', '?')}); "
            + ", ".join(f"{k.removeprefix('CONFIG_')}={v}" for k, v in config.items()),
            f"  - {fp['cpu_count']} vCPUs ({fp['vm']['guest_cpu_model']}), {fp['memory_bytes'] / 2**20:.0f} MiB, "
            f"accelerator {fp['vm']['accel']}, QEMU {settings['qemu_version']}; booted in "
            f"{settings['vm_boot_s']:.1f} s; read after boot: {guest_facts(fp)}",
            f"  - kernel command line (run {run['id']}): `{fp['cmdline']}`",
        ]
    fp = next(iter(guests.values()))["fingerprint"]
    lines += [
        f"- host: {fp['cpu_model']}, {hypervisor()}, `{fp['hostname']}`, machine id {fp['machine_id'][:12]}",
        f"- load average (1, 5, 15 min) before / after this study: {loads[0]} / {loads[1]}",
    ]
    return "\n".join(lines)


# --- studies -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    body: str  # the page between its header and the interpretation
    summary: str  # one line for the index
    fingerprint: Mapping[str, Any]  # of the machine the study ran on
    # A VM study's guests: per kernel name, a run document of a VM that booted it.
    guests: Mapping[str, Mapping[str, Any]] | None = None


@dataclass
class Study:
    slug: str
    title: str
    run: Callable[[Perfline, Path, Sizes], Outcome]
    vm: bool = False  # runs in qemu guests: only with --vm


def ab_case(cli: Perfline, job: str, a: str, b: str, pairs: int, *options: str) -> Json:
    doc = cli("ab", job, *options, "--a", a, "--b", b, "--pairs", str(pairs))
    [case] = doc["cases"]
    return case


def side_runs(case: Json) -> list[int]:
    return [side["runs"][0] for side in case["sides"]]


def rcu_study(cli: Perfline, out: Path, sizes: Sizes) -> Outcome:
    before = Path(FQS).read_text().strip()
    benchmarks = (
        ("ftrace-events", "ftrace-events.seconds", sizes.ftrace_iterations, sizes.ftrace_pairs),
        ("rcu-gp", "rcu-gp.ms_per_gp", sizes.rcu_iterations, sizes.rcu_pairs),
    )
    loads = (0, 1)
    names = ("A: jiffies_till_first_fqs=1", "B: jiffies_till_first_fqs=0")
    sections, findings, load_effects = [], [], []
    changes: list[Json] = []
    fingerprint: Mapping[str, Any] = {}
    for bench, metric, iterations, pairs in benchmarks:
        estimates: dict[str, list[Estimate]] = {name: [] for name in names}
        notes, side_a = [], []
        sections.append(f"### {bench} (iterations={iterations}, {pairs} pairs)\n")
        for load in loads:
            job = cli.job(f"{bench}-load{load}", f"""
benchmark: {bench}
params: {{iterations: {iterations}}}
warmup: {sizes.warmup}
monitors: [proc-stat]
load: {load}
""")
            case = ab_case(cli, job, f"sysfs:{FQS}=1", f"sysfs:{FQS}=0", pairs)
            runs = [cli("show", str(run_id), record=False) for run_id in side_runs(case)]
            fingerprint = fingerprint or runs[0]["fingerprint"]
            side_a.append(str(runs[0]["id"]))
            for name, run in zip(names, runs, strict=True):
                estimates[name].append(Estimate.ci(samples(run, metric)))
            change = metric_row(case, metric)["others"][0]
            changes.append(change)
            notes.append(f"B vs A {change_cell(change, '*')}\np {change['p_value']:.2g}")
            findings.append(f"- `{metric}`, {hogs(load)}: jiffies_till_first_fqs 0 vs 1: {finding(change)}")
            sections += [
                f"**{hogs(load)}** (runs {', '.join(str(r['id']) for r in runs)}; CPU time during the "
                f"repetitions: A {side_shares(case, 0)}; B {side_shares(case, 1)})\n",
                comparison_table(case, [metric], names) + "\n",
            ]
        # What the hog itself does: side A of each condition, one after the other.
        effect = metric_row(cli("compare", *side_a)["cases"][0], metric)["others"][0]
        load_effects.append(f"- `{metric}`, jiffies_till_first_fqs=1, 1 CPU hog vs no hog (runs "
                            f"{' and '.join(side_a)}, not interleaved): {finding(effect)}")
        figure = f"{bench}-fqs.png"
        grouped_bars(
            out / figure,
            [hogs(load) for load in loads],
            [Labelled(name, tuple(found)) for name, found in estimates.items()],
            title=f"{metric}: jiffies_till_first_fqs 1 vs 0, {pairs} interleaved pairs per condition",
            ylabel=value_label(metric_row(case, metric)["unit"], "lower"),
            notes=notes,
        )
        sections.append(f"![{bench}: jiffies_till_first_fqs 1 vs 0]({figure})\n")

    sweep_job = cli.job("rcu-gp-fqs-sweep", f"""
benchmark: rcu-gp
params: {{iterations: {sizes.rcu_iterations}}}
repeat: {sizes.sweep_repeat}
warmup: {sizes.warmup}
monitors: [proc-stat]
tunables:
  sysfs: {{{FQS}: [{', '.join(map(str, sizes.sweep_fqs))}]}}
""")
    swept = cli("run", sweep_job)
    sweep_case = cli("compare", *(str(r["id"]) for r in swept))["cases"][0]
    values = {r["tunables"]["sysfs"][FQS]: samples(r, "rcu-gp.ms_per_gp") for r in swept}
    xs = sorted(values)
    sweep_plot(
        out / "rcu-gp-fqs-sweep.png", xs,
        [Labelled("rcu-gp.ms_per_gp", tuple(Estimate.ci(values[x]) for x in xs))],
        title="rcu-gp.ms_per_gp against jiffies_till_first_fqs (no hog)",
        xlabel="rcutree.jiffies_till_first_fqs (jiffies)", ylabel=value_label("ms", "lower"), error="95% CI",
    )
    base, *others = sizes.sweep_fqs
    sweep_rows = metric_row(sweep_case, "rcu-gp.ms_per_gp")["others"]
    findings += [f"- `rcu-gp.ms_per_gp`, no hog, jiffies_till_first_fqs={x} vs {base} (sweep, not "
                 f"interleaved): {finding(c)}" for x, c in zip(others, sweep_rows, strict=True)]
    after = Path(FQS).read_text().strip()
    hz = config_options(["CONFIG_HZ"]).get("CONFIG_HZ", "?")
    body = "\n".join([
        "The seed: switching ftrace tracers 100 times got 40% slower after an RCU commit (49.4 s vs "
        "35.3 s idle, 45.0 s vs 30.8 s with one CPU busy, 20.3 s either way with both busy; Core 2 Duo "
        "E8400, CONFIG_RCU_FAST_NO_HZ=y). Paul McKenney explained that RCU checks on idle CPUs only "
        "after `rcutree.jiffies_till_first_fqs` jiffies (3 then), and that setting it to 0 \"should "
        "speed up your ftrace test significantly on idle systems\". This study puts that to the test on "
        "this kernel with two grace-period-bound benchmarks: `ftrace-events` (the seed's loop with a "
        "trace event instead of the function tracer, which lockdown refuses here) and `rcu-gp` (one "
        "`synchronize_rcu()` per `membarrier(MEMBARRIER_CMD_GLOBAL)`), each as interleaved A/B pairs "
        "(A B A B …) without and with one CPU hog (the seed's make-load).",
        "",
        cli.commands_section(),
        "",
        f"perfline wrote the tunable before each repetition and restored it afterwards: "
        f"`jiffies_till_first_fqs` was {before} before the study and {after} after it.",
        "",
        "## Results",
        "",
        "mean ±%stddev (n); %change of B against A with its 95% CI from the paired (interleaved) "
        "analysis; p of the paired t test; **\\*** significant at p < 0.01 and beyond 1%. The CPU idle "
        "share is the `proc-stat` monitor's over the repetitions: the seed's effect needs idle CPUs.",
        "",
        *sections,
        "### Control: a sweep of the tunable (rcu-gp, no hog)",
        "",
        f"`perfline run` over jiffies_till_first_fqs = {', '.join(map(str, sizes.sweep_fqs))} "
        f"({sizes.sweep_repeat} repetitions each, one case after the other, not interleaved), compared "
        f"against {base}. At HZ={hz}, {max(sizes.sweep_fqs)} jiffies delay the first scan for idle CPUs "
        "by that many ticks: if that scan bounded grace periods here, the sweep would rise with it.",
        "",
        comparison_table(sweep_case, ["rcu-gp.ms_per_gp"], [f"fqs={x}" for x in sizes.sweep_fqs]),
        "",
        "![rcu-gp against jiffies_till_first_fqs](rcu-gp-fqs-sweep.png)",
        "",
        "## Findings (generated from the numbers)",
        "",
        *findings,
        *load_effects,
    ])
    summary = (f"jiffies_till_first_fqs 0 vs 1: {sum(c['significant'] for c in changes)} of {len(changes)} "
               "interleaved A/B comparisons significant; changes " +
               ", ".join(change_cell(c, "*") for c in changes))
    return Outcome(body, summary, fingerprint)


def tbench_study(cli: Perfline, out: Path, sizes: Sizes) -> Outcome:
    clients = sizes.tbench_clients
    job = cli.job("tbench-clients", f"""
benchmark: tbench
params:
  clients: [{', '.join(map(str, clients))}]
  duration: {sizes.tbench_duration}
repeat: {sizes.tbench_repeat}
warmup: {sizes.warmup}
monitors: [proc-stat]
""")
    runs = cli("run", job)
    ids = [str(r["id"]) for r in runs]
    against_one = cli("compare", *ids)["cases"][0]
    at_cpus = clients.index(CPUS) if CPUS in clients else len(clients) - 1
    beyond = cli("compare", *ids[at_cpus:])["cases"][0] if at_cpus < len(ids) - 1 else None
    throughput = {r["params"]["clients"]: samples(r, "tbench.throughput") for r in runs}
    sweep_plot(
        out / "tbench-clients.png", list(clients),
        [Labelled("tbench.throughput", tuple(Estimate.stddev(throughput[c]) for c in clients))],
        title=f"tbench throughput against clients ({sizes.tbench_repeat} runs of {sizes.tbench_duration} s each)",
        xlabel="clients", ylabel=value_label("MB/s", "higher"),
    )
    row = metric_row(against_one, "tbench.throughput")
    latency = metric_row(against_one, "tbench.latency_max")
    rows = []
    for index, c in enumerate(clients):
        summary = row["base"] if index == 0 else row["others"][index - 1]
        lat = latency["base"] if index == 0 else latency["others"][index - 1]
        versus = ("baseline", "", "") if index == 0 else (
            change_cell(summary), f"{summary['p_value']:.2g}", summary["verdict"])
        rows.append([str(c), summary_cell(summary), number(max(throughput[c])), *versus, summary_cell(lat),
                     run_shares(runs[index])])
    best_one, best = max(throughput[1]), max(max(v) for v in throughput.values())
    findings = [
        f"- {clients[at_cpus]} clients (one per CPU) vs 1: {finding(row['others'][at_cpus - 1])}"
        if at_cpus > 0 else "",
        f"- {clients[-1]} clients vs {clients[at_cpus]}: "
        f"{finding(metric_row(beyond, 'tbench.throughput')['others'][-1])}" if beyond else "",
        f"- best single run: {number(best)} MB/s; best with one client {number(best_one)} MB/s "
        f"(×{best / best_one:.2f})",
    ]
    body = "\n".join([
        "The seed: Nick Piggin ran tbench from 1 to 16 clients, 5 times each, on an 8-core machine and "
        "graphed throughput against clients; SLUB was about 20% slower than SLAB once every CPU was busy, "
        "and Christoph Lameter bisected a drop from 2350 to 1260 MB/s at 8 clients to an skb alignment "
        "commit. This page redraws that graph on this machine: clients 1 to 2×CPUs, each case repeated "
        "and every run shown. (Nick plotted the best of 5; the table has both the mean and the best.)",
        "",
        cli.commands_section(),
        "",
        "## Results",
        "",
        "mean ±%stddev (n); %change against 1 client with its 95% CI (Welch, runs of different cases "
        "one after the other); **\\*** significant at p < 0.01 and beyond 1%.",
        "",
        table(["clients", "throughput MB/s", "best", "vs 1 client", "p", "verdict", "max latency ms",
               "CPU time"], rows),
        "",
        "![tbench throughput against clients](tbench-clients.png)",
        "",
        "## Findings (generated from the numbers)",
        "",
        *[f for f in findings if f],
    ])
    summary = f"{number(row['base']['mean'])} MB/s at 1 client, {number(best)} MB/s best"
    return Outcome(body, summary, runs[0]["fingerprint"])


def latency_study(cli: Perfline, out: Path, sizes: Sizes) -> Outcome:
    job = cli.job("cpu-latency", f"""
benchmark: cpu-latency
params: {{duration_ms: {sizes.latency_ms}}}
repeat: {sizes.latency_repeat}
warmup: {sizes.warmup}
monitors: [proc-stat]
load: [{', '.join(map(str, sizes.latency_loads))}]
""")
    runs = cli("run", job)
    comparison = cli("compare", *(str(r["id"]) for r in runs))["cases"][0]
    cpus = runs[0]["settings"]["cpus"]
    labels = [hogs(r["tunables"]["load"]["load"]) for r in runs]
    per_cpu = {(r["id"], cpu): samples(r, f"cpu-latency.cpu{cpu}.max_gap") for r in runs for cpu in cpus}
    grouped_bars(
        out / "cpu-latency.png",
        [f"CPU {cpu}" for cpu in cpus],
        [Labelled(label, tuple(Estimate.stddev(per_cpu[r["id"], cpu]) for cpu in cpus))
         for label, r in zip(labels, runs, strict=True)],
        title=f"largest gap seen by a SCHED_FIFO spinner per CPU ({sizes.latency_ms} ms spins, "
              f"{sizes.latency_repeat} repetitions)",
        ylabel=value_label("µs", "lower"), error="stddev",
        # Gaps span orders of magnitude when the host preempts a vCPU: a log axis shows them all.
        log=max(max(v) for v in per_cpu.values()) > 10 * min(min(v) for v in per_cpu.values()),
    )
    rows = []
    for label, r in zip(labels, runs, strict=True):
        for cpu in cpus:
            s = r["summary"][f"cpu-latency.cpu{cpu}.max_gap"]
            rows.append([label, str(cpu), f"{number(s['mean'])} ± {number(s['stddev'])} ({s['n']})",
                         number(s["min"]), number(s["median"]), number(s["max"]), run_shares(r)])
    worst = metric_row(comparison, "cpu-latency.max_gap")
    findings = [f"- worst CPU, {label} vs {labels[0]}: {finding(c)}"
                for label, c in zip(labels[1:], worst["others"], strict=True)]
    for label, r in zip(labels, runs, strict=True):
        means = {cpu: r["summary"][f"cpu-latency.cpu{cpu}.max_gap"]["mean"] for cpu in cpus}
        findings.append(f"- {label}: mean largest gap per CPU " + ", ".join(
            f"CPU {cpu} {number(v)} µs" for cpu, v in means.items()))
    body = "\n".join([
        "The seed: Rusty Russell measured stop_machine latency per CPU on an 18-way Power4 box by pinning "
        "a spinner to every CPU and recording the largest gap between its clock reads, and graphed "
        "latency against CPU number for each kernel and condition. `cpu-latency` does the same with a "
        "SCHED_FIFO spinner per CPU; here it runs with " + ", ".join(labels) + " (hogs are ordinary "
        "SCHED_OTHER busy loops, which a SCHED_FIFO spinner preempts).",
        "",
        cli.commands_section(),
        "",
        "## Results",
        "",
        "Per CPU: the largest gap of each repetition, mean ± stddev (n) over the repetitions, and the "
        "smallest, median and largest of them, in µs; the CPU time shares are the `proc-stat` "
        "monitor's over the repetitions (steal: time the hypervisor ran something else).",
        "",
        table(["condition", "CPU", "max gap µs", "min", "median", "max", "CPU time"], rows),
        "",
        f"The worst CPU of each repetition (`cpu-latency.max_gap`), against {labels[0]} (Welch, one "
        "condition after the other):",
        "",
        comparison_table(comparison, ["cpu-latency.max_gap"], labels),
        "",
        "![largest gap per CPU](cpu-latency.png)",
        "",
        "## Findings (generated from the numbers)",
        "",
        *findings,
    ])
    summary = ", ".join(f"{label}: worst CPU {number(r['summary']['cpu-latency.max_gap']['mean'])} µs"
                        for label, r in zip(labels, runs, strict=True))
    return Outcome(body, summary, runs[0]["fingerprint"])


def migration_study(cli: Perfline, out: Path, sizes: Sizes) -> Outcome:
    results: list[MigrationResult] = []
    for size in sizes.migration_sizes:
        doc = cli("migration-cost", "--size", size, "--repeat", str(sizes.migration_repeat))
        results.append(MigrationResult(**{**doc, "pairs": tuple(PairCost(**p) for p in doc["pairs"])}))
    sections, findings = [], []
    for size, result in zip(sizes.migration_sizes, results, strict=True):
        cpus = result.cpus
        cost = {(p.src, p.dst): p for p in result.pairs}
        figure = f"migration-cost-{size.lower()}.png"
        heatmap(
            out / figure,
            [[cost[s, d].cost_us for d in cpus] for s in cpus],
            [f"from CPU {s}" for s in cpus], [f"to CPU {d}" for d in cpus],
            title=f"migration cost, working set {result.cache_size // 1024} KiB (µs, MAD in brackets)",
            unit="µs",
            cells=[[f"{cost[s, d].cost_us:.1f}\n({cost[s, d].cost_mad_ns / 1000:.1f})" for d in cpus] for s in cpus],
        )
        rows = [[f"{p.src} → {p.dst}", f"{p.hot_median_ns / 1000:.1f}", f"{p.median_ns / 1000:.1f}",
                 f"{p.cost_us:.1f}", f"{p.cost_mad_ns / 1000:.1f}"] for p in result.pairs]
        sections += [
            f"### working set `--size {size}` ({result.cache_size // 1024} KiB)",
            "",
            code_block(format_matrix(result).splitlines()),
            "",
            table(["CPUs", "hot touch µs (median)", "first touch after migrating µs (median)", "cost µs",
                   "cost MAD µs"], rows),
            "",
            f"![migration cost matrix, {size}]({figure})",
            "",
        ]
        cross, same = result.cross_cpu(), [p for p in result.pairs if p.src == p.dst]
        floor = max(abs(p.cost_us) + 3 * p.cost_mad_ns / 1000 for p in same)
        findings.append(
            f"- {result.cache_size // 1024} KiB: cross-CPU cost " + ", ".join(
                f"{p.src}→{p.dst} {p.cost_us:.1f} µs (MAD {p.cost_mad_ns / 1000:.1f})" for p in cross)
            + f"; same-CPU noise floor (|cost| + 3 MAD) {floor:.1f} µs; "
            + ("every" if all(p.cost_us > floor for p in cross) else "not every")
            + " cross-CPU cost is above it")
    body = "\n".join([
        "The seed: Ingo Molnar's 2005 scheduler patch measured, at boot, the cost of migrating a "
        "cache-hot task between every pair of CPUs and printed a \"migration cost matrix\"; Linus asked "
        "for that measurement to live in user space. `perfline migration-cost` does it in user space: "
        "for each ordered CPU pair it dirties a working set on one CPU, migrates, and times the first "
        "re-touch against the next one on the same CPU (median and MAD over the migrations). It prints "
        "the seed's matrix; the heatmaps below are drawn from the same measurement (`--json`).",
        "",
        cli.commands_section(),
        "",
        "`--size auto` is the last-level cache as the guest's sysfs reports it.",
        "",
        "## Results",
        "",
        *sections,
        "## Findings (generated from the numbers)",
        "",
        *findings,
    ])
    summary = "; ".join(f"{r.cache_size // 1024} KiB: max cross-CPU {max(p.cost_us for p in r.cross_cpu()):.1f} µs"
                        for r in results if r.cross_cpu())
    # `perfline migration-cost` stores no run, so no stored fingerprint: describe the host now.
    return Outcome(body, summary or "one CPU: nothing to migrate", local.fingerprint().to_json())


# --- studies in qemu guests (--vm) ------------------------------------------------------------

# Debian 12's cloud kernels, as `perfline kernels add-deb` registers them (KERNEL_DEBS).
VM_KERNELS = ("debian-6.1", "debian-6.12")
KERNEL_DEBS = {"debian-6.1": "linux-image-cloud-amd64", "debian-6.12": "linux-image-6.12-cloud-amd64"}
VM_CPUS = 2
VM_MEMORY_MB = 1024
# What the VM studies' comparisons show besides the benchmark's own metrics, when the run has them.
VM_CONTEXT = ("proc-stat.idle_pct", "proc-stat.sys_pct", "pace.slowdown")


def vm_job(name: str, benchmark: str, rest: str, cli: Perfline) -> str:
    """A job booting the first kernel (each `ab` side names its own) under TCG: KVM cannot
    run a guest on this machine, and `auto` would try it and warn on every run."""
    return cli.job(name, f"""
benchmark: {benchmark}
target: qemu
kernel: {VM_KERNELS[0]}
accel: tcg
vm_cpus: {VM_CPUS}
vm_memory: {VM_MEMORY_MB}
{rest.strip()}
""")


def context_metrics(case: Json) -> list[str]:
    present = {m["metric"] for m in case["metrics"]}
    return [m for m in VM_CONTEXT if m in present]


def skipped_monitors(runs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The monitors the runs skipped, each once, with the reason they stored."""
    return list(dict.fromkeys(reason for run in runs for reason in run["settings"].get("monitors_skipped", [])))


def profile_section(cases: Sequence[tuple[str, Json]], runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """What perf-profile says about the difference, or why it said nothing (as the runs stored it)."""
    skipped = [reason for reason in skipped_monitors(runs) if reason.startswith("perf-profile")]
    if skipped:
        return ["perf-profile did not run in these guests; the runs stored why:", "",
                *[f"- `{reason}`" for reason in skipped], "",
                "So there is no profile diff on this page: a profile of this host would show QEMU's "
                "code generator, not the guest kernel."]
    lines = []
    for label, case in cases:
        for shifts in case["profile_shifts"]:
            lines += [f"**{label}**", "", table(
                ["symbol", "base %", "other %", "Δ points"],
                [[f"`{shift['symbol']}`", f"{shift['base_pct']:.1f}", f"{shift['other_pct']:.1f}",
                  f"{shift['delta_pct']:+.1f}"] for shift in shifts[:10]]), ""]
    return lines or ["perf-profile ran but recorded no profiles to compare."]


def pgbench_vm_study(cli: Perfline, out: Path, sizes: Sizes) -> Outcome:
    a, b = VM_KERNELS
    tps: dict[str, list[Estimate]] = {kernel: [] for kernel in VM_KERNELS}
    by_kernel: dict[str, list[Json]] = {kernel: [] for kernel in VM_KERNELS}
    notes, sections, findings, summary = [], [], [], []
    cases: list[tuple[str, Json]] = []
    clients_label = {c: f"{c} client" + ("s" if c > 1 else "") for c in sizes.pgbench_clients}
    for clients in sizes.pgbench_clients:
        job = vm_job(f"pgbench-vm-c{clients}", "pgbench", f"""
params: {{scale: 1, duration: {sizes.pgbench_duration}, clients: {clients}, fsync: false}}
warmup: {sizes.warmup}
monitors: [proc-stat, pace, perf-profile]
""", cli)
        case = ab_case(cli, job, f"kernel:{a}", f"kernel:{b}", sizes.pgbench_pairs)
        cases.append((clients_label[clients], case))
        runs = [cli("show", str(run_id), record=False) for run_id in side_runs(case)]
        for kernel, run in zip(VM_KERNELS, runs, strict=True):
            tps[kernel].append(Estimate.ci(samples(run, "pgbench.tps")))
            by_kernel[kernel].append(run)
        change = metric_row(case, "pgbench.tps")["others"][0]
        latency = metric_row(case, "pgbench.latency_avg")["others"][0]
        notes.append(f"{b} vs {a} {change_cell(change, '*')}\np {change['p_value']:.2g}")
        findings += [f"- `pgbench.tps`, {clients_label[clients]}: {b} vs {a}: {finding(change)}",
                     f"- `pgbench.latency_avg`, {clients_label[clients]}: {b} vs {a}: {finding(latency)}"]
        summary.append(f"{clients_label[clients]} {change_cell(change, '*')}")
        sections += [
            f"### {clients_label[clients]} (runs {', '.join(str(r['id']) for r in runs)})",
            "",
            f"Clock source after boot: {a} {clocksource_of(runs[0])}, {b} {clocksource_of(runs[1])}.",
            "",
            comparison_table(case, ["pgbench.tps", "pgbench.latency_avg", *context_metrics(case)], VM_KERNELS),
            "",
        ]
    grouped_bars(
        out / "pgbench-vm.png",
        list(clients_label.values()),
        [Labelled(kernel, tuple(found)) for kernel, found in tps.items()],
        title=f"pgbench tps in a {VM_CPUS}-vCPU TCG guest, {a} vs {b}, {sizes.pgbench_pairs} interleaved pairs",
        ylabel=value_label("transactions/s", "higher"),
        notes=notes,
    )
    scaling = []
    if len(sizes.pgbench_clients) > 1:
        for kernel, runs in by_kernel.items():
            compared = cli("compare", *(str(r["id"]) for r in runs))["cases"][0]
            for clients, other in zip(sizes.pgbench_clients[1:], metric_row(compared, "pgbench.tps")["others"],
                                      strict=True):
                scaling.append(f"- {kernel}, {clients_label[clients]} vs {clients_label[sizes.pgbench_clients[0]]} "
                               f"(not interleaved): {finding(other)}")
    all_runs = [run for runs in by_kernel.values() for run in runs]
    body = "\n".join([
        "The seed: Ken Chen (Intel) tracked an industry-standard database benchmark (OLTP, 4-way "
        "Itanium 2, 450 disks) across 2.6 releases against a RHEL3 baseline (2.6.2 -1%, 2.6.8 -23%, "
        "2.6.9 -6%, 2.6.11 -13%), saying the numbers repeat to 0.1%; Linus asked for numbers per "
        "snapshot, with graphs, to narrow regressions down in time. Here the workload is PostgreSQL's "
        "pgbench (TPC-B-like, a private server on the guest's Debian root disk), the releases are "
        f"Debian 12's {a} and {b} cloud kernels, each booted in a {VM_CPUS}-vCPU, {VM_MEMORY_MB} MiB "
        "qemu guest under TCG (KVM does not run here), and each client count is an interleaved "
        f"`perfline ab` of the two kernels (both VMs booted, pairs A B then B A, …).",
        "",
        cli.commands_section(),
        "",
        "## Results",
        "",
        f"mean ±%stddev (n) over the repetitions ({sizes.pgbench_duration} s of pgbench each, scale 1, "
        "fsync off: the seed's database was tuned until its disks were not the limit, and here a flush "
        f"would reach this shared host's disk through QEMU's overlay); %change of {b} against {a} with its 95% CI "
        "from the paired analysis; p of the "
        "paired test; **\\*** significant at p < 0.01 and beyond 1%. `proc-stat` is read in the guest; "
        "`pace.slowdown` is this host's (how much slower than its best it ran around each repetition: "
        "under emulation the guest runs exactly as fast as the host lets it).",
        "",
        *sections,
        "![pgbench tps per kernel and client count](pgbench-vm.png)",
        "",
        "### Profile",
        "",
        *profile_section(cases, all_runs),
        "",
        "## Findings (generated from the numbers)",
        "",
        *findings,
        *scaling,
    ])
    guests = {kernel: runs[0] for kernel, runs in by_kernel.items()}
    return Outcome(body, f"tps {b} vs {a}: " + ", ".join(summary), all_runs[0]["fingerprint"], guests)


FQS_ZERO = "rcutree.jiffies_till_first_fqs=0"


def ab_or_finished(cli: Perfline, job: str, a: str, b: str, pairs: int, *options: str) -> tuple[Json, str]:
    """`ab`'s paired comparison; when a repetition failed (a guest hung), the repetitions both
    runs finished compared as two samples (Welch, not paired), and what the failure was."""
    doc = cli("ab", job, *options, "--a", a, "--b", b, "--pairs", str(pairs), check=False)
    if doc is not None:
        [case] = doc["cases"]
        return case, ""
    newest = cli("runs", "--limit", "2", record=False)
    runs = [cli("show", str(r["id"]), record=False) for r in reversed(newest)]
    [failed] = [r for r in runs if r["status"] == "failed"]
    console = [line.strip() for line in (failed["output_tail"] or "").splitlines()
               if re.search(r"BUG:|Kernel panic|soft lockup|rcu.*stall", line)]
    said = (f"run {failed['id']} failed after {failed['repetitions']} repetitions: "
            f"`{failed['error'].splitlines()[-1].strip(chr(39) + ' ')}`"
            + (f"; the guest's console: `{console[-1]}`" if console else ""))
    [case] = cli("compare", *(str(r["id"]) for r in runs))["cases"]
    return case, said


def ftrace_vm_study(cli: Perfline, out: Path, sizes: Sizes) -> Outcome:
    names = ("A: default", "B: jiffies_till_first_fqs=0")
    sides = ("cmdline:", f"cmdline:{FQS_ZERO}")
    switch_job = vm_job("ftrace-switch-vm", "ftrace-switch", f"""
params: {{iterations: {sizes.switch_iterations}, tracers: "function,nop"}}
warmup: {sizes.warmup}
monitors: [proc-stat, pace]
""", cli)
    gp_job = vm_job("rcu-gp-vm", "rcu-gp", f"""
params: {{iterations: {sizes.gp_iterations}}}
warmup: {sizes.warmup}
monitors: [proc-stat, pace]
""", cli)
    # What one request to the guest costs by itself: ftrace-switch's time is the agent's
    # clock around the whole command, as the seed's `time ./test-ftrace` was.
    overhead_job = vm_job("agent-overhead-vm", "command", f"""
params: {{cmd: "true", timing: true, metric: request_s}}
repeat: {sizes.overhead_repeat}
warmup: {sizes.warmup}
monitors: []
""", cli)
    sections, findings, summary, notes = [], [], [], []
    switch: dict[str, list[Estimate]] = {name: [] for name in names}
    per_kernel: dict[str, dict[str, Any]] = {}
    guests: dict[str, Json] = {}
    for kernel in VM_KERNELS:
        case, failure = ab_or_finished(cli, switch_job, *sides, sizes.switch_pairs, "--kernel", kernel)
        if failure:
            findings.append(f"- {kernel}: a guest hung; {failure}; the table compares the repetitions both runs "
                            "finished, unpaired")
        runs = [cli("show", str(run_id), record=False) for run_id in side_runs(case)]
        guests[kernel] = runs[0]
        for name, run in zip(names, runs, strict=True):
            switch[name].append(Estimate.ci(samples(run, "ftrace-switch.seconds")))
        gp_case = ab_case(cli, gp_job, *sides, sizes.gp_pairs, "--kernel", kernel)
        overhead = cli("run", overhead_job, "--kernel", kernel)[0]
        change = metric_row(case, "ftrace-switch.seconds")["others"][0]
        gp = metric_row(gp_case, "rcu-gp.ms_per_gp")
        per_kernel[kernel] = {"switch": metric_row(case, "ftrace-switch.seconds"), "gp": gp, "runs": runs,
                              "overhead": overhead["summary"]["command.request_s"]}
        notes.append(f"B vs A {change_cell(change, '*')}\np {change['p_value']:.2g}")
        summary.append(f"{kernel} {change_cell(change, '*')}")
        findings += [
            f"- `ftrace-switch.seconds`, {kernel}: jiffies_till_first_fqs=0 vs default: {finding(change)}",
            f"- `rcu-gp.ms_per_gp`, {kernel}: jiffies_till_first_fqs=0 vs default: {finding(gp['others'][0])}",
        ]
        sections += [
            f"### {kernel}",
            "",
            f"ftrace-switch (runs {', '.join(str(r['id']) for r in runs)}; jiffies_till_first_fqs as the "
            f"guests read it after boot: A {fqs_of(runs[0])}, B {fqs_of(runs[1])}; clock source: "
            f"A {clocksource_of(runs[0])}, B {clocksource_of(runs[1])}):",
            "",
            comparison_table(case, ["ftrace-switch.seconds", *context_metrics(case)], names),
            "",
            *([f"**Not paired**: {failure}.", ""] if failure else []),
            f"rcu-gp in the same kinds of guests (runs {' and '.join(str(r) for r in side_runs(gp_case))}; "
            f"{sizes.gp_iterations} grace periods per repetition):",
            "",
            comparison_table(gp_case, ["rcu-gp.ms_per_gp", "rcu-gp.max_ms"], names),
            "",
        ]
    grouped_bars(
        out / "ftrace-switch-vm.png",
        list(VM_KERNELS),
        [Labelled(name, tuple(found)) for name, found in switch.items()],
        title=f"ftrace-switch (function,nop × {sizes.switch_iterations}) in a {VM_CPUS}-vCPU TCG guest, "
              f"{sizes.switch_pairs} interleaved pairs",
        ylabel=value_label("s", "lower"),
        notes=notes,
    )
    a, b = VM_KERNELS
    kernels_case = cli("compare", str(per_kernel[a]["runs"][0]["id"]), str(per_kernel[b]["runs"][0]["id"]))["cases"][0]
    kernel_change = metric_row(kernels_case, "ftrace-switch.seconds")["others"][0]
    findings.append(f"- `ftrace-switch.seconds`, default jiffies_till_first_fqs: {b} vs {a} (runs of different "
                    f"`ab` invocations, not interleaved): {finding(kernel_change)}")
    scale_rows = []
    writes = 2 * sizes.switch_iterations  # tracer switches per repetition
    for kernel, found in per_kernel.items():
        base_switch, base_gp = found["switch"]["base"], found["gp"]["base"]
        gp_saved_ms = base_gp["mean"] - found["gp"]["others"][0]["mean"]
        switch_saved_ms = 1000 * (base_switch["mean"] - found["switch"]["others"][0]["mean"]) / writes
        overhead = found["overhead"]
        scale_rows.append([
            kernel, f"{1000 * base_switch['mean'] / writes:.0f}", f"{base_gp['mean']:.1f}",
            f"{gp_saved_ms:+.1f}", f"{switch_saved_ms:+.0f}",
            f"{1000 * base_switch['stddev'] / writes:.0f}",
            f"{1000 * overhead['mean']:.0f} ± {1000 * overhead['stddev']:.0f}",
        ])
        findings.append(
            f"- {kernel}: one tracer switch took {1000 * base_switch['mean'] / writes:.0f} ms on average "
            f"(default), {base_switch['mean'] * 1000 / writes / base_gp['mean']:.0f}× a grace period "
            f"({base_gp['mean']:.1f} ms); fqs=0 shortened a grace period by {gp_saved_ms:.1f} ms and a switch "
            f"by {switch_saved_ms:.0f} ms; a request to the guest costs {1000 * overhead['mean']:.0f} ms by itself; "
            f"the seed's 100 iterations would take {duration(200 * base_switch['mean'] / writes)} here (default)")
    body = "\n".join([
        "The seed, exactly: Petr Mladek's test-ftrace script switches `current_tracer` between `function` "
        "and `nop`, with `tracing_on` 1 and 0 after each, 100 times (49.4 s vs 35.3 s across an RCU "
        "commit, Core 2 Duo, CONFIG_RCU_FAST_NO_HZ=y), and Paul McKenney's answer was to boot with "
        "`rcutree.jiffies_till_first_fqs=0`. This host's kernel is under lockdown and refuses the "
        "function tracer (the [rcu](rcu.md) page runs ftrace-events instead); a qemu guest's is not, so "
        "here `ftrace-switch` runs the seed's loop itself in the guest (the same shell loop perfline runs "
        f"on a host), on Debian 12's {a} and {b} cloud kernels, with the parameter given on the kernel "
        "command line as Paul suggested (B) or not (A: the kernel's default). Each kernel is an "
        "interleaved `perfline ab` of the two command lines (both VMs booted). `rcu-gp` in the same "
        "guests measures the grace period itself, and a `command` that does nothing measures what one "
        "request to the guest costs, to show what emulation (TCG: KVM does not run here) does to the "
        "figure.",
        "",
        cli.commands_section(),
        "",
        "## Results",
        "",
        "mean ±%stddev (n); %change of B against A with its 95% CI from the paired analysis; p of the "
        "paired test; **\\*** significant at p < 0.01 and beyond 1%. `ftrace-switch.seconds` is the wall "
        f"time of the whole loop (function, nop × {sizes.switch_iterations}: {writes} tracer switches; the "
        "seed ran 100 iterations, which emulation makes minutes long, see below) by the guest's clock, as "
        "`time` timed the seed's script.",
        "",
        *sections,
        "![ftrace-switch in qemu guests, default vs jiffies_till_first_fqs=0](ftrace-switch-vm.png)",
        "",
        "### What emulation does to the figure",
        "",
        "Per tracer switch (the loop's time divided by its switches), against the grace period `rcu-gp` "
        "measured in the same kind of guest, and the cost of one empty request to the guest "
        f"(`command` `true`, {sizes.overhead_repeat} repetitions, timed like the loop):",
        "",
        table(["kernel", "one switch ms (A)", "grace period ms (A)", "fqs=0 saves per grace period ms",
               "fqs=0 saves per switch ms", "stddev of the repetitions per switch ms (A)", "empty request ms"],
              scale_rows),
        "",
        "## Findings (generated from the numbers)",
        "",
        *findings,
    ])
    return Outcome(body, "ftrace-switch, fqs=0 vs default: " + ", ".join(summary), guests[a]["fingerprint"],
                   guests)


def fqs_of(run: Mapping[str, Any]) -> str:
    return str(run["fingerprint"]["sysfs"].get("/sys/module/rcutree/parameters/jiffies_till_first_fqs", "?"))


def clocksource_of(run: Mapping[str, Any]) -> str:
    return str(run["fingerprint"]["sysfs"].get(
        "/sys/devices/system/clocksource/clocksource0/current_clocksource", "?"))


# --- built kernels: SLAB vs SLUB (--vm) ----------------------------------------------------

# Debian's linux-source-6.1, unpacked once beside perfline's cache: `kernels build` keys its
# build directories by the tree's path, so the same path keeps the objects between runs.
SOURCE_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
SOURCE_TREE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "perfline-src" / "linux-source-6.1"
ALLOCATORS = ("slab", "slub")
# The config options a choice of allocator sets, and what a build outside Debian's
# packaging cannot keep: its signing certificates (not in linux-source), and debug info
# (a third of the build's time, and nothing of it reaches a bzImage).
DERIVED = re.compile(r"^(# )?CONFIG_(SLAB|SLUB|SLOB|SYSTEM_TRUSTED_KEYS|SYSTEM_REVOCATION_KEYS|DEBUG_INFO\w*)[= ].*$")


def derived_config(base: str, allocator: str) -> str:
    """Debian's config with only the slab allocator chosen (and the two build-only changes)."""
    lines = [line for line in base.splitlines() if not DERIVED.match(line)]
    chosen = {"slab": ["CONFIG_SLAB=y", "# CONFIG_SLUB is not set"],
              "slub": ["# CONFIG_SLAB is not set", "CONFIG_SLUB=y"]}[allocator]
    return "\n".join([*lines, *chosen, 'CONFIG_SYSTEM_TRUSTED_KEYS=""', 'CONFIG_SYSTEM_REVOCATION_KEYS=""',
                      "CONFIG_DEBUG_INFO_NONE=y", ""])


def built_kernel_name(allocator: str) -> str:
    return f"linux-6.1-{allocator}"


def build_allocator_kernels(cli: Perfline) -> dict[str, Json]:
    """Both kernels built from linux-source-6.1 through `perfline kernels build`; what it said."""
    if not SOURCE_TREE.is_dir():
        if not SOURCE_TARBALL.is_file():
            sys.exit(f"error: {SOURCE_TARBALL} is missing: `apt-get install linux-source-6.1` (make case-studies does)")
        SOURCE_TREE.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "xaf", str(SOURCE_TARBALL), "-C", str(SOURCE_TREE.parent)], check=True)
    base = get_kernel(VM_KERNELS[0]).config()
    if base is None:
        sys.exit(f"error: kernel {VM_KERNELS[0]} has no config to start from; register it with `kernels add-deb`")
    configs = SOURCE_TREE.parent / "configs"
    configs.mkdir(exist_ok=True)
    built = {}
    for allocator in ALLOCATORS:
        config = configs / f"{allocator}.config"
        config.write_text(derived_config(base, allocator))
        print(f"building {built_kernel_name(allocator)} (25-40 minutes from nothing on 2 CPUs; seconds once built)",
              file=sys.stderr, flush=True)
        built[allocator] = cli("kernels", "build", str(SOURCE_TREE), "--config", str(config),
                               "--name", built_kernel_name(allocator), "--replace")
    return built


def build_rows(built: Mapping[str, Json]) -> list[list[str]]:
    rows = []
    for allocator, doc in built.items():
        first, this = doc["builds"][0], doc["builds"][-1]
        cached = (f"{first['ccache_hits']} / {first['ccache_misses']}" if "ccache_hits" in first else "no ccache")
        rows.append([f"`{doc['name']}`", doc["release"], first["finished_at"], duration(first["seconds"]), cached,
                     duration(this["seconds"]), str(len(doc["builds"]))])
    return rows


def slab_caches(runs: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The caches slabinfo named in these runs (those whose active bytes moved most), by
    their mean active KiB at the end of the repetitions that named them."""
    found: dict[str, list[float]] = {}
    for run in runs:
        for metric, summary in run["summary"].items():
            if metric.startswith("slabinfo.") and metric.endswith(".active_kib"):
                found.setdefault(metric.removeprefix("slabinfo.").removesuffix(".active_kib"), []).append(
                    summary["mean"])
    return {cache: sum(values) / len(values) for cache, values in sorted(found.items())}


def slab_vm_study(cli: Perfline, out: Path, sizes: Sizes) -> Outcome:
    built = build_allocator_kernels(cli)
    a, b = (built_kernel_name(x) for x in ALLOCATORS)
    throughput: dict[str, list[list[float]]] = {a: [], b: []}
    by_kernel: dict[str, list[Json]] = {a: [], b: []}
    sections, findings, summary = [], [], []
    for clients in sizes.slab_clients:
        job = cli.job(f"tbench-slab-vm-c{clients}", f"""
benchmark: tbench
params: {{clients: {clients}, duration: {sizes.slab_duration}}}
target: qemu
kernel: {a}
accel: tcg
vm_cpus: {VM_CPUS}
vm_memory: {VM_MEMORY_MB}
warmup: {sizes.warmup}
monitors: [slabinfo, meminfo, proc-stat, pace]
""")
        case = ab_case(cli, job, f"kernel:{a}", f"kernel:{b}", sizes.slab_pairs)
        runs = [cli("show", str(run_id), record=False) for run_id in side_runs(case)]
        for kernel, run in zip((a, b), runs, strict=True):
            throughput[kernel].append(samples(run, "tbench.throughput"))
            by_kernel[kernel].append(run)
        change = metric_row(case, "tbench.throughput")["others"][0]
        findings.append(f"- `tbench.throughput`, {clients} client{'s' if clients > 1 else ''}: SLUB vs SLAB: "
                        f"{finding(change)}")
        summary.append(f"{clients}: {change_cell(change, '*')}")
        sections += [
            f"### {clients} client{'s' if clients > 1 else ''} (runs {', '.join(str(r['id']) for r in runs)})",
            "",
            comparison_table(case, ["tbench.throughput", "tbench.latency_max", "slabinfo.active_mib",
                                    "meminfo.sunreclaim", *context_metrics(case)], (a, b)),
            "",
        ]
    sweep_plot(
        out / "slab-vm.png", list(sizes.slab_clients),
        [Labelled(f"{kernel} ({allocator.upper()})", tuple(Estimate.ci(values) for values in throughput[kernel]))
         for allocator, kernel in zip(ALLOCATORS, (a, b), strict=True)],
        title=f"tbench in a {VM_CPUS}-vCPU TCG guest: Linux 6.1 with SLAB and with SLUB "
              f"({sizes.slab_pairs} interleaved pairs)",
        xlabel="clients", ylabel=value_label("MB/s", "higher"), error="95% CI",
    )
    caches = {kernel: slab_caches(runs) for kernel, runs in by_kernel.items()}
    cache_rows = [[f"`{cache}`", *(number(caches[k][cache]) if cache in caches[k] else "-" for k in (a, b))]
                  for cache in sorted(caches[a].keys() | caches[b].keys())]
    all_runs = [run for runs in by_kernel.values() for run in runs]
    body = "\n".join([
        "The seed: Nick Piggin ran tbench 1 to 16 clients, 5 times each, on an 8-core machine with SLAB "
        "and with SLUB and found SLUB about 20% slower once every CPU was busy; that report was part of "
        "why SLAB stayed. Here Linux 6.1 (Debian's `linux-source-6.1`) is built twice through "
        "`perfline kernels build` from Debian's own 6.1 cloud config, the same but for the allocator "
        f"(`CONFIG_SLAB=y` against `CONFIG_SLUB=y`), each booted in a {VM_CPUS}-vCPU qemu guest under TCG, "
        f"and tbench runs 1 to {2 * VM_CPUS} clients (client and server in the guest) as an interleaved "
        "`perfline ab` of the two kernels, with the `slabinfo` monitor reading the guest's /proc/slabinfo.",
        "",
        "## The builds",
        "",
        f"`{SOURCE_TREE.name}` unpacked from `{SOURCE_TARBALL}`; the config is {VM_KERNELS[0]}'s (Debian's "
        "cloud config) with the allocator chosen, Debian's signing certificates left out (not in "
        "linux-source) and debug info off (it only slows the build; a bzImage carries none); "
        "`make olddefconfig` settles the rest. The first build in a directory is the one from nothing "
        "(ccache hits / misses as ccache counted them during it); later ones are incremental.",
        "",
        table(["kernel", "release", "first built", "first build", "ccache hits / misses", "this run's build",
               "builds"], build_rows(built)),
        "",
        cli.commands_section(),
        "",
        "## Results",
        "",
        f"mean ±%stddev (n) over the repetitions ({sizes.slab_duration} s of tbench each); %change of SLUB "
        "against SLAB with its 95% CI from the paired analysis; **\\*** significant at p < 0.01 and beyond "
        "1%. `slabinfo.active_mib` and `meminfo.sunreclaim` are the guest's at the end of each repetition.",
        "",
        *sections,
        "![tbench against clients, SLAB and SLUB](slab-vm.png)",
        "",
        "### The caches that moved",
        "",
        "slabinfo names the caches whose active bytes moved most during a repetition (at least "
        "64 KiB); their mean active KiB at the end, per kernel (\"-\": never among them):",
        "",
        table(["cache", a, b], cache_rows) if cache_rows else "No cache moved by 64 KiB or more in a repetition.",
        "",
        "## Findings (generated from the numbers)",
        "",
        *findings,
    ])
    guests = {kernel: runs[0] for kernel, runs in by_kernel.items()}
    return Outcome(body, "tbench SLUB vs SLAB by clients: " + ", ".join(summary), all_runs[0]["fingerprint"], guests)


# --- per-CPU latency and migration cost in a 4-vCPU guest (--vm) -------------------------------

WIDE_VM_CPUS = 4


def cpus_vm_study(cli: Perfline, out: Path, sizes: Sizes) -> Outcome:
    kernel = VM_KERNELS[-1]
    vm = f"""
target: qemu
kernel: {kernel}
accel: tcg
vm_cpus: {WIDE_VM_CPUS}
vm_memory: {VM_MEMORY_MB}
warmup: {sizes.warmup}
"""
    latency_job = cli.job("cpu-latency-vm", f"""
benchmark: cpu-latency
params: {{duration_ms: {sizes.latency_ms}}}
repeat: {sizes.latency_repeat}
monitors: [proc-stat, pace]
{vm.strip()}
""")
    [latency] = cli("run", latency_job)
    cpus = list(range(WIDE_VM_CPUS))
    gaps = {cpu: samples(latency, f"cpu-latency.cpu{cpu}.max_gap") for cpu in cpus}
    grouped_bars(
        out / "cpus-vm-latency.png", [f"CPU {cpu}" for cpu in cpus],
        [Labelled(kernel, tuple(Estimate.stddev(gaps[cpu]) for cpu in cpus))],
        title=f"largest gap seen by a SCHED_FIFO spinner per vCPU, {WIDE_VM_CPUS}-vCPU TCG guest "
              f"({sizes.latency_ms} ms spins, {sizes.latency_repeat} repetitions)",
        ylabel=value_label("µs", "lower"), error="stddev",
        log=max(max(v) for v in gaps.values()) > 10 * min(min(v) for v in gaps.values()),
    )
    latency_rows = []
    for cpu in cpus:
        s = latency["summary"][f"cpu-latency.cpu{cpu}.max_gap"]
        latency_rows.append([str(cpu), f"{number(s['mean'])} ± {number(s['stddev'])} ({s['n']})",
                             number(s["min"]), number(s["median"]), number(s["max"])])
    migration_job = cli.job("migration-cost-vm", f"""
benchmark: migration-cost
params: {{size: 256K, repeat: {sizes.migration_repeat}}}
repeat: {sizes.migration_vm_repeat}
monitors: [pace]
{vm.strip()}
""")
    [migration] = cli("run", migration_job)
    pair = {(s, d): migration["summary"][f"migration-cost.cpu{s}-cpu{d}.cost_us"]
            for s in cpus for d in cpus if s != d}
    heatmap(
        out / "cpus-vm-migration.png",
        [[pair[s, d]["mean"] if s != d else float("nan") for d in cpus] for s in cpus],
        [f"from vCPU {s}" for s in cpus], [f"to vCPU {d}" for d in cpus],
        title=f"migration cost in a {WIDE_VM_CPUS}-vCPU TCG guest, 256 KiB (µs, mean of "
              f"{sizes.migration_vm_repeat} repetitions; stddev in brackets)",
        unit="µs",
        cells=[[f"{pair[s, d]['mean']:.1f}\n({pair[s, d]['stddev']:.1f})" if s != d else "-" for d in cpus]
               for s in cpus],
    )
    costs = [v["mean"] for v in pair.values()]
    spread = [v["stddev"] / abs(v["mean"]) * 100 for v in pair.values() if v["mean"]]
    means = {cpu: latency["summary"][f"cpu-latency.cpu{cpu}.max_gap"]["mean"] for cpu in cpus}
    settings = migration["settings"]
    findings = [
        "- largest gap per vCPU (mean of repetitions): " + ", ".join(f"vCPU {c} {number(v)} µs" for c, v in
                                                                       means.items()),
        f"- migration cost over the {len(pair)} ordered vCPU pairs: {min(costs):.1f} to {max(costs):.1f} µs "
        f"(mean {sum(costs) / len(costs):.1f}); the repetitions' spread per pair is "
        f"{min(spread):.0f}-{max(spread):.0f}% of the pair's mean",
        f"- the guest reports a {settings['cache_size'] // 1024} KiB cache and {settings['cpu_mhz']:.0f} MHz "
        f"(QEMU's model, not this host's); its clock source is {clocksource_of(latency)}",
        f"- {WIDE_VM_CPUS} vCPUs are {WIDE_VM_CPUS} QEMU threads on this host's {CPUS} CPUs: a vCPU waits "
        "whenever its thread is not running, so the gaps measure this host's scheduling of QEMU as much as "
        "the guest kernel's, and a \"migration\" between vCPUs need not move anything between real caches",
    ]
    body = "\n".join([
        "The seeds: Rusty Russell's per-CPU stop_machine latency graph (a spinner per CPU, the largest "
        "gap between its clock reads) and Ingo Molnar's boot-time migration cost matrix, both on "
        "machines with more CPUs than this 2-vCPU host has. A guest can have more CPUs than its host: "
        f"here both run in a {WIDE_VM_CPUS}-vCPU qemu guest booting {kernel} under TCG. Read the numbers "
        "for what they are: emulated CPUs on fewer real ones (see the findings).",
        "",
        cli.commands_section(),
        "",
        "## Per-CPU latency",
        "",
        "Per vCPU: the largest gap of each repetition, mean ± stddev (n), and the smallest, median and "
        "largest of them, in µs.",
        "",
        table(["vCPU", "max gap µs", "min", "median", "max"], latency_rows),
        "",
        "![largest gap per vCPU](cpus-vm-latency.png)",
        "",
        "## Migration cost matrix",
        "",
        f"`migration-cost` (size 256 KiB, {sizes.migration_repeat} migrations per pair and repetition) with "
        "its probe run in the guest, so the CPUs paired are the guest's.",
        "",
        "![migration cost matrix in the guest](cpus-vm-migration.png)",
        "",
        "## Findings (generated from the numbers)",
        "",
        *findings,
    ])
    summary = (f"worst vCPU gap {number(max(means.values()))} µs; migration {min(costs):.1f}-{max(costs):.1f} µs "
               f"over {len(pair)} pairs")
    return Outcome(body, summary, latency["fingerprint"], {kernel: latency})


STUDIES = (
    Study("rcu", "(a) Grace-period-bound work and rcutree.jiffies_till_first_fqs", rcu_study),
    Study("tbench", "(b) tbench throughput against clients", tbench_study),
    Study("latency", "(c) Per-CPU scheduling latency", latency_study),
    Study("migration", "(d) The migration cost matrix", migration_study),
    Study("ftrace-vm", "(a, VM) The seed's ftrace loop in qemu guests: jiffies_till_first_fqs, 6.1 and 6.12",
          ftrace_vm_study, vm=True),
    Study("pgbench-vm", "(d, VM) A database benchmark across two kernels, in qemu guests", pgbench_vm_study,
          vm=True),
    Study("slab-vm", "(b, VM) SLAB against SLUB under tbench: Linux 6.1 built twice, in qemu guests",
          slab_vm_study, vm=True),
    Study("cpus-vm", "(c/d, VM) Per-CPU latency and the migration cost matrix in a 4-vCPU guest", cpus_vm_study,
          vm=True),
)


# --- pages -------------------------------------------------------------------------------


def duration(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def interpretation(slug: str, quick: bool) -> str:
    if quick:
        return "_A `--quick` run: smoke-test sizes, too small to interpret._"
    notes = NOTES / f"{slug}.md"
    if not notes.exists():
        return "_No interpretation written for this study yet; the findings above are the numbers._"
    return notes.read_text().strip() + (
        "\n\n_Written by hand after reading a full run's numbers. `make case-studies` regenerates "
        "everything above this section; if the new numbers say otherwise, the numbers win._"
    )


def write_page(out: Path, study: Study, outcome: Outcome, loads: Sequence[str], seconds: float, stamp: str,
               quick: bool) -> None:
    text = "\n".join([
        f"# {study.title}",
        "",
        f"_Generated by `make case-studies` (`bench/case_studies.py{' --quick' if quick else ''}`) on "
        f"{stamp}; this study took {duration(seconds)}. [All case studies](README.md)._",
        "",
        outcome.body,
        "",
        "## What it shows",
        "",
        interpretation(study.slug, quick),
        "",
        vm_machine_section(outcome.guests, loads) if outcome.guests else machine_section(outcome.fingerprint, loads),
        "",
    ])
    (out / f"{study.slug}.md").write_text(text)


def write_index(out: Path, index: Mapping[str, Any]) -> None:
    rows = [[f"[{s.title}]({s.slug}.md)", index["studies"][s.slug]["summary"],
             duration(index["studies"][s.slug]["seconds"]), index["studies"][s.slug]["loads"][0]]
            for s in STUDIES if s.slug in index["studies"]]
    total = index.get("total")
    text = "\n".join([
        "# Case studies",
        "",
        "The seeds' experiments, rerun with perfline on a real machine, as far as one machine and one "
        "kernel allow (no SLAB-vs-SLUB comparison, no stop_machine trigger; each page's reading says "
        "what reproduced and what did not): each page has the exact "
        "commands, the tables and figures perfline produced, the machine's fingerprint and load, the "
        "findings generated from the numbers, and a hand-written reading of them. `make case-studies` "
        "regenerates all of them here (`.venv/bin/python bench/case_studies.py --only rcu` one of them; "
        "`--quick` is a smoke test). The studies marked VM boot Debian's 6.1 and 6.12 cloud kernels in "
        "qemu guests and run only with `--vm` (which `make case-studies` passes): under TCG emulation, "
        "as KVM cannot run a guest on this machine, so their pages also say what emulation does to "
        "each figure.",
        "",
        table(["study", "result", "took", "load average before"], rows),
        "",
        (f"Last full run{' (VM studies included)' if total.get('vm') else ' (without the VM studies)'}: "
         f"{total['stamp']}, {duration(total['seconds'])} in all; load average "
         f"{total['loads'][0]} before and {total['loads'][1]} after (1, 5, 15 min). This 2-vCPU VM is "
         "shared with other work, so \"no hog\" does not mean an idle machine: each page gives the CPU "
         "idle share measured during its repetitions where it matters.")
        if total else "",
        "",
        "Job files of the runs: [jobs/](jobs/). Hand-written interpretations: [notes/](notes/).",
        "",
    ])
    (out / "README.md").write_text(text)


def check_kernels() -> None:
    """The VM studies' kernels are registered, or the one command that registers each is said."""
    missing = []
    for name in VM_KERNELS:
        try:
            get_kernel(name)
        except KernelError:
            missing.append(f"{PERFLINE} kernels add-deb {KERNEL_DEBS[name]} --name {name}")
    if missing:
        print(f"error: the VM studies boot kernels not registered yet: {' && '.join(missing)}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke-test sizes (about a minute)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where pages and figures go")
    parser.add_argument("--only", default=",".join(s.slug for s in STUDIES),
                        help="comma-separated studies: " + ", ".join(s.slug for s in STUDIES))
    parser.add_argument("--db", type=Path, help="keep the perfline store here (default: a temporary file)")
    parser.add_argument("--vm", action="store_true",
                        help="also the studies in qemu guests (" + ", ".join(s.slug for s in STUDIES if s.vm) +
                             "; about 25 minutes under TCG)")
    args = parser.parse_args()
    available = [s for s in STUDIES if args.vm or not s.vm]
    chosen = [s for s in available if s.slug in args.only.split(",")]
    if not chosen:
        vm_only = [s.slug for s in STUDIES if s.vm and s.slug in args.only.split(",")]
        parser.error(f"--only {args.only!r}: " + (f"{', '.join(vm_only)} needs --vm" if vm_only else "no such study"))
    if not PERFLINE.exists():
        sys.exit(f"{PERFLINE} is missing: run `make install native` first")
    if any(s.vm for s in chosen):
        check_kernels()
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    sizes = QUICK if args.quick else FULL
    index_path = out / "studies.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {"studies": {}}
    started, first_load = time.monotonic(), loadavg()
    with tempfile.TemporaryDirectory(prefix="perfline-case-studies-") as scratch:
        db = args.db.resolve() if args.db else Path(scratch) / "case-studies.sqlite"
        cli = Perfline(out, db)
        for study in chosen:
            print(f"== {study.title} (load average {loadavg()})", file=sys.stderr, flush=True)
            loads, begun = [loadavg()], time.monotonic()
            outcome = study.run(cli, out, sizes)
            seconds = time.monotonic() - begun
            loads.append(loadavg())
            stamp = datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
            write_page(out, study, outcome, loads, seconds, stamp, args.quick)
            index["studies"][study.slug] = {"summary": outcome.summary, "seconds": seconds, "loads": loads,
                                            "stamp": stamp, "quick": args.quick}
    if len(chosen) == len(available):
        index["total"] = {"seconds": time.monotonic() - started, "loads": [first_load, loadavg()],
                          "stamp": datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
                          "quick": args.quick, "vm": args.vm}
    index_path.write_text(json.dumps(index, indent=2) + "\n")
    write_index(out, index)
    print(f"wrote {out} in {duration(time.monotonic() - started)}", file=sys.stderr)


if __name__ == "__main__":
    main()
