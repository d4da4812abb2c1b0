"""Histogram binning: equal-mass bins with smoothed, monotone bin rates.

The scores are cut at weighted quantiles into (at most) ``n_bins`` bins of about equal weight;
edges that coincide (heavily tied scores) are collapsed, so fewer bins may result, and every
bin holds fit data. Each bin's positive rate is the posterior mean under a Beta prior centred on
the overall base rate :math:`\\pi = W_+ / W`:

.. math::

    \\text{rate}_k = \\frac{W_{+,k} + m \\pi}{W_k + m},

with :math:`W_k` and :math:`W_{+,k}` the weighted count and weighted positives in bin ``k`` and
:math:`m` the weight of ``prior_strength`` rows (a Beta(:math:`m\\pi`, :math:`m(1-\\pi)`)
prior worth ``prior_strength`` rows). A row weighs 1, or the mean weight when weights are below
1 on average (:func:`calib_cli.core.fit_support.check_weight_unit`): weights of 2 count as two
rows each, and weights normalised to sum to 1 give the rates of the same weights scaled to a
mean of 1 instead of drowning them in the prior. The prior keeps rates away from 0 and 1, so
log loss stays finite.

Plain binning is not monotone: noise can make a bin's rate lower than its left neighbour's.
The rates are therefore made non-decreasing by weighted pool adjacent violators with weights
:math:`W_k + m`; pooling bins this way gives exactly the smoothed rate of the merged bin (with
the prior counted once per bin). The calibrated probability of a score is the rate of its bin.

References
----------
B. Zadrozny and C. Elkan, "Obtaining calibrated probability estimates from decision trees and
naive Bayesian classifiers", ICML 2001 (histogram binning).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from calib_cli.core.checks import check_fit_data, check_scores
from calib_cli.core.fit_support import check_weight_unit
from calib_cli.core.lazy_scipy import isotonic_regression
from calib_cli.errors import InputError
from calib_cli.types import FloatArray, IntArray

__all__ = ["HistogramParams", "apply_histogram", "fit_histogram", "fit_histogram_points"]


@dataclass(frozen=True)
class HistogramParams:
    """Fitted histogram binning.

    Attributes
    ----------
    edges : ndarray of shape (n_bins + 1,)
        Strictly increasing bin edges; the first is 0.0 and the last 1.0. Bin ``k`` holds the
        scores in ``[edges[k], edges[k + 1])`` (the last bin also holds 1.0).
    rates : ndarray of shape (n_bins,)
        Calibrated probability of each bin, non-decreasing.
    """

    kind: ClassVar[str] = "histogram"

    edges: FloatArray
    rates: FloatArray


#: A running weight within this fraction of the total of a level ``k / n`` of it reaches the
#: level without passing it: rescaled weights (integer weights normalised to sum to 1) land a
#: rounding away from a level their unscaled sums hit exactly, on either side, and would move an
#: edge by a row. Integer sums below 1e9 are compared exactly (as ``fit_support._settled``).
LEVEL_RTOL = 1e-9


def _equal_mass_edges(xs: FloatArray, cumulative: FloatArray, n_bins: int) -> IntArray:
    """Inner edges at weighted quantiles of scores in order (``xs`` non-decreasing,
    ``cumulative`` their running weight): the position of the first score whose cumulative
    weight passes each ``k / n`` of the total (by more than :data:`LEVEL_RTOL` of it, so that
    any scale of the weights gives the same positions).

    >>> w = np.array([3.0, 2.0, 2.0, 1.0, 1.0, 1.0])  # the second row ends at half the total
    >>> _equal_mass_edges(np.arange(6.0), np.cumsum(w), 2).tolist()
    [2]
    >>> _equal_mass_edges(np.arange(6.0), np.cumsum(w * 0.1), 2).tolist()  # total 1 - 1e-16
    [2]
    """
    total = cumulative[-1]
    levels = total * np.arange(1, n_bins) / n_bins + LEVEL_RTOL * total
    index: IntArray = np.minimum(np.searchsorted(cumulative, levels, side="right"), xs.shape[0] - 1)
    return index


def _inner_edges(xs: FloatArray, index: IntArray) -> FloatArray:
    """The distinct edges at ``index``, inside (0, 1) and above the smallest score ``xs[0]``
    (an edge there would leave the first bin empty)."""
    inner = np.unique(xs[index])
    kept: FloatArray = inner[(inner > xs[0]) & (inner > 0.0) & (inner < 1.0)]
    return kept


def _binned(
    x: FloatArray, y: FloatArray, w: FloatArray, inner: FloatArray, strength: float
) -> HistogramParams:
    """Each bin's weight and positives, their smoothed rates made non-decreasing (``strength``:
    the prior's weight, ``prior_strength`` rows of the weight unit)."""
    edges = np.concatenate(([0.0], inner, [1.0]))
    bins = np.searchsorted(inner, x, side="right")
    n_found = inner.shape[0] + 1
    count = np.bincount(bins, weights=w, minlength=n_found)
    positives = np.bincount(bins, weights=w * y, minlength=n_found)
    base_rate = float(positives.sum() / count.sum())
    smoothed = (positives + strength * base_rate) / (count + strength)
    rates = np.asarray(isotonic_regression(smoothed, weights=count + strength).x)
    return HistogramParams(edges=edges, rates=rates)


