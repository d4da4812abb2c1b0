"""Lazy scans and streaming queries: the entry point for streaming commands."""

from __future__ import annotations

import functools
import mmap
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import polars as pl

from calib_cli.errors import InputError
from calib_cli.io.columns import naming
from calib_cli.io.dialect import (
    checked_header,
    current_dialect,
    parse_error_hint,
    refuse_one_column,
)
from calib_cli.io.formats import (
    GZIP_MAGIC,
    STDIO,
    TEXT_FORMATS,
    check_text_columns,
    checked_format,
    display_name,
    resolve_format,
)
from calib_cli.io.formats import output_format as output_format_of
from calib_cli.io.read import (
    check_exists,
    exact_types,
    holds_blank_lines,
    read_table,
    typed_columns,
    without_blank_lines,
)
from calib_cli.io.spool import readable
from calib_cli.types import InputFormat

ROW_INDEX = "__calib_row__"


def scan_table(
    path: str,
    *,
    input_format: InputFormat | None = None,
    typed: bool = False,
    text_columns: Sequence[str] = (),
) -> tuple[pl.LazyFrame, str]:
    """A lazy scan for streaming commands; returns the frame and the name for messages.

    Uncompressed files are scanned in place (memory does not grow with rows); standard input,
    ``.gz`` files and Parquet or Arrow in gzip are read first, since they cannot be scanned.
    Bytes that clearly are another format than the name or ``input_format`` says are refused
    before (:func:`~calib_cli.io.formats.checked_format`), as by :func:`read_table`.
    """
    name = display_name(path)
    check_exists(path)
    source = readable(path)  # a pipe: its copy, read as many times as needed
    head = b"" if path == STDIO else _peek(source)
    fmt = None if path == STDIO else checked_format(source, input_format, head, name=name)
    # Parquet or Arrow in gzip cannot be scanned either (polars decompresses only text)
    packed = fmt in ("parquet", "arrow") and head.startswith(GZIP_MAGIC)
    if fmt is None or source.lower().endswith(".gz") or packed:
        table = read_table(path, input_format=input_format)
        frame = table.frame
        if typed and table.format in ("csv", "tsv"):
            types = exact_types(frame.lazy(), text_columns=text_columns)
            frame = frame.with_columns(typed_columns(types))
        return frame.lazy(), table.format
    try:
        if fmt in ("csv", "tsv"):
            separator = current_dialect().read_separator(fmt)
            lazy = pl.scan_csv(source, separator=separator, infer_schema=False, null_values=[""])
            header = lazy.collect_schema().names()
            refuse_one_column(header, name)
            lazy = lazy.rename(checked_header(header, name))
            # gzip text under another name: its bytes cannot be searched, so always filter
            compressed = head.startswith(GZIP_MAGIC)
            if compressed or may_hold_blank_lines(source, separator.encode(), len(header)):
                lazy = without_blank_lines(lazy)
            if typed:  # a column whose text would not come back exactly stays text
                lazy = lazy.with_columns(
                    typed_columns(exact_types(lazy, text_columns=text_columns))
                )
        elif fmt == "parquet":
            lazy = pl.scan_parquet(source)
        elif fmt == "arrow":
            lazy = pl.scan_ipc(source)
        else:
            lazy = pl.scan_ndjson(source)
        lazy.collect_schema()
    except InputError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0]
        raise InputError(f"{name}: cannot read as {fmt.upper()}: {first_line}") from None
    return lazy, fmt


def may_hold_blank_lines(path: str, separator: bytes, n_columns: int) -> bool:
    """:func:`~calib_cli.io.read.holds_blank_lines` of the file at ``path``, mapped, not read
    into memory; searched once per file's version (a command scans a file several times)."""
    status = os.stat(path)
    version = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
    return _file_holds_blank_lines(path, version, separator, n_columns)


@functools.lru_cache(maxsize=64)
def _file_holds_blank_lines(
    path: str, version: tuple[int, ...], separator: bytes, n_columns: int
) -> bool:
    if version[2] == 0:
        return False
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return holds_blank_lines(data, separator, n_columns)


def column_schema(
    path: str, *, input_format: InputFormat | None = None
) -> Mapping[str, pl.DataType] | None:
    """The columns of ``path`` and their types, cheaply (a CSV's header, a Parquet or Arrow
    file's schema), to check options against them before any work; None for standard input
    and gzip files, whose columns are known only once they are read (a pipe: from its copy)."""
    if path == STDIO or readable(path).lower().endswith(".gz"):
        return None
    lazy, _ = scan_table(path, input_format=input_format)
    return lazy.collect_schema()


def column_names(path: str, *, input_format: InputFormat | None = None) -> list[str] | None:
    """The names of :func:`column_schema`."""
    schema = column_schema(path, input_format=input_format)
    return None if schema is None else list(schema)


def check_passthrough_columns(
    schema: Mapping[str, pl.DataType] | None,
    output: str | None,
    *,
    name: str,
    output_format: InputFormat | None = None,
) -> None:
    """Before any work: the columns of the input ``name`` (its ``schema``; None when not
    known yet), which pass through to the rows written to ``output``, can be written in its
    format (CSV and TSV hold no nested values; exit 65, naming the file and the columns).
    Inputs whose schema is known only once read are checked when written."""
    if output is None or schema is None:
        return
    fmt = output_format_of(output, output_format)
    if fmt not in TEXT_FORMATS:
        return
    with naming(name):
        check_text_columns(schema, fmt)


def _peek(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(4096)


def collect(run: Any, name: str) -> Any:
    """Run a Polars query; a failure of the data (a value that cannot be cast, say) becomes
    an InputError naming the file, not an internal error."""
    try:
        return run()
    except pl.exceptions.PolarsError as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else "error"
        hint = parse_error_hint(first_line)
        raise InputError(f"{name}: cannot read the input: {first_line}{hint}") from None


def ordered_batches(rows: pl.LazyFrame, name: str) -> Iterator[pl.DataFrame]:
    """The rows of a streaming query as data frames, in the rows' order (a failure of the data
    becomes an InputError naming ``name``, as in :func:`collect`)."""
    batches = collect(lambda: rows.collect_batches(maintain_order=True), name)
    iterator = iter(batches)
    while True:
        batch = collect(lambda: next(iterator, None), name)
        if batch is None:
            return
        yield batch


def row_count_hint(path: str, *, input_format: InputFormat | None = None) -> int | None:
    """About how many rows ``path`` holds, cheaply, to choose between the in-memory and the
    streaming engine: exact for Parquet and Arrow IPC (from their metadata), estimated from
    the file size and the first lines for CSV, TSV and NDJSON; None for standard input and
    gzip files (which are read into memory anyway)."""
    if path == STDIO:
        return None
    check_exists(path)
    path = readable(path)  # a pipe: its copy
    if path.lower().endswith(".gz"):
        return None
    head = _peek(path)
    fmt = resolve_format(path, input_format, head)
    try:
        if fmt == "parquet":
            return int(pl.scan_parquet(path).select(pl.len()).collect().item())
        if fmt == "arrow":
            return int(pl.scan_ipc(path).select(pl.len()).collect().item())
    except (pl.exceptions.PolarsError, OSError, ValueError):
        return None  # the reader will say what is wrong with the file
    lines = head.count(b"\n")
    if lines < 2:
        return lines
    size = os.path.getsize(path)
    return int(size / (len(head) / lines))
