"""Streaming sinks: a lazy query written atomically, memory not growing with rows."""

from __future__ import annotations

import contextlib
import gzip
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import polars as pl

from calib_cli.errors import InputError, OutputError
from calib_cli.interrupts import committing, new_temporary_directory, remove_temporary
from calib_cli.io.dialect import current_dialect, parse_error_hint
from calib_cli.io.formats import (
    STDIO,
    canonical_output,
    check_text_columns,
    is_stream,
    output_format,
)
from calib_cli.io.write import atomic_destination, write_all
from calib_cli.types import InputFormat


def sink_table(
    lazy: pl.LazyFrame, path: str, *, output_format_override: InputFormat | None
) -> None:
    """Stream a lazy query to ``path`` atomically (or to stdout via a temporary file), so
    memory does not grow with rows and a failure leaves no partial file."""
    path = canonical_output(path)
    fmt = output_format(path, output_format_override)
    check_text_columns(lazy.collect_schema(), fmt)
    compress = path != STDIO and path.lower().endswith(".gz") and fmt in ("csv", "tsv", "ndjson")
    if path == STDIO or is_stream(path):
        with tempfile.TemporaryDirectory() as scratch:
            temporary = Path(scratch) / "out"
            _sink(lazy, temporary, fmt, compress=compress)
            _copy_out(temporary, path)
        return
    with atomic_destination(path) as temporary:
        _sink(lazy, temporary, fmt, compress=compress)


def _copy_out(source: Path, path: str) -> None:
    """Copy a finished temporary file to stdout or a stream, in chunks, as one commit (an
    interrupt either waits for it or stops it before the first byte). A reader that closes
    the pipe early ends the copy with BrokenPipeError (the session's exit 141)."""
    try:
        with committing():
            if path == STDIO:
                sys.stdout.flush()
                destination = sys.stdout.buffer
                with open(source, "rb") as handle:
                    while chunk := handle.read(1 << 20):
                        write_all(destination, chunk)
                destination.flush()
            else:
                with open(source, "rb") as handle, open(path, "wb") as out:
                    while chunk := handle.read(1 << 20):
                        write_all(out, chunk)
    except BrokenPipeError:
        raise
    except OSError as error:
        name = "stdout" if path == STDIO else path
        raise OutputError(f"{name}: cannot write ({error.strerror or error})") from None


@contextlib.contextmanager
def _scratch(directory: Path) -> Iterator[Path]:
    """A scratch directory beside the destination (NDJSON is sunk there, then gzipped),
    registered so that an interrupted run removes it, and removed when the block ends."""
    scratch = new_temporary_directory(directory, prefix=".calib-")
    try:
        yield scratch
    finally:
        remove_temporary(scratch)


def _sink(lazy: pl.LazyFrame, path: Path, fmt: InputFormat, *, compress: bool) -> None:
    dialect = current_dialect()
    try:
        if fmt in ("csv", "tsv"):
            lazy.sink_csv(
                path,
                separator=dialect.write_separator(fmt),
                decimal_comma=dialect.decimal_comma,
                check_extension=False,
                compression="gzip" if compress else "uncompressed",
            )
        elif fmt == "parquet":
            lazy.sink_parquet(path, statistics=False)
        elif fmt == "arrow":
            lazy.sink_ipc(path)
        elif compress:  # Polars cannot gzip NDJSON while sinking: sink, then compress
            with _scratch(path.parent) as scratch:
                plain = scratch / "plain.ndjson"
                lazy.sink_ndjson(plain)
                with (
                    open(plain, "rb") as source,
                    open(path, "wb") as raw,
                    gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as target,
                ):
                    while chunk := source.read(1 << 20):
                        target.write(chunk)
        else:
            lazy.sink_ndjson(path)
    except pl.exceptions.PolarsError as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else "error"
        hint = parse_error_hint(first_line)  # the caller names the file (io.naming)
        raise InputError(f"cannot stream the input: {first_line}{hint}") from None


def sink_collecting(
    lazy: pl.LazyFrame,
    path: str,
    *,
    output_format_override: InputFormat | None,
    queries: Sequence[pl.LazyFrame],
    name: str,
) -> list[pl.DataFrame]:
    """Like :func:`sink_table`, and collect ``queries`` (figures of the rows written), each in
    its own streaming pass after the sink: one shared pass would run the common scan once,
    but Polars' multiplexer buffers for its slowest consumer without bound, so memory would
    grow with rows. Returns the collected ``queries``; nothing is written on failure."""
    path = canonical_output(path)
    fmt = output_format(path, output_format_override)
    check_text_columns(lazy.collect_schema(), fmt)
    compress = path != STDIO and path.lower().endswith(".gz") and fmt in ("csv", "tsv", "ndjson")
    if path == STDIO or is_stream(path):
        with tempfile.TemporaryDirectory() as scratch:
            temporary = Path(scratch) / "out"
            frames = _sink_with(lazy, temporary, fmt, compress=compress, queries=queries, name=name)
            _copy_out(temporary, path)
        return frames
    with atomic_destination(path) as temporary:
        return _sink_with(lazy, temporary, fmt, compress=compress, queries=queries, name=name)


def _sink_with(
    lazy: pl.LazyFrame,
    path: Path,
    fmt: InputFormat,
    *,
    compress: bool,
    queries: Sequence[pl.LazyFrame],
    name: str,
) -> list[pl.DataFrame]:
    if fmt == "ndjson" and compress:  # Polars cannot gzip NDJSON while sinking
        with _scratch(path.parent) as scratch:
            plain = scratch / "plain.ndjson"
            return _sink_collect(lazy, path, plain, fmt, compress=True, queries=queries, name=name)
    return _sink_collect(lazy, path, path, fmt, compress=compress, queries=queries, name=name)


def _sink_collect(
    lazy: pl.LazyFrame,
    path: Path,
    plain: Path,
    fmt: InputFormat,
    *,
    compress: bool,
    queries: Sequence[pl.LazyFrame],
    name: str,
) -> list[pl.DataFrame]:
    """Sink ``lazy`` to ``plain`` (gzipped into ``path`` when they differ), then collect
    ``queries`` one pass each."""
    dialect = current_dialect()
    if fmt in ("csv", "tsv"):
        sink = lazy.sink_csv(
            plain,
            separator=dialect.write_separator(fmt),
            decimal_comma=dialect.decimal_comma,
            check_extension=False,
            compression="gzip" if compress else "uncompressed",
            lazy=True,
        )
    elif fmt == "parquet":
        sink = lazy.sink_parquet(plain, statistics=False, lazy=True)
    elif fmt == "arrow":
        sink = lazy.sink_ipc(plain, lazy=True)
    else:
        sink = lazy.sink_ndjson(plain, lazy=True)
    try:
        # One streaming pass per query, not one shared pass: a shared pass feeds the scan to
        # every consumer through Polars' multiplexer, which buffers morsels without bound for
        # the slowest consumer (a summary's group-by), so memory grew with the rows (~2 GiB
        # at 1e8 rows); separate passes re-read the input but keep memory flat.
        sink.collect(engine="streaming")
        frames = [query.collect(engine="streaming") for query in queries]
    except pl.exceptions.PolarsError as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else "error"
        hint = parse_error_hint(first_line)
        raise InputError(f"{name}: cannot stream the input: {first_line}{hint}") from None
    if plain != path:
        with (
            open(plain, "rb") as source,
            open(path, "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as target,
        ):
            while chunk := source.read(1 << 20):
                target.write(chunk)
    return frames