def _check_options(n_bins: int, prior_strength: float) -> tuple[int, float]:
    if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or n_bins < 1:
        raise InputError(f"n_bins must be a positive integer, got {n_bins!r}")
    strength = float(prior_strength)
    if not (math.isfinite(strength) and strength >= 0.0):
        raise InputError(f"prior_strength must be a non-negative number, got {prior_strength!r}")
    return int(n_bins), strength


def fit_histogram(
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    n_bins: int = 10,
    prior_strength: float = 1.0,
    weight_unit: float | None = None,
) -> HistogramParams:
    """Fit histogram binning with equal-mass bins and Beta-smoothed, monotone rates.

    Parameters
    ----------
    scores : array-like of shape (n_rows,)
        Probability scores in [0, 1].
    y_true : array-like of shape (n_rows,)
        Binary labels (0/1 or booleans); both classes must carry positive weight.
    sample_weight : array-like of shape (n_rows,), optional
        Non-negative row weights; a row of weight 2 counts exactly as two rows of weight 1.
    n_bins : int, default 10
        Number of equal-mass bins (fewer when tied scores make edges coincide).
    prior_strength : float, default 1.0
        Worth of the Beta prior centred on the base rate, in rows (0 disables it).
    weight_unit : float, optional
        The weight of one row for ``prior_strength``: by default 1, or the mean positive
        weight when that is below 1 (:func:`calib_cli.core.fit_support.check_weight_unit`),
        so any scale of weights below 1 on average gives the same rates.

    Returns
    -------
    HistogramParams
        ``edges`` and non-decreasing ``rates``.

    Notes
    -----
    :math:`\\text{rate}_k = (W_{+,k} + m\\pi) / (W_k + m)`, with :math:`m` = ``prior_strength``
    times ``weight_unit``, followed by weighted pool adjacent violators (weights
    :math:`W_k + m`); see the module docstring.

    Examples
    --------
    >>> params = fit_histogram([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9],
    ...                        [0, 0, 0, 1, 0, 1, 1, 1], n_bins=2, prior_strength=0.0)
    >>> params.edges.tolist(), params.rates.tolist()
    ([0.0, 0.6, 1.0], [0.25, 0.75])
    >>> apply_histogram(params, [0.0, 0.59, 0.6, 1.0]).tolist()
    [0.25, 0.25, 0.75, 0.75]
    """
    n, strength = _check_options(n_bins, prior_strength)
    x, y, w = check_fit_data(scores, y_true, sample_weight)
    strength *= check_weight_unit(weight_unit, w)
    used = w > 0.0
    x, y, w = x[used], y[used], w[used]
    order = np.argsort(x, kind="stable")  # ties in the rows' order: the same cumulative sums
    xs = x[order]
    inner = _inner_edges(xs, _equal_mass_edges(xs, np.cumsum(w[order]), n))
    return _binned(x, y, w, inner, strength)


