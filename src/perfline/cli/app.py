import typer

app = typer.Typer(no_args_is_help=True)


@app.command()
def version() -> None:
    """Print the version."""
    from perfline import __version__

    print(__version__)
