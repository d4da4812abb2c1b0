"""Label-shift counts from the cells of a score summary, for ``estimate-shift`` without rows.

Every estimator of :mod:`calib_cli.core.shift` works on a reference and batches reduced to
counts on its *fine grid*: ``n_fine`` (2048) equal cells of the logit
:math:`u = \\operatorname{logit}(\\operatorname{clip}(p, \\varepsilon, 1 - \\varepsilon))` over the
reference's range (:class:`~calib_cli.core.shift.ReferenceCounts`,
:class:`~calib_cli.core.shift.TargetCounts`). A score summary
(:mod:`calib_cli.summaries`) keeps, per (group, grid cell, bin, class) *key*, the rows, the
weight, the squared weight, the weighted logit sum and the smallest and largest score. This
module builds the fine counts from those keys:

* each key's rows go to the fine cell of the key's mean logit
  :math:`\\bar u = L / W`, kept inside :math:`[u(\\min p), u(\\max p)]`;
* the grid's range is the smallest and largest logit of the rows of positive weight, which the
  keys' minima and maxima give exactly;
* the squared weights, rows and weights per class are sums of the keys': exact;
* the reference AUC (identifiability) is computed with each (cell, bin) at one logit, both
  classes pooled, so pairs inside a cell count as ties.

The bound. A key whose scores all lie in one fine cell is counted exactly as its rows would be
(up to the order of floating-point sums). Only a key *straddling* a fine edge
(:math:`\\lfloor (u(\\min p) - \\ell) / h \\rfloor \\ne \\lfloor (u(\\max p) - \\ell) / h \\rfloor`,
``h`` the fine width) may put rows in a neighbouring fine cell. On the summary's 12-bit grid a
key spans at most :math:`2^{-11} \\approx 4.9 \\cdot 10^{-4}` in logit (a relative width of
:math:`2^{-12}` of ``p`` or ``1 - p``), against a fine width of about 0.01 for scores whose
logits span 20, so a key crosses at most one fine edge and its rows move by at most one fine
cell; the share of the weight in straddling keys is returned (:class:`CellBinning`), and is
what separates these counts from those of the rows. The estimators read the fine counts
through coarser density cells (5 to 20 groups of fine cells), so only straddling keys at the
edges of those cells change the estimate at all; the tests measure the effect against the
estimate from the rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from calib_cli.core import elementary as el
from calib_cli.core.shift import (
    ReferenceCounts,
    ReferenceModel,
    TargetCounts,
    fine_index,
    grid_range,
)
from calib_cli.errors import InputError
from calib_cli.types import FloatArray, IntArray

__all__ = [
    "CellBinning",
    "SummaryBinning",
    "SummaryKeys",
    "reference_counts_from_keys",
    "target_counts_from_keys",
]


@dataclass(frozen=True)
class SummaryKeys:
    """The keys of a score summary (any order), as the fine counts need them.

    Attributes
    ----------
    cell, bin : ndarray of int64, shape (k,)
        The key's grid cell and reliability bin (keys of one (cell, bin) are one score range).
    label : ndarray of int, shape (k,)
        Class, 0 or 1.
    rows : ndarray of float64, shape (k,)
        Rows of positive weight.
    n_rows : ndarray of float64, shape (k,)
        Rows, whatever their weight.
    weight, weight_sq, logit_sum : ndarray of float64, shape (k,)
        Sums of ``w``, ``w**2`` and ``w * logit(clip(p, summary_eps, 1 - summary_eps))``.
    score_min, score_max : ndarray of float64, shape (k,)
        Smallest and largest score of the rows of positive weight (NaN when none).
    """

    cell: IntArray
    bin: IntArray
    label: IntArray
    rows: FloatArray
    n_rows: FloatArray
    weight: FloatArray
    weight_sq: FloatArray
    logit_sum: FloatArray
    score_min: FloatArray
    score_max: FloatArray

    def take(self, keep: npt.NDArray[np.bool_]) -> SummaryKeys:
        """The keys where ``keep`` is true."""
        return SummaryKeys(
            *(getattr(self, name)[keep] for name in SummaryKeys.__dataclass_fields__)
        )


@dataclass(frozen=True)
class CellBinning:
    """How the keys fell on the fine grid: ``straddling_keys`` of ``keys`` span a fine edge,
    holding ``straddling_share`` of the weight (the only rows that may sit one fine cell away
    from where the rows themselves would be counted)."""

    keys: int
    straddling_keys: int
    straddling_share: float


def _key_logits(keys: SummaryKeys, eps: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Each key's smallest, largest and mean logit on the working scale (``eps`` clipping)."""
    u_low: FloatArray = el.log_odds(np.clip(keys.score_min, eps, 1.0 - eps))
    u_high: FloatArray = el.log_odds(np.clip(keys.score_max, eps, 1.0 - eps))
    mean: FloatArray = np.clip(keys.logit_sum / keys.weight, u_low, u_high)
    return u_low, u_high, mean