def fit_histogram_points(
    x: FloatArray,
    y: FloatArray,
    w: FloatArray,
    exact: npt.NDArray[np.bool_],
    *,
    n_bins: int = 10,
    prior_strength: float = 1.0,
    weight_unit: float = 1.0,
) -> HistogramParams | npt.NDArray[np.bool_]:
    """:func:`fit_histogram` on weighted points in score order: a summary's (cell, class) key
    each, at its smallest score, ``exact`` when its cell holds one distinct score over every
    class (one class's rows at one score can lie between the other class's rows, so a key of
    one score is not enough).

    The fit on the rows depends on the scores of the rows at which the cumulative weight
    passes each ``k / n`` (the edges) and on which bin each row falls in. If every edge falls
    on an exact point, that is this fit: an edge is a score of an exact point, so it never
    lies inside an inexact point's cell, whose rows all share one bin. Otherwise returns the
    mask of the inexact points an edge fell on: the rows of their cells (every class) must be
    read (as exact points) and the fit made again.

    ``x`` must be non-decreasing (points of one score or cell adjacent), weights positive.
    ``weight_unit`` is the weight of one of the rows behind the points, for
    ``prior_strength`` (:func:`fit_histogram`): a point's weight is the sum of many rows', so
    the points' mean weight is not the rows' (give ``metrics.count_unit_of`` of the points'
    total weight and their rows of positive weight).

    >>> x = np.array([0.1, 0.2, 0.2, 0.6, 0.9])
    >>> y, w = np.array([0.0, 0.0, 1.0, 1.0, 1.0]), np.array([2.0, 1.0, 1.0, 1.0, 1.0])
    >>> params = fit_histogram_points(x, y, w, np.ones(5, bool), n_bins=2, prior_strength=0.0)
    >>> params.edges.tolist(), params.rates.tolist()
    ([0.0, 0.2, 1.0], [0.0, 0.75])
    >>> fit_histogram_points(x, y, w, np.array([1, 0, 0, 1, 1], bool), n_bins=2).tolist()
    [False, False, True, False, False]
    """
    n, strength = _check_options(n_bins, prior_strength)
    strength *= check_weight_unit(weight_unit, w)
    index = _equal_mass_edges(x, np.cumsum(w), n)
    landed = np.zeros(x.shape[0], dtype=bool)
    landed[index] = True
    inexact: npt.NDArray[np.bool_] = landed & ~exact
    if inexact.any():
        return inexact
    return _binned(x, y, w, _inner_edges(x, index), strength)


def apply_histogram(params: HistogramParams, scores: npt.ArrayLike) -> FloatArray:
    """Calibrated probabilities: the rate of the bin holding each score.

    Parameters
    ----------
    params : HistogramParams
        A fitted binning from :func:`fit_histogram`.
    scores : array-like of shape (n_rows,)
        Probability scores in [0, 1].

    Returns
    -------
    ndarray of shape (n_rows,)
        Calibrated probabilities (a step function of the score, non-decreasing).

    Examples
    --------
    >>> params = HistogramParams(edges=np.array([0.0, 0.5, 1.0]), rates=np.array([0.1, 0.8]))
    >>> apply_histogram(params, [0.2, 0.5, 1.0]).tolist()
    [0.1, 0.8, 0.8]
    """
    s = check_scores(scores)
    bins = np.searchsorted(params.edges[1:-1], s, side="right")
    result: FloatArray = params.rates[bins]
    return result
