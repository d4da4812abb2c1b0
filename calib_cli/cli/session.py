"""The session every command runs in: the consoles, and the one place where errors become exit
codes (:func:`command_session`)."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NoReturn

import typer
from rich.console import Console, RenderableType

from calib_cli.errors import CalibError, CheckFailedError, ExitCode
from calib_cli.types import JsonValue


@dataclass
class Session:
    """The consoles and switches every command shares."""

    out: Console
    err: Console
    quiet: bool
    debug: bool

    def warn(self, message: str) -> None:
        """A warning line on standard error (silenced by --quiet)."""
        if not self.quiet:
            self.err.print(f"[yellow]warning:[/yellow] {message}", highlight=False)

    def info(self, renderable: RenderableType | str) -> None:
        """Diagnostics (tables, notes) on standard error (silenced by --quiet)."""
        if not self.quiet:
            self.err.print(renderable, highlight=False)

    def result(self, renderable: RenderableType | str) -> None:
        """A report's tables on standard output (silenced by --quiet)."""
        if not self.quiet:
            self.out.print(renderable, highlight=False)


OFF_TERMINAL_WIDTH = 120


class _PipeAwareConsole(Console):
    """A Rich console that ends like other Unix tools when the reader closes the pipe (Rich's
    own handler exits 1, which a cron job would read as a failed check)."""

    def on_broken_pipe(self) -> None:
        silence_stdout()
        raise SystemExit(BROKEN_PIPE_EXIT)


def _console(*, stderr: bool, no_color: bool) -> Console:
    color_off = no_color or "NO_COLOR" in os.environ
    force = os.environ.get("FORCE_COLOR") not in (None, "", "0") and not color_off
    stream = sys.stderr if stderr else sys.stdout
    # Off a terminal (logs, files, pipes) Rich would assume 80 columns; wide tables read
    # better at 120 unless COLUMNS says otherwise.
    width = None if stream.isatty() or "COLUMNS" in os.environ else OFF_TERMINAL_WIDTH
    return _PipeAwareConsole(
        width=width,
        stderr=stderr,
        no_color=color_off,
        color_system=None if color_off else "auto",
        force_terminal=True if force else None,
        highlight=False,
        soft_wrap=False,
    )


@contextlib.contextmanager
def command_session(*, quiet: bool, no_color: bool, debug: bool) -> Iterator[Session]:
    """Run a command body, turning every failure into one line on stderr and an exit code."""
    session = Session(
        out=_console(stderr=False, no_color=no_color),
        err=_console(stderr=True, no_color=no_color),
        quiet=quiet,
        debug=debug,
    )
    try:
        yield session
    except typer.Exit:
        raise
    except CalibError as error:
        _fail(session, str(error), error.exit_code, checked=isinstance(error, CheckFailedError))
    except BrokenPipeError:
        silence_stdout()
        raise typer.Exit(BROKEN_PIPE_EXIT) from None
    except KeyboardInterrupt:
        _fail(session, "interrupted", ExitCode.INTERRUPTED)
    except OSError as error:  # writing a report or table to a full or failing stream
        _fail(
            session,
            f"cannot write the output ({error.strerror or error})",
            ExitCode.CANNOT_WRITE,
        )
    except MemoryError:
        _fail(session, "out of memory", ExitCode.INTERNAL)
    except Exception as error:  # a bug: the only case that may print a traceback
        if debug:
            session.err.print(traceback.format_exc(), markup=False, highlight=False)
        _fail(
            session,
            f"internal error: {type(error).__name__}: {error} (run with --debug for the "
            "traceback, and please report it)",
            ExitCode.INTERNAL,
        )


def _fail(session: Session, message: str, code: ExitCode, *, checked: bool = False) -> NoReturn:
    prefix = "check failed" if checked else "error"
    session.err.print(f"[red]{prefix}:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(int(code))


BROKEN_PIPE_EXIT = 141  # 128 + SIGPIPE, as other Unix tools end when `| head` closes early


def silence_stdout() -> None:
    """Downstream closed the pipe: point stdout at /dev/null so that Python's final flush
    does not print 'Exception ignored ... BrokenPipeError'."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def emit_report(
    session: Session, payload: JsonValue, *, as_json: bool, report_path: str | None
) -> None:
    """Write the JSON report to --report and, with --json, to standard output."""
    from calib_cli import io
    from calib_cli.report.payloads import dumps

    text = dumps(payload)
    if report_path is not None:
        io.write_text(report_path, text)
    if as_json:
        io.write_text(io.STDIO, text)
