"""Kernel bisection: `perfline bisect start --kernel-tree`.

Building a real kernel per probe takes far too long for a test (docs/bisect.md has the
figures), so the tree here is a tiny git repository whose `make olddefconfig` and
`make bzImage` stand in for a kernel's: `bzImage` copies the image its commit names
into arch/x86/boot/bzImage. Everything around that is real: the build script perfline
writes runs in each commit's own worktree, the image is registered and booted in QEMU,
and the job measures the guest.

In the end-to-end test the images are Debian 12's real 6.1 and 6.12 cloud kernels, and
the metric is the guest's MemAvailable right after boot (the memory the kernel leaves
to user space, the figure LKP's meminfo tracks for memory-footprint regressions): with
1 GiB it is about 5.5 MB lower under 6.12, and it varies by a few kB from boot to boot.
So the test checks that the bisection finds the commit that switches to 6.12 from a
measured difference, not only the mechanics.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfline.builds import kernel
from perfline.builds.worktree import Builder
from perfline.store import Store
from perfline.targets import kernels

CULPRIT = 5  # commits 0..4 build 6.1, commits 5.. build 6.12
COMMITS = 8
MAKEFILE = """\
# Stands in for a kernel tree's top-level Makefile: same targets, same outputs.
olddefconfig:
\ttest -f .config
\techo '# olddefconfig ran with CC=$(CC)' >> .config

bzImage:
\ttest -f .config
\tmkdir -p arch/x86/boot
\tcp "$$(cat IMAGE)" arch/x86/boot/bzImage
\t@echo 'Kernel: arch/x86/boot/bzImage is ready  (CC=$(CC))'

.PHONY: olddefconfig bzImage
"""
MEM_AVAILABLE_JOB = """\
benchmark: command
params:
  cmd: "awk '/MemAvailable/ {print $2}' /proc/meminfo"
  metric: mem_available_kb
  unit: kB
  direction: higher
target: qemu
kernel: placeholder    # any registered kernel: each probe boots its own build
vm_cpus: 1
accel: tcg
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=Dev", "-c", "user.email=dev@example.org",
                           *args], capture_output=True, text=True, check=True).stdout.strip()


def kernel_tree(path: Path, images: list[Path], kconfig: bool = True) -> list[str]:
    """A git repository with one commit per image; commit i's `make bzImage` gives images[i]."""
    path.mkdir()
    git(path, "init", "-q")
    (path / "Makefile").write_text(MAKEFILE)
    if kconfig:
        (path / "Kconfig").write_text('mainmenu "stand-in"\n')
    (path / "arch" / "x86").mkdir(parents=True)
    (path / "arch" / "x86" / "Kconfig").write_text("config X86\n\tdef_bool y\n")
    (path / ".gitignore").write_text("/.config\n/arch/x86/boot/\n")
    shas = []
    for index, image in enumerate(images):
        (path / "IMAGE").write_text(f"{image}\n")
        (path / "NOTES").write_text(f"change {index}\n")
        git(path, "add", ".")
        git(path, "commit", "-q", "-m", f"change {index}")
        shas.append(git(path, "rev-parse", "HEAD"))
    return shas


def fake_bzimage(path: Path, release: str) -> Path:
    """The bytes of an x86 setup header that names `release`; enough to register, not to boot."""
    image = bytearray(0x1000)
    image[0x202:0x206] = b"HdrS"
    image[0x20E:0x210] = (0x600).to_bytes(2, "little")
    text = f"{release} (dev@host) #1 SMP\0".encode()
    image[0x800 : 0x800 + len(text)] = text
    path.write_bytes(bytes(image))
    return path


