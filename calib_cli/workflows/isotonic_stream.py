"""The exact isotonic fit of a file read in streaming passes.

The first pass is a summary on a coarse grid (:data:`ISOTONIC_MANTISSA_BITS`: cells of
relative width ``2**-12``, the reliability default: bounded by the grid, not the rows;
about 110,000 keys on 1e8 rows of rare-event scores, where Polars' streaming group-by held
365 MB, against 2.1 GB for the 400,000 keys of 14 bits). Pool adjacent violators on its
cells (:func:`~calib_cli.core.isotonic.fit_isotonic_units`) certifies the cells that the fit
on the rows cannot split; the others (at the ends of the fit's blocks, and inside blocks
where a cell holds many negatives) are read again on a finer grid, as fine as
:data:`KEY_BUDGET` allows, down to single scores at 52 bits
(:func:`~calib_cli.io.stream_map.rows_of_cells`), and the fit is repeated until no cell is
open. The knots are then exactly those of the in-memory fit on the same rows (up to the
order of floating-point sums). Memory: the coarse summary and at most ``KEY_BUDGET`` keys
per pass; time: one pass per round and target grid (7 passes on 1e8 rows, 4 on 1e7).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from calib_cli.core.isotonic import IsotonicParams, IsotonicUnits, fit_isotonic_units
from calib_cli.errors import InputError
from calib_cli.io.stream_map import BatchMap, CellRows, StreamInput, rows_of_cells
from calib_cli.summaries.grid import MAX_MANTISSA_BITS, cell_bounds, parent_cell
from calib_cli.summaries.summary import ScoreSummary, describe_positive_label
from calib_cli.types import BoolArray, FloatArray, IntArray

#: The grid of the first pass of a streaming isotonic fit (see the module notes).
ISOTONIC_MANTISSA_BITS = 12
#: Keys a refinement pass may return: the finer grid of a pass is chosen so that the open
#: cells' (sub-cell, class) keys stay below this (Polars' streaming group-by held 365 MB for
#: 110,000 keys and 2.1 GB for 400,000 with the summary's many sums; a pass now keeps, per
#: key and class, two sums, a count and two extremes in row order: 40 bytes, 32 MB in all).
KEY_BUDGET = 400_000
#: A guard on the passes; the grid gets finer for every cell a pass reads, up to single
#: scores at 52 bits, so the refinement always ends (in practice in 2 to 6 passes).
MAX_PASSES = 200


@dataclass(frozen=True)
class IsotonicStreamFit:
    """The fit and how it was made: passes over the rows after the summary, the cells of the
    summary, the cells (of any grid) read again, and the units that ended as single scores."""

    params: IsotonicParams
    refinement_passes: int
    cells: int
    resolved_cells: int
    resolved_scores: int


@dataclass(frozen=True)
class _Units:
    """Units in score order: cells of some grid (``bits``) and single scores."""

    bin: IntArray
    cell: IntArray
    bits: IntArray
    low: FloatArray
    high: FloatArray
    weight: FloatArray
    positive: FloatArray
    score_sum: FloatArray
    n_rows: IntArray
    suspect: BoolArray  # a cell whose smallest or largest score may be a row of weight 0

    @property
    def point(self) -> BoolArray:
        result: BoolArray = self.low == self.high
        return result

    def core(self) -> IsotonicUnits:
        return IsotonicUnits(self.low, self.high, self.weight, self.positive, self.score_sum)

    def take(self, keep: npt.NDArray[Any]) -> _Units:
        return _Units(*(getattr(self, f)[keep] for f in _FIELDS))


_FIELDS = tuple(_Units.__dataclass_fields__)


def _units(
    bins: IntArray,
    cells: IntArray,
    bits: int,
    sums: dict[str, FloatArray],
    label: IntArray,
    n_rows: IntArray,
    weight_min: FloatArray | None,
) -> _Units:
    """One unit per (cell, bin) from per (cell, bin, class) sums, in score order."""
    key = np.column_stack((cells.astype(np.int64), bins.astype(np.int64)))
    keys, index = np.unique(key, axis=0, return_inverse=True)
    index = index.reshape(-1)
    k = keys.shape[0]

    def total(values: FloatArray) -> FloatArray:
        result: FloatArray = np.bincount(index, weights=values, minlength=k).astype(np.float64)
        return result

    low = np.full(k, np.inf)
    high = np.full(k, -np.inf)
    # a key of rows of weight 0 only has no smallest score (NaN): fmin/fmax skip it
    np.fmin.at(low, index, sums["score_min"])
    np.fmax.at(high, index, sums["score_max"])
    suspect = np.zeros(k, dtype=bool)
    if weight_min is not None:
        lightest = np.full(k, np.inf)
        np.fmin.at(lightest, index, weight_min)
        suspect = (lightest <= 0.0) & (high > low)
    units = _Units(
        bin=keys[:, 1],
        cell=keys[:, 0],
        bits=np.full(k, bits, dtype=np.int64),
        low=low,
        high=high,
        weight=total(sums["weight"]),
        positive=total(sums["weight"] * (label == 1)),
        score_sum=total(sums["score_sum"]),
        n_rows=np.bincount(index, weights=n_rows, minlength=k).astype(np.int64),
        suspect=suspect,
    )
    return units.take(units.weight > 0.0)


def _cell_units(summary: ScoreSummary) -> _Units:
    sums = {
        "weight": summary.weight,
        "score_sum": summary.score_sum,
        "score_min": summary.score_min,
        "score_max": summary.score_max,
    }
    return _units(
        summary.bin.astype(np.int64),
        summary.cell,
        summary.mantissa_bits,
        sums,
        summary.label.astype(np.int64),
        summary.n_rows,
        summary.weight_min,
    )


def _refined_units(rows: CellRows, bits: int) -> _Units:
    sums = {
        "weight": rows.weight,
        "score_sum": rows.score_sum,
        "score_min": rows.score_min,
        "score_max": rows.score_max,
    }
    return _units(rows.bin, rows.cell, bits, sums, rows.label.astype(np.int64), rows.n_rows, None)


def finer_bits(bits: int, cells: int, rows: int) -> int:
    """The grid a pass reads ``cells`` open cells of the ``bits`` grid on: single scores when
    their ``rows`` fit the key budget, else as many more bits as keep 2 keys per sub-cell
    under it (at least one).

    >>> finer_bits(12, 100, 50_000), finer_bits(12, 25_000, 70_000_000)
    (52, 15)
    """
    if 2 * rows <= KEY_BUDGET:
        return MAX_MANTISSA_BITS
    step = max(1, math.floor(math.log2(KEY_BUDGET / (2.0 * cells))))
    return min(MAX_MANTISSA_BITS, bits + step)


def _merge(parts: list[_Units]) -> _Units:
    both = _Units(*(np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS))
    order = np.lexsort((both.high, both.low))
    return both.take(order)


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
    passes = resolved = 0
    while True:
        params, open_units = fit_isotonic_units(units.core(), **dict(options))
        need = (open_units | units.suspect) & ~units.point
        if not need.any():
            return IsotonicStreamFit(
                params=params,
                refinement_passes=passes,
                cells=n_cells,
                resolved_cells=resolved,
                resolved_scores=int(np.sum(units.point)),
            )
        # the open cells of each grid, by the grid they are read on: cells of every grid
        # that go to single scores share one pass
        plans: dict[int, dict[int, tuple[IntArray, IntArray]]] = {}
        for bits in np.unique(units.bits[need]).tolist():
            chosen = need & (units.bits == bits)
            to_bits = finer_bits(bits, int(chosen.sum()), int(units.n_rows[chosen].sum()))
            plans.setdefault(to_bits, {})[bits] = (units.bin[chosen], units.cell[chosen])
        refined = [units.take(~need)]
        for to_bits, keys in plans.items():
            if passes == MAX_PASSES:  # pragma: no cover - the grids end at single scores
                raise RuntimeError(f"the isotonic refinement did not end in {MAX_PASSES} passes")
            rows = rows_of_cells(scan, fn, keys, to_bits=to_bits, bin_edges=summary.bin_edges)
            passes += 1
            refined.append(_refined_units(rows, to_bits))
        resolved += int(need.sum())
        units = _merge(refined)


@dataclass(frozen=True)
class OpenCells:
    """The cells a summary fit left open, to be read again on a finer grid (in a SQL engine:
    :func:`calib_cli.sql.summary.summary_sql` over the rows whose score lies in one of the
    closed intervals ``[lower, upper]``, at ``to_bits``)."""

    lower: FloatArray
    upper: FloatArray
    rows: int
    to_bits: int


@dataclass(frozen=True)
class IsotonicSummaryFit:
    """The isotonic fit on a summary's cells alone (no rows to read again), and how far it
    is certified: ``open_cells`` of its ``cells`` (units of one grid cell and reliability bin)
    could be split by the fit on the rows (:func:`~calib_cli.core.isotonic.fit_isotonic_units`'s
    prefix-sum certificate), holding ``open_weight`` of the weight; with none open the knots
    are exactly those of the fit on the rows. ``resolved_cells`` of the summary's cells were
    replaced by the finer cells of refinement summaries; ``open`` says which cells to read
    again (None when exact)."""

    params: IsotonicParams
    cells: int
    open_cells: int
    open_weight: float
    resolved_cells: int = 0
    open: OpenCells | None = None

    @property
    def exact(self) -> bool:
        """Whether the certificate holds for every cell (the fit on the rows is this one)."""
        return self.open_cells == 0


def covered_by_finer(
    coarse: tuple[IntArray, IntArray, IntArray, FloatArray],
    finer: ScoreSummary,
    name: str,
) -> tuple[BoolArray, int]:
    """Which entries of a summary's cells (``coarse``: each entry's grid bits, bin, cell and
    weight; a cell may have several entries, one per class) a refinement summary ``finer``
    covers, and how many cells. A covered cell whose weight differs from the finer cells'
    is refused: the refinement was not made of the same rows of the same table."""
    bits, bin_, cell, weight = coarse
    fine_bits = finer.mantissa_bits
    fine_weight = np.asarray(finer.weight, dtype=np.float64)
    fine_bin = np.asarray(finer.bin, dtype=np.int64)
    covered = np.zeros(bits.size, dtype=bool)
    count = 0
    for level in np.unique(bits).tolist():
        if level >= fine_bits:
            continue
        here = np.flatnonzero(bits == level)
        parents = parent_cell(finer.cell, from_bits=fine_bits, to_bits=level)
        fine_keys, fine_of = np.unique(np.stack((fine_bin, parents)), axis=1, return_inverse=True)
        fine_total = np.bincount(fine_of.reshape(-1), weights=fine_weight)
        keys, key_of = np.unique(np.stack((bin_[here], cell[here])), axis=1, return_inverse=True)
        total = np.bincount(key_of.reshape(-1), weights=weight[here])
        # each key's place among the finer ones (-1: not refined)
        _, ids = np.unique(np.concatenate((fine_keys, keys), axis=1), axis=1, return_inverse=True)
        ids = ids.reshape(-1)
        place = np.full(int(ids.max()) + 1, -1)
        place[ids[: fine_keys.shape[1]]] = np.arange(fine_keys.shape[1])
        match = place[ids[fine_keys.shape[1] :]]
        refined = np.flatnonzero(match >= 0)
        finer_totals, own = fine_total[match[refined]], total[refined]
        differ = ~np.isclose(finer_totals, own, rtol=1e-9, atol=1e-12)
        if differ.any():
            k, first = int(refined[np.argmax(differ)]), int(np.argmax(differ))
            raise InputError(
                f"{name}: the refinement summary holds weight {float(finer_totals[first]):.17g} "
                f"in cell {int(keys[1, k])} (bin {int(keys[0, k])}) of the {level}-bit grid, "
                f"the summary {float(own[first]):.17g}: it must summarise every row of the "
                "cells it refines, from the same table"
            )
        covered[here] = match[key_of.reshape(-1)] >= 0
        count += int(np.sum(match >= 0))
    return covered, count


def check_refinement_labels(summary: ScoreSummary, finer: ScoreSummary, name: str) -> None:
    """Refuse (exit 65) a refinement summary whose labels were read by another rule than the
    summary's (``positive_label``): a cell's weight is the same whichever class its rows are
    counted in, so :func:`covered_by_finer` cannot tell flipped labels, and the fit would
    silently take them.

    >>> from calib_cli.summaries import summarize_arrays
    >>> coarse = summarize_arrays([1, 0], [0.2, 0.7], positive_label="0")
    >>> check_refinement_labels(coarse, summarize_arrays([0, 1], [0.2, 0.7]), "r.parquet")
    Traceback (most recent call last):
    ...
    calib_cli.errors.InputError: refinement summary r.parquet: positive_label is null (the \
default rule: label 1 or true is positive), but the summary's is '0' (label '0' is positive): \
summarise the open cells' rows with the summary's rule (the query --refine-sql writes uses it)
    """
    if finer.positive_label != summary.positive_label:
        raise InputError(
            f"refinement summary {name}: positive_label is "
            f"{describe_positive_label(finer.positive_label)}, but the summary's is "
            f"{describe_positive_label(summary.positive_label)}: summarise the open cells' rows "
            "with the summary's rule (the query --refine-sql writes uses it)"
        )


def _replace_by_finer(units: _Units, finer: ScoreSummary, name: str) -> tuple[_Units, int]:
    """``units`` with the cells that ``finer`` covers replaced by its cells; and how many
    were replaced (:func:`covered_by_finer`)."""
    covered, count = covered_by_finer(
        (units.bits, units.bin, units.cell, units.weight), finer, name
    )
    return _merge([units.take(~covered), _cell_units(finer.pooled())]), count


def fit_isotonic_summary(
    summary: ScoreSummary,
    *,
    options: Mapping[str, Any],
    refinements: Sequence[tuple[str, ScoreSummary]] = (),
) -> IsotonicSummaryFit:
    """Pool adjacent violators on the cells of ``summary`` (every group pooled), each cell
    held at one value: the first pass of :func:`fit_isotonic_streaming`, where the passes
    that resolve the open cells are summaries on finer grids of their rows, given as
    ``refinements`` (name, summary), coarsest first; each replaces the cells it covers (a
    refinement of another label rule is refused: :func:`check_refinement_labels`).

    ``options`` are the isotonic fit's (``strict``, ``eps``, ``increasing``).

    >>> from calib_cli.summaries import summarize_arrays
    >>> ties = summarize_arrays([0, 0, 1, 0, 1, 1], [0.2, 0.2, 0.2, 0.6, 0.6, 0.6])
    >>> fit = fit_isotonic_summary(ties, options={})
    >>> fit.exact, fit.params.x_knots.tolist(), fit.params.y_knots.round(6).tolist()
    (True, [0.2, 0.6], [0.333333, 0.666667])
    """
    units = _cell_units(summary.pooled())
    n_cells = int(units.low.size)
    resolved = 0
    for name, finer in sorted(refinements, key=lambda pair: pair[1].mantissa_bits):
        check_refinement_labels(summary, finer, name)
        units, replaced = _replace_by_finer(units, finer, name)
        resolved += replaced
    params, open_units = fit_isotonic_units(units.core(), **dict(options))
    need = (open_units | units.suspect) & ~units.point
    total = float(np.sum(units.weight))
    open_cells: OpenCells | None = None
    if need.any():
        lower = np.empty(int(need.sum()))
        upper = np.empty_like(lower)
        for level in np.unique(units.bits[need]).tolist():
            here = units.bits[need] == level
            lower[here], upper[here] = cell_bounds(units.cell[need][here], mantissa_bits=level)
        rows = int(np.sum(units.n_rows[need]))
        coarsest = int(np.min(units.bits[need]))
        open_cells = OpenCells(
            lower=lower,
            upper=upper,
            rows=rows,
            to_bits=finer_bits(coarsest, int(need.sum()), rows),
        )
    return IsotonicSummaryFit(
        params=params,
        cells=n_cells,
        open_cells=int(np.sum(need)),
        open_weight=float(np.sum(units.weight[need])) / total if total > 0.0 else 0.0,
        resolved_cells=resolved,
        open=open_cells,
    )
