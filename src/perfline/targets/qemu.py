"""A QEMU virtual machine running the perfline guest agent, and its request channel.

The VM boots a registered kernel with perfline's initramfs. Its console (ttyS0) goes
to a log file kept for diagnostics; the agent (guest_agent.sh, which documents the
protocol) serves requests on ttyS1, a unix socket on this side. A guest that panics
exits QEMU (panic=-1 with -no-reboot); one that hangs is killed at a deadline. Either
way GuestFailed carries the console's tail.
"""

from __future__ import annotations

import base64
import os
import re
import select
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from perfline.records.job import ACCELS
from perfline.system.process import die_with_perfline, require_tool, run, tail
from perfline.targets.kernels import Kernel
from perfline.targets.kvm_memo import KvmMemo

QEMU = "qemu-system-x86_64"
QEMU_PACKAGE = "qemu-system-x86"
KVM_DEVICE = Path("/dev/kvm")
# quiet: a console byte costs a trapped port write, which TCG makes slow.
BASE_CMDLINE = "console=ttyS0 panic=-1 quiet"
# Under TCG on 2 CPUs a Debian cloud kernel reaches /init in ~3.5 s; this leaves room
# for a loaded host without letting a hung boot stall a job for long.
BOOT_TIMEOUT_S = 60.0
# KVM boots a kernel in about a second where it works; where it does not, the guest
# may hang silently instead of failing, so `auto` gives up on it early.
KVM_BOOT_TIMEOUT_S = 15.0
FIRST_PANIC_LINES = 15  # an oops with its call trace, for a boot that panicked once
POWEROFF_TIMEOUT_S = 10.0
# What QEMU prints when KVM is present but cannot run this guest (nested VMs); it then
# pauses the guest rather than exiting.
KVM_FAILURES = ("KVM internal error", "failed to initialize kvm", "Could not access KVM kernel module")
REPLY = "@perfline "
_OOPS = re.compile(r"\] ((?:BUG|Oops|general protection fault|kernel BUG at|RIP)[: ][^\r\n]*)")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[c()][0-9A-Za-z]?")


class GuestFailed(RuntimeError):
    """The VM did not boot, died, or did not answer in time; carries the console tail."""

    def __init__(self, message: str, console_tail: str, panic: str | None = None) -> None:
        super().__init__(message)
        self.console_tail = console_tail
        self.panic = panic  # the kernel's panic message, when it panicked and exited


@dataclass(frozen=True)
class VmConfig:
    kernel: Kernel
    initramfs: Path
    cmdline: str = ""  # extra kernel parameters, after BASE_CMDLINE
    cpus: int = 2
    memory_mb: int = 1024
    accel: str = "auto"
    # A root file system image on virtio-blk. snapshot=on sends the guest's writes to a
    # throwaway overlay, so the cached image stays as built and VMs can share it.
    disk: Path | None = None

    @property
    def full_cmdline(self) -> str:
        return f"{BASE_CMDLINE} {self.cmdline}".strip()


@dataclass(frozen=True)
class GuestResult:
    status: int
    stdout: bytes
    stderr: bytes
    # The guest's wall clock (seconds since the epoch) before and after the command.
    started_at: float
    ended_at: float

    @property
    def elapsed_s(self) -> float:
        return self.ended_at - self.started_at


def kvm_usable() -> bool:
    """/dev/kvm can be opened; whether a guest then really runs is only seen by booting."""
    try:
        os.close(os.open(KVM_DEVICE, os.O_RDWR | os.O_CLOEXEC))
    except OSError:
        return False
    return True


def qemu_version() -> str:
    first = run([require_tool(QEMU, QEMU_PACKAGE), "--version"], timeout=30).stdout.splitlines()
    return first[0].removeprefix("QEMU emulator version ").strip() if first else "unknown"


