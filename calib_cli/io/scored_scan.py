"""Scored rows as a lazy scan, checked like :class:`~calib_cli.io.table.Table` checks a table.

Streaming commands (``reliability --engine streaming``, ``summarize``) never hold the rows, so
the rules of :meth:`Table.scores`, :meth:`Table.labels` and :meth:`Table.weights` are applied
as Polars expressions: one streaming pass counts the invalid values of every column, and only
when one is found a second query finds its first row for the usual one-line message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl

from calib_cli.core.checks import (
    POSITIVE_LABEL_HINT,
    WEIGHT_RANGE_PROBLEM,
    outside_weight_range,
    shown_number,
    values_message,
)
from calib_cli.errors import InputError
from calib_cli.io.columns import (
    check_label_values,
    label_missing,
    positive_label_expr,
    present_label_text,
)
from calib_cli.io.dialect import number_text, refuse_nested_groups, require_column
from calib_cli.io.identity import order_key, typed_value
from calib_cli.io.invalid import InvalidRows, reason
from calib_cli.io.scan import ROW_INDEX, collect
from calib_cli.types import GroupValue, OnInvalid

__all__ = ["FLAG_COLUMN", "ScoredScan", "scored_scan"]

#: With ``defer=True``: the column of the scan that is true on a row with an invalid value.
FLAG_COLUMN = "\x00invalid"


@dataclass(frozen=True)
class ScoredScan:
    """A checked lazy scan: score columns as Float64 in [0, 1], the label as Int8 0/1, the
    weight as Float64 (finite, non-negative), the ``by`` column as text (null: missing)."""

    lazy: pl.LazyFrame
    name: str
    rows: int
    dropped: int
    #: what ``on_invalid="drop"`` dropped, by reason (None with ``"error"``)
    invalid: InvalidRows | None = None
    #: with ``defer=True``: the check not made yet. The scan's :data:`FLAG_COLUMN` marks the
    #: rows it would refuse; the pass that reads them calls this (it raises the error the
    #: check would have raised), and ``rows`` is -1 until that pass counts them.
    verify: Callable[[], None] | None = None
    #: the ``by`` column's type before it became text (None without ``by``): reports give
    #: its groups as the in-memory reader does (:func:`~calib_cli.io.identity.typed_value`)
    by_dtype: pl.DataType | None = None


def _number(column: str, dtype: pl.DataType, name: str) -> pl.Expr:
    col = pl.col(column)
    if dtype == pl.String:
        return number_text(col).cast(pl.Float64, strict=False)
    if dtype == pl.Boolean or dtype.is_numeric():
        return col.cast(pl.Float64)
    raise InputError(f"{name}: column '{column}' has type {dtype}, not numbers")


def _not_a_number(column: str, dtype: pl.DataType) -> pl.Expr:
    if dtype != pl.String:
        return pl.lit(False)
    text = number_text(pl.col(column))
    return text.is_not_null() & (text != "") & text.cast(pl.Float64, strict=False).is_null()


def _require(schema: pl.Schema, column: str, option: str, name: str) -> None:
    require_column(list(schema), column, option, name)


def scored_scan(
    lazy: pl.LazyFrame,
    *,
    name: str,
    score_cols: Sequence[str],
    label_col: str,
    weight_col: str | None,
    positive_label: str | None,
    by: str | None,
    on_invalid: OnInvalid,
    max_invalid: float | None = None,
    defer: bool = False,
) -> ScoredScan:
    """Check the scored columns of ``lazy`` in one streaming pass and return the clean scan.

    With ``on_invalid="error"`` the first bad column is refused with the count and first row
    of its bad values (``column 'score' has 3 values outside [0, 1] (first at row 17: 1.2)``);
    with ``"drop"`` the rows with a bad score, label or weight are dropped and counted by
    reason (each under its first problem), and refused above ``max_invalid`` (a fraction
    below 1, else a count; None: 1%).

    ``defer=True`` (with ``"error"`` and no ``positive_label``) saves that pass for a caller
    that reads every row anyway: the scan gets a :data:`FLAG_COLUMN` (true on a row the check
    would refuse) and :attr:`ScoredScan.verify`, which makes the check and raises its error;
    the caller calls it when a flag is set, and counts the rows itself.
    """
    schema = lazy.collect_schema()
    for column in score_cols:
        _require(schema, column, "--score-col", name)
    _require(schema, label_col, "--label-col", name)
    if weight_col is not None:
        _require(schema, weight_col, "--weight-col", name)
    if by is not None:
        _require(schema, by, "--by", name)
        refuse_nested_groups(schema[by], by, "--by", name)

    # (column, problem, is-bad expression) in the order the in-memory checks run
    checks: list[tuple[str, str, pl.Expr]] = []
    clean: list[pl.Expr] = []
    for column in dict.fromkeys(score_cols):
        value = _number(column, schema[column], name)
        checks.append((column, "that are not numbers", _not_a_number(column, schema[column])))
        checks.append((column, "missing or NaN", value.is_null() | value.is_nan()))
        checks.append((column, "outside [0, 1]", (value < 0.0) | (value > 1.0)))
        clean.append(value.alias(column))
    is_positive, is_valid = positive_label_expr(label_col, schema[label_col], positive_label)
    checks.append((label_col, "missing", label_missing(label_col, schema[label_col])))
    problem = (
        "that are not 0 or 1"
        if schema[label_col].is_numeric()
        else "that are not 0/1 or true/false"
    )
    checks.append((label_col, problem, ~is_valid.fill_null(False)))
    clean.append(is_positive.fill_null(False).cast(pl.Int8).alias(label_col))
    if weight_col is not None:
        weight = _number(weight_col, schema[weight_col], name)
        checks.append(
            (weight_col, "that are not numbers", _not_a_number(weight_col, schema[weight_col]))
        )
        checks.append((weight_col, "missing or NaN", weight.is_null() | weight.is_nan()))
        checks.append((weight_col, "that are infinite", weight.is_infinite()))
        checks.append((weight_col, "that are negative", weight < 0.0))
        checks.append((weight_col, WEIGHT_RANGE_PROBLEM, outside_weight_range(weight)))
        clean.append(weight.alias(weight_col))
    group_text: tuple[pl.Expr, pl.DataType] | None = None
    if by is not None:
        group = pl.col(by)
        if schema[by].is_float():
            group = group.fill_nan(None)
        group_text = (group.cast(pl.String), schema[by])
        if by not in (*score_cols, label_col, weight_col):
            clean.append(group_text[0].alias(by))

    if defer and on_invalid == "error" and positive_label is None:
        flag = pl.any_horizontal([expr.fill_null(False) for _, _, expr in checks])

        def verify() -> None:
            _tally(lazy, name, checks, schema, label_col, on_invalid, max_invalid, None)

        return ScoredScan(
            lazy=lazy.with_columns(flag.alias(FLAG_COLUMN)).with_columns(clean),
            name=name,
            rows=-1,
            dropped=0,
            verify=verify,
            by_dtype=None if by is None else schema[by],
        )
    rows, bad_rows, invalid = _tally(
        lazy,
        name,
        checks,
        schema,
        label_col,
        on_invalid,
        max_invalid,
        positive_label,
        is_positive,
        group_text,
    )
    out = lazy
    if bad_rows:
        if bad_rows == rows:
            raise InputError(f"{name}: no valid rows left after dropping {rows} invalid rows")
        out = out.filter(~pl.any_horizontal([expr.fill_null(False) for _, _, expr in checks]))
    return ScoredScan(
        lazy=out.with_columns(clean),
        name=name,
        rows=rows - bad_rows,
        dropped=bad_rows,
        invalid=invalid,
        by_dtype=None if by is None else schema[by],
    )


def _tally(
    lazy: pl.LazyFrame,
    name: str,
    checks: list[tuple[str, str, pl.Expr]],
    schema: pl.Schema,
    label_col: str,
    on_invalid: OnInvalid,
    max_invalid: float | None,
    positive_label: str | None,
    is_positive: pl.Expr | None = None,
    group: tuple[pl.Expr, pl.DataType] | None = None,
) -> tuple[int, int, InvalidRows | None]:
    """The checking pass: the rows, the bad rows and (``"drop"``) what is dropped, by group
    too where ``group`` gives the grouping column's text and type; with ``"error"``, the first
    bad column's error."""
    flags = [expr.fill_null(False).alias(f"_bad{i}") for i, (_, _, expr) in enumerate(checks)]
    counts = [pl.col(f"_bad{i}").sum().alias(f"_bad{i}") for i in range(len(checks))]
    any_bad = pl.any_horizontal([pl.col(f"_bad{i}") for i in range(len(checks))])
    flagged = lazy.select(flags)
    firsts: list[pl.Expr] = []
    if on_invalid == "drop":  # each bad row once, under its first problem (its reason)
        first = pl.coalesce(
            [pl.when(pl.col(f"_bad{i}")).then(pl.lit(i, pl.Int32)) for i in range(len(checks))]
        )
        flagged = flagged.with_columns(first.alias("_first"))
        firsts = [(pl.col("_first") == i).sum().alias(f"_first{i}") for i in range(len(checks))]
    queries = [
        flagged.select(*counts, *firsts, any_bad.sum().alias("_any"), pl.len().alias("_rows"))
    ]
    if on_invalid == "drop" and group is not None:
        queries.append(
            lazy.select(group[0].alias("_group"), *flags)
            .group_by("_group")
            .agg(pl.len().alias("_rows"), any_bad.sum().alias("_dropped"))
        )
    if positive_label is not None and is_positive is not None:
        text = present_label_text(label_col, schema[label_col])
        queries.append(
            lazy.select(
                text.n_unique().alias("count"),
                text.unique().sort().head(5).implode().alias("shown"),
                is_positive.fill_null(False).any().alias("any_positive"),
            )
        )
    tallies, *others = collect(lambda: pl.collect_all(queries, engine="streaming"), name)
    by_group = None
    if on_invalid == "drop" and group is not None:
        by_group, *others = others
    distinct = others
    rows = int(tallies["_rows"][0])
    bad_rows = int(tallies["_any"][0])
    if distinct:
        _check_two_values(distinct[0], name, label_col, positive_label)
    if bad_rows and on_invalid == "error":
        for index, (column, problem, expr) in enumerate(checks):
            count = int(tallies[f"_bad{index}"][0])
            if count:
                raise InputError(
                    _first_bad(
                        lazy,
                        name,
                        column,
                        problem,
                        expr,
                        count,
                        # text values show as text where the in-memory check sees text
                        schema[column] == pl.String
                        and (column == label_col or problem == "that are not numbers"),
                    )
                )
    if rows == 0:
        raise InputError(f"{name}: no data rows")
    invalid = None
    if on_invalid == "drop":
        by_reason: dict[str, int] = {}
        for index, (column, problem, _) in enumerate(checks):
            count = int(tallies[f"_first{index}"][0])
            if count:
                why = reason(column, problem)
                by_reason[why] = by_reason.get(why, 0) + count
        invalid = InvalidRows(
            name,
            rows,
            bad_rows,
            by_reason,
            () if by_group is None or group is None else _group_drops(by_group, group[1]),
        )
        invalid.check(max_invalid)
    return rows, bad_rows, invalid


