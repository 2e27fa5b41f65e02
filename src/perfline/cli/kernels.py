"""`perfline kernels`: the registry of kernel images the qemu target boots."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from perfline.cli.common import EXIT_FAILED, console, errors, fail
from perfline.cli.help_style import App
from perfline.cli.kexec import allow_kexec, boots, install_resume, series
from perfline.system.process import ToolMissing
from perfline.targets.kernel_build import LOG_NAME, KernelBuildFailed, build_kernel
from perfline.targets.kernels import (
    Kernel,
    KernelError,
    add_deb,
    add_image,
    kernels_dir,
    list_kernels,
)

kernels_app = App(
    help="Kernel images for `perfline run --target qemu|kexec --kernel NAME`; this machine's kexec opt-in.\n\n"
         "Example: perfline kernels add-deb linux-image-cloud-amd64",
)
kernels_app.command("allow-kexec")(allow_kexec)
kernels_app.command("install-resume")(install_resume)
kernels_app.command("boots")(boots)
kernels_app.command("series")(series)

ReplaceOption = Annotated[bool, typer.Option("--replace", help="Overwrite a kernel of that name.")]


@kernels_app.command("add")
def add(
    image: Annotated[Path, typer.Argument(help="An x86 bzImage, e.g. /boot/vmlinuz-6.12.x or arch/x86/boot/bzImage.")],
    name: Annotated[str, typer.Option(help="Name to use in jobs and --kernel.")],
    config: Annotated[
        Path | None, typer.Option(help="Its .config (default: config-RELEASE beside the image).")
    ] = None,
    modules: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            file_okay=False,
            help="Its /lib/modules/RELEASE tree: the modules a guest needs to mount a root "
            "disk (virtio, ext4) are kept, for benchmarks that need a root file system.",
        ),
    ] = None,
    replace: ReplaceOption = False,
) -> None:
    """Register a kernel image (copied into perfline's cache).

    Example: perfline kernels add /boot/vmlinuz-6.1.0-13-amd64 --name debian-6.1
    """
    try:
        kernel = add_image(image, name, config=config, modules=modules, replace=replace)
    except KernelError as exc:
        raise fail(str(exc), EXIT_FAILED) from None
    _added(kernel)


@kernels_app.command("add-deb")
def add_debian(
    package: Annotated[
        str, typer.Argument(help="A Debian kernel package, e.g. linux-image-cloud-amd64.")
    ],
    name: Annotated[
        str | None, typer.Option(help="Name to use (default: the package without linux-image-).")
    ] = None,
    replace: ReplaceOption = False,
) -> None:
    """Download a Debian kernel package with apt-get and register its image and config.

    Example: perfline kernels add-deb linux-image-cloud-amd64
    """
    try:
        kernel = add_deb(
            package,
            name,
            replace=replace,
            progress=lambda message: errors.print(f"[dim]{escape(message)}[/dim]"),
        )
    except (KernelError, ToolMissing) as exc:
        raise fail(str(exc), EXIT_FAILED) from None
    _added(kernel)


@kernels_app.command("build")
def build(
    source: Annotated[Path, typer.Argument(help="A Linux source tree, clean (built out of tree).")],
    config: Annotated[Path, typer.Option(help="The .config to build with; `make olddefconfig` fills in the rest.")],
    name: Annotated[str, typer.Option(help="Name to register the bzImage under.")],
    replace: ReplaceOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the kernel and the builds made in its directory as JSON.")] = False,
) -> None:
    """Build a source tree's bzImage with a config (ccache when installed) and register it.

    Example: perfline kernels build ~/src/linux --config my.config --name v6.7-rc1
    """
    message = f"building {escape(str(source))} with {escape(config.name)}: make olddefconfig && make bzImage"
    try:
        with errors.status(message):
            built = build_kernel(source, config, name, replace=replace)
    except KernelBuildFailed as exc:
        raise fail(str(exc), EXIT_FAILED) from None
    except KernelError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print(json.dumps({"name": built.kernel.name, "release": built.kernel.release, "seconds": built.seconds,
                          "directory": str(built.directory), "builds": built.builds}, indent=2))
        return
    errors.print(f"[dim]built in {built.seconds / 60:.1f} min; objects and {LOG_NAME} in {built.directory}[/dim]")
    _added(built.kernel)


@kernels_app.command("list")
def list_registered(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Registered kernels: name, release, where they came from.

    Example: perfline kernels list
    """
    kernels = list_kernels()
    if as_json:
        print(json.dumps([{**asdict(k.meta), "image": str(k.image)} for k in kernels], indent=2))
        return
    if not kernels:
        console.print(f"no kernels in {kernels_dir()}; add one with `perfline kernels add-deb linux-image-cloud-amd64`")
        return
    table = Table(title=f"kernels in {kernels_dir()}", title_justify="left")
    for column in ("name", "release", "source", "config", "sha256"):
        table.add_column(column, no_wrap=column in ("name", "sha256"))
    for kernel in kernels:
        meta = kernel.meta
        config = "yes" if kernel.config_path.exists() else "-"
        table.add_row(meta.name, meta.release, meta.source, config, meta.sha256[:12])
    console.print(table)


def _added(kernel: Kernel) -> None:
    console.print(f"kernel [cyan]{escape(kernel.name)}[/cyan]: {escape(kernel.release)} ({escape(kernel.meta.source)})")