class Vm:
    """One booted VM, as a context manager: booted on enter, always stopped on exit.

    With accel `auto`, KVM is tried first when /dev/kvm opens; a KVM failure during
    boot falls back to TCG and is listed in `warnings`, and `kvm_memo` keeps it so that
    later VMs of the same host boot go to TCG at once.
    """

    def __init__(
        self,
        config: VmConfig,
        workdir: Path,
        boot_timeout: float = BOOT_TIMEOUT_S,
        kvm_memo: KvmMemo | None = None,
    ) -> None:
        if config.accel not in ACCELS:
            raise ValueError(f"accel must be one of {', '.join(ACCELS)}, got {config.accel!r}")
        self.config = config
        self.kvm_memo = kvm_memo or KvmMemo.for_this_boot()
        self.workdir = workdir
        self.boot_timeout = boot_timeout
        self.console_log = workdir / "console.log"
        self.qemu_log = workdir / "qemu.log"
        self.accel = ""
        self.boot_s = 0.0
        self.warnings: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._channel: _Channel | None = None
        self._serving = False  # the agent said ready and has not failed since

    def __enter__(self) -> Self:
        try:
            self.boot()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def boot(self) -> None:
        """Boot and wait for the agent; a panic during boot gets one more boot.

        A kernel that panics on every boot (a bad cmdline, a broken commit) fails
        twice the same way and is reported. One that panicked once and then booted is
        kept, with the first panic and its console's last lines in `warnings`:
        rare boot-time panics under TCG on a loaded host would otherwise fail a whole
        job, or mark a bisection probe untestable.
        """
        started = time.monotonic()
        try:
            self._boot_once()
        except GuestFailed as first:
            if first.panic is None:
                raise  # a hang would only hang again, a missing tool stay missing
            self._kill()
            try:
                self._start(self.accel, self.boot_timeout)  # the accelerator that got this far
            except GuestFailed as second:
                if second.panic is None:
                    raise
                raise GuestFailed(f"{second} (on two boots)", second.console_tail, second.panic) from None
            self.warnings.append(
                f"the guest kernel panicked during boot ({first.panic}) and booted on a second "
                f"try; the first boot's console ended:\n{tail(first.console_tail, FIRST_PANIC_LINES)}"
            )
        self.boot_s = time.monotonic() - started

    def _boot_once(self) -> None:
        if self.config.accel == "tcg" or (self.config.accel == "auto" and not kvm_usable()):
            self._start("tcg", self.boot_timeout)
        elif self.config.accel == "kvm":
            self._start("kvm", self.boot_timeout)
        elif (known := self.kvm_memo.failure()) is not None:
            self.warnings.append(f"KVM failed, fell back to TCG (slower): {known}")
            self._start("tcg", self.boot_timeout)
        else:
            try:
                self._start("kvm", min(self.boot_timeout, KVM_BOOT_TIMEOUT_S))
            except GuestFailed as exc:
                if exc.panic is not None:
                    raise  # the kernel's failure, which TCG would only repeat
                self.kvm_memo.remember(str(exc))
                self.warnings.append(f"KVM failed, fell back to TCG (slower): {exc}")
                self._kill()
                self._start("tcg", self.boot_timeout)

    def run(self, argv: list[str], timeout: float | None, cgroup: str | None = None) -> GuestResult:
        """Run a command in the guest's /tmp/work and wait for its reply. With `cgroup`,
        a cgroup v2 directory of the guest, the agent's request shell joins it and then
        execs the command: the command and all it starts run there from their spawn
        (the host's rule, `system.process.child_setup`), at no extra process."""
        channel = self._live_channel()
        command = shlex.join(argv)
        if cgroup is not None:
            # 0: the writing process itself; echo is the shell's builtin.
            command = f"echo 0 > {shlex.quote(f'{cgroup}/cgroup.procs')} && exec {command}"
        request = base64.b64encode(command.encode()).decode()
        channel.send(f"RUN {request}\n")
        deadline = None if timeout is None else time.monotonic() + timeout
        out: list[bytes] = []
        err: list[bytes] = []
        while True:
            kind, payload = self._reply(channel, deadline, f"{shlex.join(argv)} did not finish")
            if kind == "out":
                out.append(base64.b64decode(payload))
            elif kind == "err":
                err.append(base64.b64decode(payload))
            elif kind == "done":
                status, start, end = payload.split()
                return GuestResult(int(status), b"".join(out), b"".join(err), float(start), float(end))

    def console_tail(self, lines: int = 40) -> str:
        try:
            text = self.console_log.read_bytes().decode(errors="replace")
        except OSError:
            return ""
        return tail(_ANSI.sub("", text).replace("\r", ""), lines)

    def close(self) -> None:
        """Power off politely when the agent is serving, else kill; always reap."""
        proc, channel = self._proc, self._channel
        if proc is not None and proc.poll() is None and channel is not None and self._serving:
            try:
                channel.send("POWEROFF\n")
                proc.wait(POWEROFF_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()

    def _kill(self) -> None:
        proc, channel = self._proc, self._channel
        self._proc = self._channel = None
        self._serving = False
        if channel is not None:
            channel.close()
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()

    # -- internals ----------------------------------------------------------------

    def _start(self, accel: str, boot_timeout: float) -> None:
        qemu = require_tool(QEMU, QEMU_PACKAGE)
        self.accel = accel
        sock_path = self.workdir / "channel.sock"
        sock_path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(sock_path))
            listener.listen(1)
            with self.qemu_log.open("wb") as log:
                self._proc = subprocess.Popen(
                    [qemu, *self._arguments(accel, sock_path)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    # Ctrl-C reaches perfline only, which then powers the VM off in order.
                    start_new_session=True,
                    # No VM outlives the run it belongs to, even if perfline is SIGKILLed.
                    preexec_fn=die_with_perfline(),
                )
            deadline = time.monotonic() + boot_timeout
            connection = self._accept(listener, deadline)
        finally:
            listener.close()
            sock_path.unlink(missing_ok=True)
        self._channel = _Channel(connection)
        self._reply(self._channel, deadline, "the guest agent did not start", expect="ready")
        self._serving = True

    def _arguments(self, accel: str, sock_path: Path) -> list[str]:
        config = self.config
        return [
            "-accel", accel,
            # TCG's default CPU model is what it emulates fastest; KVM passes the host's.
            *(["-cpu", "host"] if accel == "kvm" else []),
            "-m", str(config.memory_mb),
            "-smp", str(config.cpus),
            "-kernel", str(config.kernel.image),
            "-initrd", str(config.initramfs),
            "-append", config.full_cmdline,
            *(["-drive", f"file={str(config.disk).replace(',', ',,')},if=virtio,format=raw,snapshot=on"]
              if config.disk is not None else []),
            "-nographic", "-no-reboot", "-nodefaults", "-monitor", "none",
            "-serial", f"file:{self.console_log}",
            "-chardev", f"socket,id=perfline,path={sock_path}",
            "-serial", "chardev:perfline",
        ]  # fmt: skip

    def _accept(self, listener: socket.socket, deadline: float) -> socket.socket:
        """QEMU connects to the channel socket as it starts; watch it while waiting."""
        while True:
            ready, _, _ = select.select([listener], [], [], 0.1)
            if ready:
                connection, _ = listener.accept()
                return connection
            self._check_alive(deadline, "QEMU did not open the channel")

    def _reply(
        self, channel: _Channel, deadline: float | None, what: str, expect: str | None = None
    ) -> tuple[str, str]:
        """The next `@perfline KIND REST` reply as (kind, rest); other lines are noise."""
        while True:
            line = channel.readline(0.1)
            if line is None:
                self._check_alive(deadline, what)
                continue
            if not line.startswith(REPLY):
                continue
            kind, _, rest = line.removeprefix(REPLY).partition(" ")
            if kind == "error":
                raise GuestFailed(f"guest agent: {rest}", self.console_tail())
            if expect is None or kind == expect:
                return kind, rest

    def _check_alive(self, deadline: float | None, what: str) -> None:
        proc = self._proc
        assert proc is not None
        status = proc.poll()
        if status is not None:
            panic = self._panic()
            cause = f"the guest kernel panicked: {panic}" if panic else f"the VM exited (QEMU status {status})"
            raise GuestFailed(f"{what}: {cause}{self._qemu_said()}", self.console_tail(), panic)
        if self.accel == "kvm" and self._kvm_failed():
            raise GuestFailed(f"{what}: {self._qemu_said().strip(': ')}", self.console_tail())
        if deadline is not None and time.monotonic() > deadline:
            self._kill()  # a hung guest is killed, not waited for
            raise GuestFailed(f"{what}: no answer, VM killed after its deadline", self.console_tail())

    def _panic(self) -> str | None:
        """The guest kernel's panic message, if the console shows one."""
        console = self.console_tail(200)
        found = re.search(r"Kernel panic - not syncing: ([^\r\n]*)", console)
        if found is None:
            return None
        # "Fatal exception" alone says nothing; the oops before it names the fault and where.
        lines = [m.group(1).strip() for m in _OOPS.finditer(console[: found.start()])]
        headline = next((line for line in lines if not line.startswith("RIP")), None)
        rip = next((line for line in lines if line.startswith("RIP")), None)
        oops = "; ".join(line for line in (headline, rip) if line)
        return found.group(1).strip() + (f" ({oops})" if oops else "")

    def _qemu_said(self) -> str:
        try:
            text = self.qemu_log.read_text(errors="replace").strip()
        except OSError:
            return ""
        return f": {tail(text, 3)}" if text else ""

    def _kvm_failed(self) -> bool:
        try:
            text = self.qemu_log.read_text(errors="replace")
        except OSError:
            return False
        return any(marker in text for marker in KVM_FAILURES)

    def _live_channel(self) -> _Channel:
        if self._channel is None:
            raise GuestFailed("the VM is not running", self.console_tail())
        return self._channel


class _Channel:
    """Lines over the agent's socket, with timeouts; a closed socket reads as silence."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""
        self._closed = False

    def send(self, text: str) -> None:
        self._sock.sendall(text.encode())

    def readline(self, wait: float) -> str | None:
        """One line without its end, or None when none arrived within `wait` seconds."""
        while b"\n" not in self._buffer:
            if self._closed:
                return None
            ready, _, _ = select.select([self._sock], [], [], wait)
            if not ready:
                return None
            chunk = self._sock.recv(65536)
            if not chunk:
                self._closed = True
                time.sleep(wait)  # the peer is gone; let the caller see QEMU's exit
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace").rstrip("\r")

    def close(self) -> None:
        self._sock.close()
