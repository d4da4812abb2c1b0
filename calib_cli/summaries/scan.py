"""The summary of a Polars lazy scan, by one streaming group-by (the only Polars code here).

:func:`summarize_lazy` computes, in one pass with Polars' streaming engine, the same
:class:`~calib_cli.summaries.summary.ScoreSummary` as
:func:`~calib_cli.summaries.summary.summarize_arrays` on the same rows (equal keys, counts,
minima and maxima; sums equal up to floating-point summation order); its memory is bounded by
the number of stored keys, not the rows. :func:`rows_in_cells` is the second pass: the rows of
chosen cells, grouped by distinct score, for
:func:`~calib_cli.summaries.figures.reliability_from_summary`.

The scan is expected to be validated upstream (``io``): scores in [0, 1], labels 0/1 (or
booleans), weights finite and non-negative. Whatever slips through is refused here after the
pass, naming the column: labels other than 0/1, missing or out-of-range scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import polars as pl

from calib_cli.errors import InputError
from calib_cli.summaries.figures import ResolvedCells
from calib_cli.summaries.grid import (
    DEFAULT_MANTISSA_BITS,
    check_bin_edges,
    check_mantissa_bits,
    half_cell,
)
from calib_cli.summaries.summary import (
    DEFAULT_BIN_EDGES,
    DEFAULT_EPS,
    GRID_KIND,
    SCHEMA_VERSION,
    SUMMARY_KIND,
    ScoreSummary,
)

__all__ = [
    "bin_expr",
    "cell_expr",
    "rows_in_cells",
    "summarize_lazy",
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
    """
    p, y, w = _inputs(score_column, label_column, weight_column)
    group = (
        pl.lit(None, pl.String) if group_column is None else pl.col(group_column).cast(pl.String)
    )
    keyed = scan.select(
        group.alias("group"),
        cell_expr(p, mantissa_bits=mantissa_bits).alias("cell"),
        bin_expr(p, bin_edges).alias("bin"),
        pl.col(label_column).cast(pl.Int8).alias("label"),
        p.alias("_p"),
        y.alias("_y"),
        w.alias("_w"),
    )
    p, y, w = pl.col("_p"), pl.col("_y"), pl.col("_w")
    q = p.clip(eps, 1.0 - eps)
    complement = 1.0 - p
    centred = 1.0 - 2.0 * p
    positive = w > 0.0
    loss = pl.when(y == 1.0).then(-q.log()).otherwise(-(-q).log1p())
    return keyed.group_by(["group", "cell", "bin", "label"]).agg(
        pl.len().cast(pl.Int64).alias("n_rows"),
        positive.cast(pl.Int64).sum().alias("n_rows_weighted"),
        w.sum().alias("weight"),
        (w * w).sum().alias("weight_sq"),
        (w * p).sum().alias("score_sum"),
        (w * p * p).sum().alias("score_sq_sum"),
        (w * complement).sum().alias("complement_sum"),
        (w * complement * complement).sum().alias("complement_sq_sum"),
        (w * loss).sum().alias("log_loss_sum"),
        (w * (q / (1.0 - q)).log()).sum().alias("logit_sum"),
        (w * ((y - p) * centred)).sum().alias("spiegelhalter_num"),
        (w * (centred * centred * p * complement)).sum().alias("spiegelhalter_var"),
        pl.when(positive).then(w).min().alias("weight_min"),
        pl.when(positive).then(p).min().alias("score_min"),
        pl.when(positive).then(p).max().alias("score_max"),
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
    }


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
    """The summary of a lazy scan, computed with the streaming engine.

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
    edges = [float(e) for e in check_bin_edges(bin_edges)]
    if not 0.0 < eps < 0.5:
        raise InputError(f"eps must be strictly between 0 and 0.5, got {eps!r}")
    options = {
        "score_column": score_column,
        "label_column": label_column,
        "weight_column": weight_column,
        "group_column": group_column,
        "bin_edges": edges,
        "mantissa_bits": check_mantissa_bits(mantissa_bits),
        "eps": float(eps),
    }
    frame = summary_plan(scan, **options).collect(engine="streaming")  # type: ignore[arg-type]
    return summary_from_frame(frame, _metadata(**options))  # type: ignore[arg-type]


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
