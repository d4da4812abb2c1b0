"""``rerank-strata``'s streaming engine at the Polars edge, in memory bounded by cells, not rows.

Four steps, each a streaming Polars query (see the README, "Streaming"):

1. :func:`reference_cells`: the labelled reference by (stratum, score cell): rows, weighted
   classes, weighted mean score, minimum and maximum score of each occupied cell of the
   summaries' fine score grid (:func:`calib_cli.summaries.scan.cell_expr`), summed in the
   rows' order (:class:`~calib_cli.core.keyed_sums.KeyedSums`; a streaming group-by merges
   partial sums in whatever order its threads finish, so its sums change from run to run).
   The in-memory engine builds the same table from its arrays
   (:func:`reference_cells_of_rows`), so both engines fit the same slopes.
2. :func:`target_strata`: one pass over the target that checks every column the command
   uses (refusing bad input before anything is written) and counts rows per stratum.
3. :func:`sink_reranked`: the row-wise map (the workflow's function of score and stratum
   code, batch by batch) to a scratch file of (row, rerank score, score, label, weight);
   a histogram of the rerank scores on a fine grid splits it into chunks of at most
   ``chunk_rows`` rows *by rerank score* (rows of equal rerank score share a chunk); each
   chunk, ranked in memory by the workflow's rank function plus the rows of higher chunks,
   gives exact ranks, which are regrouped by row and laid out in row order in a scratch file;
   a last pass streams the target again, maps its rows, reads their ranks and sinks the output.
4. The comparison counts (labelled target): weighted classes per raw score cell and per cell
   of the rerank score of the rows whose label is known (a target's late labels may be
   missing), collected from the scratch file.

Memory: the reference's occupied cells, one chunk of rows (``chunk_rows``) and Polars' batches.
Disk (in a scratch directory removed at the end): about 40 bytes a target row.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import polars as pl

from calib_cli.core import elementary as el
from calib_cli.core.checks import (
    POSITIVE_LABEL_HINT,
    WEIGHT_RANGE_PROBLEM,
    outside_weight_range,
    shown_value,
    values_message,
)
from calib_cli.core.keyed_sums import KeyedSums
from calib_cli.core.strata import factorize_strata
from calib_cli.errors import InputError, UsageError
from calib_cli.io.columns import label_missing, label_problem, positive_label_expr
from calib_cli.io.dialect import number_text, refuse_nested_groups, require_column
from calib_cli.io.scan import ROW_INDEX, collect, ordered_batches
from calib_cli.io.sink import sink_table
from calib_cli.summaries.grid import cell_index, half_cell
from calib_cli.summaries.scan import cell_expr
from calib_cli.types import FloatArray, InputFormat, IntArray, ScoreKind

__all__ = [
    "CHUNK_ROWS",
    "ComparisonCounts",
    "StratumCells",
    "TargetStrata",
    "reference_cells",
    "reference_cells_of_rows",
    "sink_reranked",
    "target_strata",
]

#: Rows ranked in memory at once by :func:`sink_reranked` (about 100 bytes each while ranked).
CHUNK_ROWS = 4_000_000
#: Scratch files are Parquet (read by decoding, not memory-mapped as Arrow IPC files are,
#: whose mapped pages would count as the process's memory), compressed cheaply.
_SCRATCH_CODEC: Final = "lz4"
#: Rows per batch of the row-wise map.
_MAP_BATCH_ROWS = 1_000_000
#: Bits of the rerank score's mantissa kept by the rank histogram and the comparison cells.
RERANK_MANTISSA_BITS = 16

RerankMap = Callable[[FloatArray, IntArray], tuple[FloatArray, FloatArray]]
RankFunction = Callable[[FloatArray, FloatArray], IntArray]


@dataclass(frozen=True)
class StratumCells:
    """One stratum of the reference as occupied score cells (ascending).

    ``thresholds`` is each cell's weighted mean score (the score itself when the cell holds
    one distinct score: ``tied``); ``positives``/``negatives`` its weighted classes; ``rows``
    counts every reference row of the stratum (zero weights included).
    """

    stratum: str
    rows: int
    thresholds: FloatArray
    positives: FloatArray
    negatives: FloatArray
    tied: npt.NDArray[np.bool_]


@dataclass(frozen=True)
class TargetStrata:
    """The target's rows per stratum (sorted by name), and its columns.

    ``labelled``: the target has a label column holding at least one label; ``missing_labels``
    counts the rows of its label column whose label is missing (late labels), all of them
    when none is present (the target is then taken as unlabelled)."""

    rows: int
    strata: Mapping[str, int]
    columns: tuple[str, ...]
    labelled: bool
    missing_labels: int = 0


@dataclass(frozen=True)
class ComparisonCounts:
    """Weighted classes per raw-score cell and per rerank-score cell, both ascending."""

    raw_positives: FloatArray
    raw_negatives: FloatArray
    reranked_positives: FloatArray
    reranked_negatives: FloatArray


# ------------------------------------------------------------------------------- checks


def _require_columns(schema: pl.Schema, name: str, columns: Sequence[tuple[str, str]]) -> None:
    for column, option in columns:
        require_column(list(schema), column, option, name)
        if option == "--strata-col":
            refuse_nested_groups(schema[column], column, option, name)


def _number(column: str, dtype: pl.DataType) -> pl.Expr:
    col = pl.col(column)
    if dtype == pl.String:
        return number_text(col).cast(pl.Float64, strict=False)
    if dtype == pl.Boolean or dtype.is_numeric():
        return col.cast(pl.Float64)
    raise InputError(f"column '{column}' has type {dtype}, not numbers")


def _not_number(column: str, dtype: pl.DataType) -> pl.Expr:
    """Text that is present but not a number (only text columns can hold it)."""
    if dtype != pl.String:
        return pl.lit(False)
    text = number_text(pl.col(column))
    return text.is_not_null() & (text != "") & text.cast(pl.Float64, strict=False).is_null()


def _score_checks(
    column: str, dtype: pl.DataType, kind: ScoreKind
) -> list[tuple[str, str, pl.Expr]]:
    value = _number(column, dtype)
    checks = [
        (column, "that are not numbers", _not_number(column, dtype)),
        (column, "missing or NaN", value.is_null() | value.is_nan()),
    ]
    if kind == "probability":
        checks.append((column, "outside [0, 1]", (value < 0.0) | (value > 1.0)))
    else:
        checks.append((column, "that are infinite", value.is_infinite()))
    return checks


def _label_checks(
    column: str, dtype: pl.DataType, positive_label: str | None
) -> list[tuple[str, str, pl.Expr]]:
    _, is_valid = positive_label_expr(column, dtype, positive_label)
    missing = label_missing(column, dtype)
    problem = "that are not 0 or 1" if dtype.is_numeric() else "that are not 0/1 or true/false"
    return [
        (column, "missing", missing),
        (column, problem, ~missing & ~is_valid.fill_null(False)),
    ]


def _weight_checks(column: str, dtype: pl.DataType) -> list[tuple[str, str, pl.Expr]]:
    value = _number(column, dtype)
    return [
        (column, "that are not numbers", _not_number(column, dtype)),
        (
            column,
            "that are missing, negative or not finite",
            value.is_null() | ~value.is_finite() | (value < 0.0),
        ),
        (column, WEIGHT_RANGE_PROBLEM, outside_weight_range(value)),
    ]


def _strata_check(column: str, dtype: pl.DataType) -> list[tuple[str, str, pl.Expr]]:
    missing = pl.col(column).is_null()
    if dtype.is_float():
        missing = missing | pl.col(column).is_nan()
    return [(column, "missing", missing)]


def _check_queries(lazy: pl.LazyFrame, checks: Sequence[tuple[str, str, pl.Expr]]) -> pl.LazyFrame:
    """One row: for each check its count of bad rows and first bad row (streaming sums and
    minima; the value is fetched afterwards, by :func:`_raise_first_failure`)."""
    indexed = lazy.with_row_index(ROW_INDEX)
    exprs: list[pl.Expr] = []
    for k, (_, _, bad) in enumerate(checks):
        flag = bad.fill_null(False)
        exprs += [
            flag.cast(pl.Int64).sum().alias(f"n{k}"),
            pl.when(flag).then(pl.col(ROW_INDEX).cast(pl.Int64)).min().alias(f"r{k}"),
        ]
    return indexed.select(exprs)


def _raise_first_failure(
    lazy: pl.LazyFrame,
    found: pl.DataFrame,
    checks: Sequence[tuple[str, str, pl.Expr]],
    name: str,
    hint: str = "",
) -> None:
    for k, (column, problem, _) in enumerate(checks):
        count = int(found[f"n{k}"][0] or 0)
        if not count:
            continue
        first = int(found[f"r{k}"][0])
        at = lazy.slice(first, 1).select(pl.col(column).cast(pl.String))
        value: object = collect(at.collect, name)[column][0]
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = float(value) if problem != "that are not numbers" else value
        extra = hint if "0 or 1" in problem or "0/1" in problem else ""
        message = values_message(column, problem, count, first + 1, shown_value(value))
        raise InputError(f"{name}: {message}{extra}")


def _cell_score(score: pl.Expr, kind: ScoreKind) -> pl.Expr:
    """A score in [0, 1] with the order of ``score``, for the grid (logits and margins go
    through the logistic function, which keeps their order)."""
    if kind == "probability":
        return score
    # elementary's sigmoid, as the target's rows take it (Polars' exp is the C library's,
    # whose last bits depend on the machine: a row could change cells between the two sides)
    return score.map_batches(_sigmoid_series, return_dtype=pl.Float64, is_elementwise=True)


def _sigmoid_series(values: pl.Series) -> pl.Series:
    return pl.Series(values.name, el.sigmoid(values.to_numpy().astype(np.float64)))


# ------------------------------------------------------------------------------ reference


def reference_cells(
    lazy: pl.LazyFrame,
    *,
    name: str,
    score_col: str,
    label_col: str,
    weight_col: str | None,
    positive_label: str | None,
    strata_col: str,
    score_kind: ScoreKind,
    mantissa_bits: int,
) -> tuple[StratumCells, ...]:
    """Check the reference and group it by (stratum, score cell), in one streaming pass each.

    Strata come out named ``str(value)`` and sorted by name, as the in-memory engine has them.
    """
    schema = lazy.collect_schema()
    _require_columns(
        schema,
        name,
        [(score_col, "--score-col"), (label_col, "--label-col"), (strata_col, "--strata-col")]
        + ([(weight_col, "--weight-col")] if weight_col is not None else []),
    )
    checks = [
        *_score_checks(score_col, schema[score_col], score_kind),
        *_label_checks(label_col, schema[label_col], positive_label),
        *_strata_check(strata_col, schema[strata_col]),
    ]
    if weight_col is not None:
        checks += _weight_checks(weight_col, schema[weight_col])
    is_positive, _ = positive_label_expr(label_col, schema[label_col], positive_label)
    score = _number(score_col, schema[score_col])
    weight = pl.lit(1.0) if weight_col is None else _number(weight_col, schema[weight_col])
    y = is_positive.fill_null(False).cast(pl.Float64)
    rows = lazy.select(
        pl.col(strata_col).cast(pl.String).alias("stratum"),
        cell_expr(_cell_score(score, score_kind), mantissa_bits=mantissa_bits).alias("cell"),
        score.alias("s"),
        y.alias("y"),
        weight.cast(pl.Float64).alias("w"),
    )
    hint = POSITIVE_LABEL_HINT if positive_label is None else ""
    found = collect(lambda: _check_queries(lazy, checks).collect(engine="streaming"), name)
    _raise_first_failure(lazy, found, checks, name, hint)
    # (stratum, cell) sums added in the rows' order: the same bytes on every run (a streaming
    # group-by merges partial sums in the order its threads finish)
    span = 2 * half_cell(mantissa_bits) + 1
    sums = _cell_sums()
    codes: dict[str, int] = {}
    for batch in ordered_batches(rows, name):
        names_in = batch["stratum"]
        for value in names_in.unique(maintain_order=True).to_list():
            codes.setdefault(str(value), len(codes))
        code = names_in.replace_strict(list(codes), list(codes.values()), return_dtype=pl.Int64)
        s, y_, w = (batch[c].to_numpy().astype(np.float64) for c in ("s", "y", "w"))
        _add_cell_rows(
            sums, code.to_numpy() * span + batch["cell"].to_numpy().astype(np.int64), s, y_, w
        )
    if not sums.keys.size:
        raise InputError(f"{name}: no data rows")
    # strata in the order of their names, as the in-memory engine sorts them (as text)
    return tuple(
        _stratum_cells(sums, codes[stratum], span, _stratum_name(stratum))
        for stratum in sorted(codes)
    )


def reference_cells_of_rows(
    scores: FloatArray,
    y_true: FloatArray,
    strata: npt.ArrayLike,
    sample_weight: FloatArray,
    *,
    score_kind: ScoreKind,
    mantissa_bits: int,
) -> tuple[StratumCells, ...]:
    """:func:`reference_cells` of rows held in memory: the same cells, bit for bit.

    The in-memory engine fits its slopes on this table, so that both engines fit the same
    numbers (README, "Algorithm 1"): each row's cell is :func:`cell_index` of its score (of
    ``elementary.sigmoid`` of a logit or margin), the cell sums are added in the rows' order
    (:class:`~calib_cli.core.keyed_sums.KeyedSums`, the same bytes however the rows are cut)
    and the thresholds are chosen by the same rule. ``strata`` holds each row's stratum name;
    strata come out sorted by name.

    >>> cells = reference_cells_of_rows(
    ...     np.array([0.2, 0.2, 0.6, 0.60001, 0.3]), np.array([0.0, 1.0, 1.0, 0.0, 1.0]),
    ...     np.array(["a", "a", "a", "a", "b"]), np.ones(5),
    ...     score_kind="probability", mantissa_bits=12)
    >>> [(c.stratum, c.rows, c.thresholds.size) for c in cells]
    [('a', 4, 2), ('b', 1, 1)]
    >>> cells[0].tied.tolist(), cells[0].positives.tolist(), cells[0].negatives.tolist()
    ([True, False], [1.0, 1.0], [1.0, 1.0])
    """
    s = np.asarray(scores, dtype=np.float64)
    code, names = factorize_strata(strata)
    grid_score = s if score_kind == "probability" else el.sigmoid(s)
    span = 2 * half_cell(mantissa_bits) + 1
    sums = _cell_sums()
    key = code * span + cell_index(grid_score, mantissa_bits=mantissa_bits)
    _add_cell_rows(
        sums,
        key,
        s,
        np.asarray(y_true, dtype=np.float64),
        np.asarray(sample_weight, dtype=np.float64),
    )
    return tuple(
        _stratum_cells(sums, j, span, _stratum_name(stratum)) for j, stratum in enumerate(names)
    )


def _cell_sums() -> KeyedSums:
    return KeyedSums(("positives", "negatives", "score_sum", "weight"), extremes=("s",))


def _add_cell_rows(
    sums: KeyedSums, key: IntArray, s: FloatArray, y: FloatArray, w: FloatArray
) -> None:
    """Add rows (score ``s``, label ``y``, weight ``w``) to the sums of their (stratum, cell)."""
    sums.add(
        key,
        {"positives": w * y, "negatives": w * (1.0 - y), "score_sum": w * s, "weight": w},
        extremes={"s": s},
        extremes_where=w > 0.0,
    )


def _stratum_cells(sums: KeyedSums, code: int, span: int, stratum: str) -> StratumCells:
    """The occupied cells (positive weight) of stratum ``code``: keys ``code * span + cell``."""
    first = np.searchsorted(sums.keys, code * span)
    last = np.searchsorted(sums.keys, (code + 1) * span)
    rows_in = int(sums.counts[first:last].sum())
    kept = np.arange(first, last)[sums.sums["weight"][first:last] > 0.0]
    low, high = sums.low["s"][kept], sums.high["s"][kept]
    mean = sums.sums["score_sum"][kept] / sums.sums["weight"][kept]
    tied = low == high
    return StratumCells(
        stratum=stratum,
        rows=rows_in,
        thresholds=np.where(tied, low, np.clip(mean, low, high)),
        positives=sums.sums["positives"][kept],
        negatives=sums.sums["negatives"][kept],
        tied=tied,
    )


def _stratum_name(value: object) -> str:
    """``str(value)``, as the in-memory engine names strata (``1`` and ``"1"`` alike)."""
    return str(value)


# --------------------------------------------------------------------------------- target


def target_strata(
    lazy: pl.LazyFrame,
    *,
    name: str,
    score_col: str,
    strata_col: str,
    score_kind: ScoreKind,
    label_col: str,
    positive_label: str | None,
    weight_col: str | None,
) -> TargetStrata:
    """Check the target (score, strata; labels and weights when it has labels) and count its
    rows per stratum, in one streaming pass, before anything is written.

    A target's labels may be missing (late labels: the rule of
    :meth:`~calib_cli.io.table.Table.partial_labels`), and are counted; the labels present
    are checked. A label column without any label is no label column: its labels and the
    weights (used with labels only) are not checked."""
    schema = lazy.collect_schema()
    _require_columns(schema, name, [(score_col, "--score-col"), (strata_col, "--strata-col")])
    has_labels = label_col in schema
    if has_labels and weight_col is not None:
        _require_columns(schema, name, [(weight_col, "--weight-col")])
    checks = [
        *_score_checks(score_col, schema[score_col], score_kind),
        *_strata_check(strata_col, schema[strata_col]),
    ]
    unlabelled_checks = len(checks)
    if has_labels:
        dtype = schema[label_col]
        missing = label_missing(label_col, dtype)
        _, is_valid = positive_label_expr(label_col, dtype, positive_label)
        checks.append(
            (label_col, label_problem(dtype), ~missing.fill_null(True) & ~is_valid.fill_null(False))
        )
        if weight_col is not None:
            checks += _weight_checks(weight_col, schema[weight_col])
        checks.append((label_col, "missing", missing))  # counted, not refused: kept last
    counts = lazy.group_by(pl.col(strata_col).alias("stratum")).agg(pl.len().alias("rows"))
    found = collect(lambda: _check_queries(lazy, checks).collect(engine="streaming"), name)
    hint = POSITIVE_LABEL_HINT if positive_label is None else ""
    grouped = collect(lambda: counts.collect(engine="streaming"), name)
    missing_labels = int(found[f"n{len(checks) - 1}"][0] or 0) if has_labels else 0
    labelled = has_labels and missing_labels < int(grouped["rows"].sum())
    _raise_first_failure(
        lazy, found, checks[: len(checks) - 1 if labelled else unlabelled_checks], name, hint
    )
    if grouped.height == 0:
        raise InputError(f"{name}: no data rows")
    grouped = grouped.with_columns(pl.col("stratum").cast(pl.String)).sort("stratum")
    strata = {
        _stratum_name(value): int(rows)
        for value, rows in zip(grouped["stratum"].to_list(), grouped["rows"].to_list(), strict=True)
    }
    return TargetStrata(
        rows=sum(strata.values()),
        strata=strata,
        columns=tuple(schema),
        labelled=labelled,
        missing_labels=missing_labels,
    )


def _coded(strata_col: str, codes: Mapping[str, int]) -> pl.Expr:
    return (
        pl.col(strata_col)
        .cast(pl.String)
        .replace_strict(list(codes), list(codes.values()), return_dtype=pl.Int64)
    )


def sink_reranked(
    lazy: pl.LazyFrame,
    *,
    name: str,
    destination: str,
    output_format: InputFormat | None,
    score_col: str,
    strata_col: str,
    score_kind: ScoreKind,
    codes: Mapping[str, int],
    rerank_map: RerankMap,
    rank_rows: RankFunction,
    columns: tuple[str, str, str],
    label_col: str | None = None,
    positive_label: str | None = None,
    weight_col: str | None = None,
    chunk_rows: int = CHUNK_ROWS,
    mantissa_bits: int = 12,
) -> ComparisonCounts | None:
    """Map every target row, rank all rows exactly, and stream the output (module docstring).

    ``rerank_map(scores, codes) -> (rerank_score, calibrated)`` is applied batch by batch;
    ``rank_rows(rerank_score, score)`` ranks one chunk (1 = best) by the in-memory rule.
    ``columns`` names the three added columns. With ``label_col``, returns the comparison
    counts of the labelled target.
    """
    if chunk_rows < 1:
        raise UsageError("chunk_rows must be positive")
    schema = lazy.collect_schema()
    score = _number(score_col, schema[score_col])
    # the stratum goes through as it is: turned into codes per batch, eagerly (a cast to text
    # and replace_strict in the streaming query held memory in proportion to the rows)
    inputs: list[pl.Expr] = [score.alias("s"), pl.col(strata_col).alias("g")]
    if label_col is not None:
        is_positive, _ = positive_label_expr(label_col, schema[label_col], positive_label)
        inputs.append(is_positive.fill_null(False).cast(pl.Float64).alias("y"))
        inputs.append(
            (pl.lit(1.0) if weight_col is None else _number(weight_col, schema[weight_col]))
            .cast(pl.Float64)
            .alias("w")
        )
        # a row whose label is missing (late labels) is left out of the comparison
        inputs.append(~label_missing(label_col, schema[label_col]).fill_null(True).alias("k"))
    score_name, calibrated_name, rank_name = columns
    with tempfile.TemporaryDirectory(prefix="calib-rerank-") as scratch_dir:
        scratch = Path(scratch_dir)
        # 1. the map, batch by batch, to scratch files in row order: row, r, p, s; with
        # 2. a histogram of the rerank scores (and the comparison counts), tallied per part in
        # memory and merged (a streaming group-by of the scratch files held memory in
        # proportion to the rows: 4.5 GB at 1e8 rows)
        (scratch / "mapped").mkdir()
        mapped, histogram, comparison = _map_to_parts(
            lazy.select(inputs),
            scratch / "mapped",
            rerank_map,
            codes,
            name,
            _MAP_BATCH_ROWS,
            cells=(score_kind, mantissa_bits) if label_col is not None else None,
        )
        n_rows = int(histogram["n"].sum())
        # 3. chunks of whole histogram buckets, ranked from the top; ranks regrouped by row
        starts = _chunk_starts(histogram["n"].to_numpy(), chunk_rows)
        bounds = histogram["b"].to_numpy()[starts]  # the first bucket of each chunk
        parts = scratch / "chunks"
        shift = 52 - RERANK_MANTISSA_BITS
        for index, source in enumerate(mapped):  # split each part by chunk, in memory
            part = pl.read_parquet(source, columns=["row", "r", "s"])
            bits = part["r"].to_numpy().view(np.int64) >> shift
            in_chunk = np.searchsorted(bounds, bits, side="right") - 1
            _write_split(part, in_chunk, parts, index)
            del part, bits, in_chunk
        counts = np.bincount(
            np.searchsorted(bounds, histogram["b"].to_numpy(), side="right") - 1,
            weights=histogram["n"].to_numpy(),
            minlength=bounds.size,
        ).astype(np.int64)
        above = np.concatenate((np.cumsum(counts[::-1])[::-1][1:], [0]))
        by_row = scratch / "by_row"
        for k in range(bounds.size):
            files = sorted((parts / f"{k:06d}").glob("*.parquet"))
            if not files:
                continue
            chunk = pl.scan_parquet(files).collect()
            for path in files:
                path.unlink()
            ranks = rank_rows(
                chunk["r"].to_numpy().astype(np.float64),
                chunk["s"].to_numpy().astype(np.float64),
            ) + int(above[k])
            row = chunk["row"].to_numpy()
            _write_split(pl.DataFrame({"row": row, "rank": ranks}), row // chunk_rows, by_row, k)
            del chunk, ranks, row
        ranked: list[Path] = []
        for j in range(math.ceil(n_rows / chunk_rows)):
            files = sorted((by_row / f"{j:06d}").glob("*.parquet"))
            path = scratch / f"ranks{j:09d}.parquet"
            pl.scan_parquet(files).collect().sort("row").select(
                pl.col("rank").alias(rank_name)
            ).write_parquet(path, compression=_SCRATCH_CODEC, statistics=False)
            for used in files:
                used.unlink()
            ranked.append(path)
        # 4. the output: the target, its mapped columns and its ranks, side by side in row order
        added = pl.scan_parquet(mapped).select(
            pl.col("r").alias(score_name), pl.col("p").alias(calibrated_name)
        )
        pieces = [lazy, added] + ([pl.scan_parquet(ranked)] if ranked else [])
        output = (
            pl.concat(pieces, how="horizontal")
            if ranked
            else lazy.with_columns(
                pl.lit(None, pl.Float64).alias(score_name),
                pl.lit(None, pl.Float64).alias(calibrated_name),
                pl.lit(None, pl.Int64).alias(rank_name),
            )
        )
        sink_table(output, destination, output_format_override=output_format)
    if not comparison:
        return None
    raw, reranked = comparison
    return ComparisonCounts(
        raw_positives=raw["pos"].to_numpy().astype(np.float64),
        raw_negatives=raw["neg"].to_numpy().astype(np.float64),
        reranked_positives=reranked["pos"].to_numpy().astype(np.float64),
        reranked_negatives=reranked["neg"].to_numpy().astype(np.float64),
    )


def _map_to_parts(
    inputs: pl.LazyFrame,
    folder: Path,
    rerank_map: RerankMap,
    codes: Mapping[str, int],
    name: str,
    part_rows: int,
    *,
    cells: tuple[ScoreKind, int] | None = None,
) -> tuple[list[Path], pl.DataFrame, list[pl.DataFrame]]:
    """Stream ``inputs`` (s, g[, y, w, k]; ``g`` the stratum, coded by ``codes``; ``k``
    whether the row's label is known) through ``rerank_map``; write the rows, in order, with
    their row number, rerank score ``r`` and calibrated ``p``, to files of at most
    ``part_rows`` rows; return the files in row order, the histogram of the rerank scores
    (``b``, the rerank score's bucket, and ``n``, its rows; ascending) and, with ``cells``
    (a labelled target), the weighted classes (``k``, ``pos``, ``neg``; ascending) per raw
    score cell and per rerank-score bucket of the rows whose label is known (the sums of a
    target of those rows only, to the bit).

    The inputs are first sunk by Polars into files of ``part_rows`` rows, then read one at a
    time: a sink waits for its writer, whereas a Python consumer of ``collect_batches`` slower
    than the reader lets batches pile up in memory. The histogram and the classes are summed
    per key in the rows' order (:class:`~calib_cli.core.keyed_sums.KeyedSums`), in memory
    bounded by their keys (cells of a grid)."""
    raw = folder / "inputs"
    collect(
        lambda: inputs.sink_parquet(
            pl.PartitionBy(raw, max_rows_per_file=part_rows), compression=_SCRATCH_CODEC
        ),
        name,
    )
    shift = 52 - RERANK_MANTISSA_BITS
    # per key, in the rows' order (the same bytes on every run): rows per bucket, and the
    # weighted classes per raw score cell and per bucket
    by_bucket = KeyedSums(("pos", "neg", "known") if cells is not None else ())
    by_cell = KeyedSums(("pos", "neg"))
    paths: list[Path] = []
    offset = 0
    for index, source in enumerate(sorted(raw.glob("*.parquet"))):
        batch = pl.read_parquet(source)
        source.unlink()
        s = batch["s"].to_numpy().astype(np.float64)
        c = batch.select(_coded("g", codes))["g"].to_numpy().astype(np.int64)
        r, p = rerank_map(s, c)
        n = s.size
        frame = pl.DataFrame(
            {"row": np.arange(offset, offset + n, dtype=np.int64), "r": r, "p": p, "s": s}
        )
        path = folder / f"{index:09d}.parquet"
        frame.write_parquet(path, compression=_SCRATCH_CODEC, statistics=False)
        paths.append(path)
        bucket = r.view(np.int64) >> shift
        if cells is None:
            by_bucket.add(bucket, {})
        else:
            kind, bits = cells
            grid_score = s if kind == "probability" else el.sigmoid(s)
            known = batch["k"].to_numpy().astype(np.bool_)
            y = np.where(known, batch["y"].to_numpy().astype(np.float64), 0.0)
            w = np.where(known, batch["w"].to_numpy().astype(np.float64), 0.0)
            classes = {"pos": w * y, "neg": w * (1.0 - y)}
            cell = cell_index(grid_score, mantissa_bits=bits)
            if known.all():
                by_cell.add(cell, classes)
            else:  # only the labelled rows' cells (adding zeros would add cells)
                by_cell.add(cell[known], {name: v[known] for name, v in classes.items()})
            # every row counts in the histogram; a bucket of unlabelled rows only is left out
            # of the comparison by its count of known labels (adding zeros changes no sum)
            by_bucket.add(bucket, {**classes, "known": known.astype(np.float64)})
            del grid_score, y, w, classes, known, cell
        offset += n
        del batch, frame, bucket, s, c, r, p
    counts = pl.DataFrame({"b": by_bucket.keys, "n": by_bucket.counts})
    if cells is None:
        return paths, counts, []
    labelled = by_bucket.sums["known"] > 0.0
    return (
        paths,
        counts,
        [
            pl.DataFrame(
                {"k": by_cell.keys, "pos": by_cell.sums["pos"], "neg": by_cell.sums["neg"]}
            ),
            pl.DataFrame(
                {
                    "k": by_bucket.keys[labelled],
                    "pos": by_bucket.sums["pos"][labelled],
                    "neg": by_bucket.sums["neg"][labelled],
                }
            ),
        ],
    )


def _write_split(frame: pl.DataFrame, keys: IntArray, folder: Path, index: int) -> None:
    """Write the rows of ``frame`` with key ``k`` to ``folder/k/index.parquet``, per key."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    cuts = np.flatnonzero(np.diff(sorted_keys)) + 1
    for start, stop in zip(
        np.concatenate(([0], cuts)), np.concatenate((cuts, [keys.size])), strict=True
    ):
        if stop <= start:
            continue
        target = folder / f"{int(sorted_keys[start]):06d}"
        target.mkdir(parents=True, exist_ok=True)
        frame[order[start:stop]].write_parquet(
            target / f"{index:09d}.parquet", compression=_SCRATCH_CODEC, statistics=False
        )


def _chunk_starts(counts: npt.NDArray[np.int64], chunk_rows: int) -> IntArray:
    """Indices of the buckets that start a chunk: greedy runs of buckets of at most
    ``chunk_rows`` rows (a bucket larger than that is a chunk of its own).

    >>> _chunk_starts(np.array([2, 2, 2, 5, 1]), 4).tolist()
    [0, 2, 3, 4]
    """
    starts = [0]
    total = 0
    for index, n in enumerate(counts.tolist()):
        if total and total + n > chunk_rows:
            starts.append(index)
            total = 0
        total += n
    return np.asarray(starts, dtype=np.int64)
