"""A table read in full, its typed columns, and ``--on-invalid drop``."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from calib_cli.core.checks import (
    WEIGHT_RANGE_PROBLEM,
    bad_values_message,
    check_scores,
    check_weights,
    outside_weight_range,
)
from calib_cli.errors import InputError, UsageError
from calib_cli.io.columns import (
    as_float,
    label_missing,
    naming,
    parse_labels,
    positive_label_expr,
)
from calib_cli.io.dialect import number_text, refuse_nested_groups, require_column
from calib_cli.io.identity import order_key, refuse_missing_name, reported_value
from calib_cli.io.invalid import InvalidRows, reason
from calib_cli.types import FloatArray, GroupValue, InputFormat, ScoreKind


@dataclass(frozen=True)
class Table:
    """A data table read from one file, with the name used for it in messages."""

    frame: pl.DataFrame
    name: str
    format: InputFormat
    #: 0-based rows of the file that this table holds, when rows were dropped
    #: (``--on-invalid drop``), so that messages still name the file's row numbers
    row_numbers: Any = None

    def context(self) -> contextlib.AbstractContextManager[None]:
        """Errors raised inside name this file and its own row numbers."""
        return naming(self.name, rows=self.row_numbers)

    @property
    def n_rows(self) -> int:
        return self.frame.height

    @property
    def columns(self) -> list[str]:
        return self.frame.columns

    def has_column(self, column: str) -> bool:
        return column in self.frame.columns

    def require_column(self, column: str, *, option: str | None = None) -> pl.Series:
        """The column, or an InputError naming the file, the column and the columns it has."""
        require_column(self.frame.columns, column, option, self.name)
        return self.frame.get_column(column)

    def scores(
        self, column: str, *, kind: ScoreKind = "probability", option: str = "--score-col"
    ) -> FloatArray:
        """A score column as clean float64 (probabilities inside [0, 1] unless ``kind`` says)."""
        with self.context():
            values = as_float(self.require_column(column, option=option), self.name)
            return check_scores(values, name=column, kind=kind)

    def labels(
        self, column: str, *, positive_label: str | None = None, option: str = "--label-col"
    ) -> FloatArray:
        """A label column as float64 0/1: 0/1 numbers, booleans, or two values with
        ``positive_label`` naming the positive one."""
        series = self.require_column(column, option=option)
        with self.context():
            return parse_labels(series, column, positive_label)

    def partial_labels(
        self, column: str, *, positive_label: str | None = None, option: str = "--label-col"
    ) -> FloatArray:
        """A label column whose labels may be missing, as float64 0/1 and NaN where missing.

        A target's labels arrive late (chargebacks, defaults): its most recent rows often
        have none yet. A missing value (null, NaN, empty text; the rule of
        :func:`~calib_cli.io.columns.label_missing`) is NaN, never a negative (with
        ``positive_label`` too); a value present is checked as by :meth:`labels`. Both
        engines of ``estimate-shift`` and ``rerank-strata`` read a target's labels by this
        rule (chunk by chunk, or as a Polars expression).
        """
        series = self.require_column(column, option=option)
        with self.context():
            return parse_labels(series, column, positive_label, missing_ok=True)

    def weights(self, column: str | None) -> FloatArray:
        """Sample weights (ones when ``column`` is None): finite and non-negative."""
        if column is None:
            return np.ones(self.n_rows, dtype=np.float64)
        with self.context():
            values = as_float(self.require_column(column, option="--weight-col"), self.name)
            return check_weights(values, self.n_rows, name=column)

    def numbers(self, column: str, *, option: str | None = None) -> FloatArray:
        """Any numeric column (features, rates) as float64: missing values and infinities are
        refused, naming this file and its own row (a pooled array would count another's)."""
        with self.context():
            values = as_float(self.require_column(column, option=option), self.name)
            missing = np.isnan(values)
            if missing.any():
                raise InputError(bad_values_message(column, "missing or NaN", missing, values))
            infinite = np.isinf(values)
            if infinite.any():
                raise InputError(bad_values_message(column, "infinite", infinite, values))
            return values

    def groups(self, column: str, *, option: str | None = None) -> tuple[list[Any], Any]:
        """A grouping column (``--by``, ``--batch-col``) as (distinct values, code per row).

        The rule of :mod:`calib_cli.io.identity`, as in every engine: a text value is its
        text (``"007"`` and ``"7"``, ``"1"`` and ``"1.0"`` are two groups), shown as a number
        when it is an integer's text (``"7"`` is 7, as a Parquet 7 is), whatever else the
        column (or this chunk of it) holds; typed values keep their type, except booleans,
        which become ``"false"`` and ``"true"`` as in a summary (whose groups are text).
        Values are in :func:`~calib_cli.io.identity.order_key` order (numbers by value, text
        that reads as a number among them); rows with a missing value (or NaN) form a last
        group whose value is ``None``.
        """
        series = self.require_column(column, option=option)
        refuse_nested_groups(series.dtype, column, option, self.name)
        if series.dtype == pl.Boolean or series.dtype in (pl.Categorical, pl.Enum):
            series = series.cast(pl.String)  # as summaries keep them: "false", "true"
        if series.dtype.is_float():
            series = series.fill_nan(None)  # NaN is a missing value, not a group of its own
        distinct = series.drop_nulls().unique()
        read = distinct.to_list()
        shown: list[Any] = (
            [reported_value(text) for text in read] if series.dtype == pl.String else read
        )
        order = sorted(range(len(read)), key=lambda i: order_key(shown[i]))
        values = [shown[i] for i in order]
        frame = pl.DataFrame(
            {"value": distinct.gather(order), "code": np.arange(len(order), dtype=np.int64)}
        )
        codes = (
            pl.DataFrame({"value": series})
            .join(frame, on="value", how="left", maintain_order="left")["code"]
            .fill_null(len(values))
            .to_numpy()
            .astype(np.int64)
        )
        if series.null_count():
            values.append(None)
        with naming(self.name):
            refuse_missing_name(values, column, option)
        return values, codes

    def text(self, column: str, *, option: str | None = None) -> Any:
        """A column's values as text (NumPy array of str); missing values are refused."""
        names, codes = self.categories(column, option=option)
        return np.asarray(names, dtype=str)[codes]

    def categories(self, column: str, *, option: str | None = None) -> tuple[list[str], Any]:
        """A grouping column as (sorted distinct values as text, integer code per row).

        Missing values are refused: a row without a group or stratum cannot be placed.
        """
        series = self.require_column(column, option=option)
        refuse_nested_groups(series.dtype, column, option, self.name)
        missing = series.is_null().to_numpy()
        if missing.any():
            with self.context():
                raise InputError(bad_values_message(column, "missing", missing, series.to_numpy()))
        text = series.cast(pl.String)
        names = text.unique().sort()
        lookup = pl.DataFrame({"value": names, "code": np.arange(names.len(), dtype=np.int64)})
        codes = (
            text.to_frame("value")
            .join(lookup, on="value", how="left", maintain_order="left")["code"]
            .to_numpy()
        )
        return [str(n) for n in names.to_list()], codes.astype(np.int64)

    def with_columns(self, added: Mapping[str, Any]) -> pl.DataFrame:
        """The input's columns in their order, then ``added`` (refusing to overwrite one)."""
        clash = [name for name in added if name in self.frame.columns]
        if clash:
            raise UsageError(
                f"{self.name} already has a column '{clash[0]}'; choose another output name"
            )
        return self.frame.with_columns(
            [pl.Series(name, np.asarray(values)) for name, values in added.items()]
        )


# --------------------------------------------------------------------- --on-invalid drop


def _as_numbers(table: Table, column: str, option: str) -> tuple[Any, Any]:
    """A column as float64 (NaN where missing) and, for text, where it is not a number."""
    series = table.require_column(column, option=option)
    if series.dtype == pl.String:
        text = series.to_frame().select(number_text(pl.col(column)))[:, 0]
        values = text.cast(pl.Float64, strict=False)
        not_number = (values.is_null() & text.is_not_null() & (text != "")).to_numpy()
    elif series.dtype == pl.Boolean or series.dtype.is_numeric():
        values = series.cast(pl.Float64)
        not_number = np.zeros(series.len(), dtype=bool)
    else:
        raise InputError(f"{table.name}: column '{column}' has type {series.dtype}, not numbers")
    return values.fill_null(np.nan).to_numpy().astype(np.float64), not_number


def _score_problems(table: Table, column: str, kind: ScoreKind) -> list[tuple[str, Any]]:
    array, not_number = _as_numbers(table, column, "--score-col")
    missing = np.isnan(array)
    problems = [("that are not numbers", not_number), ("missing or NaN", missing)]
    if kind == "probability":
        problems.append(("outside [0, 1]", ~missing & ((array < 0.0) | (array > 1.0))))
    else:
        problems.append(("that are infinite", np.isinf(array)))
    return problems


def _label_problems(table: Table, column: str, positive_label: str | None) -> list[tuple[str, Any]]:
    series = table.require_column(column, option="--label-col")
    missing = (
        series.to_frame(column)
        .select(label_missing(column, series.dtype).fill_null(True))[:, 0]
        .to_numpy()
    )
    _, is_valid = positive_label_expr(column, series.dtype, positive_label)
    valid = series.to_frame(column).select(is_valid.fill_null(False))[:, 0].to_numpy()
    problem = (
        "that are not 0 or 1" if series.dtype.is_numeric() else "that are not 0/1 or true/false"
    )
    return [("missing", missing), (problem, ~valid)]


def _weight_problems(table: Table, column: str) -> list[tuple[str, Any]]:
    array, not_number = _as_numbers(table, column, "--weight-col")
    return [
        ("that are not numbers", not_number),
        ("missing or NaN", np.isnan(array)),
        ("that are infinite", np.isinf(array)),
        ("that are negative", array < 0.0),
        (WEIGHT_RANGE_PROBLEM, outside_weight_range(array)),
    ]


def drop_invalid_rows(
    table: Table,
    *,
    score_cols: Sequence[str],
    score_kind: ScoreKind,
    label_col: str | None,
    positive_label: str | None,
    weight_col: str | None,
    max_invalid: float | None = None,
    by: str | None = None,
) -> tuple[Table, InvalidRows]:
    """Drop rows whose score, label or weight would be refused; return the table and what
    was dropped, by reason (each row under its first problem: scores, label, weight) and, with
    a grouping column ``by``, by group (:meth:`Table.groups`' values and order).

    Raises InputError when more rows are invalid than ``max_invalid`` allows (a fraction
    below 1, else a count; None: 1%), or when no valid row is left.
    """
    problems: list[tuple[str, Any]] = []
    for column in dict.fromkeys(score_cols):
        problems += [
            (reason(column, p), bad) for p, bad in _score_problems(table, column, score_kind)
        ]
    if label_col is not None and table.has_column(label_col):
        problems += [
            (reason(label_col, p), bad)
            for p, bad in _label_problems(table, label_col, positive_label)
        ]
    if weight_col is not None:
        problems += [(reason(weight_col, p), bad) for p, bad in _weight_problems(table, weight_col)]
    keep = np.ones(table.n_rows, dtype=bool)
    by_reason: dict[str, int] = {}
    for why, bad in problems:
        first = bad & keep  # a row counts under its first problem only
        if first.any():
            by_reason[why] = by_reason.get(why, 0) + int(first.sum())
        keep &= ~bad
    dropped = int(table.n_rows - keep.sum())
    by_group: tuple[tuple[GroupValue, int, int], ...] = ()
    if by is not None:
        values, codes = table.groups(by, option="--by")
        read = np.bincount(codes, minlength=len(values))
        lost = np.bincount(codes[~keep], minlength=len(values))
        by_group = tuple(
            (value, int(n), int(d)) for value, n, d in zip(values, read, lost, strict=True)
        )
    invalid = InvalidRows(table.name, table.n_rows, dropped, by_reason, by_group)
    invalid.check(max_invalid)
    if dropped == table.n_rows:
        raise InputError(f"{table.name}: no valid rows left after dropping {dropped} invalid rows")
    if dropped == 0:
        return table, invalid
    kept = table.frame.filter(pl.Series(keep))
    original = np.flatnonzero(keep)
    if table.row_numbers is not None:
        original = np.asarray(table.row_numbers)[original]
    kept_table = Table(frame=kept, name=table.name, format=table.format, row_numbers=original)
    return kept_table, invalid
