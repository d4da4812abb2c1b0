"""Streaming ``estimate-shift``: a file read in chunks of exactly N rows, and the row-wise
second pass (scan -> map -> sink).

Chunks are :class:`~calib_cli.io.table.Table` objects holding a slice of the file, whose
``row_numbers`` are the file's rows, so the column rules and messages are those of the
in-memory engine (a chunk's message counts the rows of that chunk: :func:`whole_columns`
re-reads the columns concerned to give the whole file's count). Chunks of a fixed size let the
core count rows in the same chunks as the in-memory engine, so the sums agree bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, cast

import numpy as np
import polars as pl

from calib_cli.errors import InputError, UsageError
from calib_cli.io.dialect import current_dialect, using_dialect
from calib_cli.io.formats import display_name
from calib_cli.io.scan import collect, scan_table
from calib_cli.io.sink import sink_table
from calib_cli.io.table import Table
from calib_cli.types import InputFormat


def _present(lazy: pl.LazyFrame, columns: Sequence[str]) -> list[str]:
    schema = lazy.collect_schema()
    return [c for c in dict.fromkeys(columns) if c in schema]


def scan_chunks(
    path: str,
    *,
    columns: Sequence[str],
    chunk_rows: int,
    required: Sequence[str] = (),
    input_format: InputFormat | None = None,
    typed: bool = False,
) -> Iterator[Table]:
    """The file's ``columns`` (those it has) in chunks of exactly ``chunk_rows`` rows (the
    last one shorter; one empty chunk for an empty file), in file order, memory not growing
    with rows. Without one of the ``required`` columns, a single empty chunk with every column
    of the file, so that the Table's rules name the missing column and list the file's."""
    lazy, fmt_text = scan_table(path, input_format=input_format, typed=typed)
    fmt = cast(InputFormat, fmt_text)
    name = display_name(path)
    wanted = _present(lazy, columns)
    schema = lazy.collect_schema()
    if not wanted or any(column not in schema for column in required):
        yield Table(pl.DataFrame(schema=schema), name, fmt)
        return
    selected = lazy.select(wanted)
    pending: list[pl.DataFrame] = []
    held = 0
    offset = 0

    def table(frame: pl.DataFrame) -> Table:
        nonlocal offset
        start = offset
        offset += frame.height
        return Table(frame, name, fmt, row_numbers=range(start, offset))

    batches = collect(
        lambda: selected.collect_batches(chunk_size=chunk_rows, maintain_order=True), name
    )
    iterator = iter(batches)
    while True:
        batch = collect(lambda: next(iterator, None), name)
        if batch is None:
            break
        pending.append(batch)
        held += batch.height
        while held >= chunk_rows:
            frame = pl.concat(pending, rechunk=True) if len(pending) > 1 else pending[0]
            yield table(frame.slice(0, chunk_rows))
            rest = frame.slice(chunk_rows)
            pending, held = ([rest] if rest.height else []), rest.height
    if held or offset == 0:
        frame = (
            pl.concat(pending, rechunk=True)
            if pending
            else pl.DataFrame(schema=selected.collect_schema())
        )
        yield table(frame)


def whole_columns(
    path: str,
    *,
    columns: Sequence[str],
    input_format: InputFormat | None = None,
    typed: bool = False,
) -> Table:
    """The file's ``columns`` read whole (only to word an error with the whole file's count)."""
    lazy, fmt_text = scan_table(path, input_format=input_format, typed=typed)
    fmt = cast(InputFormat, fmt_text)
    name = display_name(path)
    wanted = _present(lazy, columns)
    frame = collect(lambda: lazy.select(wanted).collect(engine="streaming"), name)
    return Table(frame, name, fmt)


def sink_mapped(
    path: str,
    output: str,
    *,
    added: Sequence[tuple[str, Literal["float", "int"], Sequence[str], Callable[[Table], Any]]],
    input_format: InputFormat | None = None,
    output_format: InputFormat | None = None,
    typed: bool = False,
) -> None:
    """Stream ``path`` to ``output`` with columns appended: each ``(name, kind, inputs,
    function)`` maps a chunk (a Table of the ``inputs`` columns, which may be columns added
    before it) to the new column's values (float64 or int64). Row order and every
    input column are kept; written atomically."""
    lazy, fmt_text = scan_table(path, input_format=input_format, typed=typed)
    fmt = cast(InputFormat, fmt_text)
    name = display_name(path)
    schema = lazy.collect_schema()
    for column, _, _, _ in added:
        if column in schema:
            raise UsageError(f"{name} already has a column '{column}'; choose another output name")

    dialect = current_dialect()  # Polars calls the mappers on threads of its own

    def mapper(function: Callable[[Table], Any], dtype: type[np.generic]) -> Any:
        def run(series: pl.Series) -> pl.Series:
            frame = series.struct.unnest()
            with using_dialect(dialect):
                values = function(Table(frame, name, fmt))
            return pl.Series(np.asarray(values, dtype=dtype))

        return run

    mapped = lazy
    for column, kind, inputs, function in added:
        mapped = mapped.with_columns(
            pl.struct(list(inputs))
            .map_batches(
                mapper(function, np.float64 if kind == "float" else np.int64),
                return_dtype=pl.Float64 if kind == "float" else pl.Int64,
                is_elementwise=True,
            )
            .alias(column)
        )
    try:
        sink_table(mapped, output, output_format_override=output_format)
    except InputError as error:
        raise InputError(f"{name}: {error}") from None
