"""Calibrators fitted on the cells of a score summary: each (cell, class) as a weighted row.

A summary (:mod:`calib_cli.summaries`) keeps, per grid cell of the score and per class, the
weight and the weighted sums of the score, of its complement and of its logit. A fit on the
summary is the core's own fit (:func:`~calib_cli.core.selection.fit_calibrator`: one
implementation per formula) on at most two weighted rows per cell:

* isotonic and histogram: both classes at the cell's pooled mean score
  :math:`\\bar p_c = \\sum_{y} S_{c,y} / \\sum_y W_{c,y}`, so a cell is one tie (pooled as the
  exact fit pools ties) carrying :math:`W_{c,1}` positives and :math:`W_{c,0}` negatives;
* Platt: each class at its mean logit :math:`L_{c,y} / W_{c,y}` in the cell (the feature Platt
  regresses on);
* beta: each class at its mean score in the cell (its log terms are taken of that mean).

The only difference from the fit on the rows is that rows of one cell are moved to a common
point inside the cell, whose relative width is :math:`2^{-m}`: for the logistic fits the loss
changes to second order in the width (:math:`O(4^{-m})`), for the step fits only the rows of
the cells where the exact fit puts a knot move. README ("Out of core") states the measured
held-out log-loss differences.

``auto`` on a summary grouped by fold (:func:`choose_method_on_cells`) fits each candidate on
the cells of all folds but one and scores it on that fold's cells, each class of a cell at its
mean score. Every map calib fits is monotone in the score (Platt in its logit, beta with
non-negative coefficients, isotonic, the histogram made non-decreasing), so each row's
out-of-fold probability lies between the map's values at its cell's smallest and largest
score, and its loss between the losses there: the rows' cross-validated log loss lies in an
interval the cells give exactly, whose width is reported as the comparison's bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from calib_cli.core.fit_support import FitFacts, require_fit_support
from calib_cli.core.metrics import brier_score, count_unit_of, log_loss
from calib_cli.core.platt import PlattParams
from calib_cli.core.selection import (
    CalibratorParams,
    MethodChoice,
    MethodScore,
    apply_calibrator,
    fit_calibrator,
)
from calib_cli.errors import InputError
from calib_cli.types import FittedMethod, FloatArray, IntArray


@dataclass(frozen=True)
class CellSums:
    """Per (cell, class) sums of a summary (one group), in any order.

    Attributes
    ----------
    cell : ndarray of int64, shape (k,)
        Grid cell of the key.
    label : ndarray of int, shape (k,)
        Class (0 or 1).
    weight, score_sum, logit_sum : ndarray of float64, shape (k,)
        Sums over the key's rows of ``w``, ``w p`` and ``w logit(clip(p, eps, 1 - eps))``.
    score_min, score_max : ndarray of float64, shape (k,)
        The key's smallest and largest score: means are kept inside them, so a cell of ties
        sits exactly at its score (a sum divided by a weight may round off it).
    rows : ndarray of float64, shape (k,), optional
        The key's rows of positive weight (a summary's ``n_rows_weighted``): with it, weights
        below 1 on average count in units of their mean (:func:`cell_facts`).
    """

    cell: IntArray
    label: npt.NDArray[np.integer[Any]]
    weight: FloatArray
    score_sum: FloatArray
    logit_sum: FloatArray
    score_min: FloatArray
    score_max: FloatArray
    rows: FloatArray | None = None


def pooled_points(cells: CellSums) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(score, label, weight) rows: every class of a cell at the cell's pooled mean score.

    >>> c = CellSums(np.array([5, 5]), np.array([0, 1]), np.array([1.0, 3.0]),
    ...              np.array([0.2, 0.9]), np.zeros(2), np.array([0.2, 0.25]),
    ...              np.array([0.2, 0.35]))
    >>> [a.tolist() for a in pooled_points(c)]
    [[0.275, 0.275], [0.0, 1.0], [1.0, 3.0]]
    """
    live = cells.weight > 0.0
    cell, label = cells.cell[live], cells.label[live]
    weight, score_sum = cells.weight[live], cells.score_sum[live]
    keys, index = np.unique(cell, return_inverse=True)
    total = np.bincount(index, weights=weight, minlength=keys.size)
    sums = np.bincount(index, weights=score_sum, minlength=keys.size)
    low = np.full(keys.size, np.inf)
    high = np.full(keys.size, -np.inf)
    np.minimum.at(low, index, cells.score_min[live])
    np.maximum.at(high, index, cells.score_max[live])
    mean = np.clip(sums / total, low, high)
    return mean[index], label.astype(np.float64), weight


