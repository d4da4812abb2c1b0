"""The hash sampling rule of :mod:`calib_cli.core.sampling` as a streaming Polars query."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from calib_cli.core.checks import shown_value, values_message
from calib_cli.errors import InputError
from calib_cli.io.columns import positive_label_expr
from calib_cli.io.dialect import separator_hint
from calib_cli.io.identity import integer_text_bits
from calib_cli.io.scan import ROW_INDEX, collect


def key_kind(lazy: pl.LazyFrame, key_col: str | None, *, name: str) -> str:
    """The key column's type, recorded as ``key_type``: ``row`` (no key column), ``integer``
    (an integer column) or ``string`` (a text column: CSV keys always are).

    It is what the column is, not what its values look like, so it does not change as a file
    grows; nor does the hash of any key: each key is hashed on its own by the rule of
    :mod:`calib_cli.core.sampling` (an integer's text as the integer, other text by FNV-1a).
    Missing keys and floating-point or boolean keys are refused.
    """
    if key_col is None:
        return "row"
    schema = lazy.collect_schema()
    if key_col not in schema:
        raise InputError(
            f"{name}: no column '{key_col}' (set --key-col)" + separator_hint(list(schema))
        )
    dtype = schema[key_col]
    if dtype.is_float() or dtype == pl.Boolean:
        raise InputError(
            f"{name}: column '{key_col}' is {dtype}; --key-col needs integer or text ids"
        )
    if dtype != pl.String and not dtype.is_integer():
        raise InputError(f"{name}: column '{key_col}' has type {dtype}; use integer or text ids")
    # how many and the first row, as every reader names bad values (io.counts.class_counts)
    missing = (
        lazy.with_row_index(ROW_INDEX)
        .filter(pl.col(key_col).is_null())
        .select(pl.len().alias("count"), pl.col(ROW_INDEX).first().alias("row"))
    )
    found = collect(lambda: missing.collect(engine="streaming"), name)
    if found["count"][0]:
        count, row = int(found["count"][0]), int(found["row"][0]) + 1
        message = values_message(key_col, "missing", count, row, shown_value(None))
        raise InputError(f"{name}: {message}; --key-col needs a key on every row")
    return "string" if dtype == pl.String else "integer"


def _key_hash_expr(
    key_col: str | None, kind: str, seed: int, key_dtype: pl.DataType | None = None
) -> pl.Expr:
    """The per-row ``hash64(seed, key)`` of :mod:`calib_cli.core.sampling`, computed batch by
    batch inside a streaming query: row numbers, integers, or text keys each by its own value
    (an integer's text as the integer, other text by FNV-1a of its UTF-8 bytes)."""
    from calib_cli.core.sampling import hash_string_keys, hash_uint64_keys

    def hash_integers(series: pl.Series) -> pl.Series:
        if series.dtype.is_unsigned_integer():
            keys = series.cast(pl.UInt64).to_numpy().astype(np.uint64)
        else:  # two's complement: -1 is 2**64 - 1, as the specification says
            keys = series.cast(pl.Int64).to_numpy().astype(np.int64).view(np.uint64)
        return pl.Series(hash_uint64_keys(keys, seed=seed), dtype=pl.UInt64)

    def hash_text(series: pl.Series) -> pl.Series:
        text = series.cast(pl.String)
        bits = text.to_frame("k").select(integer_text_bits(pl.col("k")))["k"]
        integer = bits.is_not_null().to_numpy()
        out = np.empty(text.len(), dtype=np.uint64)
        if integer.any():
            keys = bits.filter(pl.Series(integer)).to_numpy().astype(np.uint64)
            out[integer] = hash_uint64_keys(keys, seed=seed)
        if not integer.all():
            others = text.filter(pl.Series(~integer))
            lengths = others.str.len_bytes().cast(pl.Int64).to_numpy()
            offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
            data = np.frombuffer(others.str.join("").item().encode("utf-8"), dtype=np.uint8)
            out[~integer] = hash_string_keys(offsets, data, seed=seed)
        return pl.Series(out, dtype=pl.UInt64)

    if key_col is None or kind == "row":
        return pl.col(ROW_INDEX).map_batches(hash_integers, pl.UInt64, is_elementwise=True)
    key = pl.col(key_col)
    if key_dtype is not None and key_dtype.is_integer():
        return key.map_batches(hash_integers, pl.UInt64, is_elementwise=True)
    return key.map_batches(hash_text, pl.UInt64, is_elementwise=True)


def _stratum_lookup(
    strata_col: str | None, values: Mapping[str, Any], dtype: pl.DataType | type[pl.DataType]
) -> pl.Expr:
    """Per-row value looked up by the row's stratum (one value when there are no strata)."""
    if strata_col is None:
        (only,) = values.values()
        return pl.lit(only, dtype=dtype)
    return pl.col(strata_col).cast(pl.String).replace_strict(dict(values), return_dtype=dtype)


def sample_rows(
    lazy: pl.LazyFrame,
    *,
    label_col: str,
    label_dtype: pl.DataType,
    positive_label: str | None,
    strata_col: str | None,
    key_col: str | None,
    key_hash_kind: str,
    seed: int,
    thresholds: Mapping[str, tuple[int, int]],
    weights: Mapping[str, tuple[float, float]] | None,
    weight_col_out: str | None,
) -> pl.LazyFrame:
    """The rows kept by the hash rule: ``hash64(seed, key) < threshold`` of the row's class and
    stratum (``thresholds``: stratum -> (negative, positive) as integers below 2**64; a
    threshold of 2**64 - 1 keeps every row). With ``weight_col_out``, appends the importance
    weight of each kept row (``weights``: stratum -> (negative, positive))."""
    is_positive, _ = positive_label_expr(label_col, label_dtype, positive_label)
    key_dtype = lazy.collect_schema()[key_col] if key_col is not None else None
    negative = _stratum_lookup(strata_col, {k: v[0] for k, v in thresholds.items()}, pl.UInt64)
    positive = _stratum_lookup(strata_col, {k: v[1] for k, v in thresholds.items()}, pl.UInt64)
    threshold = pl.when(is_positive).then(positive).otherwise(negative)
    keep_all = threshold == pl.lit(2**64 - 1, dtype=pl.UInt64)
    kept = (
        lazy.with_row_index(ROW_INDEX)
        .filter(keep_all | (_key_hash_expr(key_col, key_hash_kind, seed, key_dtype) < threshold))
        .drop(ROW_INDEX)
    )
    if weight_col_out is not None and weights is not None:
        neg_w = _stratum_lookup(strata_col, {k: v[0] for k, v in weights.items()}, pl.Float64)
        pos_w = _stratum_lookup(strata_col, {k: v[1] for k, v in weights.items()}, pl.Float64)
        kept = kept.with_columns(
            pl.when(is_positive).then(pos_w).otherwise(neg_w).alias(weight_col_out)
        )
    return kept
