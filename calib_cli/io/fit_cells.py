"""The refinement passes of an exact fit on a summary: chosen cells again, on a finer grid.

A fit made on a summary holds the rows of each grid cell at one point; for the isotonic fit,
:func:`calib_cli.core.isotonic.fit_isotonic_units` names the cells that the fit on the rows
could split. This pass reads the fit's input again (the same scores, mapped by the same
``fn`` when a prior correction comes first) and returns, for the rows of those cells only,
their sums per (bin, cell of a finer grid, class): the grids nest
(:func:`calib_cli.summaries.grid.parent_cell`), and at 52 bits a cell is one distinct score.
Memory: the keys returned, which the caller bounds by its choice of the finer grid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt
import polars as pl

from calib_cli.io.scan import collect
from calib_cli.io.stream_map import _P, _W, _Y, BatchMap, StreamInput, _inputs, mapped_expr
from calib_cli.summaries.scan import bin_expr, cell_expr
from calib_cli.types import FloatArray, IntArray


@dataclass(frozen=True)
class CellRows:
    """Sums of the rows of some cells on a finer grid, one entry per (bin, cell, class).

    Attributes
    ----------
    bin, cell : ndarray of int64
        The bin and the cell on the finer grid.
    label : ndarray of int8
    weight, score_sum : ndarray of float64
        Summed weight and ``weight * score`` of the rows (rows of weight 0 are left out).
    score_min, score_max : ndarray of float64
        Smallest and largest score.
    n_rows : ndarray of int64
    """

    bin: IntArray
    cell: IntArray
    label: npt.NDArray[np.int8]
    weight: FloatArray
    score_sum: FloatArray
    score_min: FloatArray
    score_max: FloatArray
    n_rows: IntArray


def rows_of_cells(
    scan: StreamInput,
    fn: BatchMap | None,
    keys: Mapping[int, tuple[npt.ArrayLike, npt.ArrayLike]],
    *,
    to_bits: int,
    bin_edges: tuple[float, ...],
) -> CellRows:
    """One streaming pass: the rows of positive weight whose fit input (``fn`` of the scores,
    or the scores) falls in one of the (bin, cell) ``keys[bits]`` of the ``bits`` grid (for
    each grid given), summed per (bin, cell of the ``to_bits`` grid, class)."""
    inputs = _inputs(scan)
    score = inputs[0] if fn is None else mapped_expr(scan, fn).alias(_P)
    n_keys = len(bin_edges)  # bins run from 0 to len(edges) - 2: pack (cell, bin) in one int
    p = pl.col(_P)
    bin_ = bin_expr(p, bin_edges).cast(pl.Int64)
    wanted = pl.lit(False)
    for bits, (bins, cells) in keys.items():
        packed = np.asarray(cells, dtype=np.int64) * n_keys + np.asarray(bins, dtype=np.int64)
        key = cell_expr(p, mantissa_bits=bits) * n_keys + bin_
        wanted = wanted | key.is_in(pl.Series(packed, dtype=pl.Int64))
    plan = (
        scan.lazy.select(score, *inputs[1:])
        .filter((pl.col(_W) > 0.0) & wanted)
        .group_by(bin_.alias("bin"), cell_expr(p, mantissa_bits=to_bits).alias("cell"), _Y)
        .agg(
            pl.col(_W).sum().alias("weight"),
            (pl.col(_W) * p).sum().alias("score_sum"),
            p.min().alias("score_min"),
            p.max().alias("score_max"),
            pl.len().cast(pl.Int64).alias("n_rows"),
        )
    )
    frame = cast(pl.DataFrame, collect(lambda: plan.collect(engine="streaming"), scan.name))
    return CellRows(
        bin=frame["bin"].to_numpy().astype(np.int64),
        cell=frame["cell"].to_numpy().astype(np.int64),
        label=frame[_Y].to_numpy().astype(np.int8),
        weight=frame["weight"].to_numpy().astype(np.float64),
        score_sum=frame["score_sum"].to_numpy().astype(np.float64),
        score_min=frame["score_min"].to_numpy().astype(np.float64),
        score_max=frame["score_max"].to_numpy().astype(np.float64),
        n_rows=frame["n_rows"].to_numpy().astype(np.int64),
    )