def perfline(db: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "perfline", "--db", str(db), *args],
                          capture_output=True, text=True, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"perfline {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """perfline's cache (worktrees, kept configs, kernel registry) for this test only."""
    monkeypatch.setenv(kernels.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


# -- without a VM ---------------------------------------------------------------------


def test_each_commit_is_built_once_with_its_config_and_full_log(tmp_path: Path, cache: Path) -> None:
    images = [fake_bzimage(tmp_path / "image-a", "6.9.0-a"), fake_bzimage(tmp_path / "image-b", "6.9.0-b")]
    shas = kernel_tree(tmp_path / "linux", [images[0], tmp_path / "missing", images[1]])
    config = tmp_path / "my.config"
    config.write_text("CONFIG_X=y\n")
    kept_config = kernel.keep_config(config)
    build = kernel.build_command(kept_config)
    config.write_text("CONFIG_X=n\n")  # edited after the start: the bisection keeps its copy
    announced: list[str] = []
    builder = kernel.KernelBuilder(tmp_path / "linux", build, announced.append)

    first = builder.build(shas[0])
    assert first.ok and not first.cached, first.log_tail
    kept = builder.kept(shas[0])
    # Only what the probe needs is kept; the worktree and git's record of it are gone.
    assert sorted(p.name for p in kept.iterdir()) == ["bzImage", "config", kernel.LOG_NAME, "result"]
    assert not (builder.root / shas[0]).exists() and shas[0] not in git(tmp_path / "linux", "worktree", "list")
    assert (kept / "config").read_text().startswith("CONFIG_X=y\n# olddefconfig ran with CC=")
    log = builder.log_path(shas[0]).read_text()
    cc = "ccache gcc" if shutil.which("ccache") else "cc"
    assert "perfline: make olddefconfig" in log and f"bzImage is ready  (CC={cc})" in log
    assert "perfline: exit status 0" in log and "bzImage is ready" in first.log_tail
    assert len(announced) == 1 and str(builder.root / shas[0] / kernel.LOG_NAME) in announced[0]
    assert builder.build(shas[0]).cached and len(announced) == 1  # built once

    broken = builder.build(shas[1])  # its IMAGE names no file: the build fails
    assert not broken.ok and "missing" in broken.log_tail
    assert "perfline: exit status 2" in builder.log_path(shas[1]).read_text()
    assert not (builder.kept(shas[1]) / "bzImage").exists() and not (builder.root / shas[1]).exists()

    registered = kernel.register(kept, kernel.kernel_name(7, shas[0]), shas[0])
    assert (registered.name, registered.release) == (f"bisect-7-{shas[0][:12]}", "6.9.0-a")
    assert registered.config() == (kept / "config").read_text()
    assert kernel.register(kept, kernel.kernel_name(7, shas[0]), shas[0]) == registered  # the same commit again: a no-op
    assert kernels.get_kernel(registered.name).image.read_bytes() == images[0].read_bytes()
    with pytest.raises(kernel.KernelBisectError, match="left no arch/x86/boot/bzImage"):
        kernel.register(builder.kept(shas[1]), kernel.kernel_name(7, shas[1]), shas[1])

    assert kept_config.read_text() == "CONFIG_X=y\n"
    kept_config.unlink()
    with pytest.raises(kernel.KernelBisectError, match="config.*is gone"):
        kernel.check_resumable(kept_config)


def cut_short(repo: Path, path: Path, sha: str) -> None:
    """What a kill during `git worktree add` leaves: git's record, locked while it is
    being made, and a `.git` in a directory without the commit's files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "--detach", "--no-checkout", str(path), sha)
    git(repo, "worktree", "lock", "--reason", "initializing", str(path))
    assert (path / ".git").exists() and not (path / "Makefile").exists()


def test_a_worktree_cut_short_is_made_again(tmp_path: Path, cache: Path) -> None:
    image = fake_bzimage(tmp_path / "image", "6.9.0-a")
    repo = tmp_path / "linux"
    shas = kernel_tree(repo, [image, image])
    (tmp_path / "my.config").write_text("CONFIG_X=y\n")
    builder = kernel.KernelBuilder(repo, kernel.build_command(kernel.keep_config(tmp_path / "my.config")))
    cut_short(repo, builder.root / shas[0], shas[0])
    built = builder.build(shas[0])
    assert built.ok and not built.cached, built.log_tail
    assert (builder.kept(shas[0]) / "bzImage").read_bytes() == image.read_bytes()
    assert not (builder.root / shas[0]).exists() and shas[0] not in git(repo, "worktree", "list")

    # Killed after the build was kept but before its worktree went: nothing is built,
    # the worktree is removed on the next use.
    builder.tree(shas[0])
    assert builder.build(shas[0]).cached and not (builder.root / shas[0]).exists()

    # Any build command: a bisection with --repo/--build uses the same worktrees.
    plain = Builder(repo, "test -f Makefile && test -f NOTES")
    cut_short(repo, plain.root / shas[1], shas[1])
    assert plain.build(shas[1]).ok and (plain.tree(shas[1]) / "Makefile").is_file()
    assert plain.build(shas[1]).cached


LOCAL_JOB = "benchmark: command\nparams: {cmd: 'echo 1'}\n"
OPTION_ERRORS = [
    (["--repo", "."], None, "it excludes --repo and --build"),
    (["--build", "make"], None, "it excludes --repo and --build"),
    (["--command", "./bench"], None, "give --job JOB --metric M, not --command"),
    (["--no-config"], None, "--kernel-tree needs --config FILE"),
    (["--config", "/nonexistent.config"], None, "--config /nonexistent.config: no such file"),
    ([], "benchmark: cyclictest\n", "benchmark 'cyclictest' cannot run with target qemu"),
    ([], LOCAL_JOB + "tunables: {sysctl: {vm.swappiness: 1}}\n", "would be applied on this host"),
    ([], "benchmark: command\nparams: {cmd: 'echo 1'}\ntarget: qemu\n", "any registered kernel will do"),
    (["--not-a-kernel"], None, "not a Linux kernel tree (no Kconfig at"),
]


@pytest.mark.parametrize(("extra", "job", "message"), OPTION_ERRORS)
def test_kernel_tree_options_fail_in_one_line(
    tmp_path: Path, cache: Path, extra: list[str], job: str | None, message: str
) -> None:
    shas = kernel_tree(tmp_path / "linux", [tmp_path / "a", tmp_path / "b"], kconfig="--not-a-kernel" not in extra)
    (tmp_path / "job.yaml").write_text(job or LOCAL_JOB)
    (tmp_path / "my.config").write_text("CONFIG_X=y\n")
    args = ["bisect", "start", "--kernel-tree", str(tmp_path / "linux"), "--good", shas[0], "--bad", shas[-1],
            "--job", str(tmp_path / "job.yaml"), "--metric", "command.value"]
    if "--no-config" not in extra and "--config" not in extra:
        args += ["--config", str(tmp_path / "my.config")]
    args += [a for a in extra if a not in ("--no-config", "--not-a-kernel")]
    proc = perfline(tmp_path / "db", *args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "db").exists() or "bisection 1" not in proc.stderr  # nothing started


def test_config_needs_a_kernel_tree(tmp_path: Path) -> None:
    proc = perfline(tmp_path / "db", "bisect", "start", "--repo", ".", "--build", "make", "--good", "a",
                    "--bad", "b", "--command", "true", "--direction", "lower", "--config", "x", check=False)
    assert proc.returncode == 2 and "--config applies only to --kernel-tree" in proc.stderr


# -- booting the builds ---------------------------------------------------------------


@pytest.mark.vm
@pytest.mark.slow
def test_kernel_bisection_boots_each_build_and_finds_the_commit(
    debian_kernels: dict[str, kernels.Kernel], tmp_path: Path, cache: Path
) -> None:
    old, new = debian_kernels["debian-6.1"], debian_kernels["debian-6.12"]
    shas = kernel_tree(tmp_path / "linux", [old.image if i < CULPRIT else new.image for i in range(COMMITS)])
    kernels.add_image(new.image, "placeholder")  # the job names it; no probe boots it
    (tmp_path / "job.yaml").write_text(MEM_AVAILABLE_JOB)
    (tmp_path / "my.config").write_text("CONFIG_X=y\n")
    db = tmp_path / "db"
    start = [sys.executable, "-m", "perfline", "--db", str(db), "bisect", "start",
             "--kernel-tree", str(tmp_path / "linux"), "--good", shas[0], "--bad", shas[-1],
             "--config", str(tmp_path / "my.config"), "--job", str(tmp_path / "job.yaml"),
             "--metric", "command.mem_available_kb", "--direction", "higher", "--max-runs", "40", "--json"]

    def samples() -> list[tuple[int, int, float, int]]:
        with sqlite3.connect(db) as connection:
            try:
                return connection.execute(
                    "SELECT id, commit_index, value, run_id FROM bisect_samples ORDER BY id").fetchall()
            except sqlite3.OperationalError:
                return []

    # Killed after a few probes, then resumed: nothing measured or built is done again.
    started = time.monotonic()
    proc = subprocess.Popen(start, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    while len(samples() if db.exists() else []) < 4:
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() - started < 300
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    before = samples()
    resumed = perfline(db, "bisect", "resume", "1", "--json")
    result = json.loads(resumed.stdout)
    assert result["status"] == "found", result
    assert result["culprit"] == shas[CULPRIT] and result["parent"] == shas[CULPRIT - 1]
    assert result["change_pct"] < -0.1 and result["kind"] == "regression"  # less memory left
    assert result["confirmation"]["decision"] == "confirmed"
    after = samples()
    assert after[: len(before)] == before
    with sqlite3.connect(db) as connection:
        built = connection.execute("SELECT commit_index, count(*) FROM bisect_builds GROUP BY commit_index").fetchall()
    assert all(count == 1 for _, count in built) and len(built) == result["builds"]

    # Every sample is a stored run on the commit's own build, booted in the guest.
    store = Store.open(str(db))
    for _, index, value, run_id in after:
        run = store.get_run(run_id)
        sha = shas[index]
        assert run.info.kernel_commit == sha and run.info.label == "bisect-1"
        assert run.settings["vm_kernel"] == f"bisect-1-{sha[:12]}"
        assert run.fingerprint["kernel_release"] == (old if index < CULPRIT else new).release
        assert [s.value for s in run.samples if s.metric.name == "command.mem_available_kb"] == [value]
    registry = {k.name: k for k in kernels.list_kernels()}
    for index, _ in built:
        assert registry[f"bisect-1-{shas[index][:12]}"].release == (old if index < CULPRIT else new).release

    log = perfline(db, "bisect", "log", "1").stdout
    assert "full log" in log and shas[CULPRIT][:12] in log
    [kept] = (cache / "worktrees").glob("configs/*.config")
    assert result["kernel"] == {"config": str(kept), "config_source": str(tmp_path / "my.config")}
    status = perfline(db, "bisect", "status", "1").stdout
    assert f"kernel bisection: each commit's bzImage built with config {kept}" in " ".join(status.split())
    [culprit_log] = (cache / "worktrees").glob(f"*/kernels/*/{shas[CULPRIT]}/{kernel.LOG_NAME}")
    assert "perfline: exit status 0" in culprit_log.read_text()
    assert not list((cache / "worktrees").glob("*/*/.git")), "a worktree was left after its build"


# The stand-in tree again, built out of tree as `make -C TREE O=DIR` builds a kernel.
OUT_OF_TREE_MAKEFILE = """\
O ?= .
olddefconfig:
\ttest -f $(O)/.config
\techo '# olddefconfig ran with CC=$(CC)' >> $(O)/.config

bzImage:
\ttest -f $(O)/.config
\tmkdir -p $(O)/arch/x86/boot
\tcp "$$(cat IMAGE)" $(O)/arch/x86/boot/bzImage

.PHONY: olddefconfig bzImage
"""


def test_kernels_build_builds_out_of_tree_and_registers_the_image(tmp_path: Path, cache: Path) -> None:
    tree = tmp_path / "linux"
    kernel_tree(tree, [fake_bzimage(tmp_path / "image", "6.1.99-built")])
    (tree / "Makefile").write_text(OUT_OF_TREE_MAKEFILE)
    slab, slub = tmp_path / "slab.config", tmp_path / "slub.config"
    slab.write_text("CONFIG_SLAB=y\n")
    slub.write_text("CONFIG_SLUB=y\n")
    db = tmp_path / "db"
    for config, name in ((slab, "k-slab"), (slub, "k-slub")):
        proc = perfline(db, "kernels", "build", str(tree), "--config", str(config), "--name", name)
        assert "6.1.99-built" in proc.stdout
    # Each config built in its own directory; the tree itself is left clean.
    assert not (tree / ".config").exists() and not (tree / "arch" / "x86" / "boot").exists()
    registered = {k.name: k for k in kernels.list_kernels()}
    assert registered["k-slab"].config().startswith("CONFIG_SLAB=y\n# olddefconfig ran with CC=")
    assert registered["k-slub"].config().startswith("CONFIG_SLUB=y\n")
    assert len(list((cache / "builds").iterdir())) == 2
    # The same tree and config again: the same directory, its builds listed, this one last.
    again = json.loads(perfline(db, "kernels", "build", str(tree), "--config", str(slab), "--name", "k-slab",
                                "--replace", "--json").stdout)
    assert again["name"] == "k-slab" and again["release"] == "6.1.99-built"
    assert [b["status"] for b in again["builds"]] == [0, 0] and again["builds"][-1]["seconds"] >= 0


@pytest.mark.parametrize(("setup", "message", "status"), [
    ("not-a-tree", "not a Linux kernel source tree (no Kconfig, arch/x86/Kconfig)", 2),
    ("no-config", "no such file", 2),
    ("dirty", "has a .config: an out-of-tree build needs a clean tree", 2),
    ("taken", "registered already; give --replace", 2),
    ("bad-name", "use letters, digits", 2),
    ("failing", "failed (status 2; the whole log is", 1),
])
def test_kernels_build_refuses_bad_input_in_one_line(
    tmp_path: Path, cache: Path, setup: str, message: str, status: int
) -> None:
    tree = tmp_path / "linux"
    kernel_tree(tree, [fake_bzimage(tmp_path / "image", "6.1.99-built")])
    (tree / "Makefile").write_text(OUT_OF_TREE_MAKEFILE)
    config = tmp_path / "my.config"
    config.write_text("CONFIG_X=y\n")
    if setup == "not-a-tree":
        (tree / "Kconfig").unlink()
        (tree / "arch" / "x86" / "Kconfig").unlink()
    elif setup == "no-config":
        config.unlink()
    elif setup == "dirty":
        (tree / ".config").write_text("CONFIG_X=y\n")
    elif setup == "taken":
        kernels.add_image(fake_bzimage(tmp_path / "other", "6.1.0-other"), "k")
    elif setup == "failing":
        (tree / "IMAGE").write_text(f"{tmp_path / 'missing'}\n")
    name = "k k" if setup == "bad-name" else "k"
    proc = perfline(tmp_path / "db", "kernels", "build", str(tree), "--config", str(config), "--name", name,
                    check=False)
    assert proc.returncode == status, proc.stderr
    assert proc.stderr.startswith("error: ") and message in proc.stderr
    if status == 2:
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not (cache / "builds").exists()  # refused before anything was built
