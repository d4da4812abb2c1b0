"""Summary files: a :class:`~calib_cli.summaries.ScoreSummary` as Parquet or JSON, atomically.

Parquet (``*.parquet``, ``*.pq``, standard output, a pipe): the summary's rows as columns, its
metadata as JSON under the key-value metadata key ``calib.summary`` (the format of
:mod:`calib_cli.summaries`). JSON (``*.json``): :meth:`ScoreSummary.to_json`. Other names are
refused before any work (:func:`summary_format`). Reading validates every field and names the
file; a SQL engine's result of no rows, which holds no metadata, is told apart
(:func:`read_summary_part`).
"""

from __future__ import annotations

import io as _bytes_io
import json
import sys
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from calib_cli.errors import InputError, UsageError
from calib_cli.io.columns import naming
from calib_cli.io.formats import STDIO, canonical_output, display_name, is_stream
from calib_cli.io.read import check_exists
from calib_cli.io.write import write_bytes

if TYPE_CHECKING:  # the summaries load SciPy: imported when a summary is read
    from calib_cli.summaries import ScoreSummary

__all__ = [
    "SUMMARY_EXTENSIONS",
    "SUMMARY_METADATA_KEY",
    "read_summary",
    "read_summary_part",
    "summary_format",
    "write_summary",
]

#: The Parquet key-value metadata key holding the summary's metadata (JSON).
SUMMARY_METADATA_KEY = "calib.summary"
#: The column that holds the same JSON in summaries computed by a SQL engine
#: (``calib summarize --emit-sql``), where no key-value metadata can be written.
SUMMARY_METADATA_COLUMN = "calib_summary"
#: The extensions of summary files, and the format each is written in.
SUMMARY_EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".json": "json"}
#: Why an engine's result of no rows is not a summary (:func:`read_summary`).
NO_ROWS_NO_METADATA = (
    "holds no rows, so no summary metadata: the query that wrote it found no rows "
    "(an empty table, or a day without data?); leave the file out"
)


def summary_format(path: str) -> str:
    """The format a summary is written in at ``path``: ``json`` for ``*.json``; ``parquet``
    for ``*.parquet`` and ``*.pq``, standard output and streams (a pipe, a device). Any other
    name is refused (exit 2): a summary written as Parquet under ``day.csv`` or
    ``day.json.gz`` is read by nothing that trusts the extension.

    >>> summary_format("day.parquet"), summary_format("day.JSON"), summary_format("-")
    ('parquet', 'json', 'parquet')
    >>> summary_format("day.csv")
    Traceback (most recent call last):
    ...
    calib_cli.errors.UsageError: day.csv: a summary is written as Parquet (.parquet, .pq) or \
JSON (.json), not .csv: end the -o name in one of them ('-': Parquet on standard output)
    """
    target = canonical_output(path)
    if target == STDIO or is_stream(target):
        return "parquet"
    suffix = PurePath(target).suffix.lower()
    if suffix in SUMMARY_EXTENSIONS:
        return SUMMARY_EXTENSIONS[suffix]
    ending = f"not {suffix}" if suffix else "and the name has no extension"
    raise UsageError(
        f"{path}: a summary is written as Parquet (.parquet, .pq) or JSON (.json), {ending}: "
        "end the -o name in one of them ('-': Parquet on standard output)"
    )


def summary_bytes(summary: ScoreSummary, fmt: str) -> bytes:
    """The bytes of a summary file in ``fmt`` (``parquet`` or ``json``)."""
    if fmt == "json":
        return (summary.to_json() + "\n").encode("utf-8")
    columns = summary.to_columns()
    frame = pl.DataFrame(
        {
            name: pl.Series(name, values.tolist(), dtype=pl.String)
            if name == "group"
            else pl.Series(name, values)
            for name, values in columns.items()
        }
    )
    # NaN minima and maxima (no row of positive weight) are stored as nulls
    frame = frame.with_columns(
        pl.col(c).fill_nan(None) for c in ("weight_min", "score_min", "score_max")
    )
    buffer = _bytes_io.BytesIO()
    frame.write_parquet(
        buffer,
        statistics=False,
        metadata={SUMMARY_METADATA_KEY: json.dumps(summary.metadata(), allow_nan=False)},
    )
    return buffer.getvalue()