def _live(keys: SummaryKeys) -> SummaryKeys:
    return keys.take((keys.weight > 0.0) & np.isfinite(keys.score_min))


def _binning(
    u_low: FloatArray, u_high: FloatArray, weight: FloatArray, low: float, high: float, n_fine: int
) -> CellBinning:
    straddling = fine_index(u_low, low, high, n_fine) != fine_index(u_high, low, high, n_fine)
    total = float(np.sum(weight))
    return CellBinning(
        keys=int(u_low.size),
        straddling_keys=int(np.sum(straddling)),
        straddling_share=float(np.sum(weight[straddling])) / total if total > 0.0 else 0.0,
    )


def _bincount(index: IntArray, values: FloatArray, size: int) -> FloatArray:
    return np.asarray(np.bincount(index, weights=values, minlength=size), dtype=np.float64)


def reference_counts_from_keys(
    keys: SummaryKeys, *, n_fine: int = 2048, eps: float = 1e-12
) -> tuple[ReferenceCounts, CellBinning]:
    """:class:`~calib_cli.core.shift.ReferenceCounts` of the rows a summary's keys hold
    (one group; module docstring for what is exact), and how the keys fell on the fine grid.

    >>> keys = SummaryKeys(cell=np.array([1, 1, 2]), bin=np.zeros(3, np.int64),
    ...     label=np.array([0, 1, 1]), rows=np.array([2.0, 1.0, 3.0]), n_rows=np.array([2.0,
    ...     1.0, 3.0]), weight=np.array([2.0, 1.0, 3.0]), weight_sq=np.array([2.0, 1.0, 3.0]),
    ...     logit_sum=np.array([-2.0, -1.0, 3.0]), score_min=np.full(3, 0.2689414213699951),
    ...     score_max=np.array([0.2689414213699951, 0.2689414213699951, 0.7310585786300049]))
    >>> counts, binning = reference_counts_from_keys(keys, n_fine=4)
    >>> counts.rows_neg.tolist(), counts.rows_pos.tolist(), binning.straddling_keys
    ([2.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 3.0], 1)
    """
    live = _live(keys)
    if live.weight.size == 0:
        raise InputError("the reference summary has no rows with positive weight")
    u_low, u_high, mean = _key_logits(live, eps)
    low, high = grid_range([(float(u_low.min()), float(u_high.max()))])
    index = fine_index(mean, low, high, n_fine)
    pos = live.label == 1
    neg = ~pos
    # the AUC's points: each (cell, bin) at the pooled mean logit of both classes
    pair = np.column_stack((live.cell.astype(np.int64), live.bin.astype(np.int64)))
    _, unit = np.unique(pair, axis=0, return_inverse=True)
    unit = unit.reshape(-1)
    n_units = int(unit.max()) + 1
    unit_weight = _bincount(unit, live.weight, n_units)
    unit_low = np.full(n_units, np.inf)
    unit_high = np.full(n_units, -np.inf)
    np.minimum.at(unit_low, unit, u_low)
    np.maximum.at(unit_high, unit, u_high)
    unit_mean = np.clip(
        _bincount(unit, live.weight * mean, n_units) / unit_weight, unit_low, unit_high
    )
    values, inverse = np.unique(unit_mean[unit], return_inverse=True)
    inverse = inverse.reshape(-1)
    counts = ReferenceCounts(
        logit_low=low,
        logit_high=high,
        n_fine=n_fine,
        rows_neg=_bincount(index[neg], live.rows[neg], n_fine),
        rows_pos=_bincount(index[pos], live.rows[pos], n_fine),
        weight_neg=_bincount(index[neg], live.weight[neg], n_fine),
        weight_pos=_bincount(index[pos], live.weight[pos], n_fine),
        logit_sum=_bincount(index, live.weight * mean, n_fine),
        square_neg=float(np.sum(live.weight_sq[neg])),
        square_pos=float(np.sum(live.weight_sq[pos])),
        distinct_logit=values,
        distinct_neg=_bincount(inverse, live.weight * neg, values.size),
        distinct_pos=_bincount(inverse, live.weight * pos, values.size),
    )
    return counts, _binning(u_low, u_high, live.weight, low, high, n_fine)