def class_points(cells: CellSums, *, logit: bool) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(x, label, weight) rows: each class of a cell at its mean score, or mean logit.

    >>> c = CellSums(np.array([5, 5]), np.array([0, 1]), np.array([1.0, 2.0]),
    ...              np.array([0.2, 1.0]), np.array([-1.0, 0.5]), np.array([0.2, 0.4]),
    ...              np.array([0.2, 0.6]))
    >>> [a.tolist() for a in class_points(c, logit=True)]
    [[-1.0, 0.25], [0.0, 1.0], [1.0, 2.0]]
    """
    live = cells.weight > 0.0
    weight = cells.weight[live]
    sums = cells.logit_sum[live] if logit else cells.score_sum[live]
    x = sums / weight
    if not logit:
        x = np.clip(x, cells.score_min[live], cells.score_max[live])
    return x, cells.label[live].astype(np.float64), weight


def cell_facts(cells: CellSums) -> FitFacts:
    """The :class:`~calib_cli.core.fit_support.FitFacts` of a summary: its smallest and
    largest score and each class's weight, exactly those of the rows it summarises.

    >>> c = CellSums(np.array([1, 2]), np.array([0, 1]), np.array([3.0, 2.0]),
    ...              np.array([0.6, 1.6]), np.zeros(2), np.array([0.1, 0.7]),
    ...              np.array([0.3, 0.9]))
    >>> cell_facts(c)
    FitFacts(lowest=0.1, highest=0.9, positives=2.0, negatives=3.0, score_kind='probability')
    """
    live = cells.weight > 0.0
    if not live.any():  # no row of positive weight: refused as fit_facts refuses it
        return FitFacts(lowest=0.0, highest=0.0, positives=0.0, negatives=0.0)
    unit = rows_unit(cells) or 1.0
    return FitFacts(
        lowest=float(np.min(cells.score_min[live])),
        highest=float(np.max(cells.score_max[live])),
        positives=float(np.sum(cells.weight[live & (cells.label == 1)])) / unit,
        negatives=float(np.sum(cells.weight[live & (cells.label == 0)])) / unit,
    )


def rows_unit(cells: CellSums) -> float | None:
    """The weight that counts as one row of the rows ``cells`` summarise
    (:func:`~calib_cli.core.metrics.count_unit_of` their weight and rows), or ``None`` when the
    summary does not count rows. A cell's weight is the sum of many rows', so the cells' own
    mean weight is not it.

    >>> c = CellSums(np.array([1, 2]), np.array([0, 1]), np.array([0.3, 0.2]),
    ...              np.array([0.06, 0.16]), np.zeros(2), np.array([0.1, 0.7]),
    ...              np.array([0.3, 0.9]), rows=np.array([3, 2]))
    >>> rows_unit(c), rows_unit(replace(c, rows=None))
    (0.1, None)
    """
    live = cells.weight > 0.0
    if cells.rows is None or not live.any():
        return None
    return count_unit_of(float(np.sum(cells.weight[live])), float(np.sum(cells.rows[live])))


def fit_on_cells(
    method: FittedMethod,
    cells: CellSums,
    *,
    options: Mapping[str, Any] | None = None,
    what: str = "the scores",
    check_support: bool = True,
    weight_unit: float | None = None,
) -> CalibratorParams:
    """Fit ``method`` on the cells of a summary of probability scores (module docstring).

    Data that cannot support the fit are refused first, as the fit on rows refuses them
    (:func:`~calib_cli.core.fit_support.require_fit_support`; ``what`` names the scores),
    unless ``check_support`` is false (a cross-validation's training part, which the fit on
    rows does not check either: ``auto`` checks the whole data once). Pseudo-counts (Platt's
    target smoothing, the histogram's prior) count rows in ``weight_unit``, by default the
    unit of the rows the cells summarise (:func:`rows_unit`), as the fit on those rows counts
    them; a cross-validation passes the unit of all its folds.

    >>> c = CellSums(np.array([1, 1, 2, 2]), np.array([0, 1, 0, 1]),
    ...              np.array([30.0, 10.0, 10.0, 30.0]), np.array([6.0, 2.0, 8.0, 24.0]),
    ...              np.zeros(4), np.array([0.2] * 2 + [0.8] * 2), np.array([0.2] * 2 + [0.8] * 2))
    >>> params = fit_on_cells("isotonic", c)
    >>> params.x_knots.tolist(), params.y_knots.tolist()
    ([0.2, 0.8], [0.25, 0.75])
    """
    opts = dict(options or {})
    if not np.any(cells.weight > 0.0):
        raise InputError("the summary's weights sum to 0: no row carries weight")
    unit = weight_unit if weight_unit is not None else rows_unit(cells)
    if unit is not None and method != "isotonic":  # isotonic has no pseudo-count
        opts["weight_unit"] = unit
    if check_support:
        require_fit_support(method, cell_facts(cells), n_bins=opts.get("n_bins"), what=what)
    if method == "platt":
        x, y, w = class_points(cells, logit=True)
        fitted = fit_calibrator("platt", x, y, sample_weight=w, score_kind="logit", **opts)
        # the features were the logits of probability scores: the map reads probabilities
        return (
            replace(fitted, score_kind="probability") if isinstance(fitted, PlattParams) else fitted
        )
    if method == "beta":
        x, y, w = class_points(cells, logit=False)
        return fit_calibrator("beta", x, y, sample_weight=w, **opts)
    x, y, w = pooled_points(cells)
    return fit_calibrator(method, x, y, sample_weight=w, **opts)


def concat_cells(parts: Sequence[CellSums]) -> CellSums:
    """The cells of several summaries as one (keys may repeat: each is a weighted point).

    >>> a = CellSums(np.array([1]), np.array([0]), np.array([2.0]), np.array([0.4]),
    ...              np.array([-0.8]), np.array([0.2]), np.array([0.2]))
    >>> concat_cells([a, a]).weight.tolist()
    [2.0, 2.0]
    """
    rows = [p.rows for p in parts if p.rows is not None]
    joined = {
        f.name: np.concatenate([getattr(p, f.name) for p in parts])
        for f in fields(CellSums)
        if f.name != "rows"
    }
    return CellSums(  # row counts only when every part has them
        **joined, rows=np.concatenate(rows) if len(rows) == len(parts) else None
    )


def choose_method_on_cells(
    folds: Sequence[CellSums],
    *,
    candidates: Sequence[FittedMethod],
    options: Mapping[str, Mapping[str, Any]] | None = None,
    what: str = "the scores",
    dealt: str = "hashed",
) -> MethodChoice:
    """``auto`` on a summary grouped by fold (``dealt`` says how, for the report): each
    candidate is fitted (:func:`fit_on_cells`) on the cells of every fold but one and scored
    on that fold's cells, each class of a cell at its mean score; the weighted log loss and
    Brier score of those out-of-fold probabilities are the same functions as in memory
    (:func:`calib_cli.core.selection.choose_method`), and the lowest log loss wins (the
    earlier candidate on a tie). As in memory, the training parts are not checked for the
    candidates' minimum rows (the caller checks the whole data).

    ``cv_log_loss_bound``: each map is monotone (module docstring), so a row's out-of-fold
    probability lies between the map's values at its cell's smallest and largest score; the
    rows' log loss lies between the log losses of every point at its worse and at its better
    end, and the bound is that interval's width (the value at the means lies in it too). A
    fold of no weight is skipped; a training part the method cannot be fitted on is refused
    as in memory (``fold k of n: ...``).

    >>> rng = np.random.default_rng(0)
    >>> scores = rng.uniform(0.05, 0.95, 400)
    >>> labels = (rng.random(400) < scores).astype(np.int8)
    >>> parts = []
    >>> for k in range(2):
    ...     rows = np.arange(400) % 2 == k
    ...     s, y = scores[rows], labels[rows]
    ...     parts.append(CellSums(np.arange(s.size), y, np.ones(s.size), s,
    ...                           np.log(s / (1 - s)), s, s))
    >>> choice = choose_method_on_cells(parts, candidates=("platt", "beta"))
    >>> choice.chosen in ("platt", "beta"), choice.candidates[0].cv_log_loss_bound
    (True, 0.0)
    """
    if len(folds) < 2:
        raise InputError(f"cross-validation needs at least 2 folds, got {len(folds)}")
    if not candidates:
        raise InputError("candidates must name at least one method")
    # what does not depend on the candidate, once: each scored fold's training cells (the
    # other folds) and its points (each class of a cell at its mean, and the cell's ends)
    scored = [k for k, fold in enumerate(folds) if np.any(fold.weight > 0.0)]
    unit = rows_unit(concat_cells(folds))  # every fold counts rows as all the rows do
    trains = {k: concat_cells([f for j, f in enumerate(folds) if j != k]) for k in scored}
    points = {k: class_points(folds[k], logit=False) for k in scored}
    ends = {
        k: (folds[k].score_min[folds[k].weight > 0.0], folds[k].score_max[folds[k].weight > 0.0])
        for k in scored
    }
    y = np.concatenate([points[k][1] for k in scored])
    w = np.concatenate([points[k][2] for k in scored])
    table = []
    for method in candidates:
        opts = dict((options or {}).get(method, {}))
        p_parts, low_parts, high_parts = [], [], []
        for k in scored:
            try:
                params = fit_on_cells(
                    method,
                    trains[k],
                    options=opts,
                    what=what,
                    check_support=False,
                    weight_unit=unit,
                )
            except InputError as exc:
                raise InputError(f"fold {k + 1} of {len(folds)}: {exc}") from None
            at_low, at_high = (apply_calibrator(params, e) for e in ends[k])
            p_parts.append(apply_calibrator(params, points[k][0]))
            low_parts.append(np.minimum(at_low, at_high))
            high_parts.append(np.maximum(at_low, at_high))
        p = np.concatenate(p_parts)
        low, high = np.concatenate(low_parts), np.concatenate(high_parts)
        # a positive's loss is largest at the lower probability, a negative's at the higher
        worst = log_loss(y, np.where(y == 1.0, low, high), sample_weight=w)
        best = log_loss(y, np.where(y == 1.0, high, low), sample_weight=w)
        table.append(
            MethodScore(
                method=method,
                cv_log_loss=log_loss(y, p, sample_weight=w),
                cv_brier=brier_score(y, p, sample_weight=w),
                cv_log_loss_bound=max(worst - best, 0.0),
            )
        )
    chosen = min(range(len(table)), key=lambda i: (table[i].cv_log_loss, i))
    return MethodChoice(
        chosen=table[chosen].method, n_folds=len(scored), candidates=tuple(table), folds=dealt
    )
