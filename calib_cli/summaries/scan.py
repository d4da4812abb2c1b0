"""The summary of a Polars lazy scan (the only Polars code here).

:func:`summarize_lazy` computes, in one streaming pass, the same
:class:`~calib_cli.summaries.summary.ScoreSummary` as
:func:`~calib_cli.summaries.summary.summarize_arrays` on the same rows (equal keys, counts,
minima and maxima; sums equal up to floating-point summation order). Polars reads only the
columns needed, in batches, in the scan's order; NumPy adds each batch's keys and terms row by
row (:mod:`calib_cli.summaries.accumulate`), so the same file gives the same bytes on every run
(a multi-threaded group-by merges partial sums in whatever order its threads finish). Memory is
bounded by the stored keys and a few batches, not the rows. :func:`refine_dense_lazy` is the
second pass (:mod:`calib_cli.summaries.dense`); :func:`summary_plan` is the same summary as a
Polars group-by (used where a fit is collected along with a sink). :func:`rows_in_cells`
brings back the rows of chosen cells, grouped by distinct score.

The scan is expected to be validated upstream (``io``): scores in [0, 1], labels 0/1 (or
booleans), weights finite and non-negative. Whatever slips through is refused here, naming the
column: labels other than 0/1, missing or out-of-range scores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from calib_cli.core.scatter import import_in_background
from calib_cli.errors import InputError
from calib_cli.summaries.accumulate import (
    GridSums,
    TermBatch,
    check_batch_values,
    in_order_ahead,
    term_batch,
)
from calib_cli.summaries.dense import DenseBatch, refine_batches
from calib_cli.summaries.figures import (
    DEFAULT_AUC_TOLERANCE,
    DEFAULT_MAX_SLOTS,
    RefinementLevel,
    RefinementPlan,
    ResolvedCells,
    plan_dense_refinement,
)
from calib_cli.summaries.grid import (
    DEFAULT_MANTISSA_BITS,
    MAX_MANTISSA_BITS,
    check_bin_edges,
    check_mantissa_bits,
    half_cell,
)
from calib_cli.summaries.subcells import SubCells
from calib_cli.summaries.summary import (
    DEFAULT_BIN_EDGES,
    DEFAULT_EPS,
    GRID_KIND,
    SCHEMA_VERSION,
    SUMMARY_KIND,
    ScoreSummary,
    check_eps,
)
from calib_cli.types import BinStrategy

__all__ = [
    "FlaggedRowError",
    "bin_expr",
    "cell_expr",
    "dense_batches",
    "holds_no_rows",
    "refine_dense_lazy",
    "refinement_level_lazy",
    "rows_in_cells",
    "summarize_lazy",
    "summarize_lazy_many",
    "summarize_lazy_sub_cells",
    "summary_from_frame",
    "summary_plan",
]


def cell_expr(score: pl.Expr, *, mantissa_bits: int = DEFAULT_MANTISSA_BITS) -> pl.Expr:
    """The grid cell of a score column, bit for bit :func:`~calib_cli.summaries.grid.cell_index`.

    ``bits >> s`` is written ``bits // 2**s`` (equal for the non-negative patterns used).

    Examples
    --------
    >>> df = pl.DataFrame({"p": [0.0, 1e-300, 0.25, 0.5, 0.75, 1.0]})
    >>> df.select(cell_expr(pl.col("p"))).to_series().to_list()
    [0, 107887, 4182017, 4186113, 4190209, 8372226]
    """
    s = 52 - check_mantissa_bits(mantissa_bits)
    h = half_cell(mantissa_bits)
    p = score.cast(pl.Float64)
    low = p <= 0.5
    x = pl.when(low).then(p).otherwise(1.0 - p)
    f = (
        pl.when(x == 0.0)
        .then(pl.lit(0, pl.Int64))
        .otherwise(x.reinterpret(dtype=pl.Int64) // (1 << s) + 1)
    )
    return pl.when(low).then(f).otherwise(2 * h - f).cast(pl.Int64)


def bin_expr(score: pl.Expr, bin_edges: Sequence[float]) -> pl.Expr:
    """The reliability bin: the number of inner edges strictly below the score.

    Examples
    --------
    >>> df = pl.DataFrame({"p": [0.0, 0.5, 0.50001, 1.0]})
    >>> df.select(bin_expr(pl.col("p"), [0.0, 0.5, 1.0])).to_series().to_list()
    [0, 0, 1, 1]
    """
    inner = [float(e) for e in check_bin_edges(bin_edges)[1:-1]]
    if not inner:
        return pl.lit(0, pl.Int32)
    p = score.cast(pl.Float64)
    return pl.sum_horizontal([(p > e).cast(pl.Int32) for e in inner]).cast(pl.Int32)


def _inputs(
    score_column: str, label_column: str, weight_column: str | None
) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    p = pl.col(score_column).cast(pl.Float64)
    y = pl.col(label_column).cast(pl.Float64)
    w = pl.lit(1.0) if weight_column is None else pl.col(weight_column).cast(pl.Float64)
    return p, y, w


def _packable(mantissa_bits: int, n_bins: int) -> bool:
    """Whether (cell, bin, label) packs into one int64: cell < 2**(m + 11), 8 bits of label."""
    return mantissa_bits + 11 + max(n_bins - 1, 1).bit_length() + 8 <= 62


def summary_plan(
    scan: pl.LazyFrame,
    *,
    score_column: str = "score",
    label_column: str = "label",
    weight_column: str | None = None,
    group_column: str | None = None,
    bin_edges: Sequence[float] = DEFAULT_BIN_EDGES,
    mantissa_bits: int = DEFAULT_MANTISSA_BITS,
    eps: float = DEFAULT_EPS,
) -> pl.LazyFrame:
    """The lazy group-by behind :func:`summarize_lazy` (collect several with ``pl.collect_all``).

    One output row per (group, cell, bin, label) with the columns of the summary format.
    The pass aggregates fewer terms than the format stores, and derives the rest per key,
    without cancellation: with :math:`x = \\min(p, 1 - p)` (exact), the sums of :math:`w x`
    and :math:`w x^2` give ``score_sum``, ``complement_sum`` and their squares (the far side
    is :math:`W - \\sum w x \\ge W/2`, resp. :math:`W - 2\\sum w x + \\sum w x^2 \\ge W/4`;
    which side is which is the cell's tail); the sums of :math:`w \\log q` and
    :math:`w \\log(1 - q)` give ``log_loss_sum`` (the label is the key's) and ``logit_sum``;
    without a weight column the weight sums are the row counts. The key (cell, bin, label)
    is packed into one int64 when it fits (hashing one integer is cheaper than three).
    """
    m = check_mantissa_bits(mantissa_bits)
    edges = [float(e) for e in check_bin_edges(bin_edges)]
    n_bins = len(edges) - 1
    h = half_cell(m)
    weighted = weight_column is not None
    p, y, w = _inputs(score_column, label_column, weight_column)
    packed = _packable(m, n_bins)
    p_raw = pl.col(score_column).cast(pl.Float64)
    label = pl.col(label_column).cast(pl.Int8)
    cell = cell_expr(p_raw, mantissa_bits=m)
    bin_ = bin_expr(p_raw, edges).cast(pl.Int64)
    # Key and per-row inputs computed once, in one projection (only the needed columns).
    columns: list[pl.Expr] = [p.alias("_p"), y.alias("_y")]
    if weighted:
        columns.append(w.alias("_w"))
    keys: list[str] = []
    if group_column is not None:
        columns.append(pl.col(group_column).cast(pl.String).alias("group"))
        keys.append("group")
    if packed:
        columns.append(((cell * n_bins + bin_) * 256 + (label.cast(pl.Int64) + 128)).alias("_key"))
        keys.append("_key")
    else:
        columns += [cell.alias("cell"), bin_.cast(pl.Int32).alias("bin"), label.alias("label")]
        keys += ["cell", "bin", "label"]
    scan = scan.select(columns).with_columns(
        pl.when(pl.col("_p") <= 0.5).then(pl.col("_p")).otherwise(1.0 - pl.col("_p")).alias("_x")
    )
    p, y, x = pl.col("_p"), pl.col("_y"), pl.col("_x")
    w = pl.col("_w") if weighted else pl.lit(1.0)
    q = p.clip(eps, 1.0 - eps)
    centred = 1.0 - 2.0 * p

    def total(term: pl.Expr) -> pl.Expr:
        return (w * term).sum() if weighted else term.sum()

    aggs = [
        pl.len().cast(pl.Int64).alias("n_rows"),
        total(x).alias("_near"),
        total(x * x).alias("_near_sq"),
        total(q.log()).alias("_log_q"),
        total((-q).log1p()).alias("_log_1mq"),
        total((y - p) * centred).alias("spiegelhalter_num"),
        total(centred * centred * p * (1.0 - p)).alias("spiegelhalter_var"),
    ]
    positive = w > 0.0
    if weighted:
        aggs += [
            positive.cast(pl.Int64).sum().alias("n_rows_weighted"),
            w.sum().alias("weight"),
            (w * w).sum().alias("weight_sq"),
            pl.when(positive).then(w).min().alias("weight_min"),
            pl.when(positive).then(p).min().alias("score_min"),
            pl.when(positive).then(p).max().alias("score_max"),
        ]
    else:
        aggs += [p.min().alias("score_min"), p.max().alias("score_max")]
    out = scan.group_by(keys).agg(aggs)
    if packed:
        key = pl.col("_key")
        out = out.with_columns(
            (key // (256 * n_bins)).alias("cell"),
            ((key // 256) % n_bins).cast(pl.Int32).alias("bin"),
            ((key % 256) - 128).cast(pl.Int8).alias("label"),
        )
    if group_column is None:
        out = out.with_columns(pl.lit(None, pl.String).alias("group"))
    if not weighted:
        out = out.with_columns(
            pl.col("n_rows").alias("n_rows_weighted"),
            pl.col("n_rows").cast(pl.Float64).alias("weight"),
            pl.col("n_rows").cast(pl.Float64).alias("weight_sq"),
            pl.lit(1.0).alias("weight_min"),
        )
    low = pl.col("cell") <= h
    near, near_sq, weight = pl.col("_near"), pl.col("_near_sq"), pl.col("weight")
    far = weight - near
    far_sq = weight - 2.0 * near + near_sq
    positive_key = pl.col("label") == 1
    return out.select(
        "group",
        pl.col("cell").cast(pl.Int64),
        pl.col("bin").cast(pl.Int32),
        pl.col("label").cast(pl.Int8),
        "n_rows",
        pl.col("n_rows_weighted").cast(pl.Int64),
        "weight",
        "weight_sq",
        pl.when(low).then(near).otherwise(far).alias("score_sum"),
        pl.when(low).then(near_sq).otherwise(far_sq).alias("score_sq_sum"),
        pl.when(low).then(far).otherwise(near).alias("complement_sum"),
        pl.when(low).then(far_sq).otherwise(near_sq).alias("complement_sq_sum"),
        pl.when(positive_key)
        .then(-pl.col("_log_q"))
        .otherwise(-pl.col("_log_1mq"))
        .alias("log_loss_sum"),
        (pl.col("_log_q") - pl.col("_log_1mq")).alias("logit_sum"),
        "spiegelhalter_num",
        "spiegelhalter_var",
        pl.col("weight_min").cast(pl.Float64),
        "score_min",
        "score_max",
    )


def _metadata(
    *,
    score_column: str,
    label_column: str,
    weight_column: str | None,
    group_column: str | None,
    bin_edges: Sequence[float],
    mantissa_bits: int,
    eps: float,
    positive_label: str | None = None,
) -> dict[str, object]:
    return {
        "kind": SUMMARY_KIND,
        "schema_version": SCHEMA_VERSION,
        "grid": {"kind": GRID_KIND, "mantissa_bits": mantissa_bits},
        "bin_edges": [float(e) for e in bin_edges],
        "eps": eps,
        "score_column": score_column,
        "label_column": label_column,
        "weight_column": weight_column,
        "group_column": group_column,
        "positive_label": positive_label,
    }


def holds_no_rows(scan: pl.LazyFrame) -> bool:
    """Whether a scan holds no rows, found by reading its first row at most (a Parquet file's
    first row group, a CSV file's first lines): an empty table or partition.

    >>> holds_no_rows(pl.LazyFrame({"score": []})), holds_no_rows(pl.LazyFrame({"score": [0.5]}))
    (True, False)
    """
    return scan.head(1).collect(engine="streaming").height == 0


def summary_from_frame(frame: pl.DataFrame, metadata: dict[str, object]) -> ScoreSummary:
    """A collected :func:`summary_plan` (or a read summary file) as a ScoreSummary.

    Refuses, naming the column, keys that only bad rows can make: missing scores or labels,
    labels other than 0/1, scores outside [0, 1].
    """
    label = str(metadata["label_column"])
    score = str(metadata["score_column"])
    if frame.height:
        if frame["cell"].null_count() or frame["bin"].null_count():
            raise InputError(f"column '{score}' has missing values")
        if frame["label"].null_count():
            raise InputError(f"column '{label}' has missing values")
    cols: dict[str, npt.ArrayLike] = {
        name: frame[name].to_numpy() for name in frame.columns if name != "group"
    }
    for name in ("weight_min", "score_min", "score_max"):
        cols[name] = frame[name].cast(pl.Float64).fill_null(np.nan).to_numpy()
    cols["group"] = np.array([*frame["group"].to_list(), None], dtype=object)[:-1]
    lo, hi = np.asarray(cols["score_min"]), np.asarray(cols["score_max"])
    if np.any(np.isnan(frame["score_sum"].to_numpy())) or np.any((lo < 0.0) | (hi > 1.0)):
        raise InputError(f"column '{score}' has values that are NaN or outside [0, 1]")
    labels = np.asarray(cols["label"])
    if np.any((labels != 0) & (labels != 1)):
        raise InputError(f"column '{label}' has values that are not 0 or 1")
    return ScoreSummary.from_columns(cols, metadata)


def summarize_lazy(
    scan: pl.LazyFrame,
    *,
    score_column: str = "score",
    label_column: str = "label",
    weight_column: str | None = None,
    group_column: str | None = None,
    bin_edges: Sequence[float] = DEFAULT_BIN_EDGES,
    mantissa_bits: int = DEFAULT_MANTISSA_BITS,
    eps: float = DEFAULT_EPS,
) -> ScoreSummary:
    """The summary of a lazy scan, in one streaming pass.

    Polars' streaming engine computes each row's key and terms; they are added batch by
    batch in the scan's order (:class:`~calib_cli.summaries.accumulate.GridSums`), so the
    same file gives the same bytes on every run. Memory: the keys and one batch.

    Parameters
    ----------
    scan : polars.LazyFrame
        The rows (``pl.scan_parquet``, ``scan_csv``, ``scan_ipc``, ``scan_ndjson``, ...).
    score_column, label_column, weight_column, group_column : str or None
        Columns: probability score, 0/1 label, optional frequency weight, optional group.
    bin_edges, mantissa_bits, eps
        As in :func:`~calib_cli.summaries.summary.summarize_arrays`.

    Returns
    -------
    ScoreSummary

    Examples
    --------
    >>> rows = pl.LazyFrame({"score": [0.2, 0.7, 0.7], "label": [0, 1, 1]})
    >>> s = summarize_lazy(rows)
    >>> s.n_keys, s.weight.tolist(), s.n_rows.tolist()
    (2, [1.0, 2.0], [1, 2])
    """
    return summarize_lazy_many(
        scan,
        [score_column],
        label_column=label_column,
        weight_column=weight_column,
        group_column=group_column,
        bin_edges=bin_edges,
        mantissa_bits=mantissa_bits,
        eps=eps,
    )[score_column]


#: Rows of one batch of a streaming pass: batches of a few MB keep NumPy's temporaries in
#: cache (larger ones cost more per row, and memory).
BATCH_ROWS = 1 << 18
#: Rows per block of a summary pass: each key's sums add the rows of a block from zero, in
#: their order, then the blocks' sums in theirs (:class:`~calib_cli.summaries.accumulate.
#: BlockSums`), so the bytes depend on this constant, never on ``batch_rows`` or the threads.
BLOCK_ROWS = 1 << 18
#: Worker threads of a summary pass: they compute each block's terms and sums, and count its
#: sub-cells, while the main thread adds the blocks in order. Their scatters run without the
#: GIL (:mod:`calib_cli.core.scatter`). On two cores two took 0.96x the time and 0.94x the
#: CPU of three (paired runs at 1e8 rows), one 1.23x the time. The bytes never depend on it.
WORKERS = 2


#: Sub-cell bits a summary pass adds for the ranking figures by default: on the benchmark's
#: scores a 16-bit grid leaves an AUC bound of about 7e-7 (:mod:`calib_cli.summaries.subcells`).
DEFAULT_SUB_BITS = 4


class FlaggedRowError(Exception):
    """A batch holds a row whose ``flag_column`` is true (:func:`summarize_lazy_sub_cells`)."""


class _GroupCodes:
    """Group values (text, None: missing) to int32 codes, in order of first appearance."""

    def __init__(self) -> None:
        self.names: list[str | None] = []
        self.codes: dict[str | None, int] = {}

    def __call__(self, values: pl.Series) -> npt.NDArray[np.int32]:
        for value in values.unique(maintain_order=True).to_list():
            if value not in self.codes:
                self.codes[value] = len(self.names)
                self.names.append(value)
        known = [v for v in self.codes if v is not None]
        codes = values.replace_strict(
            known, [self.codes[v] for v in known], default=None, return_dtype=pl.Int32
        )
        if None in self.codes:
            codes = codes.fill_null(self.codes[None])
        return codes.to_numpy().astype(np.int32, copy=False)


def term_batches(
    scan: pl.LazyFrame,
    score_columns: Sequence[str],
    *,
    label_column: str,
    weight_column: str | None,
    group_column: str | None,
    bin_edges: Sequence[float],
    mantissa_bits: int,
    eps: float,
    batch_rows: int = BATCH_ROWS,
    sub_bits: int = 0,
    flag_column: str | None = None,
    prepare: Callable[[str, TermBatch], TermBatch] | None = None,
) -> tuple[Iterator[dict[str, TermBatch]], _GroupCodes]:
    """The scan's rows as batches of keys and terms (one :class:`~calib_cli.summaries.
    accumulate.TermBatch` per score column), in the scan's order; and the group codes
    (filled as the batches are read). Polars reads only the columns needed."""
    columns: list[pl.Expr] = [pl.col(label_column).cast(pl.Int8).alias("\x00label")]
    if weight_column is not None:
        columns.append(pl.col(weight_column).cast(pl.Float64).alias("\x00weight"))
    if group_column is not None:
        columns.append(pl.col(group_column).cast(pl.String).alias("\x00group"))
    columns += [pl.col(name).cast(pl.Float64).alias(name) for name in score_columns]
    if flag_column is not None:
        columns.append(pl.col(flag_column).alias("\x00flag"))
    rows = scan.select(columns)
    codes = _GroupCodes()
    edges = np.asarray(bin_edges, dtype=np.float64)

    def terms(frame: pl.DataFrame) -> dict[str, TermBatch]:
        if flag_column is not None and frame["\x00flag"].any():
            raise FlaggedRowError(flag_column)
        for name in score_columns:
            if frame[name].null_count():
                raise InputError(f"column '{name}' has missing values")
        if frame["\x00label"].null_count():
            raise InputError(f"column '{label_column}' has missing values")
        label = frame["\x00label"].to_numpy()
        weight = None if weight_column is None else frame["\x00weight"].to_numpy()
        group = codes(frame["\x00group"]) if group_column is not None else None
        out = {}
        for name in score_columns:
            score = frame[name].to_numpy()
            batch = term_batch(
                label,
                score,
                sample_weight=weight,
                bin_edges=edges,
                mantissa_bits=mantissa_bits,
                eps=eps,
                group=group,
                sub_bits=sub_bits,
            )
            check_batch_values(batch, score_column=name, label_column=label_column)
            out[name] = batch if prepare is None else prepare(name, batch)
        return out

    import_in_background()  # the workers' scatters: while the first rows are read
    chunks = rows.collect_batches(chunk_size=batch_rows, maintain_order=True)
    return in_order_ahead(_exact_blocks(chunks, BLOCK_ROWS), terms, workers=WORKERS), codes


def _exact_blocks(frames: Iterable[pl.DataFrame], rows: int) -> Iterator[pl.DataFrame]:
    """``frames`` cut again into blocks of exactly ``rows`` rows (the last one shorter): their
    bounds depend on the row count only, never on how the streaming engine happens to cut
    its chunks, so sums added block by block are the same bytes on every run."""
    held: list[pl.DataFrame] = []
    n_held = 0
    for chunk in frames:
        held.append(chunk)
        n_held += chunk.height
        while n_held >= rows:
            frame = pl.concat(held, rechunk=True) if len(held) > 1 else held[0]
            yield frame.slice(0, rows)
            rest = frame.slice(rows)
            held, n_held = ([rest] if rest.height else []), rest.height
    if n_held:
        yield pl.concat(held, rechunk=True)


def summarize_lazy_many(
    scan: pl.LazyFrame,
    score_columns: Sequence[str],
    *,
    label_column: str = "label",
    weight_column: str | None = None,
    group_column: str | None = None,
    bin_edges: Sequence[float] = DEFAULT_BIN_EDGES,
    mantissa_bits: int = DEFAULT_MANTISSA_BITS,
    eps: float = DEFAULT_EPS,
    batch_rows: int = BATCH_ROWS,
) -> dict[str, ScoreSummary]:
    """One summary per score column, from one streaming pass over the scan (as
    :func:`summarize_lazy`). ``batch_rows`` changes the memory, never the bytes.

    Examples
    --------
    >>> rows = pl.LazyFrame({"a": [0.2, 0.7], "b": [0.1, 0.9], "label": [0, 1]})
    >>> out = summarize_lazy_many(rows, ["a", "b"])
    >>> sorted(out), out["b"].score_max.tolist()
    (['a', 'b'], [0.1, 0.9])
    """
    out = summarize_lazy_sub_cells(
        scan,
        score_columns,
        label_column=label_column,
        weight_column=weight_column,
        group_column=group_column,
        bin_edges=bin_edges,
        mantissa_bits=mantissa_bits,
        eps=eps,
        batch_rows=batch_rows,
        sub_bits=0,
    )
    return {name: summary for name, (summary, _) in out.items()}


#: The finest grid whose keys are kept in pages of 256 cells (a table lookup per row); finer
#: grids keep a page per key, found by a search (memory: the occupied keys only).
PAGED_MAX_BITS = 12


def summarize_lazy_sub_cells(
    scan: pl.LazyFrame,
    score_columns: Sequence[str],
    *,
    label_column: str = "label",
    weight_column: str | None = None,
    group_column: str | None = None,
    bin_edges: Sequence[float] = DEFAULT_BIN_EDGES,
    mantissa_bits: int = DEFAULT_MANTISSA_BITS,
    eps: float = DEFAULT_EPS,
    batch_rows: int = BATCH_ROWS,
    sub_bits: int = DEFAULT_SUB_BITS,
    flag_column: str | None = None,
    on_rows: Callable[[int], None] | None = None,
    positive_label: str | None = None,
) -> dict[str, tuple[ScoreSummary, SubCells | None]]:
    """:func:`summarize_lazy_many`, and in the same pass each column's sub-cells on a grid
    ``sub_bits`` finer (:mod:`calib_cli.summaries.subcells`; None when they would take more
    than :data:`~calib_cli.summaries.accumulate.SUB_MAX_BYTES`, or ``sub_bits`` is 0).
    ``flag_column``: a boolean column of the scan; the pass stops with :class:`FlaggedRowError`
    at the first batch where it is true (a check deferred to this pass,
    :func:`calib_cli.io.scored_scan`). ``on_rows(n)``: called after each block with the rows
    read so far (a progress display). ``positive_label``: the rule that made the scan's 0/1
    labels (:func:`calib_cli.io.scored_scan`), recorded in the summaries' metadata.

    Examples
    --------
    >>> rows = pl.LazyFrame({"score": [0.30001, 0.30002, 0.9], "label": [0, 1, 1]})
    >>> summary, sub = summarize_lazy_sub_cells(rows, ["score"])["score"]
    >>> summary.n_keys, sub.n_keys, sub.mantissa_bits
    (3, 2, 16)
    """
    names = list(dict.fromkeys(score_columns))
    if not names:
        raise InputError("score_columns must name at least one column")
    edges = [float(e) for e in check_bin_edges(bin_edges)]
    check_eps(eps)
    bits = check_mantissa_bits(mantissa_bits)
    sub_bits = min(sub_bits, MAX_MANTISSA_BITS - bits)
    # One group on the default grid: pages of 256 keys in a table (a few dozen pages for real
    # scores). Groups (perhaps thousands, each with few keys), or a finer grid (at 20 bits a
    # page of 256 cells holds one or two occupied keys, and slots for all 256: 7 GB at 1e7
    # rows): a page per key, searched, so that memory is the keys.
    searched = group_column is not None or bits > PAGED_MAX_BITS
    sums = {
        name: GridSums(
            mantissa_bits=bits,
            n_bins=len(edges) - 1,
            weighted=weight_column is not None,
            page_bits=0 if searched else 8,
            search=searched,
            sub_bits=sub_bits,
            counting_threads=0 if searched else WORKERS,
        )
        for name in names
    }
    batches, codes = term_batches(
        scan,
        names,
        label_column=label_column,
        weight_column=weight_column,
        group_column=group_column,
        bin_edges=edges,
        mantissa_bits=bits,
        eps=float(eps),
        batch_rows=batch_rows,
        sub_bits=sub_bits,
        flag_column=flag_column,
        prepare=lambda name, batch: sums[name].sums_ahead(batch),  # in the workers
    )
    read = 0
    for batch in batches:
        for name in names:
            sums[name].add(batch[name])
        if on_rows is not None:
            read += batch[names[0]].score.size
            on_rows(read)
    groups = codes.names if group_column is not None else [None]
    shared: dict[str, Any] = {
        "label_column": label_column,
        "weight_column": weight_column,
        "group_column": group_column,
        "bin_edges": edges,
        "mantissa_bits": bits,
        "eps": float(eps),
        "positive_label": positive_label,
    }
    out: dict[str, tuple[ScoreSummary, SubCells | None]] = {}
    for name in names:  # sub-cells first, their counts freed before the summary is built
        done = sums.pop(name)
        sub = done.sub_cells(groups, edges)
        done.drop_sub_cells()
        out[name] = (done.summary(groups, _metadata(score_column=name, **shared)), sub)
        del done
    return out


def _rows_of_group(scan: pl.LazyFrame, summary: ScoreSummary) -> pl.LazyFrame:
    if summary.group_column is None:
        return scan
    if len(summary.groups) != 1:
        raise InputError(
            f"the summary holds {len(summary.groups)} groups of {summary.group_column!r}: "
            "refine one (select_group()) or all of them pooled (pooled())"
        )
    column = pl.col(summary.group_column).cast(pl.String)
    name = summary.groups[0]
    return scan.filter(column.is_null() if name is None else column == name)


def refinement_level_lazy(
    scan: pl.LazyFrame, plan: RefinementPlan, *, summary: ScoreSummary
) -> RefinementLevel:
    """One refinement pass: the rows of ``plan``'s parent cells, summarised on its finer grid.

    ``summary`` is the one-group summary being refined (its group's rows are kept; a pooled
    summary keeps every row). Memory: at most ``plan.max_keys`` keys.
    """
    p = pl.col(summary.score_column).cast(pl.Float64)
    inside = pl.any_horizontal(
        [
            cell_expr(p, mantissa_bits=bits).is_in(
                pl.lit(pl.Series(np.asarray(cells, dtype=np.int64))).implode()
            )
            for bits, cells in plan.parents
        ]
    )
    options: dict[str, Any] = {
        "score_column": summary.score_column,
        "label_column": summary.label_column,
        "weight_column": summary.weight_column,
        "group_column": None,
        "bin_edges": list(summary.bin_edges),
        "mantissa_bits": plan.mantissa_bits,
        "eps": summary.eps,
    }
    rows = _rows_of_group(scan, summary).filter(inside)
    frame = summary_plan(rows, **options).collect(engine="streaming")
    metadata = _metadata(**options, positive_label=summary.positive_label)
    return RefinementLevel(plan=plan, summary=summary_from_frame(frame, metadata))


#: Rows of one batch of a dense refinement pass (the NumPy temporaries are about 150 bytes a
#: row: 1M rows, about 150 MB).
DENSE_BATCH_ROWS = 1 << 18


def dense_batches(
    scan: pl.LazyFrame, summary: ScoreSummary, *, batch_rows: int = DENSE_BATCH_ROWS
) -> Iterator[DenseBatch]:
    """The rows of ``summary``'s group as NumPy batches of exactly ``batch_rows`` rows (the
    last one shorter), in the scan's order, streamed (never the whole scan in memory).

    The batches' bounds depend on the row count only, never on how the streaming engine
    happens to cut its chunks, so sums added batch by batch are the same bytes every run.
    """
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise InputError(f"batch_rows must be a positive integer, got {batch_rows!r}")
    p, _, _ = _inputs(summary.score_column, summary.label_column, summary.weight_column)
    columns = [p.alias("score"), pl.col(summary.label_column).cast(pl.Int8).alias("label")]
    if summary.weight_column is not None:
        columns.append(pl.col(summary.weight_column).cast(pl.Float64).alias("weight"))
    rows = _rows_of_group(scan, summary).select(columns)

    def batch(frame: pl.DataFrame) -> DenseBatch:
        return DenseBatch(
            score=frame["score"].to_numpy(),
            label=frame["label"].to_numpy(),
            weight=frame["weight"].to_numpy() if "weight" in frame.columns else None,
        )

    chunks = rows.collect_batches(chunk_size=batch_rows, maintain_order=True)
    for frame in _exact_blocks(chunks, batch_rows):
        yield batch(frame)


def refine_dense_lazy(
    scan: pl.LazyFrame,
    summary: ScoreSummary,
    *,
    auc_tolerance: float = DEFAULT_AUC_TOLERANCE,
    n_bins: int | None = None,
    strategy: BinStrategy = "uniform",
    max_slots: int = DEFAULT_MAX_SLOTS,
    max_passes: int = 3,
    batch_rows: int = DENSE_BATCH_ROWS,
    levels: Sequence[RefinementLevel] = (),
) -> tuple[RefinementLevel, ...]:
    """Dense refinement passes over the scan until the AUC bound meets ``auc_tolerance``.

    Each pass plans per-cell depths (:func:`~calib_cli.summaries.figures.
    plan_dense_refinement`) and reads the rows once, in batches, into flat arrays of at most
    ``max_slots`` slots (:func:`~calib_cli.summaries.dense.refine_batches`): memory bounded by
    the slots and a batch, never the rows. Usually one pass; at most ``max_passes``. Give the
    levels to :func:`~calib_cli.summaries.figures.reliability_from_summary` (``refinement=``):
    the same figures as :func:`refinement_level_lazy`'s levels would give on the same plans.
    ``levels`` are passes already made (the new levels come after them; only the new ones are
    returned).

    Examples
    --------
    >>> from calib_cli.summaries.figures import reliability_from_summary
    >>> rows = pl.LazyFrame({"score": [0.31, 0.31001, 0.31002, 0.9], "label": [0, 1, 0, 1]})
    >>> s = summarize_lazy(rows)
    >>> levels = refine_dense_lazy(rows, s)
    >>> len(levels), reliability_from_summary(s, refinement=levels).exactness.auc_bound
    (1, 0.0)
    """
    done: list[RefinementLevel] = list(levels)
    for _ in range(max_passes):
        plans = plan_dense_refinement(
            summary,
            done,
            auc_tolerance=auc_tolerance,
            n_bins=n_bins,
            strategy=strategy,
            max_slots=max_slots,
        )
        if not plans:
            break
        batches = dense_batches(scan, summary, batch_rows=batch_rows)
        done.extend(refine_batches(summary, plans, batches))
    return tuple(done[len(levels) :])


# ---------------------------------------------------------------------------------------------
# The Parquet file form
# ---------------------------------------------------------------------------------------------


def rows_in_cells(
    scan: pl.LazyFrame,
    keys: tuple[npt.ArrayLike, npt.ArrayLike],
    *,
    summary: ScoreSummary,
    group: str | None = None,
) -> ResolvedCells:
    """The second pass: the rows of the (bin, cell) ``keys``, grouped by distinct score.

    ``keys`` is what :func:`~calib_cli.summaries.figures.cells_to_resolve` returns;
    ``summary`` names the columns, grid and edges. With a group column, only the rows of
    ``group`` are kept. Memory: the distinct scores of the chosen cells.

    Examples
    --------
    >>> from calib_cli.summaries.figures import cells_to_resolve
    >>> rows = pl.LazyFrame({"score": [0.31, 0.31001, 0.9], "label": [0, 1, 1]})
    >>> s = summarize_lazy(rows)
    >>> r = rows_in_cells(rows, cells_to_resolve(s), summary=s)
    >>> r.score.tolist(), r.label.tolist()
    ([0.31, 0.31001], [0, 1])
    """
    p, _, w = _inputs(summary.score_column, summary.label_column, summary.weight_column)
    wanted = pl.LazyFrame(
        {
            "bin": np.asarray(keys[0], dtype=np.int32),
            "cell": np.asarray(keys[1], dtype=np.int64),
        }
    )
    rows = scan
    if summary.group_column is not None:
        column = pl.col(summary.group_column).cast(pl.String)
        rows = rows.filter(column.is_null() if group is None else column == group)
    keyed = rows.select(
        bin_expr(p, summary.bin_edges).alias("bin"),
        cell_expr(p, mantissa_bits=summary.mantissa_bits).alias("cell"),
        p.alias("score"),
        pl.col(summary.label_column).cast(pl.Int8).alias("label"),
        w.alias("_w"),
    )
    frame = (
        keyed.join(wanted, on=["bin", "cell"], how="semi")
        .group_by(["bin", "cell", "score", "label"])
        .agg(pl.col("_w").sum().alias("weight"), pl.len().cast(pl.Int64).alias("n_rows"))
        .sort(["bin", "cell", "score", "label"])
        .collect(engine="streaming")
    )
    return ResolvedCells(
        bin=frame["bin"].to_numpy().astype(np.int64),
        cell=frame["cell"].to_numpy().astype(np.int64),
        score=frame["score"].to_numpy().astype(np.float64),
        label=frame["label"].to_numpy().astype(np.int8),
        weight=frame["weight"].to_numpy().astype(np.float64),
        n_rows=frame["n_rows"].to_numpy().astype(np.int64),
    )
