"""The streaming histogram fit, exact by refinement passes (the isotonic fit's approach).

Histogram binning (:mod:`calib_cli.core.histogram`) depends on its rows only through the scores
at which the cumulative weight passes each ``k / n`` (the equal-mass edges) and through the
bin each row falls in. A 12-bit summary gives every cell's weight per class in score order;
:func:`~calib_cli.core.histogram.fit_histogram_points` finds the cells the edges fall in, and
when such a cell holds more than one distinct score its rows are read again on a finer grid
(single scores when they fit :data:`~calib_cli.workflows.isotonic_stream.KEY_BUDGET`), until
every edge falls on a single score. The other cells never hold an edge inside them, so each
lies wholly in one bin: the fit is then that of the rows (bin weights summed in another order:
the same bits for integer weights). Memory: the summary and the few cells read again, where a
20-bit summary of 1e8 rows took 6.8 GB.

On summary files (:func:`fit_histogram_summary`) the passes are refinement summaries: the
engine summarises the rows of the edges' cells on a finer grid (the query
``recalibrate --refine-sql`` writes), and each replaces the cells it covers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from calib_cli.core.histogram import HistogramParams, fit_histogram_points
from calib_cli.core.metrics import count_unit_of
from calib_cli.io.stream_map import BatchMap, StreamInput, rows_of_cells
from calib_cli.summaries import ScoreSummary
from calib_cli.summaries.grid import cell_bounds
from calib_cli.types import FloatArray, IntArray
from calib_cli.workflows.isotonic_stream import (
    OpenCells,
    check_refinement_labels,
    covered_by_finer,
    finer_bits,
)

#: Refinement passes after which the fit gives up: each pass takes the cells at least one bit
#: finer (single scores when their rows fit the key budget), and 52 bits are single scores.
MAX_PASSES = 64


@dataclass(frozen=True)
class HistogramStreamFit:
    """The fitted binning and how it was made exact."""

    params: HistogramParams
    refinement_passes: int
    cells: int
    resolved_cells: int


@dataclass(frozen=True)
class _Points:
    """Weighted points in score order: a (grid, bin, cell, class) key's rows each, at their
    smallest score; ``exact`` when every row of the cell, of either class, has that score
    (one class's rows at one score can lie between the other class's rows)."""

    x: FloatArray
    y: FloatArray
    w: FloatArray
    exact: np.ndarray
    bits: IntArray
    bin: IntArray
    cell: IntArray
    n_rows: IntArray

    def take(self, keep: np.ndarray) -> _Points:
        return _Points(*(getattr(self, f)[keep] for f in _FIELDS))


_FIELDS = ("x", "y", "w", "exact", "bits", "bin", "cell", "n_rows")


def _sorted(parts: list[_Points]) -> _Points:
    both = _Points(*(np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS))
    order = np.lexsort((both.y, both.x))  # by score, then class
    return both.take(order)


def fit_histogram_streaming(
    scan: StreamInput,
    fn: BatchMap | None,
    summary: ScoreSummary,
    *,
    options: Mapping[str, Any],
) -> HistogramStreamFit:
    """The histogram fit of the rows behind ``summary`` (one group), exact by refinement
    passes over ``scan`` (``fn`` maps the scores as the summary's pass did, or is None;
    ``options``: ``n_bins``, ``prior_strength``)."""
    points = _summary_points(summary)
    n_cells = len({(int(b), int(c)) for b, c in zip(points.bin, points.cell, strict=True)})
    passes = resolved = 0
    unit = rows_unit(summary)
    while True:
        found = fit_histogram_points(
            points.x, points.y, points.w, points.exact, weight_unit=unit, **dict(options)
        )
        if isinstance(found, HistogramParams):
            return HistogramStreamFit(
                params=found, refinement_passes=passes, cells=n_cells, resolved_cells=resolved
            )
        if passes == MAX_PASSES:  # pragma: no cover - 40 passes reach 52 bits from 12
            raise RuntimeError(f"the histogram refinement did not end in {MAX_PASSES} passes")
        # every point of the cells the edges fell in (both classes) is read again
        _, cell_of = np.unique(
            np.stack((points.bits, points.bin, points.cell)), axis=1, return_inverse=True
        )
        cell_of = cell_of.reshape(-1)
        found = np.isin(cell_of, cell_of[found])
        refined = [points.take(~found)]
        for from_bits in np.unique(points.bits[found]).tolist():
            chosen = found & (points.bits == from_bits)
            keys = np.unique(np.stack((points.bin[chosen], points.cell[chosen])), axis=1)
            to_bits = finer_bits(from_bits, keys.shape[1], int(np.sum(points.n_rows[chosen])))
            rows = rows_of_cells(
                scan,
                fn,
                {from_bits: (keys[0], keys[1])},
                to_bits=to_bits,
                bin_edges=summary.bin_edges,
            )
            refined.append(
                _Points(
                    x=rows.score_min,
                    y=rows.label.astype(np.float64),
                    w=rows.weight,
                    exact=_one_score(rows.bin, rows.cell, rows.score_min, rows.score_max),
                    bits=np.full(rows.weight.size, to_bits, dtype=np.int64),
                    bin=rows.bin.astype(np.int64),
                    cell=rows.cell.astype(np.int64),
                    n_rows=rows.n_rows.astype(np.int64),
                )
            )
            resolved += keys.shape[1]
        passes += 1
        points = _sorted(refined)


@dataclass(frozen=True)
class HistogramSummaryFit:
    """The histogram fit on a summary's cells and its refinement summaries: ``params`` when
    every equal-mass edge falls on a cell of one distinct score (then exact), else None and
    ``open`` the cells an edge falls in, to be summarised again on a finer grid.
    ``resolved_cells`` of the summary's ``cells`` were replaced by refinements' cells."""

    params: HistogramParams | None
    cells: int
    resolved_cells: int
    open: OpenCells | None


def fit_histogram_summary(
    summary: ScoreSummary,
    *,
    options: Mapping[str, Any],
    refinements: Sequence[tuple[str, ScoreSummary]] = (),
) -> HistogramSummaryFit:
    """:func:`fit_histogram_streaming` on a summary file (one group), where the refinement
    passes are ``refinements`` (name, summary on a finer grid of every row of some of its
    cells), coarsest first: each replaces the cells it covers. A covered cell whose weight
    differs from the finer cells' is refused (not the same rows), and so is a refinement of
    another label rule (:func:`~calib_cli.workflows.isotonic_stream.check_refinement_labels`)."""
    points = _summary_points(summary)
    n_cells = len({(int(b), int(c)) for b, c in zip(points.bin, points.cell, strict=True)})
    resolved = 0
    for name, finer in sorted(refinements, key=lambda pair: pair[1].mantissa_bits):
        check_refinement_labels(summary, finer, name)
        points, replaced = _replace_by_finer(points, finer.pooled(), name)
        resolved += replaced
    found = fit_histogram_points(
        points.x, points.y, points.w, points.exact, weight_unit=rows_unit(summary), **dict(options)
    )
    if isinstance(found, HistogramParams):
        return HistogramSummaryFit(found, n_cells, resolved, None)
    cells, cell_of = np.unique(
        np.stack((points.bits, points.bin, points.cell)), axis=1, return_inverse=True
    )
    open_ = np.unique(cell_of.reshape(-1)[found])
    bits, cell = cells[0][open_], cells[2][open_]
    lower, upper = np.empty(open_.size), np.empty(open_.size)
    for level in np.unique(bits).tolist():
        here = bits == level
        lower[here], upper[here] = cell_bounds(cell[here], mantissa_bits=level)
    rows = int(np.sum(points.n_rows[np.isin(cell_of.reshape(-1), open_)]))
    to_bits = finer_bits(int(bits.min()), int(open_.size), rows)
    return HistogramSummaryFit(None, n_cells, resolved, OpenCells(lower, upper, rows, to_bits))


def _replace_by_finer(points: _Points, finer: ScoreSummary, name: str) -> tuple[_Points, int]:
    """``points`` without the cells ``finer`` covers, plus ``finer``'s points; and how many
    cells were replaced (:func:`~calib_cli.workflows.isotonic_stream.covered_by_finer`)."""
    coarse = (points.bits, points.bin, points.cell, points.w)
    covered, count = covered_by_finer(coarse, finer, name)
    return _sorted([points.take(~covered), _summary_points(finer)]), count


def rows_unit(summary: ScoreSummary) -> float:
    """The weight of one of the rows ``summary`` counts, for the histogram's prior (a point's
    weight is many rows', so the points' own mean weight is not it): 1, or the rows' mean
    weight where it is below 1 (:func:`~calib_cli.core.metrics.count_unit_of`)."""
    return count_unit_of(float(np.sum(summary.weight)), float(np.sum(summary.n_rows_weighted)))


def _summary_points(summary: ScoreSummary) -> _Points:
    """Each key of positive weight as a point at its smallest score."""
    live = summary.weight > 0.0
    bits = summary.mantissa_bits
    return _sorted(
        [
            _Points(
                x=summary.score_min[live],
                y=summary.label[live].astype(np.float64),
                w=summary.weight[live],
                exact=_one_score(
                    summary.bin[live],
                    summary.cell[live],
                    summary.score_min[live],
                    summary.score_max[live],
                ),
                bits=np.full(int(live.sum()), bits, dtype=np.int64),
                bin=summary.bin[live].astype(np.int64),
                cell=summary.cell[live].astype(np.int64),
                n_rows=summary.n_rows[live].astype(np.int64),
            )
        ]
    )


def _one_score(
    bin_: np.ndarray, cell: np.ndarray, score_min: FloatArray, score_max: FloatArray
) -> np.ndarray:
    """Whether each key's (bin, cell) holds one distinct score over both classes."""
    key = np.stack((np.asarray(bin_, dtype=np.int64), np.asarray(cell, dtype=np.int64)))
    _, group = np.unique(key, axis=1, return_inverse=True)
    group = group.reshape(-1)
    low = np.full(int(group.max()) + 1 if group.size else 0, np.inf)
    high = np.full(low.size, -np.inf)
    np.minimum.at(low, group, score_min)
    np.maximum.at(high, group, score_max)
    one: np.ndarray = low[group] == high[group]
    return one
