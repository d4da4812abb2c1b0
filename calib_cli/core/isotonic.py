"""Isotonic calibration: the weighted pool-adjacent-violators fit, kept as plain knots.

Rows with tied scores are pooled first (weights summed, label rate weighted), then the
isotonic regression of the pooled label rates on the distinct scores is

.. math::

    \\hat m = \\arg\\min_{m_1 \\le m_2 \\le \\dots \\le m_k} \\sum_j W_j (r_j - m_j)^2,

with :math:`W_j` the summed weight and :math:`r_j` the weighted label rate of the j-th
distinct score (pool adjacent violators, ``scipy.optimize.isotonic_regression``). The fitted
values are constant on blocks of consecutive distinct scores.

Two knot sets (``x_knots``, ``y_knots``) turn the fit into a map by linear interpolation:

* default (``strict=False``): exactly scikit-learn's ``IsotonicRegression``: every distinct
  score with its fitted value, dropping interior points whose value equals both neighbours'
  (so each block keeps its first and last score); scores between blocks are interpolated,
  scores outside the fitted range get the end values (``out_of_bounds="clip"``);
* ``strict=True``: one knot per block at its centre (weighted mean score) with the block
  value, plus end knots at score 0 and 1 that continue the first and last block by ``eps``;
  the values are then squeezed affinely from ``[-eps, 1 + eps]`` into ``[eps, 1 - eps]``. The
  map is strictly increasing on [0, 1], so distinct scores keep distinct, equally ordered
  outputs (to float64 resolution) and ranking metrics such as AUC are unchanged.

By default, outputs are clipped to ``[eps, 1 - eps]`` so that log loss stays finite.

References
----------
B. Zadrozny and C. Elkan, "Transforming Classifier Scores into Accurate Multiclass
Probability Estimates", KDD 2002.
M. Ayer et al., "An Empirical Distribution Function for Sampling with Incomplete
Information", Ann. Math. Statist. 26, 1955 (pool adjacent violators).
References/004: isotonic regression with linear interpolation between steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from calib_cli.core.checks import check_fit_data, check_scores
from calib_cli.core.lazy_scipy import isotonic_regression
from calib_cli.errors import InputError
from calib_cli.types import BoolArray, FloatArray

__all__ = [
    "IsotonicParams",
    "IsotonicUnits",
    "apply_isotonic",
    "fit_isotonic",
    "fit_isotonic_units",
]


@dataclass(frozen=True)
class IsotonicParams:
    """A fitted isotonic map: linear interpolation through knots, clipped outside them.

    Attributes
    ----------
    x_knots : ndarray of shape (n_knots,)
        Scores, strictly increasing.
    y_knots : ndarray of shape (n_knots,)
        Calibrated probabilities at the knots (monotone in ``x_knots``).
    eps : float
        Outputs are kept inside ``[eps, 1 - eps]`` by :func:`apply_isotonic`.
    strict : bool
        Whether the knots were built to make the map strictly monotone.
    """

    kind: ClassVar[str] = "isotonic"

    x_knots: FloatArray
    y_knots: FloatArray
    eps: float
    strict: bool


def _pool_ties(
    x: FloatArray, y: FloatArray, w: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Distinct scores (sorted), their summed weights and weighted label rates."""
    # ties are pooled; stable, so each pool's weights add in the rows' order on every machine
    # (NumPy's default sort orders ties by the CPU's vector width)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    new = np.empty(xs.shape[0], dtype=bool)
    new[0] = True
    np.not_equal(xs[1:], xs[:-1], out=new[1:])
    group = np.cumsum(new) - 1
    unique_w = np.bincount(group, weights=w[order]).astype(np.float64, copy=False)
    unique_y = np.bincount(group, weights=(w * y)[order]) / unique_w
    return xs[new], unique_y, unique_w


