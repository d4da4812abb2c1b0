"""The session every command runs in: the consoles, and the one place where errors become exit
codes (:func:`command_session`)."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console, RenderableType
from rich.markup import escape

from calib_cli import interrupts
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
            # one line whatever its length, like error lines: logs are grepped line by line
            self.err.print(
                f"[yellow]warning:[/yellow] {escape(message)}", highlight=False, soft_wrap=True
            )

    def info(self, renderable: RenderableType | str) -> None:
        """Diagnostics (tables, notes) on standard error (silenced by --quiet). A note (a
        string) is a :class:`~calib_cli.report.tables.Line`: never broken inside a word, one
        line off a terminal. Nothing is cropped to the width."""
        if not self.quiet:
            self.err.print(_renderable(renderable), highlight=False, crop=False)

    def result(self, renderable: RenderableType | str) -> None:
        """A report's tables on standard output (silenced by --quiet), rendered first and
        written as the JSON report is (:func:`calib_cli.io.write_text`): every byte, or a
        closed pipe's BrokenPipeError (exit 141). Written by the console, a pipe whose reader
        went away could take part of a long report with no error, and the command ended 0."""
        if not self.quiet:
            from calib_cli import io

            with self.out.capture() as captured:
                self.out.print(_renderable(renderable), highlight=False, crop=False)
            io.write_text(io.STDIO, captured.get())

    def progress(
        self, description: str, *, delay: float | None = None
    ) -> contextlib.AbstractContextManager[Callable[[str], None]]:
        """Progress of a long run on standard error: a spinner, the step and the time elapsed.

        Yields a callback for the workflow (``step("reading scores.parquet: 262,144 rows")``), which
        stays free of Rich. Shown only on a terminal, without --quiet, and only once the run
        has lasted ``delay`` seconds (:data:`PROGRESS_DELAY`); it disappears when the block ends::

            with session.progress("summarising scores.parquet") as step:
                result = run_reliability(request, warn=session.warn, progress=step)
        """
        if self.quiet or not self.err.is_terminal:
            return contextlib.nullcontext(_no_step)
        return _progress_display(self.err, description, PROGRESS_DELAY if delay is None else delay)


OFF_TERMINAL_WIDTH = 120

#: Seconds a run lasts before its progress is shown (short runs stay quiet).
PROGRESS_DELAY = 2.0


def _no_step(message: str) -> None:
    """The progress callback off a terminal or with --quiet: nothing."""


@contextlib.contextmanager
def _progress_display(
    console: Console, description: str, delay: float
) -> Iterator[Callable[[str], None]]:
    """A transient Rich spinner with the current step and the elapsed time, started by a
    timer after ``delay`` seconds (Polars releases the GIL while it scans, so it keeps
    turning) and stopped when the block ends."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.table import Column

    display = Progress(
        SpinnerColumn(),
        # a long step is cut with an ellipsis, never the time elapsed (80 columns, long paths)
        TextColumn(
            "{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)
        ),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        expand=True,
    )
    task = display.add_task(description, total=None)
    lock = threading.Lock()
    state = {"started": False, "done": False}

    def start() -> None:
        with lock:
            if not state["done"]:
                display.start()
                state["started"] = True

    def step(message: str) -> None:
        display.update(task, description=message)

    timer = threading.Timer(delay, start)
    timer.daemon = True
    timer.start()
    try:
        yield step
    finally:
        timer.cancel()
        with lock:
            state["done"] = True
            if state["started"]:
                display.stop()


def _renderable(renderable: RenderableType | str) -> RenderableType:
    """A note (plain text, not markup) as a :class:`~calib_cli.report.tables.Line`; a table
    as it is."""
    if isinstance(renderable, str):
        from calib_cli.report.tables import Line

        return Line(renderable, style="none")
    return renderable


class _PipeAwareConsole(Console):
    """A Rich console that ends like other Unix tools when the reader closes the pipe (Rich's
    own handler exits 1, which a cron job would read as a failed check)."""

    def on_broken_pipe(self) -> None:
        silence_stdout()
        raise SystemExit(BROKEN_PIPE_EXIT)


