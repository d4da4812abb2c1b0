"""The second pass of an exact fit on a summary: the rows of chosen cells, by distinct score.

A fit made on a summary holds the rows of each grid cell at one point; for the isotonic fit,
:func:`calib_cli.core.isotonic.fit_isotonic_units` names the cells that the fit on the rows
could split. This pass reads the fit's input again (the same scores, mapped by the same
``fn`` when a prior correction comes first) and returns, for the rows of those cells only,
one entry per (distinct score, class) with its summed weight: memory in proportion to the
distinct scores of the chosen cells, not to the rows.
"""

from __future__ import annotations

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
class DistinctScores:
    """Rows of some cells, one entry per (bin, cell, distinct score, class), sorted by score.

    Attributes
    ----------
    bin, cell : ndarray of int64
        The key of the summary's cell the entry comes from.
    score : ndarray of float64
        The distinct score.
    label : ndarray of int8
        The class.
    weight : ndarray of float64
        Summed weight of the rows (rows of weight 0 are left out).
    """

    bin: IntArray
    cell: IntArray
    score: FloatArray
    label: npt.NDArray[np.int8]
    weight: FloatArray


def distinct_scores_in_cells(
    scan: StreamInput,
    fn: BatchMap | None,
    keys: tuple[npt.ArrayLike, npt.ArrayLike],
    *,
    mantissa_bits: int,
    bin_edges: tuple[float, ...],
) -> DistinctScores:
    """One streaming pass: the rows of positive weight whose fit input (``fn`` of the scores,
    or the scores) falls in the (bin, cell) ``keys`` of a summary made with ``mantissa_bits``
    and ``bin_edges``, grouped by distinct score and class."""
    inputs = _inputs(scan)
    score = inputs[0] if fn is None else mapped_expr(scan, fn).alias(_P)
    wanted = pl.LazyFrame(
        {
            "bin": np.asarray(keys[0], dtype=np.int32),
            "cell": np.asarray(keys[1], dtype=np.int64),
        }
    )
    keyed = (
        scan.lazy.select(score, *inputs[1:])
        .filter(pl.col(_W) > 0.0)
        .with_columns(
            bin_expr(pl.col(_P), bin_edges).cast(pl.Int32).alias("bin"),
            cell_expr(pl.col(_P), mantissa_bits=mantissa_bits).alias("cell"),
        )
    )
    plan = (
        keyed.join(wanted, on=["bin", "cell"], how="semi")
        .group_by(["bin", "cell", _P, _Y])
        .agg(pl.col(_W).sum().alias("weight"))
        .sort([_P, _Y])
    )
    frame = cast(pl.DataFrame, collect(lambda: plan.collect(engine="streaming"), scan.name))
    return DistinctScores(
        bin=frame["bin"].to_numpy().astype(np.int64),
        cell=frame["cell"].to_numpy().astype(np.int64),
        score=frame[_P].to_numpy().astype(np.float64),
        label=frame[_Y].to_numpy().astype(np.int8),
        weight=frame["weight"].to_numpy().astype(np.float64),
    )
