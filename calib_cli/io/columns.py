"""Column rules: numbers, labels (eager and as Polars expressions), file-named errors."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl

from calib_cli.core.checks import (
    FALSE_LABEL_TEXT,
    POSITIVE_LABEL_HINT,
    TRUE_LABEL_TEXT,
    bad_values_message,
)
from calib_cli.errors import InputError
from calib_cli.io.dialect import number_text
from calib_cli.types import FloatArray

_FIRST_ROW = re.compile(r"(first at row )(\d+)")


@contextlib.contextmanager
def naming(name: str, *, rows: Any = None) -> Iterator[None]:
    """Prefix InputErrors raised inside with the file's name (core errors do not know it).

    ``rows`` maps the rows of a filtered table back to the file's 0-based rows, so that
    "first at row N" names the row of the file, not of what was left after dropping rows.
    """
    try:
        yield
    except InputError as error:
        message = str(error)
        if rows is not None:
            message = _FIRST_ROW.sub(
                lambda m: f"{m.group(1)}{int(rows[int(m.group(2)) - 1]) + 1}", message
            )
        if not message.startswith(f"{name}: "):
            message = f"{name}: {message}"
        if message == str(error):
            raise
        raise type(error)(message) from None


def as_float(series: pl.Series, name: str) -> FloatArray:
    """A column as float64 with nulls as NaN, refusing text that is not a number."""
    if series.dtype == pl.Boolean:
        return series.cast(pl.Float64).fill_null(np.nan).to_numpy().astype(np.float64)
    if series.dtype.is_numeric():
        return series.cast(pl.Float64).fill_null(np.nan).to_numpy().astype(np.float64)
    if series.dtype == pl.String:
        stripped = series.to_frame("text").select(number_text(pl.col("text")))["text"]
        converted = stripped.cast(pl.Float64, strict=False)
        not_numbers = (converted.is_null() & stripped.is_not_null() & (stripped != "")).to_numpy()
        if not_numbers.any():
            raise InputError(
                f"{name}: "
                + bad_values_message(
                    series.name, "that are not numbers", not_numbers, series.to_numpy()
                )
            )
        return converted.fill_null(np.nan).to_numpy().astype(np.float64)
    raise InputError(f"{name}: column '{series.name}' has type {series.dtype}, not numbers")


def _as_number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_labels(
    series: pl.Series, column: str, positive_label: str | None, *, missing_ok: bool = False
) -> FloatArray:
    """Labels as 0.0/1.0 by the rules of :func:`positive_label_expr` (shared with streaming
    ``resample`` and ``--on-invalid drop``), refusing missing or unreadable values.

    With ``missing_ok`` (a target's labels, which arrive late), a missing value
    (:func:`label_missing`: null, NaN, empty text) is NaN in the result instead of an error,
    whatever ``positive_label`` says; values present are checked as without it.

    >>> parse_labels(pl.Series("y", [1.0, None, float("nan"), 0.0]), "y", None, missing_ok=True)
    array([ 1., nan, nan,  0.])
    >>> parse_labels(pl.Series("y", ["ok", "", "fraud"]), "y", "fraud", missing_ok=True)
    array([ 0., nan,  1.])
    """
    missing = (
        series.to_frame(column)
        .select(label_missing(column, series.dtype).fill_null(True))[:, 0]
        .to_numpy()
    )
    if missing.any() and not missing_ok:
        raise InputError(bad_values_message(column, "missing", missing, series.to_numpy()))
    is_positive, is_valid = positive_label_expr(column, series.dtype, positive_label)
    flags = series.to_frame(column).select(
        is_positive.fill_null(False).alias("positive"), is_valid.fill_null(False).alias("valid")
    )
    invalid = ~flags["valid"].to_numpy() & ~missing
    if invalid.any():
        problem = label_problem(series.dtype)
        raise InputError(
            bad_values_message(column, problem, invalid, series.to_numpy()) + POSITIVE_LABEL_HINT
        )
    positive = flags["positive"].to_numpy()
    if positive_label is not None:
        present = series.filter(pl.Series(~missing)) if missing.any() else series
        _require_two_values(present, column, positive_label, bool(positive[~missing].any()))
    labels = positive.astype(np.float64)
    labels[missing] = np.nan
    return labels


def label_missing(column: str, dtype: pl.DataType) -> pl.Expr:
    """Where a label is missing: null, NaN, or text that is empty or ``NaN`` (as a CSV writer
    writes a missing float). Every reader of labels, in memory and streaming, refuses these
    as "missing" (a NaN was read as a negative with ``--positive-label 1``), except a target's,
    whose labels may arrive late (:meth:`~calib_cli.io.table.Table.partial_labels`).

    >>> frame = pl.DataFrame({"y": [1.0, None, float("nan"), 0.0], "t": ["1", " ", None, "NaN"]})
    >>> frame.select(label_missing("y", pl.Float64), label_missing("t", pl.String)).rows()
    [(False, False), (True, True), (True, True), (False, True)]
    """
    col = pl.col(column)
    missing = col.is_null()
    if dtype == pl.String:
        text = col.str.strip_chars()
        missing = missing | (text == "") | (text.str.to_lowercase() == "nan")
    elif dtype.is_float():
        missing = missing | col.is_nan()
    return missing


def present_label_text(column: str, dtype: pl.DataType) -> pl.Expr:
    """The trimmed text of the labels that are there (:func:`label_missing` left out): what
    the two-values check of ``--positive-label`` counts in a streaming pass (an empty field
    or a NaN counted as a third value, where it is a missing label).

    >>> frame = pl.DataFrame({"y": [" 1", "", None, "NaN", "0"]})
    >>> frame.select(present_label_text("y", pl.String))["y"].to_list()
    ['1', '0']
    """
    text = pl.col(column).cast(pl.String).str.strip_chars()
    return text.filter(~label_missing(column, dtype).fill_null(True))


def unlabelled_target_message(name: str, column: str, rows: int) -> str:
    """The warning of a target whose label column holds no label (every value missing): it
    is taken as a target without labels.

    >>> unlabelled_target_message("t.csv", "label", 5000)
    "t.csv: column 'label' has no labels (all 5,000 missing): the target is taken as unlabeled"
    """
    return (
        f"{name}: column '{column}' has no labels (all {rows:,} missing): "
        "the target is taken as unlabeled"
    )


def label_problem(dtype: pl.DataType) -> str:
    """What a label that is present but not a label is, as every reader words it."""
    return "that are not 0 or 1" if dtype.is_numeric() else "that are not 0/1 or true/false"


def _require_two_values(
    series: pl.Series, column: str, positive_label: str, any_positive: bool
) -> None:
    """With --positive-label, a label column takes two values, one of them the positive."""
    distinct = series.cast(pl.String).str.strip_chars().unique()
    shown = distinct.sort().head(5).to_list()
    check_label_values(column, distinct.len(), shown, any_positive, positive_label)


def check_label_values(
    column: str,
    count: int,
    shown: list[str],
    any_positive: bool,
    positive_label: str,
    *,
    name: str | None = None,
) -> None:
    """The rule of every reader for a label column read with --positive-label: ``count``
    distinct values (the first five sorted in ``shown``) are at most two, and with two, one
    of them is the positive (a typo or the wrong case would make every row a negative). With
    one value only, every row is of one class, which a batch may be.

    >>> check_label_values("y", 3, ["a", "b", "c"], True, "a", name="t.csv")
    Traceback (most recent call last):
    ...
    calib_cli.errors.InputError: t.csv: column 'y' has 3 distinct values ('a', 'b', 'c'); \
labels must take two values
    >>> check_label_values("y", 2, ["fraud", "ok"], False, "Fraud")
    Traceback (most recent call last):
    ...
    calib_cli.errors.InputError: column 'y' never equals --positive-label 'Fraud'
    """
    where = f"{name}: " if name is not None else ""
    if count > 2:
        listed = ", ".join(repr(value) for value in shown) + (", ..." if count > len(shown) else "")
        raise InputError(
            f"{where}column '{column}' has {count} distinct values ({listed}); "
            "labels must take two values"
        )
    if count == 2 and not any_positive:
        raise InputError(
            f"{where}column '{column}' never equals --positive-label {positive_label!r}"
        )


def positive_label_expr(
    column: str, dtype: pl.DataType, positive_label: str | None
) -> tuple[pl.Expr, pl.Expr]:
    """Polars expressions (is positive, is a valid label) with the rules of
    :meth:`Table.labels`, for streaming where the whole column is never in memory."""
    col = pl.col(column)
    present = col.is_not_null()
    if positive_label is not None:
        if dtype.is_numeric():
            try:
                target = float(positive_label)
            except ValueError:
                raise InputError(
                    f"column '{column}' is numeric but --positive-label is {positive_label!r}"
                ) from None
            return col.cast(pl.Float64) == target, present
        text = col.cast(pl.String).str.strip_chars()
        numeric = _as_number(positive_label)
        if numeric is not None:
            # numeric text compares as numbers ("1.0" matches "1"); other text as text
            as_number = text.cast(pl.Float64, strict=False)
            matches = pl.when(as_number.is_not_null()).then(as_number == numeric)
            return matches.otherwise(text == positive_label.strip()), present & (text != "")
        return text == positive_label.strip(), present & (text != "")
    if dtype == pl.Boolean:
        return col, present
    if dtype.is_numeric():
        value = col.cast(pl.Float64)
        return value == 1.0, present & ((value == 0.0) | (value == 1.0))
    text = col.cast(pl.String).str.strip_chars().str.to_lowercase()
    return text.is_in(sorted(TRUE_LABEL_TEXT)), text.is_in(
        sorted(TRUE_LABEL_TEXT | FALSE_LABEL_TEXT)
    )
