"""Summary files: a :class:`~calib_cli.summaries.ScoreSummary` as Parquet or JSON, atomically.

Parquet (any name but ``*.json``): the summary's rows as columns, its metadata as JSON under
the key-value metadata key ``calib.summary`` (the format of :mod:`calib_cli.summaries`). JSON
(``*.json``): :meth:`ScoreSummary.to_json`. Reading validates every field and names the file.
"""

from __future__ import annotations

import io as _bytes_io
import json
import sys
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from calib_cli.errors import InputError
from calib_cli.io.columns import naming
from calib_cli.io.formats import STDIO, canonical_output, display_name
from calib_cli.io.read import check_exists
from calib_cli.io.write import write_bytes

if TYPE_CHECKING:  # the summaries load SciPy: imported when a summary is read
    from calib_cli.summaries import ScoreSummary

__all__ = ["SUMMARY_METADATA_KEY", "read_summary", "summary_format", "write_summary"]

#: The Parquet key-value metadata key holding the summary's metadata (JSON).
SUMMARY_METADATA_KEY = "calib.summary"
#: The column that holds the same JSON in summaries computed by a SQL engine
#: (``calib summarize --emit-sql``), where no key-value metadata can be written.
SUMMARY_METADATA_COLUMN = "calib_summary"


def summary_format(path: str) -> str:
    """``json`` for ``*.json``, else ``parquet`` (also on standard output)."""
    return "json" if canonical_output(path).lower().endswith(".json") else "parquet"


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
    """Read and validate a summary file (format by its first bytes); errors name the file."""
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


def _from_parquet(raw: bytes) -> ScoreSummary:
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
            raise InputError(
                "holds no rows, so no summary metadata: the query that wrote it found no rows "
                "(an empty table, or a day without data?); leave the file out"
            )
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