def write_summary(summary: ScoreSummary, path: str) -> None:
    """Write a summary atomically (Parquet, or JSON for ``*.json``; ``-``: standard output)."""
    write_bytes(path, summary_bytes(summary, summary_format(path)))


def read_summary(path: str) -> ScoreSummary:
    """Read and validate a summary file (format by its first bytes); errors name the file.

    A SQL engine's result of no rows (no metadata: :func:`read_summary_part`) is refused."""
    summary = read_summary_part(path)
    if summary is None:
        raise InputError(f"{display_name(path)}: {NO_ROWS_NO_METADATA}")
    return summary


def read_summary_part(path: str) -> ScoreSummary | None:
    """:func:`read_summary`, but None for a file a SQL engine wrote from no rows (the summary
    query of ``summarize --emit-sql`` on an empty table or partition: a Parquet file with the
    summary's columns, no rows, so no metadata), which a reader of several files leaves out.
    A file of no rows that holds the metadata (calib's own, or DuckDB's with ``KV_METADATA``)
    is a summary of no rows, read as any other."""
    name = display_name(path)
    check_exists(path)
    if path == STDIO:
        raw = sys.stdin.buffer.read()
    else:
        with open(path, "rb") as handle:
            raw = handle.read()
    from calib_cli.summaries import ScoreSummary

    with naming(name):
        if raw[:4] == b"PAR1":
            return _from_parquet(raw)
        if raw.lstrip()[:1] == b"{":
            return ScoreSummary.from_json(raw.decode("utf-8", errors="replace"))
        raise InputError(
            "not a calib summary (neither Parquet nor JSON; `calib summarize` writes them, and "
            "a file of rows is read without the summary options)"
        )


def _from_parquet(raw: bytes) -> ScoreSummary | None:
    from calib_cli.summaries import ScoreSummary

    try:
        metadata = pl.read_parquet_metadata(_bytes_io.BytesIO(raw))
        frame = pl.read_parquet(_bytes_io.BytesIO(raw))
    except (pl.exceptions.PolarsError, OSError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else "error"
        raise InputError(f"cannot read as Parquet: {first_line}") from None
    text = metadata.get(SUMMARY_METADATA_KEY)
    if SUMMARY_METADATA_COLUMN in frame.columns:
        values = frame[SUMMARY_METADATA_COLUMN].unique().to_list()
        if text is None and not values:
            return None
        if text is None and len(values) == 1 and isinstance(values[0], str):
            text = values[0]
        elif text is None or len(values) > 1:
            raise InputError(
                f"column '{SUMMARY_METADATA_COLUMN}' must hold one metadata value, "
                f"found {len(values)}"
            )
        frame = frame.drop(SUMMARY_METADATA_COLUMN)
    if text is None:
        raise InputError(
            f"not a calib summary (no '{SUMMARY_METADATA_KEY}' metadata; "
            "write one with calib summarize)"
        )
    try:
        meta: Any = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"metadata '{SUMMARY_METADATA_KEY}' is not valid JSON: {error}") from None
    if not isinstance(meta, dict):
        raise InputError(f"metadata '{SUMMARY_METADATA_KEY}' must be a JSON object")
    if "group" not in frame.columns:
        raise InputError("the summary lacks the column(s) group")
    columns: dict[str, Any] = {}
    for name in frame.columns:
        series = frame[name]
        if name == "group":
            columns[name] = np.array([*series.cast(pl.String).to_list(), None], dtype=object)[:-1]
        elif series.dtype.is_float() or series.null_count():
            try:
                columns[name] = series.cast(pl.Float64).fill_null(np.nan).to_numpy()
            except pl.exceptions.PolarsError:
                raise InputError(f"summary column {name!r} is not numeric") from None
        else:
            columns[name] = series.to_numpy()
    return ScoreSummary.from_columns(columns, meta)
