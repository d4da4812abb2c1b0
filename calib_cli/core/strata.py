"""Stratified re-ranking: per-stratum ROC slopes times stratum odds (Zuo 2021, Algorithm 1).

When one model is trained per stratum :math:`g` (segment), each on a sample or weighting that
differs by stratum, pooled raw scores are mis-ranked across strata. Zuo (2021, Theorem 4)
shows that among all rankings that keep the order *within* each stratum, ranking by

.. math::

    r(x) = h_g(s) \\cdot \\frac{p(y = 1 \\mid g)}{p(y = 0 \\mid g)} = h_g(s) \\, w_g

uniformly maximises the TPR at every FPR, where :math:`s` is the row's score,
:math:`h_g(s) = \\mathrm{d}\\,\\mathrm{TPR}_g / \\mathrm{d}\\,\\mathrm{FPR}_g` is the slope of
stratum :math:`g`'s ROC curve at :math:`s` (the likelihood ratio
:math:`f_1(s \\mid g) / f_0(s \\mid g)`), and :math:`w_g` (``stratum_odds``) the positive odds
of the stratum in the population being scored. Then :math:`r` is the population posterior odds
and ``calibrated`` :math:`= r / (1 + r)` the population posterior probability.

Algorithm 1, per stratum :math:`j` of a labelled reference (tuning) set:

1. the weighted empirical ROC of the reference scores (:func:`roc_hull`);
2. the slope :math:`h_j` as a function of the FPR, smoothed and made *strictly* decreasing in
   the FPR (:func:`fit_stratum_slope`), so that the order within a stratum never changes;
3. the stratum odds :math:`w_j` (:func:`stratum_odds`, or :func:`odds_from_prevalence`);
4. for each target row, :math:`r = w_j \\, h_j(\\mathrm{FPR}_j(s))` (:func:`rerank`).

Ties in :math:`r` across strata are broken by the raw score (:func:`rank_order`,
:func:`rerank_rank`); ``rerank_score`` itself may tie.

Strata are identified by ``str(value)`` (so the integer stratum ``1`` and the string ``"1"``
are the same stratum); :func:`factorize_strata` turns a column into codes and names.

References
----------
C. Zuo, "Calibration for Stratified Classification Models", 2021 (reference 002): Theorem 4
(equation 5) and Algorithm 1.
T. Fawcett and A. Niculescu-Mizil, "PAV and the ROC convex hull", Machine Learning 68, 2007:
the slopes of the ROC convex hull are the pool-adjacent-violators likelihood ratios.
B. C. K. Choi, "Slopes of a receiver operating characteristic curve and likelihood ratios for
a diagnostic test", American Journal of Epidemiology 148, 1998.
W. S. Cleveland, E. Grosse and W. M. Shyu, "Local regression models", 1992 (``loess``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from calib_cli.core import elementary as el
from calib_cli.core.checks import (
    check_labels,
    check_scores,
    check_weights,
    require_both_classes,
    require_same_length,
)
from calib_cli.core.lazy_scipy import isotonic_regression
from calib_cli.core.shift import ShiftEstimate, estimate_prevalence, fit_reference
from calib_cli.errors import InputError
from calib_cli.types import FloatArray, IntArray, ScoreKind, SlopeSmoothing

__all__ = [
    "CONTINUITY",
    "DEFAULT_N_GRID",
    "DEFAULT_SPAN",
    "DEFAULT_TIE_EPS",
    "RankingComparison",
    "RerankResult",
    "RocHull",
    "StratumSlope",
    "StratumSummary",
    "compare_rankings",
    "compare_rankings_from_counts",
    "factorize_strata",
    "fit_strata",
    "fit_stratum_slope",
    "fit_stratum_slope_from_counts",
    "fpr_at",
    "odds_from_prevalence",
    "rank_order",
    "require_strata",
    "rerank",
    "rerank_coded",
    "rerank_rank",
    "roc_hull",
    "roc_slope_at",
    "stratum_aucs",
    "stratum_label_rates",
    "stratum_odds",
    "stratum_odds_from_counts",
    "summarise_strata",
    "summarise_strata_counts",
    "tpr_at_fpr",
]

DEFAULT_TIE_EPS = 1e-6
"""Size of the tie-breaking ramps: a relative change of at most 1e-6 in any slope or FPR."""
DEFAULT_SPAN = 0.05
"""``loess`` span (fraction of the FPR grid in each local fit); 0.05 as in Zuo (2021, sec. 3.1)."""
DEFAULT_N_GRID = 1001
"""Number of FPR grid points on which the ``loess`` fit is evaluated."""
CONTINUITY = 0.5
"""Continuity correction (in rows of weight 1) for hull segments with no negatives/positives."""

_SMOOTHINGS = ("hull", "loess")
_ULP_MARGIN = 64.0  # ramp steps are at least this many ulps, so rounding cannot undo them


# --------------------------------------------------------------------------------------------
# Result dataclasses
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RocHull:
    """The concave hull of a weighted empirical ROC curve, one entry per hull segment.

    Segments run from the lowest scores (top right of the ROC) to the highest (bottom left);
    each is a pool-adjacent-violators block of distinct scores.

    Attributes
    ----------
    score_low, score_high : ndarray of shape (n_segments,)
        Lowest and highest distinct score in the segment (ascending).
    positives, negatives : ndarray of shape (n_segments,)
        Weighted positives and negatives of the segment.
    fpr_low, fpr_high, tpr_low, tpr_high : ndarray of shape (n_segments,)
        End points of the segment on the ROC curve.
    roc_slope : ndarray of shape (n_segments,)
        ``(positives / P) / (negatives / N)``, non-decreasing in the score; ``inf`` for a
        segment without negatives and ``0`` for one without positives (no correction here).
    """

    score_low: FloatArray
    score_high: FloatArray
    positives: FloatArray
    negatives: FloatArray
    fpr_low: FloatArray
    fpr_high: FloatArray
    tpr_low: FloatArray
    tpr_high: FloatArray
    roc_slope: FloatArray


@dataclass(frozen=True)
class StratumSlope:
    """A stratum's fitted ROC slope function :math:`h_j` as knots, for :func:`roc_slope_at`.

    Attributes
    ----------
    thresholds : ndarray of shape (n_knots,)
        The distinct reference scores (with positive weight), strictly increasing.
    fpr : ndarray of shape (n_knots,)
        The FPR at each threshold, strictly decreasing (see :func:`fit_stratum_slope`).
    roc_slope : ndarray of shape (n_knots,)
        :math:`h_j` at each knot: finite, positive, strictly increasing along ``thresholds``
        (strictly decreasing in ``fpr``).
    smoothing : {"hull", "loess"}
        How the slope was estimated.
    tie_eps : float
        Size of the tie-breaking ramps (also used to extrapolate beyond the reference range).
    rows : int
        Reference rows of the stratum.
    positives, negatives : float
        Weighted positive and negative reference rows.
    auc : float
        Weighted within-stratum ROC AUC of the reference scores (ties count one half).
    slope_min, slope_max : float
        Smallest and largest fitted slope.
    """

    thresholds: FloatArray
    fpr: FloatArray
    roc_slope: FloatArray
    smoothing: str
    tie_eps: float
    rows: int
    positives: float
    negatives: float
    auc: float
    slope_min: float
    slope_max: float


@dataclass(frozen=True)
class RerankResult:
    """Re-ranked target rows (aligned with the target's rows).

    Attributes
    ----------
    rerank_score : ndarray
        :math:`r = w_j \\, h_j(\\mathrm{FPR}_j(s))`; may tie across strata (break ties with
        :func:`rank_order` / :func:`rerank_rank`, which use the raw score).
    calibrated : ndarray
        :math:`r / (1 + r)`: the population posterior when the odds are the population's.
    roc_slope : ndarray
        :math:`h_j(\\mathrm{FPR}_j(s))` of each row.
    """

    rerank_score: FloatArray
    calibrated: FloatArray
    roc_slope: FloatArray


@dataclass(frozen=True)
class StratumSummary:
    """One row of the per-stratum report table.

    ``stratum_odds`` is NaN (null in JSON) when no odds were given for the stratum.
    """

    stratum: str
    rows: int
    positives: float
    negatives: float
    stratum_odds: float
    auc: float
    slope_min: float
    slope_max: float
    target_rows: int


@dataclass(frozen=True)
class RankingComparison:
    """Raw versus re-ranked ranking quality on a labelled target.

    ``tpr_raw[i]`` and ``tpr_reranked[i]`` are the TPR at FPR ``fpr[i]`` (see
    :func:`tpr_at_fpr`); the re-ranked ranking breaks ties in ``rerank_score`` by the raw score.
    """

    auc_raw: float
    auc_reranked: float
    fpr: tuple[float, ...]
    tpr_raw: tuple[float, ...]
    tpr_reranked: tuple[float, ...]


# --------------------------------------------------------------------------------------------
# Weighted ROC building blocks
# --------------------------------------------------------------------------------------------


def _score_table(
    scores: FloatArray, y_true: FloatArray, sample_weight: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Distinct scores (ascending) of rows with positive weight, and their weighted classes."""
    keep = sample_weight > 0.0
    thresholds, inverse = np.unique(scores[keep], return_inverse=True)
    w = sample_weight[keep]
    y = y_true[keep]
    m = thresholds.size
    positives = np.asarray(np.bincount(inverse, weights=w * y, minlength=m), dtype=np.float64)
    negatives = np.asarray(
        np.bincount(inverse, weights=w * (1.0 - y), minlength=m), dtype=np.float64
    )
    return thresholds.astype(np.float64), positives, negatives


def _roc_vertices(positives: FloatArray, negatives: FloatArray) -> tuple[FloatArray, FloatArray]:
    """ROC vertices from (0, 0), lowering the threshold one distinct score at a time."""
    fpr = np.concatenate(([0.0], np.cumsum(negatives[::-1])))
    tpr = np.concatenate(([0.0], np.cumsum(positives[::-1])))
    fpr /= fpr[-1]
    tpr /= tpr[-1]
    return fpr, tpr


def _auc_from_vertices(fpr: FloatArray, tpr: FloatArray) -> float:
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1])) / 2.0)