def drop_unusable_columns() -> None:
    """Forget a ``COLUMNS`` that is not a positive whole number.

    Some containers and CI runners set ``COLUMNS=0``; Rich (ours and Typer's help) then wraps
    every line to nothing, so reports, help and even error messages came out empty. Without
    it the width is measured on a terminal, and :data:`OFF_TERMINAL_WIDTH` off one.
    """
    raw = os.environ.get("COLUMNS")
    if raw is not None and not (raw.strip().isdigit() and int(raw) > 0):
        del os.environ["COLUMNS"]


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
    # messages are text, not markup: "calib-cli[plot]" must keep its brackets
    session.err.print(f"[red]{prefix}:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(int(code))


BROKEN_PIPE_EXIT = 141  # 128 + SIGPIPE, as other Unix tools end when `| head` closes early


def silence_stdout() -> None:
    """Downstream closed the pipe: point stdout at /dev/null so that Python's final flush
    does not print 'Exception ignored ... BrokenPipeError'."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _stdout_identity() -> tuple[int, int] | None:
    """(device, inode) of what file descriptor 1 writes to, if anything."""
    try:
        status = os.fstat(1)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _pipe_aware(body: Callable[[], int]) -> int:
    """Run ``body``; when it ends with 1 because standard output was closed outside a
    command's session (Click wraps ``sys.stdout`` in its ``PacifyFlushWrapper`` before
    exiting 1; Typer's Rich help console points stdout at /dev/null before exiting 1), end
    with 141 instead, as every command does when the reader goes away (``--help | head``)."""
    before = _stdout_identity()
    code = body()
    if code != 1:
        return code
    wrapped = type(sys.stdout).__name__ == "PacifyFlushWrapper"
    after = _stdout_identity()
    null = os.stat(os.devnull)
    pointed_at_null = after != before and after == (null.st_dev, null.st_ino)
    if wrapped or pointed_at_null:
        silence_stdout()
        return BROKEN_PIPE_EXIT
    return code


def json_on_stdout(as_json: bool, report_path: str | None) -> bool:
    """Whether the JSON report is standard output's document: ``--json``, or ``--report -``
    (the same, said another way); the human tables then stay off standard output."""
    from calib_cli.io.formats import STDIO, canonical_output

    return as_json or (report_path is not None and canonical_output(report_path) == STDIO)


def emit_report(
    session: Session, payload: JsonValue, *, as_json: bool, report_path: str | None
) -> None:
    """Write the JSON report to --report and, with --json, to standard output: once, when
    both say standard output (two documents back to back are no JSON)."""
    if report_path is None and not as_json:
        return  # nothing asked for: no JSON text to build (seconds for thousands of groups)
    from calib_cli import io
    from calib_cli.report.payloads import dumps

    text = dumps(payload)
    if report_path is not None and io.canonical_output(report_path) != io.STDIO:
        io.write_text(report_path, text)
    if json_on_stdout(as_json, report_path):
        io.write_text(io.STDIO, text)


# --------------------------------------------------------------------------------- signals

#: Exit codes of the interrupts (DESIGN.md, "Signals"): 128 + the signal's number.
INTERRUPT_EXITS: dict[int, int] = {
    signal.SIGINT: int(ExitCode.INTERRUPTED),
    signal.SIGTERM: int(ExitCode.TERMINATED),
}


def run_interruptibly(body: Callable[[], int]) -> int:
    """Run ``body`` (a whole command, returning its exit code) so that SIGINT and SIGTERM end
    the process within a fraction of a second in every phase, with no output left behind.

    The body runs on the main thread; a watcher thread waits on the signal wakeup socket,
    which the C-level signal handler writes whichever thread the kernel delivers the signal
    to. So the watcher acts at once, even while the main thread blocks on a pipe or sits in a
    long Polars or NumPy call (both release the GIL). It closes every later commit
    (:func:`calib_cli.interrupts.stop_commits`), removes the registered temporary files
    (atomic writes, and the run's scratch directory, which becomes :data:`tempfile.tempdir`),
    prints ``error: interrupted`` and ends the process with 130 (SIGINT) or 143 (SIGTERM) at
    once, without unwinding the body. Python's own handler, run on the main thread when it
    next executes bytecode, does the same; whichever comes first ends the process.

    The body stays on the main thread because Polars' streaming engine, driven from another
    thread, ran a 1e8-row reliability summary in 2.8-3.9 GB instead of 1.0 GB, and slower.

    A signal that has arrived but not yet been handled is visible to the body
    (:func:`calib_cli.interrupts.set_interrupt_probe`), so an input cut short by the same
    Ctrl-C is never written out as if complete.
    """
    if threading.current_thread() is not threading.main_thread():
        return _pipe_aware(body)
    scratch = Path(tempfile.mkdtemp(prefix="calib-"))
    interrupts.register_temporary(scratch)
    tempfile.tempdir = str(scratch)
    wakeup_reader, wakeup_writer = socket.socketpair()
    wakeup_reader.setblocking(False)
    wakeup_writer.setblocking(False)
    signal.set_wakeup_fd(wakeup_writer.fileno(), warn_on_full_buffer=False)
    arrived = threading.Event()
    ending = threading.Lock()

    def interrupt_pending() -> bool:
        if arrived.is_set():
            return True
        try:
            return bool(wakeup_reader.recv(1, socket.MSG_PEEK))
        except (BlockingIOError, OSError):
            return False

    def end(signum: int) -> NoReturn:
        arrived.set()
        ending.acquire()  # the first of the watcher and the handler ends the process
        interrupts.stop_commits()
        interrupts.remove_temporaries()
        with contextlib.suppress(OSError):
            os.write(2, b"error: interrupted\n")
        os._exit(INTERRUPT_EXITS[signum])

    def on_signal(signum: int, frame: object) -> None:
        end(signum)

    def watch() -> None:
        while True:
            select.select([wakeup_reader], [], [])
            try:
                data = wakeup_reader.recv(1, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                continue
            if data and data[0] in {int(s) for s in INTERRUPT_EXITS}:
                end(data[0])
            with contextlib.suppress(OSError):
                wakeup_reader.recv(1)  # another signal's byte: not ours to act on

    interrupts.set_interrupt_probe(interrupt_pending)
    for signum in INTERRUPT_EXITS:
        signal.signal(signum, on_signal)
    threading.Thread(target=watch, name="calib-signals", daemon=True).start()
    try:
        return _pipe_aware(body)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        interrupts.unregister_temporary(scratch)