def target_counts_from_keys(
    reference: ReferenceModel, keys: SummaryKeys
) -> tuple[TargetCounts, CellBinning]:
    """:class:`~calib_cli.core.shift.TargetCounts` of one batch's keys on ``reference``'s fine
    grid (rows outside its range in the end cells, as :func:`~calib_cli.core.shift.count_target`
    puts them), and how the keys fell on that grid.

    A key counts as outside the reference's range when its mean logit is (exact for a key
    wholly outside or inside; a key across an end of the range is a straddling key).
    """
    if reference.score_kind != "probability":
        raise InputError("counts from a summary need a reference of probability scores")
    size = int(np.sum(keys.n_rows))
    live = _live(keys)
    n_fine = reference.n_fine
    low, high = reference.logit_low, reference.logit_high
    if live.weight.size == 0:
        empty = np.zeros(n_fine)
        counts = TargetCounts(empty, empty.copy(), empty.copy(), size, 0.0, 0.0)
        return counts, CellBinning(keys=0, straddling_keys=0, straddling_share=0.0)
    u_low, u_high, mean = _key_logits(live, reference.eps)
    index = fine_index(mean, low, high, n_fine)
    outside = (mean < low) | (mean > high)
    counts = TargetCounts(
        rows=_bincount(index, live.rows, n_fine),
        weight=_bincount(index, live.weight, n_fine),
        logit_sum=_bincount(index, live.weight * mean, n_fine),
        size=size,
        weight_square=float(np.sum(live.weight_sq)),
        outside_weight=float(np.sum(live.weight[outside])),
    )
    across_end = ((u_low < low) & (u_high >= low)) | ((u_low <= high) & (u_high > high))
    binning = _binning(
        np.clip(u_low, low, high), np.clip(u_high, low, high), live.weight, low, high, n_fine
    )
    if np.any(across_end):
        extra = across_end & (
            fine_index(np.clip(u_low, low, high), low, high, n_fine)
            == fine_index(np.clip(u_high, low, high), low, high, n_fine)
        )
        total = float(np.sum(live.weight))
        binning = CellBinning(
            keys=binning.keys,
            straddling_keys=binning.straddling_keys + int(np.sum(extra)),
            straddling_share=binning.straddling_share + float(np.sum(live.weight[extra])) / total,
        )
    return counts, binning


@dataclass(frozen=True)
class SummaryBinning:
    """How a run's summaries fell on the fine grid: the reference's keys (None when the
    reference was read as rows) and each batch's, in the order of the batches (empty when the
    target was read as rows)."""

    reference: CellBinning | None
    batches: tuple[CellBinning, ...]
