"""The Typer application: the commands registered in one place, and the entry point."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from calib_cli import __version__
from calib_cli.cli import estimate_shift, recalibrate, reliability, rerank_strata, resample
from calib_cli.cli.session import BROKEN_PIPE_EXIT, silence_stdout
from calib_cli.errors import ExitCode

app = typer.Typer(
    name="calib",
    help=(
        "Make classifier scores trustworthy as probabilities: resample, recalibrate, "
        "estimate label shift, re-rank strata, and check reliability, from CSV, Parquet, "
        "Arrow or NDJSON files ('-' for stdin/stdout)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


app.command(epilog=reliability.EPILOG)(reliability.reliability)
app.command(epilog=resample.EPILOG)(resample.resample)
app.command(epilog=recalibrate.EPILOG)(recalibrate.recalibrate)
app.command("rerank-strata", epilog=rerank_strata.EPILOG)(rerank_strata.rerank_strata)
app.command("estimate-shift", epilog=estimate_shift.EPILOG)(estimate_shift.estimate_shift)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"calib {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """calib: classifier scores you can trust as probabilities."""


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except BrokenPipeError:
        silence_stdout()
        raise SystemExit(BROKEN_PIPE_EXIT) from None
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(int(ExitCode.INTERRUPTED)) from None