def _group_drops(
    frame: pl.DataFrame, dtype: pl.DataType
) -> tuple[tuple[GroupValue, int, int], ...]:
    """(group, rows read, rows dropped) from the checking pass's group-by, with the in-memory
    reader's values and order (:meth:`~calib_cli.io.table.Table.groups`)."""
    found = [
        (None if text is None else typed_value(text, dtype), int(rows), int(dropped))
        for text, rows, dropped in frame.iter_rows()
    ]
    return tuple(sorted(found, key=lambda entry: order_key(entry[0])))


def _check_two_values(
    frame: pl.DataFrame, name: str, column: str, positive_label: str | None
) -> None:
    assert positive_label is not None  # queried only with --positive-label
    shown = frame["shown"][0].to_list()
    count, any_positive = int(frame["count"][0]), bool(frame["any_positive"][0])
    check_label_values(column, count, shown, any_positive, positive_label, name=name)


def _first_bad(
    lazy: pl.LazyFrame,
    name: str,
    column: str,
    problem: str,
    expr: pl.Expr,
    count: int,
    text: bool,
) -> str:
    first = collect(
        lambda: (
            lazy.with_row_index(ROW_INDEX)
            .filter(expr.fill_null(False))
            .select(pl.col(ROW_INDEX), pl.col(column).cast(pl.String).alias("value"))
            .head(1)
            .collect(engine="streaming")
        ),
        name,
    )
    row, value = int(first[ROW_INDEX][0]) + 1, first["value"][0]
    shown = "empty" if value is None or value == "" else repr(value) if text else _shown(value)
    hint = POSITIVE_LABEL_HINT if problem.startswith("that are not 0") and shown != "empty" else ""
    return f"{name}: {values_message(column, problem, count, row, shown)}{hint}"


def _shown(value: str) -> str:
    try:
        number = float(value)
    except ValueError:
        return repr(value)
    return shown_number(number)
