"""The Typer application: the commands registered in one place, and the entry point."""

from __future__ import annotations

import difflib
import sys
from types import SimpleNamespace
from typing import Annotated, Any, cast

import typer
import typer.main

from calib_cli import __version__
from calib_cli.allocator import tune_allocator
from calib_cli.cli import (
    estimate_shift,
    export_sql,
    recalibrate,
    reliability,
    rerank_strata,
    resample,
    show,
    summarize,
)
from calib_cli.cli.session import (
    BROKEN_PIPE_EXIT,
    drop_unusable_columns,
    run_interruptibly,
    silence_stdout,
)
from calib_cli.errors import ExitCode

HELP_OPTION_NAMES = ["-h", "--help"]

app = typer.Typer(
    name="calib",
    help=(
        "Make classifier scores trustworthy as probabilities: resample, recalibrate, "
        "estimate label shift, re-rank strata, and check reliability, from CSV, Parquet, "
        "Arrow or NDJSON files ('-' for stdin/stdout)."
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": HELP_OPTION_NAMES},
)


def _command(func: Any, epilog: str, name: str | None = None) -> None:
    """Register ``func``; its list entry is the docstring's first paragraph on one line.

    In Rich markup mode Typer keeps the docstring's line breaks in the list of commands, so
    a sentence wrapped in the source would break mid-line there.
    """
    summary = " ".join((func.__doc__ or "").split("\n\n")[0].split())
    app.command(name, epilog=epilog, short_help=summary)(func)


_command(reliability.reliability, reliability.EPILOG)
_command(resample.resample, resample.EPILOG)
_command(recalibrate.recalibrate, recalibrate.EPILOG)
_command(rerank_strata.rerank_strata, rerank_strata.EPILOG, "rerank-strata")
_command(estimate_shift.estimate_shift, estimate_shift.EPILOG, "estimate-shift")
_command(show.show, show.EPILOG)
_command(summarize.summarize, summarize.EPILOG)
_command(export_sql.export_sql, export_sql.EPILOG, "export-sql")


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"calib {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "-V",
            "--version",
            callback=_version_callback,
            is_eager=True,
            help="Print the version.",
        ),
    ] = False,
) -> None:
    """calib: classifier scores you can trust as probabilities."""


def main() -> None:
    """Console-script entry point: the command runs so that SIGINT and SIGTERM end it at once
    (:func:`~calib_cli.cli.session.run_interruptibly`), with the C allocator's large blocks
    given back when freed (:mod:`calib_cli.allocator`)."""
    tune_allocator()
    drop_unusable_columns()
    raise SystemExit(run_interruptibly(_run))


def _usage_error_type() -> type[Exception]:
    """The base class of Click's usage and file errors: Typer's own since Typer vendored Click
    (0.26.8 and later), Click's before (pyproject.toml allows both)."""
    try:
        from typer.exceptions import TyperException
    except ImportError:
        import click  # type: ignore[import-not-found, unused-ignore]

        return cast("type[Exception]", click.ClickException)
    return TyperException


def _run() -> int:
    """Run the application and return its exit code; usage errors become one line."""
    try:
        command = typer.main.get_command(app)
        hide_flag_metavars(command)
        returned = command.main(standalone_mode=False, prog_name="calib")
    except _usage_error_type() as error:  # Click's usage errors and file errors
        if type(error).__name__ == "NoArgsIsHelpError":  # `calib` alone: the help was shown
            return int(ExitCode.USAGE)
        code = int(getattr(error, "exit_code", ExitCode.USAGE))
        sys.stderr.write(f"error: {one_line_error(error)}\n")
        return code
    except typer.Abort:
        sys.stderr.write("error: interrupted\n")
        return int(ExitCode.INTERRUPTED)
    except SystemExit as done:
        return _exit_code(done.code)
    except BrokenPipeError:
        silence_stdout()
        return BROKEN_PIPE_EXIT
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return int(ExitCode.INTERRUPTED)
    return returned if isinstance(returned, int) else 0


def hide_flag_metavars(command: Any) -> None:
    """Flags take no value: show none in --help (Typer would print ``<bool>``)."""
    names = SimpleNamespace(help_option_names=HELP_OPTION_NAMES)
    help_option = command.get_help_option(names)  # created once and cached by the command
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for child in getattr(command, "commands", {}).values():
        hide_flag_metavars(child)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1


def one_line_error(error: Exception) -> str:
    """A usage error in one line, naming the subcommand and the closest option
    (instead of Rich's boxed usage, hint and message)."""
    option = getattr(error, "option_name", None)
    possibilities = getattr(error, "possibilities", None)
    message = str(getattr(error, "message", error))
    if not possibilities and hasattr(error, "format_message"):
        message = str(error.format_message())
    context = getattr(error, "ctx", None)
    command = context.command_path if context is not None else "calib"
    known = list(possibilities or [])
    if option and context is not None:
        known = [
            name for param in context.command.params for name in param.opts if name[:2] == "--"
        ]
    return usage_line(message, command=command, option=option, possibilities=known)


def usage_line(
    message: str, *, command: str, option: str | None = None, possibilities: list[str]
) -> str:
    """One line for a usage error: the subcommand, the message, the closest option.

    >>> usage_line("No such option: --scor-col", command="calib reliability",
    ...            option="--scor-col", possibilities=["--no-color", "--score-col"])
    'calib reliability: no such option: --scor-col (did you mean --score-col?)'
    >>> usage_line("Missing argument 'FILE'.", command="calib", possibilities=[])
    "missing argument 'FILE'."
    """
    text = " ".join(message.split())
    text = text.replace("Value error, ", "")  # Typer's wording of a bad choice
    text = text[:1].lower() + text[1:] if text[1:2].islower() else text
    if option and possibilities:
        closest = sorted(name for name in possibilities if name.startswith(option))[:2]
        closest = closest or difflib.get_close_matches(option, possibilities, n=1, cutoff=0.6)
        if closest:
            text += f" (did you mean {' or '.join(closest)}?)"
    prefix = f"{command}: " if command != "calib" else ""
    return prefix + text
