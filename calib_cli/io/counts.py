"""Streaming group-bys: rows and positives per stratum (``resample``)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from calib_cli.core.checks import POSITIVE_LABEL_HINT, shown_value, values_message
from calib_cli.errors import InputError
from calib_cli.io.columns import (
    check_label_values,
    label_missing,
    label_problem,
    positive_label_expr,
    present_label_text,
)
from calib_cli.io.dialect import refuse_nested_groups, require_column
from calib_cli.io.scan import ROW_INDEX, collect


@dataclass(frozen=True)
class ClassCounts:
    """Rows and positives of one stratum (``None`` when there are no strata)."""

    stratum: str | None
    rows: int
    positives: int

    @property
    def negatives(self) -> int:
        return self.rows - self.positives


def class_counts(
    lazy: pl.LazyFrame,
    *,
    name: str,
    label_col: str,
    positive_label: str | None,
    strata_col: str | None,
) -> list[ClassCounts]:
    """One streaming pass: rows and positives per stratum, refusing invalid labels or strata
    with the usual one-line message (count and first row)."""
    schema = lazy.collect_schema()
    for column, option in ((label_col, "--label-col"), (strata_col, "--strata-col")):
        if column is not None:
            require_column(list(schema), column, option, name)
    if strata_col is not None:
        refuse_nested_groups(schema[strata_col], strata_col, "--strata-col", name)
    _, is_valid = positive_label_expr(label_col, schema[label_col], positive_label)
    text_label = pl.col(label_col).cast(pl.String)
    missing = label_missing(label_col, schema[label_col])
    # the two problems every reader names, in its order: missing labels, then other values
    invalid = [
        lazy.with_row_index(ROW_INDEX)
        .filter(bad)
        .select(
            pl.len().alias("count"),
            pl.col(ROW_INDEX).first().alias("row"),
            text_label.first().alias("value"),
        )
        for bad in (missing, ~missing & ~is_valid.fill_null(False))
    ]
    counts = _counts_query(lazy, label_col, schema[label_col], positive_label, strata_col)
    # with --positive-label, a label column takes two values (as Table.labels requires)
    text = present_label_text(label_col, schema[label_col])
    distinct = lazy.select(
        text.n_unique().alias("count"), text.unique().sort().head(5).implode().alias("shown")
    )
    queries = [*invalid, counts] + ([distinct] if positive_label is not None else [])
    empty, other, grouped, *labels_seen = collect(
        lambda: pl.collect_all(queries, engine="streaming"), name
    )
    for bad, problem, hint in (
        (empty, "missing", ""),
        (other, label_problem(schema[label_col]), POSITIVE_LABEL_HINT),
    ):
        if bad["count"][0]:
            count, row, value = int(bad["count"][0]), int(bad["row"][0]) + 1, bad["value"][0]
            shown = shown_value(value if value is not None and value.strip() else None)
            message = values_message(label_col, problem, count, row, shown)
            raise InputError(f"{name}: {message}{hint}")
    if grouped.height == 0:
        raise InputError(f"{name}: no data rows")
    if labels_seen:
        assert positive_label is not None  # queried only with --positive-label
        seen = labels_seen[0]
        count, shown = int(seen["count"][0]), seen["shown"][0].to_list()
        any_positive = bool(grouped["positives"].sum())
        check_label_values(label_col, count, shown, any_positive, positive_label, name=name)
    if strata_col and grouped["stratum"].is_null().any():
        raise InputError(f"{name}: column '{strata_col}' has missing values")
    return _as_class_counts(grouped, strata_col)


def _counts_query(
    lazy: pl.LazyFrame,
    label_col: str,
    label_dtype: pl.DataType,
    positive_label: str | None,
    strata_col: str | None,
) -> pl.LazyFrame:
    is_positive, _ = positive_label_expr(label_col, label_dtype, positive_label)
    group = pl.col(strata_col).cast(pl.String) if strata_col else pl.lit("", dtype=pl.String)
    return (
        lazy.group_by(group.alias("stratum"))
        .agg(pl.len().alias("rows"), is_positive.sum().alias("positives"))
        .sort("stratum", nulls_last=True)
    )


def _as_class_counts(grouped: pl.DataFrame, strata_col: str | None) -> list[ClassCounts]:
    return [
        ClassCounts(
            stratum=row["stratum"] if strata_col else None,
            rows=int(row["rows"]),
            positives=int(row["positives"] or 0),
        )
        for row in grouped.iter_rows(named=True)
    ]


def counts_by_stratum(
    lazy: pl.LazyFrame,
    *,
    label_col: str,
    label_dtype: pl.DataType,
    positive_label: str | None,
    strata_col: str | None,
) -> list[ClassCounts]:
    """Rows and positives per stratum of a (validated) lazy table, in one streaming pass."""
    query = _counts_query(lazy, label_col, label_dtype, positive_label, strata_col)
    return _as_class_counts(collect(lambda: query.collect(engine="streaming"), "input"), strata_col)