def _sklearn_knots(ux: FloatArray, fitted: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Drop interior points whose value equals both neighbours' (scikit-learn's trimming)."""
    keep: BoolArray = np.ones(fitted.shape[0], dtype=bool)
    keep[1:-1] = (fitted[1:-1] != fitted[:-2]) | (fitted[1:-1] != fitted[2:])
    return ux[keep].copy(), fitted[keep].copy()


_SAME_VALUE = 1e-12


def _knots(
    low: FloatArray,
    high: FloatArray,
    weight: FloatArray,
    score_sum: FloatArray,
    fitted: FloatArray,
    *,
    strict: bool,
    increasing: bool,
    eps: float,
) -> tuple[FloatArray, FloatArray]:
    """The knots of a fit on score-ordered units (a distinct score: ``low == high``; a group
    of scores that share one value: its smallest and largest score), each with its fitted
    value, summed weight and summed ``weight * score``."""
    if not strict:
        # every unit contributes its lowest and (when different) its highest score
        two = high > low
        x = np.column_stack((low, high))[np.column_stack((np.ones(low.size, bool), two))]
        values = np.repeat(fitted, np.where(two, 2, 1))
        return _sklearn_knots(x, values)
    return _strict_knots(low, high, weight, score_sum, fitted, increasing=increasing, eps=eps)


def _strict_knots(
    low: FloatArray,
    high: FloatArray,
    weight: FloatArray,
    score_sum: FloatArray,
    fitted: FloatArray,
    *,
    increasing: bool,
    eps: float,
) -> tuple[FloatArray, FloatArray]:
    """Block centres with block values, end knots at 0 and 1, squeezed into [eps, 1 - eps]."""
    start = np.empty(fitted.shape[0], dtype=bool)
    start[0] = True
    # Blocks whose values differ only by rounding (PAV's means of equal rates) are one block:
    # two knots at the same height would make the map flat between them and tie their scores.
    start[1:] = np.abs(fitted[1:] - fitted[:-1]) > _SAME_VALUE * np.maximum(1.0, np.abs(fitted[1:]))
    block = np.cumsum(start) - 1
    centre = np.bincount(block, weights=score_sum) / np.bincount(block, weights=weight)
    first = low[start]
    last = high[np.r_[np.flatnonzero(start)[1:] - 1, high.shape[0] - 1]]
    centre = np.clip(centre, first, last)  # rounding cannot push a centre out of its block
    values = fitted[start]
    sign = 1.0 if increasing else -1.0
    knots_x = [centre]
    knots_y = [values]
    if centre[0] > 0.0:
        knots_x.insert(0, np.array([0.0]))
        knots_y.insert(0, np.array([values[0] - sign * eps]))
    if centre[-1] < 1.0:
        knots_x.append(np.array([1.0]))
        knots_y.append(np.array([values[-1] + sign * eps]))
    x_knots = np.concatenate(knots_x)
    raw = np.concatenate(knots_y)
    y_knots = eps + (1.0 - 2.0 * eps) * (raw + eps) / (1.0 + 2.0 * eps)
    return x_knots, y_knots


def _check_eps(eps: float, strict: bool) -> float:
    eps_value = float(eps)
    if not (math.isfinite(eps_value) and 0.0 <= eps_value < 0.5):
        raise InputError(f"eps must be in [0, 0.5), got {eps!r}")
    if strict and eps_value == 0.0:
        raise InputError("eps must be positive when strict=True (it sets the end ramps)")
    return eps_value


def fit_isotonic(
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    increasing: bool = True,
    strict: bool = False,
    eps: float = 1e-6,
) -> IsotonicParams:
    """Fit isotonic calibration by weighted pool adjacent violators on tie-pooled scores.

    Parameters
    ----------
    scores : array-like of shape (n_rows,)
        Probability scores in [0, 1].
    y_true : array-like of shape (n_rows,)
        Binary labels (0/1 or booleans); both classes must carry positive weight.
    sample_weight : array-like of shape (n_rows,), optional
        Non-negative row weights; a row of weight 2 counts exactly as two rows of weight 1.
        Rows of weight 0 are ignored (they add no knots).
    increasing : bool, default True
        Fit a non-decreasing map (``False``: non-increasing).
    strict : bool, default False
        Build the knots so that the map is strictly monotone on [0, 1] (block centres,
        end knots that continue the end blocks by ``eps``, values squeezed into
        ``[eps, 1 - eps]``), preserving the ranking and AUC.
    eps : float, default 1e-6
        Outputs are kept inside ``[eps, 1 - eps]``; in [0, 0.5), and positive when ``strict``.

    Returns
    -------
    IsotonicParams
        ``x_knots``, ``y_knots``, ``eps``, ``strict``.

    Notes
    -----
    With ``strict=False`` the knots are scikit-learn's ``X_thresholds_``/``y_thresholds_``
    (``IsotonicRegression(out_of_bounds="clip")``), except that scikit-learn also merges
    distinct scores closer than 1e-15 while this pools exactly equal scores only.

    Examples
    --------
    >>> params = fit_isotonic([0.1, 0.2, 0.3, 0.4], [0, 1, 0, 1])
    >>> params.x_knots.tolist(), params.y_knots.tolist()
    ([0.1, 0.2, 0.3, 0.4], [0.0, 0.5, 0.5, 1.0])
    >>> apply_isotonic(params, [0.0, 0.15, 0.35]).round(12).tolist()
    [1e-06, 0.25, 0.75]
    """
    eps_value = _check_eps(eps, strict)
    x, y, w = check_fit_data(scores, y_true, sample_weight)
    used = w > 0.0
    ux, uy, uw = _pool_ties(x[used], y[used], w[used])
    fitted = np.asarray(isotonic_regression(uy, weights=uw, increasing=increasing).x)
    x_knots, y_knots = _knots(
        ux, ux, uw, uw * ux, fitted, strict=strict, increasing=increasing, eps=eps_value
    )
    return IsotonicParams(x_knots=x_knots, y_knots=y_knots, eps=eps_value, strict=bool(strict))


@dataclass(frozen=True)
class IsotonicUnits:
    """Score-ordered groups of rows for :func:`fit_isotonic_units`, each given one value.

    A unit is either one distinct score (``low == high``: a group of ties, as the fit on
    rows pools them) or a grid cell of a summary whose rows are not told apart. Units must
    not overlap (``high[i] < low[i + 1]``) and carry positive weight.

    Attributes
    ----------
    low, high : ndarray of shape (k,)
        The smallest and largest score of the unit's rows (of positive weight).
    weight, positive_weight : ndarray of shape (k,)
        Summed weight of its rows, and of its positive rows.
    score_sum : ndarray of shape (k,)
        Summed ``weight * score``.
    """

    low: FloatArray
    high: FloatArray
    weight: FloatArray
    positive_weight: FloatArray
    score_sum: FloatArray


def fit_isotonic_units(
    units: IsotonicUnits, *, increasing: bool = True, strict: bool = False, eps: float = 1e-6
) -> tuple[IsotonicParams, BoolArray]:
    """The isotonic fit with every unit held at one value, and the units it may not hold.

    Pool adjacent violators on the units' label rates gives the best map that is constant on
    each unit. It is the fit on the rows (:func:`fit_isotonic`) unless the fit on the rows
    would split a unit. That cannot happen to a unit of one distinct score, nor to a unit
    that passes this certificate: for an increasing fit, a block (a run of equal values
    ``v``) is optimal iff every prefix of it, in score order, has
    :math:`S = \\sum w (y - v) \\ge 0` (its rate is at least ``v``); inside a unit, whatever
    the order of its rows, a prefix has
    :math:`S \\ge S_{\\text{before}} - v\\, W_0` (its negatives first), where
    :math:`S_{\\text{before}}` sums the block's units before it and :math:`W_0` is the unit's
    negative weight (for a decreasing fit, :math:`S \\le S_{\\text{before}} + (1 - v) W_1`
    is needed, positives first). Units that fail it are returned as ``open``: resolve them
    into their distinct scores (a second pass over the rows) and fit again; when no unit is
    open the knots are exactly those of the fit on the rows, up to the order of
    floating-point sums. The first and last unit of a block with both classes always fail.

    Returns
    -------
    params : IsotonicParams
    open : ndarray of bool, shape (k,)
        Units that the fit on the rows could split.

    Examples
    --------
    >>> units = IsotonicUnits(np.array([0.1, 0.3, 0.5]), np.array([0.2, 0.3, 0.9]),
    ...     np.array([4.0, 1.0, 4.0]), np.array([1.0, 1.0, 3.0]), np.array([0.6, 0.3, 2.8]))
    >>> params, open_ = fit_isotonic_units(units)
    >>> params.x_knots.tolist(), params.y_knots.tolist(), open_.tolist()
    ([0.1, 0.2, 0.3, 0.9], [0.25, 0.25, 0.8, 0.8], [True, False, True])
    """
    eps_value = _check_eps(eps, strict)
    low = np.asarray(units.low, dtype=np.float64)
    high = np.asarray(units.high, dtype=np.float64)
    weight = np.asarray(units.weight, dtype=np.float64)
    positive = np.asarray(units.positive_weight, dtype=np.float64)
    if low.size == 0 or not np.all(weight > 0.0):
        raise InputError("isotonic units need positive weights (and at least one unit)")
    if np.any(high < low) or np.any(low[1:] <= high[:-1]):
        raise InputError("isotonic units must be sorted by score and must not overlap")
    fitted = np.asarray(
        isotonic_regression(positive / weight, weights=weight, increasing=increasing).x
    )
    x_knots, y_knots = _knots(
        low,
        high,
        weight,
        np.asarray(units.score_sum, dtype=np.float64),
        fitted,
        strict=strict,
        increasing=increasing,
        eps=eps_value,
    )
    params = IsotonicParams(x_knots=x_knots, y_knots=y_knots, eps=eps_value, strict=bool(strict))
    # S before each unit, within its block (runs of exactly equal values, as PAV leaves them)
    start = np.r_[True, fitted[1:] != fitted[:-1]]
    block = np.cumsum(start) - 1
    residual = positive - fitted * weight
    before = np.cumsum(residual) - residual
    before = before - before[start][block]
    if increasing:
        worst = before - fitted * (weight - positive)
        open_units = worst < 0.0
    else:
        worst = before + (1.0 - fitted) * positive
        open_units = worst > 0.0
    return params, open_units & (high > low)


def apply_isotonic(
    params: IsotonicParams, scores: npt.ArrayLike, *, clip_eps: bool = True
) -> FloatArray:
    """Calibrated probabilities: linear interpolation through the knots, constant outside.

    Parameters
    ----------
    params : IsotonicParams
        A fitted map from :func:`fit_isotonic`.
    scores : array-like of shape (n_rows,)
        Probability scores in [0, 1].
    clip_eps : bool, default True
        Clip the outputs to ``[params.eps, 1 - params.eps]``.

    Returns
    -------
    ndarray of shape (n_rows,)
        Calibrated probabilities.

    Examples
    --------
    >>> params = IsotonicParams(x_knots=np.array([0.2, 0.8]), y_knots=np.array([0.0, 0.6]),
    ...                         eps=0.01, strict=False)
    >>> apply_isotonic(params, [0.1, 0.5, 0.9]).round(12).tolist()
    [0.01, 0.3, 0.6]
    """
    s = check_scores(scores)
    out: FloatArray = np.interp(s, params.x_knots, params.y_knots)
    if clip_eps and params.eps > 0.0:
        np.clip(out, params.eps, 1.0 - params.eps, out=out)
    return out
