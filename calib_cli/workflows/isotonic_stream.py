"""The exact isotonic fit of a file read in streaming passes.

The first pass is a summary on a coarse grid (:data:`ISOTONIC_MANTISSA_BITS`: cells of
relative width ``2**-12``, the reliability default: bounded by the grid, not the rows;
about 110,000 keys on 1e8 rows of rare-event scores, where Polars' streaming group-by held
365 MB, against 2.1 GB for the 400,000 keys of 14 bits). Pool adjacent violators on its
cells (:func:`~calib_cli.core.isotonic.fit_isotonic_units`) certifies the cells that the fit
on the rows cannot split; the others, in practice the cells at the ends of the fit's blocks,
are read again by distinct score
(:func:`~calib_cli.io.fit_cells.distinct_scores_in_cells`) and the fit is repeated, until no
cell is open. The knots are then exactly those of the in-memory fit on the same rows (up to
the order of floating-point sums). Memory: the coarse summary and the distinct scores of
the open cells; time: one pass per round, usually two or three rounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from calib_cli.core.isotonic import IsotonicParams, IsotonicUnits, fit_isotonic_units
from calib_cli.io.fit_cells import DistinctScores, distinct_scores_in_cells
from calib_cli.io.stream_map import BatchMap, StreamInput
from calib_cli.summaries.summary import ScoreSummary
from calib_cli.types import BoolArray, FloatArray, IntArray

#: The grid of the first pass of a streaming isotonic fit (see the module notes).
ISOTONIC_MANTISSA_BITS = 12
#: Rounds of refinement before giving up (each is one pass over the rows); every round
#: resolves at least one cell, and in practice two or three close the fit.
MAX_ROUNDS = 30


@dataclass(frozen=True)
class IsotonicStreamFit:
    """The fit and how it was made: passes over the rows after the summary, and the cells
    resolved into distinct scores."""

    params: IsotonicParams
    refinement_passes: int
    cells: int
    resolved_cells: int
    resolved_scores: int


@dataclass(frozen=True)
class _Units:
    """Units in score order: coarse cells (``point`` False) and distinct scores."""

    bin: IntArray
    cell: IntArray
    point: BoolArray
    low: FloatArray
    high: FloatArray
    weight: FloatArray
    positive: FloatArray
    score_sum: FloatArray
    suspect: BoolArray  # a cell whose smallest or largest score may be a row of weight 0

    def core(self) -> IsotonicUnits:
        return IsotonicUnits(self.low, self.high, self.weight, self.positive, self.score_sum)

    def take(self, keep: BoolArray) -> _Units:
        return _Units(*(getattr(self, f)[keep] for f in self.__dataclass_fields__))


def _cell_units(summary: ScoreSummary) -> _Units:
    """One unit per (cell, bin) of a one-group summary, in score order."""
    key = np.column_stack((summary.cell.astype(np.int64), summary.bin.astype(np.int64)))
    keys, index = np.unique(key, axis=0, return_inverse=True)
    index = index.reshape(-1)
    k = keys.shape[0]
    weight = np.bincount(index, weights=summary.weight, minlength=k).astype(np.float64)
    positive_weight = summary.weight * (summary.label == 1)
    positive = np.bincount(index, weights=positive_weight, minlength=k).astype(np.float64)
    score_sum = np.bincount(index, weights=summary.score_sum, minlength=k).astype(np.float64)
    low = np.full(k, np.inf)
    high = np.full(k, -np.inf)
    lightest = np.full(k, np.inf)
    # a key of rows of weight 0 only has no smallest score (NaN): fmin/fmax skip it
    np.fmin.at(low, index, summary.score_min)
    np.fmax.at(high, index, summary.score_max)
    np.fmin.at(lightest, index, summary.weight_min)
    units = _Units(
        bin=keys[:, 1],
        cell=keys[:, 0],
        point=low == high,
        low=low,
        high=high,
        weight=weight,
        positive=positive,
        score_sum=score_sum,
        suspect=(lightest <= 0.0) & (high > low),
    )
    return units.take(weight > 0.0)


def _point_units(rows: DistinctScores) -> _Units:
    """One unit per distinct score (both classes pooled)."""
    scores, index = np.unique(rows.score, return_inverse=True)
    index = index.reshape(-1)
    k = scores.size
    weight = np.bincount(index, weights=rows.weight, minlength=k).astype(np.float64)
    first = np.zeros(k, dtype=np.int64)
    first[index[::-1]] = np.arange(index.size)[::-1]
    return _Units(
        bin=rows.bin[first],
        cell=rows.cell[first],
        point=np.ones(k, dtype=bool),
        low=scores,
        high=scores,
        weight=weight,
        positive=np.bincount(index, weights=rows.weight * (rows.label == 1), minlength=k).astype(
            np.float64
        ),
        score_sum=weight * scores,
        suspect=np.zeros(k, dtype=bool),
    )


def _merge(kept: _Units, added: _Units) -> _Units:
    both = _Units(
        *(
            np.concatenate((getattr(kept, f), getattr(added, f)))
            for f in _Units.__dataclass_fields__
        )
    )
    return _sorted(both)


def _sorted(units: _Units) -> _Units:
    order = np.lexsort((units.high, units.low))
    return _Units(*(getattr(units, f)[order] for f in _Units.__dataclass_fields__))


def fit_isotonic_streaming(
    scan: StreamInput,
    fn: BatchMap | None,
    summary: ScoreSummary,
    *,
    options: Mapping[str, Any],
) -> IsotonicStreamFit:
    """The isotonic fit of the rows behind ``summary`` (one group, on the grid of
    :data:`ISOTONIC_MANTISSA_BITS`), exact by refinement passes over ``scan``.

    ``fn`` maps the scores as the summary's pass did (a prior correction) or is None;
    ``options`` are the isotonic fit's (``strict``, ``eps``, ``increasing``).
    """
    units = _cell_units(summary)
    n_cells = int(units.low.size)
    resolved_cells = 0
    for passes in range(MAX_ROUNDS + 1):
        params, open_units = fit_isotonic_units(units.core(), **dict(options))
        need = (open_units | units.suspect) & ~units.point
        if not need.any():
            return IsotonicStreamFit(
                params=params,
                refinement_passes=passes,
                cells=n_cells,
                resolved_cells=resolved_cells,
                resolved_scores=int(np.sum(units.point)),
            )
        if passes == MAX_ROUNDS:
            break
        rows = distinct_scores_in_cells(
            scan,
            fn,
            (units.bin[need], units.cell[need]),
            mantissa_bits=summary.mantissa_bits,
            bin_edges=summary.bin_edges,
        )
        resolved_cells += int(need.sum())
        units = _merge(units.take(~need), _point_units(rows))
    raise RuntimeError(  # pragma: no cover - every round resolves at least one cell
        f"the streaming isotonic fit did not close in {MAX_ROUNDS} refinement passes"
    )