def _clean_binary(
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    sample_weight: npt.ArrayLike | None,
    *,
    what: str,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    s = check_scores(scores, kind="raw")
    y = check_labels(y_true)
    require_same_length([s, y], ["scores", "y_true"])
    w = check_weights(sample_weight, s.size)
    require_both_classes(y, w, what=what)
    return s, y, w


def tpr_at_fpr(
    y_true: npt.ArrayLike,
    scores: npt.ArrayLike,
    *,
    fprs: Iterable[float] = (0.01, 0.05, 0.1),
    sample_weight: npt.ArrayLike | None = None,
) -> FloatArray:
    """The weighted TPR at given FPRs, read off the empirical ROC curve.

    The ROC curve joins the vertices reached by lowering the threshold one distinct score at a
    time; a run of tied scores holding both classes is a straight (diagonal) segment. Between
    vertices the TPR is interpolated linearly, which is exactly the expected TPR when the rows
    at the threshold score are flagged at random in the proportion needed to reach the FPR. At
    an FPR reached by a vertical segment (positives only) the top of the segment is returned.

    >>> tpr_at_fpr([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], fprs=(0.0, 0.25, 0.5)).tolist()
    [0.5, 0.5, 1.0]
    """
    s, y, w = _clean_binary(scores, y_true, sample_weight, what="the labels")
    targets = _check_fprs(fprs)
    _, pos, neg = _score_table(s, y, w)
    return _tpr_from_vertices(*_roc_vertices(pos, neg), targets)


def _check_fprs(fprs: Iterable[float]) -> FloatArray:
    targets = np.asarray(list(fprs), dtype=np.float64)
    bad = ~np.isfinite(targets) | (targets < 0.0) | (targets > 1.0)
    if bad.any():
        raise InputError(f"fprs must lie in [0, 1], got {float(targets[bad][0])!r}")
    return targets


def _tpr_from_vertices(fpr: FloatArray, tpr: FloatArray, targets: FloatArray) -> FloatArray:
    last = np.searchsorted(fpr, targets, side="right") - 1  # last vertex with fpr <= target
    nxt = np.minimum(last + 1, fpr.size - 1)
    span = fpr[nxt] - fpr[last]
    frac = np.divide(targets - fpr[last], span, out=np.zeros_like(targets), where=span > 0.0)
    out: FloatArray = tpr[last] + frac * (tpr[nxt] - tpr[last])
    return out


def roc_hull(
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
) -> RocHull:
    """The concave hull of the weighted empirical ROC curve, by pool-adjacent-violators.

    Weighted PAV of the labels on the scores (increasing) pools the distinct scores into
    blocks :math:`b` with strictly increasing positive rates; block :math:`b` is a segment of
    the ROC's concave hull with slope (likelihood ratio)

    .. math:: h_b = \\frac{P_b / P}{N_b / N}
        = \\frac{\\rho_b}{1 - \\rho_b} \\cdot \\frac{N}{P},

    where :math:`\\rho_b` is the block's weighted positive rate and :math:`P, N` the weighted
    totals (Fawcett and Niculescu-Mizil 2007). Adjacent blocks with equal rates are merged.

    >>> hull = roc_hull([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0, 1, 0, 0, 1, 1])
    >>> hull.roc_slope.tolist()
    [0.0, 0.5, inf]
    >>> hull.fpr_low.tolist(), hull.tpr_high.tolist()
    ([0.6666666666666666, 0.0, 0.0], [1.0, 1.0, 0.6666666666666666])
    """
    s, y, w = _clean_binary(scores, y_true, sample_weight, what="the labels")
    thresholds, pos, neg = _score_table(s, y, w)
    return _hull_from_table(thresholds, pos, neg)


def _pav_starts(pos: FloatArray, neg: FloatArray) -> IntArray:
    """Start indices of the PAV blocks (rate increasing in the score), merged when equal."""
    total = pos + neg
    fit = isotonic_regression(pos / total, weights=total, increasing=True)
    starts = np.asarray(fit.blocks[:-1], dtype=np.int64)
    block_pos = np.add.reduceat(pos, starts)
    block_neg = np.add.reduceat(neg, starts)
    # Merge neighbours with exactly equal rates (collinear hull segments): compare
    # P_b N_{b+1} with P_{b+1} N_b rather than rounded rates.
    increases = block_pos[1:] * block_neg[:-1] > block_pos[:-1] * block_neg[1:]
    return starts[np.concatenate(([True], increases))]


def _hull_from_table(thresholds: FloatArray, pos: FloatArray, neg: FloatArray) -> RocHull:
    starts = _pav_starts(pos, neg)
    ends = np.concatenate((starts[1:], [thresholds.size])) - 1
    total_pos = float(pos.sum())
    total_neg = float(neg.sum())
    block_pos = np.add.reduceat(pos, starts)
    block_neg = np.add.reduceat(neg, starts)
    # cumulative mass at or above each block's lowest score
    pos_at_or_above = np.cumsum(block_pos[::-1])[::-1]
    neg_at_or_above = np.cumsum(block_neg[::-1])[::-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (block_pos / total_pos) / (block_neg / total_neg)
    slope = np.where(block_pos == 0.0, 0.0, slope)
    return RocHull(
        score_low=thresholds[starts],
        score_high=thresholds[ends],
        positives=block_pos,
        negatives=block_neg,
        fpr_low=(neg_at_or_above - block_neg) / total_neg,
        fpr_high=neg_at_or_above / total_neg,
        tpr_low=(pos_at_or_above - block_pos) / total_pos,
        tpr_high=pos_at_or_above / total_pos,
        roc_slope=slope,
    )


# --------------------------------------------------------------------------------------------
# Fitting the slope function of one stratum
# --------------------------------------------------------------------------------------------


def _check_smoothing(smoothing: str) -> None:
    if smoothing not in _SMOOTHINGS:
        options = ", ".join(repr(o) for o in _SMOOTHINGS)
        raise InputError(f"smoothing must be one of {options}, got {smoothing!r}")


def _check_options(span: float, n_grid: int, tie_eps: float) -> None:
    if not (0.0 < span <= 1.0):
        raise InputError(f"span must be in (0, 1], got {span!r}")
    if n_grid < 10:
        raise InputError(f"n_grid must be at least 10, got {n_grid!r}")
    if not (0.0 < tie_eps <= 1e-3):
        raise InputError(f"tie_eps must be in (0, 0.001], got {tie_eps!r}")


def _ramp(base: FloatArray, tie_eps: float) -> FloatArray:
    """Add a strictly increasing ramp of total size about ``tie_eps`` to a non-decreasing array.

    Each step is ``max(tie_eps / m, 64 ulps)``, so that rounding can never undo it.
    """
    m = base.size
    ulp = float(np.spacing(float(np.max(np.abs(base))) + 1.0))
    step = max(tie_eps / max(m, 1), _ULP_MARGIN * ulp)
    out: FloatArray = base + step * np.arange(m, dtype=np.float64)
    return out


def _hull_log_slope(
    pos: FloatArray,
    neg: FloatArray,
    perturbed_neg: FloatArray,
    fpr: FloatArray,
) -> FloatArray:
    """Log of the hull slope, interpolated between segment centres, at each knot's FPR."""
    starts = _pav_starts(pos, neg)
    total_pos = float(pos.sum())
    total_neg = float(neg.sum())
    block_pos = np.add.reduceat(pos, starts)
    block_neg = np.add.reduceat(neg, starts)
    # continuity correction for the end segments without negatives (top) or positives (bottom)
    corr = np.where((block_pos == 0.0) | (block_neg == 0.0), CONTINUITY, 0.0)
    log_slope = (
        el.log(block_pos + corr)
        - el.log(block_neg + corr)
        + (math.log(total_neg) - math.log(total_pos))
    )
    # the correction can (for a light end segment) undo monotonicity: restore it
    log_slope = np.asarray(
        isotonic_regression(log_slope, weights=block_pos + block_neg, increasing=True).x,
        dtype=np.float64,
    )
    at_or_above = np.cumsum(perturbed_neg[::-1])[::-1]
    high = at_or_above[starts]
    low = high - np.add.reduceat(perturbed_neg, starts)
    centre = (high + low) / 2.0  # decreasing with the block index
    out: FloatArray = np.interp(fpr, centre[::-1], log_slope[::-1])
    return out


def _loess_log_slope(
    pos: FloatArray,
    perturbed_neg: FloatArray,
    fpr: FloatArray,
    *,
    span: float,
    n_grid: int,
) -> FloatArray:
    """Log of the derivative of a local quadratic fit of TPR on FPR, monotonised."""
    roc_fpr = np.concatenate(([0.0], np.cumsum(perturbed_neg[::-1])))
    roc_fpr /= roc_fpr[-1]
    roc_tpr = np.concatenate(([0.0], np.cumsum(pos[::-1])))
    total_pos = float(roc_tpr[-1])
    roc_tpr /= total_pos
    grid = np.linspace(0.0, 1.0, n_grid)
    tpr_grid = np.interp(grid, roc_fpr, roc_tpr)
    # Local quadratic regression with tricube weights over the q nearest grid points
    # (Cleveland's loess with span = q / n_grid), evaluated at every grid point.
    q = min(max(math.ceil(span * n_grid), 4), n_grid)
    # the q nearest grid points of point i lie within q indices of it: work on that band
    index = np.arange(n_grid)[:, None] + np.arange(-q, q + 1)[None, :]
    valid = (index >= 0) & (index < n_grid)
    index = np.clip(index, 0, n_grid - 1)
    offset = grid[index] - grid[:, None]  # (i, k): x_k - x_i over the band
    distance = np.where(valid, np.abs(offset), np.inf)
    bandwidth = np.partition(distance, q - 1, axis=1)[:, q - 1]
    u = offset / bandwidth[:, None]
    # powers by multiplication: NumPy's power kernels differ by CPU in their last bits
    a = np.abs(u)
    inner = 1.0 - a * a * a
    kernel = np.where(valid & (a < 1.0), inner * inner * inner, 0.0)
    powers = [np.ones_like(u)]
    for _ in range(4):
        powers.append(powers[-1] * u)
    moments = [np.sum(kernel * powers[p], axis=1) for p in range(5)]
    cross = [np.sum(kernel * powers[p] * tpr_grid[index], axis=1) for p in range(3)]
    design = np.stack(
        [
            np.stack(moments[0:3], axis=1),
            np.stack(moments[1:4], axis=1),
            np.stack(moments[2:5], axis=1),
        ],
        axis=1,
    )
    coef = np.linalg.solve(design, np.stack(cross, axis=1)[..., None])[..., 0]
    derivative = coef[:, 1] / bandwidth
    # a concave ROC has a non-increasing slope; floor at half a positive over all negatives
    derivative = np.asarray(isotonic_regression(derivative, increasing=False).x)
    floor = CONTINUITY / (total_pos + CONTINUITY)
    log_derivative = el.log(np.maximum(derivative, floor))
    out: FloatArray = np.interp(fpr, grid, log_derivative)
    return out


def _fit_slope(
    s: FloatArray,
    y: FloatArray,
    w: FloatArray,
    *,
    smoothing: str,
    span: float,
    n_grid: int,
    tie_eps: float,
) -> StratumSlope:
    thresholds, pos, neg = _score_table(s, y, w)
    return _fit_from_table(
        thresholds,
        pos,
        neg,
        rows=int(s.size),
        smoothing=smoothing,
        span=span,
        n_grid=n_grid,
        tie_eps=tie_eps,
    )


def _fit_from_table(
    thresholds: FloatArray,
    pos: FloatArray,
    neg: FloatArray,
    *,
    rows: int,
    smoothing: str,
    span: float,
    n_grid: int,
    tie_eps: float,
) -> StratumSlope:
    m = thresholds.size
    total_pos = float(pos.sum())
    total_neg = float(neg.sum())
    auc = _auc_from_vertices(*_roc_vertices(pos, neg))
    # FPR knots: mid-points of the ROC's steps, with a negligible negative mass tie_eps spread
    # evenly over the distinct scores so that the FPR is strictly decreasing in the score.
    blend = max(tie_eps, _ULP_MARGIN * m * float(np.finfo(np.float64).eps))
    perturbed_neg = (1.0 - blend) * (neg / total_neg) + blend / m
    fpr = np.cumsum(perturbed_neg[::-1])[::-1] - perturbed_neg / 2.0
    if smoothing == "hull":
        base = _hull_log_slope(pos, neg, perturbed_neg, fpr)
    else:
        base = _loess_log_slope(pos, perturbed_neg, fpr, span=span, n_grid=n_grid)
    slope = el.exp(_ramp(base, tie_eps))
    return StratumSlope(
        thresholds=thresholds,
        fpr=fpr,
        roc_slope=slope,
        smoothing=smoothing,
        tie_eps=float(tie_eps),
        rows=rows,
        positives=total_pos,
        negatives=total_neg,
        auc=auc,
        slope_min=float(slope[0]),
        slope_max=float(slope[-1]),
    )


def fit_stratum_slope(
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    smoothing: SlopeSmoothing = "hull",
    span: float = DEFAULT_SPAN,
    n_grid: int = DEFAULT_N_GRID,
    tie_eps: float = DEFAULT_TIE_EPS,
) -> StratumSlope:
    """Fit the ROC slope function :math:`h_j` of one stratum from labelled reference rows.

    Steps 3 and 4 of Zuo (2021, Algorithm 1). Knots are the distinct reference scores
    :math:`t_1 < \\dots < t_m` (rows of zero weight are ignored).

    **FPR knots.** The FPR at knot :math:`k` is the mid-point of the ROC's step at that score,

    .. math:: \\mathrm{FPR}_k = \\sum_{i > k} \\tilde n_i + \\tilde n_k / 2, \\qquad
        \\tilde n_k = (1 - \\epsilon)\\, N_k / N + \\epsilon / m,

    where :math:`N_k` is the weighted negatives at :math:`t_k`. The tiny mass
    :math:`\\epsilon` = ``tie_eps`` spread evenly over the knots makes the FPR strictly
    decreasing in the score even across runs of positive-only scores.

    **Slopes** (``smoothing="hull"``, the default). The ROC's concave hull (:func:`roc_hull`,
    weighted PAV) gives a step function of likelihood ratios
    :math:`h_b = (P_b / P) / (N_b / N)`. A top segment without negatives (infinite slope) or a
    bottom one without positives (zero slope) is continuity-corrected to
    :math:`(P_b + 0.5) / (N_b + 0.5) \\cdot N / P` (and, should that undo the ordering, the
    log-slopes are made monotone again by a weighted isotonic pass). The step function is then
    smoothed by linear interpolation of :math:`\\log h` against the FPR between the centres of
    the hull segments (constant beyond the first and last centre).

    ``smoothing="loess"`` follows the paper: a local quadratic regression (tricube weights,
    ``span`` of an ``n_grid``-point FPR grid) of the ROC's TPR on its FPR, whose derivative is
    made non-increasing by isotonic regression and floored at :math:`0.5 / (P + 0.5)`. It is
    smoother but blurs the steep start of the ROC, where the highest-ranked rows are.

    **Strictness.** Finally a ramp of total size ``tie_eps`` is added to :math:`\\log h`
    (:math:`\\epsilon k / m` at knot :math:`k`, at least 64 ulps a step), so :math:`h` is
    strictly increasing in the score: a higher score always gets a strictly higher slope and
    the order within a stratum never changes. No slope moves by more than a factor
    :math:`e^{\\epsilon}`.

    Parameters
    ----------
    scores : array-like of shape (n,)
        The stratum model's scores on reference rows (any finite real: probabilities, logits).
    y_true : array-like of shape (n,)
        0/1 labels; both classes must carry positive weight.
    sample_weight : array-like of shape (n,), optional
        Row weights (a row of weight 2 counts as two rows).
    smoothing : {"hull", "loess"}
        Slope estimator (see above).
    span, n_grid : float, int
        ``loess`` only: the fraction of the grid in each local fit, and the grid size.
    tie_eps : float
        Size of the tie-breaking ramps, in (0, 1e-3].

    Returns
    -------
    StratumSlope

    References
    ----------
    Zuo (2021), Algorithm 1, steps 3-4; Fawcett and Niculescu-Mizil (2007).

    Examples
    --------
    >>> fit = fit_stratum_slope([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0, 1, 0, 0, 1, 1])
    >>> fit.fpr.round(3).tolist()
    [0.833, 0.667, 0.5, 0.167, 0.0, 0.0]
    >>> fit.roc_slope.round(3).tolist()
    [0.333, 0.382, 0.437, 1.581, 5.0, 5.0]
    >>> bool(np.all(np.diff(fit.roc_slope) > 0))
    True
    """
    _check_smoothing(smoothing)
    _check_options(span, n_grid, tie_eps)
    s, y, w = _clean_binary(scores, y_true, sample_weight, what="the labels")
    return _fit_slope(s, y, w, smoothing=smoothing, span=span, n_grid=n_grid, tie_eps=tie_eps)


def fit_stratum_slope_from_counts(
    thresholds: npt.ArrayLike,
    positives: npt.ArrayLike,
    negatives: npt.ArrayLike,
    *,
    rows: int,
    smoothing: SlopeSmoothing = "hull",
    span: float = DEFAULT_SPAN,
    n_grid: int = DEFAULT_N_GRID,
    tie_eps: float = DEFAULT_TIE_EPS,
) -> StratumSlope:
    """:func:`fit_stratum_slope` from a table of weighted class counts per threshold.

    The same fit, from ``(threshold, positives, negatives)`` rows instead of labelled rows:
    given the distinct scores and their weighted classes it is :func:`fit_stratum_slope`
    exactly. ``rerank-strata`` passes *cells* of a fine score grid instead, in both engines
    (one threshold per occupied cell, its weighted mean score, and the cell's class sums): the
    ROC is then the ROC at cell thresholds, exact at every cell boundary, and a score inside a
    cell is placed by linear interpolation between neighbouring cells (see the README,
    "Algorithm 1"). The hull's segments then end at cell boundaries: its slopes can differ
    from those of the distinct scores by the fit's own sampling noise (tens of percent where a
    segment holds few positives), which is why both engines fit the same cells.

    Parameters
    ----------
    thresholds : array-like of shape (m,)
        Strictly increasing finite scores.
    positives, negatives : array-like of shape (m,)
        Weighted positives and negatives at each threshold (finite, >= 0, not both 0); each
        class must have a positive total.
    rows : int
        Rows behind the table (reported as :attr:`StratumSlope.rows`).

    Examples
    --------
    >>> a = fit_stratum_slope([0.1, 0.2, 0.2, 0.4], [0, 1, 0, 1])
    >>> b = fit_stratum_slope_from_counts([0.1, 0.2, 0.4], [0, 1, 1], [1, 1, 0], rows=4)
    >>> bool(np.array_equal(a.roc_slope, b.roc_slope)), a.auc == b.auc
    (True, True)
    """
    _check_smoothing(smoothing)
    _check_options(span, n_grid, tie_eps)
    t = check_scores(thresholds, name="thresholds", kind="raw")
    pos = np.asarray(positives, dtype=np.float64)
    neg = np.asarray(negatives, dtype=np.float64)
    require_same_length([t, pos, neg], ["thresholds", "positives", "negatives"])
    if t.size and not np.all(np.diff(t) > 0.0):
        raise InputError("thresholds must be strictly increasing")
    bad = ~np.isfinite(pos) | ~np.isfinite(neg) | (pos < 0.0) | (neg < 0.0) | (pos + neg <= 0.0)
    if bad.any():
        raise InputError(
            f"class counts must be finite, non-negative and not both 0 "
            f"(first bad at threshold {int(np.flatnonzero(bad)[0]) + 1})"
        )
    if not (pos.sum() > 0.0 and neg.sum() > 0.0):
        raise InputError("the counts need both classes (positive totals of each)")
    return _fit_from_table(
        t, pos, neg, rows=int(rows), smoothing=smoothing, span=span, n_grid=n_grid, tie_eps=tie_eps
    )


# --------------------------------------------------------------------------------------------
# Evaluating the slope function at new scores
# --------------------------------------------------------------------------------------------


def _interval(xp: FloatArray, x: FloatArray) -> IntArray:
    """Index ``j`` with ``xp[j] <= x < xp[j + 1]`` (clipped to ``0 .. len(xp) - 2``).

    The queries are sorted first: a binary search with sorted keys is many times faster on
    millions of rows than with keys in random order.
    """
    order = np.argsort(x)
    j = np.empty(x.size, dtype=np.int64)
    j[order] = np.searchsorted(xp, x[order], side="right") - 1
    return np.clip(j, 0, xp.size - 2)


def _lerp_clamped(frac: FloatArray, f0: FloatArray, f1: FloatArray) -> FloatArray:
    """``f0 + frac (f1 - f0)`` for ``frac`` in [0, 1], exact at both ends and kept between them,
    so that it is monotone across adjacent intervals even under rounding."""
    y = np.clip(f0 + frac * (f1 - f0), np.minimum(f0, f1), np.maximum(f0, f1))
    out: FloatArray = np.where(frac == 1.0, f1, y)
    return out


def _spread(slope: StratumSlope) -> float:
    spread = float(slope.thresholds[-1] - slope.thresholds[0])
    return spread if spread > 0.0 else 1.0


def _evaluate(slope: StratumSlope, s: FloatArray) -> tuple[FloatArray, FloatArray]:
    """FPR and log slope at scores ``s``: step 6 of Algorithm 1, :math:`h(\\alpha(s))`."""
    knots = slope.thresholds
    knot_fpr = slope.fpr
    knot_log = el.log(slope.roc_slope)
    eps = slope.tie_eps
    spread = _spread(slope)
    fpr = np.empty_like(s)
    log_slope = np.empty_like(s)
    above = s > knots[-1]
    below = s < knots[0]
    inside = ~(above | below)
    if knots.size == 1:
        fpr[inside] = knot_fpr[0]
        log_slope[inside] = knot_log[0]
    else:
        x = s[inside]
        j = _interval(knots, x)
        frac = np.clip((x - knots[j]) / (knots[j + 1] - knots[j]), 0.0, 1.0)
        f = _lerp_clamped(frac, knot_fpr[j], knot_fpr[j + 1])
        fpr[inside] = f
        # log h is linear in the FPR between the same two knots (FPR is monotone in s)
        frac_fpr = np.clip((knot_fpr[j] - f) / (knot_fpr[j] - knot_fpr[j + 1]), 0.0, 1.0)
        log_slope[inside] = _lerp_clamped(frac_fpr, knot_log[j], knot_log[j + 1])
    top_fpr = knot_fpr[-1]
    fpr[above] = top_fpr / (1.0 + (s[above] - knots[-1]) / spread)
    log_slope[above] = knot_log[-1] + eps * (1.0 - fpr[above] / top_fpr)
    bottom_fpr = knot_fpr[0]
    fpr[below] = 1.0 - (1.0 - bottom_fpr) / (1.0 + (knots[0] - s[below]) / spread)
    log_slope[below] = knot_log[0] - eps * (fpr[below] - bottom_fpr) / (1.0 - bottom_fpr)
    return fpr, log_slope


def fpr_at(slope: StratumSlope, scores: npt.ArrayLike) -> FloatArray:
    """The stratum's reference FPR :math:`\\hat\\alpha_j(s)` at new scores.

    Linear interpolation between the knots; beyond the reference range it approaches 0
    (above the highest score) or 1 (below the lowest) hyperbolically,

    .. math:: \\alpha(s) = \\frac{\\alpha_m}{1 + (s - t_m)/d}, \\qquad
        \\alpha(s) = 1 - \\frac{1 - \\alpha_1}{1 + (t_1 - s)/d},

    with :math:`d = t_m - t_1` (1 for a single knot), so it is strictly decreasing everywhere.

    >>> fit = fit_stratum_slope([0.1, 0.2, 0.3, 0.4], [0, 1, 0, 1])
    >>> fpr_at(fit, [0.0, 0.15, 0.4, 1.0]).round(4).tolist()
    [0.8125, 0.625, 0.0, 0.0]
    """
    return _evaluate(slope, check_scores(scores, kind="raw"))[0]


def roc_slope_at(slope: StratumSlope, scores: npt.ArrayLike) -> FloatArray:
    """The fitted slope :math:`\\hat h_j(\\hat\\alpha_j(s))` at new scores of the stratum.

    The FPR comes from :func:`fpr_at`; :math:`\\log h` is interpolated linearly in the FPR
    between the knots. Beyond the knots' FPR range :math:`\\log h` continues by a bounded ramp
    of size ``tie_eps`` (above the top knot
    :math:`\\log h_m + \\epsilon (1 - \\alpha / \\alpha_m)`, below the bottom knot
    :math:`\\log h_1 - \\epsilon (\\alpha - \\alpha_1) / (1 - \\alpha_1)`), so the result is
    strictly increasing in the score over the whole real line (in exact arithmetic; in
    floating point, scores more than about 10^4 reference ranges outside may tie) and never
    leaves :math:`[h_1 e^{-\\epsilon}, h_m e^{\\epsilon}]`.

    >>> fit = fit_stratum_slope([0.1, 0.2, 0.3, 0.4], [0, 1, 0, 1])
    >>> roc_slope_at(fit, [0.3, 0.4]).round(4).tolist() == fit.roc_slope[2:].round(4).tolist()
    True
    >>> values = roc_slope_at(fit, [-5.0, 0.0, 0.25, 0.5, 9.0])
    >>> bool(np.all(np.diff(values) > 0))
    True
    """
    return el.exp(_evaluate(slope, check_scores(scores, kind="raw"))[1])


# --------------------------------------------------------------------------------------------
# Strata, odds and the re-ranking
# --------------------------------------------------------------------------------------------


def _name(value: object) -> str:
    item = value.item() if isinstance(value, np.generic) else value
    return str(item)


_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


def _factorize_fixed_width_text(
    arr: npt.NDArray[np.generic],
) -> tuple[IntArray, tuple[str, ...]] | None:
    """A sort-free factorisation of a NumPy text column (``<U`` or ``S``), or None to fall back.

    Sorting millions of strings is the slow part of :func:`np.unique`; instead each row's
    fixed-width characters are hashed to one uint64 (wrapping arithmetic), the hashes are
    factorised (an integer sort), and one vectorised comparison checks that no two different
    strings share a hash (then the caller falls back to ``np.unique``). Names come out sorted
    as text, as ``np.unique`` would give them.
    """
    if arr.dtype.kind not in "US" or arr.size == 0 or arr.dtype.itemsize == 0:
        return None
    width = arr.dtype.itemsize // (4 if arr.dtype.kind == "U" else 1)
    units = np.ascontiguousarray(arr).view(np.uint32 if arr.dtype.kind == "U" else np.uint8)
    units64: npt.NDArray[np.uint64] = units.reshape(arr.size, width).astype(np.uint64)
    hashes = np.zeros(arr.size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in range(width):  # a loop over character positions, not rows
            hashes = (hashes ^ units64[:, column]) * _HASH_MULTIPLIER
    _, first, codes = np.unique(hashes, return_index=True, return_inverse=True)
    if not np.array_equal(arr[first][codes.reshape(-1)], arr):
        return None  # a hash collision: let np.unique sort the strings
    order = np.argsort(arr[first], kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    names = tuple(_name(v) for v in arr[first][order])
    return rank[codes.reshape(-1)], names


def factorize_strata(
    strata: npt.ArrayLike, *, name: str = "stratum"
) -> tuple[IntArray, tuple[str, ...]]:
    """Codes ``0..J-1`` for a stratum column, and the stratum names ``str(value)`` in order.

    Names follow the sorted order of the values (numeric order for numbers). Missing values
    (NaN, None) are refused.

    >>> codes, names = factorize_strata(["b", "a", "b"])
    >>> codes.tolist(), names
    ([1, 0, 1], ('a', 'b'))
    >>> factorize_strata([3, 1, 3])[1]
    ('1', '3')
    """
    arr = np.asarray(strata)
    if arr.ndim != 1:
        raise InputError(f"column '{name}' must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind == "f":
        missing = np.isnan(arr)
    elif arr.dtype.kind == "O":
        missing = np.asarray(np.equal(arr, np.array(None, dtype=object)), dtype=bool)
    else:
        missing = np.zeros(arr.shape, dtype=bool)
    if missing.any():
        idx = np.flatnonzero(missing)
        noun = "value" if idx.size == 1 else "values"
        raise InputError(
            f"column '{name}' has {idx.size} missing {noun} (first at row {int(idx[0]) + 1})"
        )
    fast = _factorize_fixed_width_text(arr)
    if fast is not None:
        return fast
    try:
        values, codes = np.unique(arr, return_inverse=True)
    except TypeError:
        raise InputError(f"column '{name}' mixes values of different types") from None
    names = tuple(_name(v) for v in values)
    if len(set(names)) != len(names):
        raise InputError(f"column '{name}' has different values with the same text")
    return np.asarray(codes, dtype=np.int64).reshape(-1), names


def fit_strata(
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    strata: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    smoothing: SlopeSmoothing = "hull",
    span: float = DEFAULT_SPAN,
    n_grid: int = DEFAULT_N_GRID,
    tie_eps: float = DEFAULT_TIE_EPS,
) -> dict[str, StratumSlope]:
    """:func:`fit_stratum_slope` on the reference rows of every stratum.

    A stratum whose reference rows lack a class is refused with a message naming it.

    >>> fits = fit_strata([0.2, 0.6, 0.3, 0.9], [0, 1, 0, 1], ["a", "a", "b", "b"])
    >>> sorted(fits), fits["a"].rows
    (['a', 'b'], 2)
    """
    _check_smoothing(smoothing)
    _check_options(span, n_grid, tie_eps)
    return {
        stratum: _fit_slope(s, y, w, smoothing=smoothing, span=span, n_grid=n_grid, tie_eps=tie_eps)
        for stratum, s, y, w in _each_stratum(scores, y_true, strata, sample_weight)
    }


def _each_stratum(
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    strata: npt.ArrayLike,
    sample_weight: npt.ArrayLike | None,
) -> Iterator[tuple[str, FloatArray, FloatArray, FloatArray]]:
    """Each stratum's name, scores, labels and weights, checked; a stratum whose reference
    rows lack a class is refused, naming it."""
    s = check_scores(scores, kind="raw")
    y = check_labels(y_true)
    codes, names = factorize_strata(strata)
    require_same_length([s, y, codes], ["scores", "y_true", "strata"])
    w = check_weights(sample_weight, s.size)
    order, bounds = _group(codes, len(names))
    for j, stratum in enumerate(names):
        idx = order[bounds[j] : bounds[j + 1]]
        require_both_classes(y[idx], w[idx], what=f"the reference rows of stratum '{stratum}'")
        yield stratum, s[idx], y[idx], w[idx]


def stratum_aucs(
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    strata: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
) -> dict[str, float]:
    """The weighted within-stratum ROC AUC of every stratum (ties count one half).

    :attr:`StratumSlope.auc` of :func:`fit_strata`, bit for bit, without the fit: the exact
    AUC of the rows where the slopes are fitted on a table of score cells
    (:func:`fit_stratum_slope_from_counts`). A stratum whose rows lack a class is refused
    with the message of :func:`fit_strata`.

    >>> stratum_aucs([0.2, 0.6, 0.4, 0.3, 0.9, 0.5], [0, 1, 0, 0, 1, 0], list("aaabbb"))
    {'a': 1.0, 'b': 1.0}
    >>> stratum_aucs([0.2, 0.6, 0.4, 0.3, 0.5, 0.5], [0, 1, 0, 1, 0, 1], list("aabbbb"))
    {'a': 1.0, 'b': 0.375}
    """
    aucs: dict[str, float] = {}
    for stratum, s, y, w in _each_stratum(scores, y_true, strata, sample_weight):
        _, pos, neg = _score_table(s, y, w)
        aucs[stratum] = _auc_from_vertices(*_roc_vertices(pos, neg))
    return aucs


def _group(codes: IntArray, n_groups: int) -> tuple[IntArray, IntArray]:
    """A stable order that groups rows by code, and the group boundaries within it."""
    order = np.argsort(codes, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(codes, minlength=n_groups))))
    return order.astype(np.int64), bounds.astype(np.int64)


def stratum_label_rates(
    y_true: npt.ArrayLike,
    strata: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
) -> dict[str, float]:
    """Weighted positive rate of each stratum (NaN for a stratum whose weights sum to 0).

    >>> stratum_label_rates([1, 0, 0, 1, 1], ["a", "a", "a", "b", "b"])
    {'a': 0.3333333333333333, 'b': 1.0}
    """
    y = check_labels(y_true)
    codes, names = factorize_strata(strata)
    require_same_length([y, codes], ["y_true", "strata"])
    w = check_weights(sample_weight, y.size)
    positives = np.bincount(codes, weights=w * y, minlength=len(names))
    totals = np.bincount(codes, weights=w, minlength=len(names))
    return {
        name: float(positives[j] / totals[j]) if totals[j] > 0 else math.nan
        for j, name in enumerate(names)
    }


def stratum_odds(
    y_true: npt.ArrayLike,
    strata: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
) -> dict[str, float]:
    """Stratum odds :math:`\\hat w_j = \\sum_i w_i y_i / \\sum_i w_i (1 - y_i)` (Algorithm 1,
    step 5), from labelled rows that are a (weighted) sample of the population being scored.

    >>> stratum_odds([1, 0, 0, 1, 0], ["a", "a", "a", "b", "b"])
    {'a': 0.5, 'b': 1.0}
    """
    y = check_labels(y_true)
    codes, names = factorize_strata(strata)
    require_same_length([y, codes], ["y_true", "strata"])
    w = check_weights(sample_weight, y.size)
    positives = np.bincount(codes, weights=w * y, minlength=len(names))
    negatives = np.bincount(codes, weights=w * (1.0 - y), minlength=len(names))
    return stratum_odds_from_counts(
        dict(zip(names, positives.tolist(), strict=True)),
        dict(zip(names, negatives.tolist(), strict=True)),
    )


def stratum_odds_from_counts(
    positives: Mapping[str, float], negatives: Mapping[str, float]
) -> dict[str, float]:
    """Stratum odds :math:`P_j / N_j` from each stratum's weighted positives and negatives
    (:func:`stratum_odds` on rows; the streaming engine passes sums of a group-by).

    >>> stratum_odds_from_counts({"a": 1.0, "b": 1.0}, {"a": 2.0, "b": 1.0})
    {'a': 0.5, 'b': 1.0}
    """
    odds: dict[str, float] = {}
    for name, pos in positives.items():
        p, n = float(pos), float(negatives[name])
        if p <= 0.0 or n <= 0.0:
            missing = "positive" if p <= 0.0 else "negative"
            raise InputError(
                f"stratum '{name}' has no {missing} rows (with positive weight), "
                "so its odds are undefined; give its prevalence instead"
            )
        odds[name] = p / n
    return odds


def odds_from_prevalence(prevalence: Mapping[str, float]) -> dict[str, float]:
    """Stratum odds :math:`w_j = \\pi_j / (1 - \\pi_j)` from given positive rates.

    Keys are stratum names (``str`` of the value); each rate must lie strictly inside (0, 1).

    >>> odds_from_prevalence({"a": 0.2, "b": 0.5})
    {'a': 0.25, 'b': 1.0}
    """
    odds: dict[str, float] = {}
    for key, rate in prevalence.items():
        value = float(rate)
        if not (0.0 < value < 1.0):
            raise InputError(f"prevalence of stratum '{key}' must be in (0, 1), got {rate!r}")
        odds[str(key)] = value / (1.0 - value)
    return odds


def _missing_message(
    names: tuple[str, ...], counts: IntArray, missing: list[int], what: str
) -> str:
    first = missing[0]
    rows = int(counts[first])
    noun = "row" if rows == 1 else "rows"
    message = f"stratum '{names[first]}' of the target {what} ({rows} target {noun})"
    if len(missing) > 1:
        others = ", ".join(f"'{names[j]}'" for j in missing[1:])
        message += f"; so do {len(missing) - 1} more: {others}"
    return message


def require_strata(
    target_rows: Mapping[str, int],
    slopes: Mapping[str, StratumSlope],
    stratum_odds: Mapping[str, float],
    *,
    reference_name: str | None = None,
) -> None:
    """Refuse target strata without a reference slope or without valid odds, naming them.

    ``target_rows`` maps each target stratum to its row count (for the message);
    ``reference_name``, the reference's file, is named beside "the reference" when given (the
    caller prefixes the target's, so a message names both files).

    >>> fits = fit_strata([0.2, 0.6, 0.3, 0.9], [0, 1, 0, 1], ["a", "a", "b", "b"])
    >>> require_strata({"a": 5}, fits, {"a": 0.5})
    >>> try:
    ...     require_strata({"a": 5, "c": 2}, fits, {"a": 0.5})
    ... except InputError as error:
    ...     print(error)
    stratum 'c' of the target has no rows in the reference (2 target rows)
    """
    names = tuple(target_rows)
    counts = np.asarray([int(target_rows[name]) for name in names], dtype=np.int64)
    no_slope = [j for j, name in enumerate(names) if name not in slopes]
    if no_slope:
        reference = "the reference" if reference_name is None else f"the reference {reference_name}"
        raise InputError(_missing_message(names, counts, no_slope, f"has no rows in {reference}"))
    no_odds = [j for j, name in enumerate(names) if name not in stratum_odds]
    if no_odds:
        raise InputError(_missing_message(names, counts, no_odds, "has no odds or prevalence"))
    for name in names:
        odds = float(stratum_odds[name])
        if not (math.isfinite(odds) and odds > 0.0):
            raise InputError(f"odds of stratum '{name}' must be finite and positive, got {odds!r}")


def rerank(
    target_scores: npt.ArrayLike,
    target_strata: npt.ArrayLike,
    slopes: Mapping[str, StratumSlope],
    stratum_odds: Mapping[str, float],
    *,
    reference_name: str | None = None,
) -> RerankResult:
    """Re-rank target rows by :math:`r = w_j \\, h_j(\\hat\\alpha_j(s))` (Algorithm 1, step 6).

    .. math:: r = w_j \\, h_j(\\hat\\alpha_j(s)), \\qquad \\text{calibrated} = \\frac{r}{1 + r}

    Within a stratum :math:`r` is strictly increasing in the score (equal scores tie), so the
    order within each stratum is kept exactly. Across strata :math:`r` may tie; rank with
    :func:`rank_order` or :func:`rerank_rank`, which break such ties by the raw score.

    Parameters
    ----------
    target_scores : array-like of shape (n,)
        Each target row's score from its stratum's model.
    target_strata : array-like of shape (n,)
        Each target row's stratum (matched to the keys by ``str(value)``).
    slopes : mapping of stratum name to StratumSlope
        From :func:`fit_strata`.
    stratum_odds : mapping of stratum name to float
        Positive odds of each stratum in the population being scored (finite, > 0).
    reference_name : str, optional
        The reference's file, for the message of a stratum it lacks (:func:`require_strata`).

    Raises
    ------
    InputError
        When a target stratum has no reference slope or no odds, naming it and its row count.

    Examples
    --------
    >>> fits = fit_strata([0.2, 0.6, 0.4, 0.3, 0.9, 0.5], [0, 1, 0, 0, 1, 1], list("aaabbb"))
    >>> result = rerank([0.6, 0.9], ["a", "b"], fits, {"a": 0.1, "b": 1.0})
    >>> result.calibrated.round(3).tolist()
    [0.375, 0.714]
    >>> try:
    ...     rerank([0.5], ["c"], fits, {"a": 0.1, "b": 1.0})
    ... except InputError as error:
    ...     print(error)
    stratum 'c' of the target has no rows in the reference (1 target row)
    """
    s = check_scores(target_scores, kind="raw")
    codes, names = factorize_strata(target_strata)
    require_same_length([s, codes], ["target_scores", "target_strata"])
    counts = np.bincount(codes, minlength=len(names))
    require_strata(
        dict(zip(names, counts.tolist(), strict=True)),
        slopes,
        stratum_odds,
        reference_name=reference_name,
    )
    return rerank_coded(
        s, codes, [slopes[name] for name in names], [stratum_odds[name] for name in names]
    )


def rerank_coded(
    target_scores: npt.ArrayLike,
    codes: npt.ArrayLike,
    slopes: Sequence[StratumSlope],
    stratum_odds: Sequence[float],
) -> RerankResult:
    """:func:`rerank` on stratum codes: ``codes[i]`` indexes ``slopes`` and ``stratum_odds``.

    The row-wise map of both engines: each row's result depends only on its own score and
    stratum, so a batch of rows gives bit for bit the values the whole table would.

    >>> fits = fit_strata([0.2, 0.6, 0.4, 0.3, 0.9, 0.5], [0, 1, 0, 0, 1, 1], list("aaabbb"))
    >>> one = rerank_coded([0.6, 0.9], [0, 1], [fits["a"], fits["b"]], [0.1, 1.0])
    >>> one.calibrated.round(3).tolist()
    [0.375, 0.714]
    """
    s = check_scores(target_scores, kind="raw")
    c = np.asarray(codes, dtype=np.int64).reshape(-1)
    require_same_length([s, c], ["target_scores", "codes"])
    n_strata = len(slopes)
    if len(stratum_odds) != n_strata:
        raise InputError(f"{n_strata} slopes but {len(stratum_odds)} odds")
    if c.size and (c.min() < 0 or c.max() >= n_strata):
        raise InputError(f"stratum codes must lie in 0..{n_strata - 1}")
    order, bounds = _group(c, n_strata)
    log_slope = np.empty_like(s)
    log_odds = np.empty_like(s)
    for j in range(n_strata):
        idx = order[bounds[j] : bounds[j + 1]]
        if idx.size == 0:
            continue
        odds = float(stratum_odds[j])
        if not (math.isfinite(odds) and odds > 0.0):
            raise InputError(f"odds of stratum {j} must be finite and positive, got {odds!r}")
        log_slope[idx] = _evaluate(slopes[j], s[idx])[1]
        log_odds[idx] = math.log(odds)
    log_r = log_slope + log_odds
    return RerankResult(
        rerank_score=el.exp(log_r),
        calibrated=el.sigmoid(log_r),
        roc_slope=el.exp(log_slope),
    )


def _check_pair(rerank_score: npt.ArrayLike, raw_score: npt.ArrayLike) -> tuple[FloatArray, ...]:
    r = check_scores(rerank_score, name="rerank_score", kind="raw")
    s = check_scores(raw_score, name="score", kind="raw")
    require_same_length([r, s], ["rerank_score", "raw_score"])
    return r, s


def rank_order(rerank_score: npt.ArrayLike, raw_score: npt.ArrayLike) -> IntArray:
    """Row indices from best to worst: by ``rerank_score`` descending, ties by the raw score
    descending, remaining ties in row order (``np.lexsort`` is stable).

    >>> rank_order([0.5, 0.9, 0.5], [0.2, 0.1, 0.7]).tolist()
    [1, 2, 0]
    """
    r, s = _check_pair(rerank_score, raw_score)
    return np.lexsort((-s, -r)).astype(np.int64)


def _dense_lexicographic(primary: FloatArray, secondary: FloatArray) -> IntArray:
    """0, 1, ... for the distinct (primary, secondary) pairs in ascending lexicographic order."""
    # The fast (unstable) sort on the first key, then a lexicographic sort of only the rows
    # that tie on it (rare: equal scores), in the positions those rows occupy.
    order = np.argsort(primary)
    p = primary[order]
    tied = np.zeros(order.size, dtype=bool)
    if order.size > 1:
        same = p[1:] == p[:-1]
        tied[1:] |= same
        tied[:-1] |= same
    if tied.any():
        rows = order[tied]
        order[tied] = rows[np.lexsort((secondary[rows], primary[rows]))]
    p, q = primary[order], secondary[order]
    new = np.empty(order.size, dtype=bool)
    new[:1] = False
    new[1:] = (p[1:] != p[:-1]) | (q[1:] != q[:-1])
    dense = np.empty(order.size, dtype=np.int64)
    dense[order] = np.cumsum(new)
    return dense


def rerank_rank(rerank_score: npt.ArrayLike, raw_score: npt.ArrayLike) -> IntArray:
    """Each row's rank, 1 = best, by ``rerank_score`` then the raw score (both descending).

    Rows equal in both share the lowest rank of their group (competition ranking "1224").

    >>> rerank_rank([0.5, 0.9, 0.5, 0.5], [0.2, 0.1, 0.7, 0.2]).tolist()
    [3, 1, 2, 3]
    """
    r, s = _check_pair(rerank_score, raw_score)
    if r.size == 0:
        return np.zeros(0, dtype=np.int64)
    dense = _dense_lexicographic(r, s)
    at_or_below = np.cumsum(np.bincount(dense))  # rows with dense rank <= d
    ranks: IntArray = r.size - at_or_below[dense] + 1
    return ranks.astype(np.int64)


def compare_rankings(
    y_true: npt.ArrayLike,
    raw_score: npt.ArrayLike,
    rerank_score: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    fprs: Iterable[float] = (0.01, 0.05, 0.1),
) -> RankingComparison:
    """AUC and TPR at given FPRs of the raw and the re-ranked ranking of a labelled target.

    The re-ranked ranking is ``rerank_score`` with ties broken by the raw score (as in
    :func:`rank_order`); rows equal in both remain tied (count one half in the AUC).

    >>> cmp = compare_rankings([0, 1, 0, 1], [0.9, 0.8, 0.1, 0.2], [0.1, 0.8, 0.05, 0.3])
    >>> cmp.auc_raw, cmp.auc_reranked
    (0.5, 1.0)
    """
    r, s = _check_pair(rerank_score, raw_score)
    s, y, w = _clean_binary(s, y_true, sample_weight, what="the labels")
    targets = _check_fprs(fprs)
    _, pos_raw, neg_raw = _score_table(s, y, w)
    raw_roc = _roc_vertices(pos_raw, neg_raw)
    # the re-ranked ranking: dense ranks of (rerank_score, raw score), counted by bincount
    keep = w > 0.0
    combined = _dense_lexicographic(r[keep], s[keep])
    size = int(combined.max()) + 1
    pos = np.asarray(np.bincount(combined, weights=(w * y)[keep], minlength=size), dtype=float)
    neg = np.asarray(
        np.bincount(combined, weights=(w * (1.0 - y))[keep], minlength=size), dtype=float
    )
    reranked_roc = _roc_vertices(pos, neg)
    return RankingComparison(
        auc_raw=_auc_from_vertices(*raw_roc),
        auc_reranked=_auc_from_vertices(*reranked_roc),
        fpr=tuple(targets.tolist()),
        tpr_raw=tuple(_tpr_from_vertices(*raw_roc, targets).tolist()),
        tpr_reranked=tuple(_tpr_from_vertices(*reranked_roc, targets).tolist()),
    )


def compare_rankings_from_counts(
    raw_positives: npt.ArrayLike,
    raw_negatives: npt.ArrayLike,
    reranked_positives: npt.ArrayLike,
    reranked_negatives: npt.ArrayLike,
    *,
    fprs: Iterable[float] = (0.01, 0.05, 0.1),
) -> tuple[RankingComparison, float, float]:
    """:func:`compare_rankings` from weighted class counts per ranking position.

    Each ranking is given as weighted positives and negatives per *group of rows*, groups in
    ascending order of the ranking (distinct keys, or cells of a fine grid of the key). Rows
    of one group count as tied (one half in the AUC, a diagonal ROC segment), so with one
    group per distinct key this is :func:`compare_rankings` exactly. With coarser groups the
    AUC is off by at most :math:`\\sum_c P_c N_c / (2 P N)` (pairs inside a group); this bound
    is returned for the raw and the re-ranked ranking, after the comparison.

    >>> cmp, raw_bound, reranked_bound = compare_rankings_from_counts(
    ...     [0, 1, 1], [2, 0, 0], [1, 0, 1], [1, 1, 0])
    >>> cmp.auc_raw, cmp.auc_reranked, raw_bound, reranked_bound
    (1.0, 0.625, 0.0, 0.125)
    """
    targets = _check_fprs(fprs)
    results = []
    for positives, negatives in (
        (raw_positives, raw_negatives),
        (reranked_positives, reranked_negatives),
    ):
        pos = np.asarray(positives, dtype=np.float64)
        neg = np.asarray(negatives, dtype=np.float64)
        require_same_length([pos, neg], ["positives", "negatives"])
        total_pos, total_neg = float(pos.sum()), float(neg.sum())
        if not (total_pos > 0.0 and total_neg > 0.0):
            raise InputError("the labels need both classes (with positive weight)")
        roc = _roc_vertices(pos, neg)
        bound = float(np.sum(pos * neg) / (2.0 * total_pos * total_neg))
        results.append((roc, bound))
    (raw_roc, raw_bound), (reranked_roc, reranked_bound) = results
    comparison = RankingComparison(
        auc_raw=_auc_from_vertices(*raw_roc),
        auc_reranked=_auc_from_vertices(*reranked_roc),
        fpr=tuple(targets.tolist()),
        tpr_raw=tuple(_tpr_from_vertices(*raw_roc, targets).tolist()),
        tpr_reranked=tuple(_tpr_from_vertices(*reranked_roc, targets).tolist()),
    )
    return comparison, raw_bound, reranked_bound


def summarise_strata(
    slopes: Mapping[str, StratumSlope],
    stratum_odds: Mapping[str, float],
    target_strata: npt.ArrayLike,
) -> tuple[StratumSummary, ...]:
    """The per-stratum report table: one :class:`StratumSummary` per reference stratum.

    >>> fits = fit_strata([0.2, 0.6, 0.3, 0.9], [0, 1, 0, 1], ["a", "a", "b", "b"])
    >>> rows = summarise_strata(fits, {"a": 0.5}, ["a", "a", "b"])
    >>> [(r.stratum, r.rows, r.stratum_odds, r.target_rows) for r in rows]
    [('a', 2, 0.5, 2), ('b', 2, nan, 1)]
    """
    codes, names = factorize_strata(target_strata)
    counts = np.bincount(codes, minlength=len(names))
    target_rows = {name: int(counts[j]) for j, name in enumerate(names)}
    return summarise_strata_counts(slopes, stratum_odds, target_rows)


def summarise_strata_counts(
    slopes: Mapping[str, StratumSlope],
    stratum_odds: Mapping[str, float],
    target_rows: Mapping[str, int],
) -> tuple[StratumSummary, ...]:
    """:func:`summarise_strata` from the target's row count per stratum.

    >>> fits = fit_strata([0.2, 0.6, 0.3, 0.9], [0, 1, 0, 1], ["a", "a", "b", "b"])
    >>> [r.target_rows for r in summarise_strata_counts(fits, {"a": 0.5}, {"a": 2})]
    [2, 0]
    """
    return tuple(
        StratumSummary(
            stratum=stratum,
            rows=fit.rows,
            positives=fit.positives,
            negatives=fit.negatives,
            stratum_odds=float(stratum_odds.get(stratum, math.nan)),
            auc=fit.auc,
            slope_min=fit.slope_min,
            slope_max=fit.slope_max,
            target_rows=target_rows.get(stratum, 0),
        )
        for stratum, fit in slopes.items()
    )


def estimate_stratum_prevalence(
    reference_scores: npt.ArrayLike,
    reference_labels: npt.ArrayLike,
    reference_strata: npt.ArrayLike,
    target_scores: npt.ArrayLike,
    target_strata: npt.ArrayLike,
    *,
    reference_weight: npt.ArrayLike | None = None,
    score_kind: ScoreKind = "probability",
    seed: int = 0,
) -> dict[str, ShiftEstimate]:
    """Each target stratum's positive rate, estimated from its scores by the label-shift
    estimator of ``estimate-shift`` (method ``auto``) fitted on that stratum's reference rows
    (Algorithm 1, step 3, when the population's rates are unknown).

    Each stratum draws its bootstrap from a generator seeded with ``seed``, so a stratum's
    estimate does not depend on the other strata. Strata absent from the reference are left
    out (:func:`rerank` refuses them by name).
    """
    ref_codes, ref_names = factorize_strata(reference_strata, name="reference stratum")
    tgt_codes, tgt_names = factorize_strata(target_strata, name="target stratum")
    scores = np.asarray(reference_scores, dtype=np.float64)
    labels = np.asarray(reference_labels, dtype=np.float64)
    weights = check_weights(reference_weight, scores.shape[0])
    target = np.asarray(target_scores, dtype=np.float64)
    estimates: dict[str, ShiftEstimate] = {}
    for code, stratum in enumerate(tgt_names):
        if stratum not in ref_names:
            continue
        in_ref = ref_codes == ref_names.index(stratum)
        with _stratum_errors(stratum):
            model = fit_reference(
                scores[in_ref], labels[in_ref], sample_weight=weights[in_ref], score_kind=score_kind
            )
            estimates[stratum] = estimate_prevalence(
                model, target[tgt_codes == code], rng=np.random.default_rng(seed)
            )
    return estimates


@contextlib.contextmanager
def _stratum_errors(stratum: str) -> Iterator[None]:
    try:
        yield
    except InputError as error:
        raise InputError(f"stratum '{stratum}': {error}") from None
