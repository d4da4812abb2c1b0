"""Label shift: estimate the positive rate of an unlabeled batch from its scores alone.

Under label shift the class-conditional score densities :math:`f_0` (negatives) and
:math:`f_1` (positives) stay as they were on a labelled *reference*, and only the positive rate
moves, so a target score is drawn from the mixture

.. math::

    z \\sim (1 - \\alpha) f_0(z) + \\alpha f_1(z), \\qquad
    c(z; \\alpha) = P(y = 1 \\mid z)
    = \\frac{\\alpha f_1(z)}{(1 - \\alpha) f_0(z) + \\alpha f_1(z)}.

Estimators of :math:`\\alpha` (``prevalence``) offered by :func:`estimate_prevalence`:

``mle``
    Maximum likelihood of :math:`\\alpha` in the mixture (reference 001). The log-likelihood
    :math:`\\ell(\\alpha) = \\sum_k c_k \\log[(1-\\alpha) P_{0k} + \\alpha P_{1k}]` is concave, its
    derivative strictly decreasing, so the maximiser is 0, 1, or the root of
    :math:`\\ell'` found by bracketing (``scipy.optimize.brentq``) to machine precision;
    converged when the projected Newton step at the returned point (the distance to the
    maximiser to second order, :func:`calib_cli.core.convergence.newton_distance`) is at most
    ``1e-10``.
``em``
    Saerens, Latinne and Decaestecker (2002): EM on posteriors calibrated on the reference
    (Platt scaling of the reference, as Alexandari et al. 2020 recommend: EM is only as good
    as its calibration), starting at the reference prevalence :math:`\\pi`:
    :math:`p_i' = \\frac{(\\alpha/\\pi) p_i}{(\\alpha/\\pi) p_i + ((1-\\alpha)/(1-\\pi))(1-p_i)}`,
    :math:`\\alpha \\leftarrow \\operatorname{mean}_i p_i'`. Its fixed point maximises
    :math:`\\sum_i \\log(1 - \\alpha + \\alpha r_i)` (:math:`r_i` the calibrated likelihood
    ratio), and the iteration stops when the projected Newton step of that concave function,
    the distance to the fixed point to second order, is at most ``em_tol`` (the step of EM
    itself, :math:`\\alpha (1 - \\alpha) \\ell'`, can be tiny far from the fixed point when
    EM is slow).
``acc`` / ``pacc``
    Adjusted classify-and-count (Forman 2008): :math:`\\alpha = (\\mathrm{CC} - \\mathrm{FPR}) /
    (\\mathrm{TPR} - \\mathrm{FPR})` at a threshold (default: the one maximising
    :math:`\\mathrm{TPR} - \\mathrm{FPR}` on the reference), and its probabilistic version with
    the calibrated posteriors' class means (Bella et al. 2010), clipped to [0, 1].
``map``
    Reference 001's maximum a posteriori estimate of :math:`\\alpha` together with the shape of
    :math:`f_1` (see :mod:`calib_cli.core.shift_map`): for batches whose positive scores
    changed shape; under pure label shift it pays some bias for that freedom.
``auto``
    ``mle``, always. It is the most accurate of these under exact label shift and assumes
    nothing about the shape of the scores (``em`` relies on Platt scaling, biased when the
    likelihood ratio is not logistic in the score's logit). No test switches it: the
    goodness-of-fit p-value, which used to switch to ``map``, is blind to the drift that
    misleads every method here (a change of :math:`P(x)` along the score axis looks like a
    change of base rate: p = 0.96 on a real week whose estimate was far off) and rejects
    harmless changes of shape on large batches. It remains a reported diagnostic.

What the estimate assumes
-------------------------
Every method assumes label shift. From scores alone a change of the mix of cases with
:math:`P(y \\mid x)` unchanged (covariate shift) can look the same, and then the right answer
is PCC, the batch's mean reference-calibrated posterior :math:`r(s)`
(:func:`reference_posterior`), which under label shift is biased towards the reference
prevalence. Each estimate reports ``pcc``, ``pcc_difference = prevalence - pcc``, its
bootstrap standard error ``pcc_difference_se`` (both recomputed on every replicate, so their
correlation counts; the replicate's reference rate drawn as in an unstratified bootstrap, see
:func:`_replicate_prior`) and ``disagreement = pcc_difference / pcc_difference_se``, with a
warning when ``|disagreement| > DISAGREEMENT_Z`` (2.576, two-sided 1%).

Representation (what makes 10 million rows cheap)
-------------------------------------------------
Every score is first put on the logit scale :math:`u`: ``logit(clip(z, eps, 1 - eps))`` for
probabilities, the score itself for ``logit``/``raw`` scores (``expit(u)`` is then the
probability scale used by ``map``). The *fine grid* has ``n_fine`` (default 2048) equal cells on
:math:`u` spanning the reference's range (resolution ``(max - min) / n_fine``, e.g. 0.01 for
scores whose logits span -10..10); target rows outside it fall in the end cells. One O(n) pass
reduces a batch to per-cell weighted counts, row counts and mean logits; every estimator,
bootstrap replicate and test then costs O(cells). The *cells* of the densities are groups of
fine cells cut at the quantiles of the class-balanced reference
:math:`\\tfrac12 F_0 + \\tfrac12 F_1` (``n_cells`` of them, default
``clip(min(weight_neg, weight_pos) / 100, 5, 20)``), so each holds enough reference rows and the
ratio :math:`f_1/f_0` is resolved where either class lives. The cell probabilities are the
weighted histogram plus ``smoothing`` (0.5) pseudo-weight per class spread like the balanced
reference, so neither class has an empty cell (no :math:`\\log 0`). Binning the reference and
the target on the same cells keeps the mixture identity exact (:math:`P_{\\text{target}} =
(1-\\alpha) P_0 + \\alpha P_1` cell by cell), so binning costs efficiency, not bias (a small
reference adds noise, and at tiny prevalences a slight upward bias, through the few negatives
it has in the positives' score range: the bootstrap covers the noise). EM and PACC use the
Platt-calibrated posterior at each fine cell's mean target logit (fine cells are narrow, so
this is the per-row posterior to within a fraction of a percent). The per-row posterior of
every method (:func:`posterior`) and PCC use the fine calibration map instead
(:func:`calibration_map`: isotonic on the fine cells), so they keep the scores' resolution.

Intervals and tests
-------------------
``ci_low``/``ci_high`` are percentile bootstrap intervals over target *and* reference rows:
each replicate draws the target's fine-cell row counts from a multinomial with its row total,
and each reference class's likewise (a stratified bootstrap), giving each drawn row its cell's
mean weight (exact for equal weights within a cell), then rebuilds the reference (cell
probabilities, Platt fit, TPR/FPR at the fixed threshold) and re-estimates. For ``mle``,
``ci_method="profile"`` gives the profile-likelihood interval instead (target uncertainty
only). ``fit_pvalue`` tests the label-shift model itself: the Cramér-von Mises statistic
:math:`W^2 = n \\sum_k (\\hat F_k - F_k)^2 p_k` between the target's cell distribution and the
fitted ``mle`` mixture, with a parametric-bootstrap p-value that simulates the target *and*
the reference from the fitted model and re-fits (so a small reference does not make a large
batch look misfit). Two rules keep the interval honest where the bootstrap cannot be: when
the reference AUC does not differ from 0.5 (Mann-Whitney normal approximation, two-sided
p >= 0.05) any prevalence fits and the interval is [0, 1]; a batch of fewer than 30 rows gets
the union of its bootstrap interval and the ``mle`` profile-likelihood interval. Weights count
as repetition in every estimate and statistic (the smoothing is a pseudo-*weight*); the
bootstrap and the test draw as many rows as there are (Kish effective sizes for the test).

Diagnostics and warnings: ``reference_auc`` below 0.6 (weakly identifiable), no information
at all (both classes' cell probabilities equal where the batch lies: the reference prevalence
is returned with the interval [0, 1]), ``fit_pvalue`` below 0.01, a ``disagreement`` beyond
2.576, acc/pacc separation below
0.1, an estimator that did not converge, a tiny batch, a batch in a single cell, and more than
1% of the batch outside the reference's score range. No figure is NaN without a warning (only
``n_bootstrap=0`` leaves the interval and ``fit_pvalue`` undefined).

References
----------
B. Zadrozny, C. Elkan, "Transforming Classifier Scores into Accurate Multiclass Probability
Estimates", KDD 2002 (isotonic calibration).
M. Saerens, P. Latinne, C. Decaestecker, "Adjusting the Outputs of a Classifier to New a Priori
Probabilities: A Simple Procedure", Neural Computation 14, 2002.
A. Alexandari, A. Kundaje, A. Shrikumar, "Maximum Likelihood with Bias-Corrected Calibration is
Hard-To-Beat at Label Shift Adaptation", ICML 2020.
G. Forman, "Quantifying counts and costs via classification", Data Mining and Knowledge
Discovery 17, 2008.
A. Bella, C. Ferri, J. Hernández-Orallo, M. J. Ramírez-Quintana, "Quantification via
Probability Estimators", ICDM 2010 (PCC and PACC).
V. Choulakian, R. A. Lockhart, M. A. Stephens, "Cramér-von Mises statistics for discrete
distributions", Canadian Journal of Statistics 22, 1994.
References/001: label shift, Bayes thresholds from costs, MLE of the base rate, the MAP method.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.special import chdtri

from calib_cli.core import elementary as el
from calib_cli.core import shift_map
from calib_cli.core.checks import (
    check_labels,
    check_score_kind,
    check_scores,
    check_weights,
    require_same_length,
)
from calib_cli.core.convergence import newton_distance
from calib_cli.core.decisions import PREVALENCE_FLOOR
from calib_cli.core.dots import dot, rows_dot
from calib_cli.core.lazy_scipy import brentq, isotonic_regression
from calib_cli.core.metrics import check_weight_kind, count_unit_of
from calib_cli.core.platt import PlattParams, apply_platt, fit_platt
from calib_cli.core.shift_map import MapFit, PiecewiseLinearFit
from calib_cli.errors import InputError
from calib_cli.types import CiMethod, FloatArray, IntArray, ScoreKind, ShiftMethod, WeightKind

__all__ = [
    "COUNT_CHUNK",
    "DISAGREEMENT_LEVEL",
    "DISAGREEMENT_Z",
    "FIT_WARN_PVALUE",
    "MAP_BETA",
    "MAP_NODES",
    "MAP_POWER",
    "MAP_SMOOTHING",
    "CalibrationMap",
    "CiMethod",
    "DecisionCosts",
    "EstimatedMethod",
    "ReferenceCounts",
    "ReferenceModel",
    "ShiftEstimate",
    "TargetCounts",
    "bayes_threshold",
    "calibration_map",
    "count_reference",
    "count_target",
    "decision_costs",
    "estimate_prevalence",
    "expected_cost",
    "fine_index",
    "fit_reference",
    "fit_reference_counts",
    "grid_range",
    "logit_range",
    "merge_decision_costs",
    "merge_reference_counts",
    "merge_target_counts",
    "posterior",
    "realised_cost",
    "reference_posterior",
]

#: The estimator actually used (``auto`` resolves to one of these).
EstimatedMethod = Literal["mle", "em", "acc", "pacc", "map"]
#: How ``ci_low``/``ci_high`` are computed.

#: Pseudo-rows of every block of the fine calibration map (:func:`calibration_map`).
MAP_SMOOTHING = 2.0
#: ``map``'s defaults: nodes of the piecewise-linear positive density, the strength of the
#: prior tying it to the reference's and the power of that prior's penalty.
MAP_NODES = 10
MAP_BETA = 1000.0
MAP_POWER = 1.0
#: Warn when ``fit_pvalue`` is below this (a diagnostic: it never chooses the method).
FIT_WARN_PVALUE = 0.01
#: Warn when the label-shift estimate and PCC differ by more than sampling explains at this
#: two-sided level: ``|disagreement| > DISAGREEMENT_Z``, the normal quantile.
DISAGREEMENT_LEVEL = 0.01
DISAGREEMENT_Z = 2.5758293035489004  # scipy.special.ndtri(1 - DISAGREEMENT_LEVEL / 2)
#: Warn when the reference AUC is below this: the prevalence is weakly identifiable.
AUC_WARN = 0.6
#: Warn when TPR - FPR (or its probabilistic version) is below this for acc/pacc.
SEPARATION_WARN = 0.1
#: Warn when a batch has fewer rows than this; its interval also includes the profile one.
FEW_ROWS_WARN = 30
#: The interval is [0, 1] when the reference AUC does not differ from 0.5 at this level.
IDENTIFIABILITY_LEVEL = 0.05

#: ``mle`` (and EM's fixed point in bootstrap replicates) is converged when the projected
#: Newton step of its log-likelihood, the distance to the maximiser, is at most this.
ROOT_TOL = 1e-10
#: Share of the bootstrap spread that a ``map`` replicate's own optimisation error may take:
#: replicates are solved to a projected-gradient residual of
#: :func:`replicate_tol` ``= REPLICATE_SHARE / sqrt(n)`` (never below ``shift_map.TOL``, the
#: point estimate's). The residual is a gradient per count in coordinates of about unit
#: curvature, whose sampling noise over ``n`` effective rows is about ``1 / sqrt(n)``; the
#: same inverse Hessian carries both to the estimate, so a replicate is off by at most about
#: ``REPLICATE_SHARE`` standard errors: far below the Monte Carlo error of an interval's end
#: (with 200 replicates the 2.5% quantile of the draws is uncertain by about 0.19 standard
#: errors). Tested: interval ends within 2% of the interval's width of those of replicates
#: solved to ``shift_map.TOL`` (measured: under 0.7%).
REPLICATE_SHARE = 0.05

_METHODS = ("auto", "mle", "em", "acc", "pacc", "map")
_LOG_RATIO_CLIP = 700.0


# --------------------------------------------------------------------------------------------
# Result and fitted-state dataclasses
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CalibrationMap:
    """The reference's calibrated posterior :math:`r(u)` at fine resolution (knots and values).

    Built by :func:`calibration_map`; evaluated by :func:`reference_posterior` (linear
    interpolation of the log-odds between knots, constant beyond the outer ones).

    Attributes
    ----------
    knots : ndarray of shape (n_knots,)
        Increasing logits: the weighted mean reference logit of each pooled block.
    log_odds : ndarray of shape (n_knots,)
        Non-decreasing :math:`\\operatorname{logit} r` at the knots (finite).
    weights : ndarray of shape (n_knots,)
        Reference weight of each block (plus its share of the pseudo-weight).
    prior : float
        The prevalence :math:`r` is calibrated at (the reference's).
    """

    knots: FloatArray
    log_odds: FloatArray
    weights: FloatArray
    prior: float


@dataclass(frozen=True)
class ReferenceModel:
    """What the labelled reference says about the scores, reduced to grid statistics.

    Built by :func:`fit_reference`. Arrays indexed by fine cell have shape ``(n_fine,)``;
    arrays indexed by cell have shape ``(n_cells,)``.

    Attributes
    ----------
    score_kind : {"probability", "logit", "raw"}
        What the scores are; all work is on the logit scale ``u`` (see the module notes).
    eps : float
        Clip of probability scores before the logit.
    logit_low, logit_high : float
        Range of the fine grid on ``u`` (the reference's range).
    n_fine : int
        Number of fine cells (resolution ``(logit_high - logit_low) / n_fine`` on ``u``).
    fine_rows_neg, fine_rows_pos : ndarray
        Reference rows (of positive weight) per fine cell and class.
    fine_weight_neg, fine_weight_pos : ndarray
        Weighted counts per fine cell and class.
    fine_center : ndarray
        Weighted mean reference logit per fine cell (the cell's midpoint when empty).
    cell_bounds : ndarray of int, shape (n_cells + 1,)
        Fine-cell index where each cell starts (the last entry is ``n_fine``).
    cell_edges : ndarray, shape (n_cells + 1,)
        Cell edges on the probability scale ``expit(u)``, 0 first and 1 last.
    cell_center : ndarray
        Weighted mean reference logit per cell (where :func:`posterior` interpolates).
    mass_neg, mass_pos : ndarray
        Smoothed cell probabilities of each class, :math:`P_{0k}`, :math:`P_{1k}` (sum to 1).
    density_neg, density_pos : ndarray
        The same as densities on the probability scale (``mass / cell width``): :math:`f_0`,
        :math:`f_1`, piecewise constant.
    smoothing : float
        Pseudo-weight per class spread over the cells like the class-balanced reference.
    reference_prevalence : float
        Weighted positive rate of the reference (the training prior for ``em``).
    n : int
        Reference rows (of positive weight).
    n_eff_neg, n_eff_pos : float
        Rows per class the sampling error is counted in: with frequency weights the rows the
        weights stand for (``sum w / unit``, :func:`~calib_cli.core.metrics.count_unit_of`),
        with importance weights Kish's effective sizes ``(sum w)^2 / sum w^2``.
    reference_auc : float
        Weighted ROC AUC of the scores on the reference (ties count one half).
    platt : PlattParams
        Platt map fitted on the reference, applied to the logit ``u``
        (``score_kind="logit"``): the calibrated posterior at the reference prior.
    threshold : float
        Default ``acc`` threshold in score units (maximises TPR - FPR on the reference).
    threshold_index : int
        The threshold as a fine-grid edge index.
    tpr, fpr : float
        True and false positive rates of the reference at ``threshold``.
    pacc_pos, pacc_neg : float
        Mean calibrated posterior of reference positives and negatives (for ``pacc``).
    calibration : CalibrationMap
        The reference's fine calibration map :math:`r(u)` (:func:`calibration_map`): the
        per-row posterior, PCC and the static decisions use it.
    map_smoothing : float
        Pseudo-rows per block of ``calibration``.
    weight_kind : {"frequency", "importance"}
        What the reference's weights mean (:func:`fit_reference`): how its bootstrap draws
        rows and how many rows its sampling error is counted in.
    """

    score_kind: ScoreKind
    eps: float
    logit_low: float
    logit_high: float
    n_fine: int
    fine_rows_neg: FloatArray
    fine_rows_pos: FloatArray
    fine_weight_neg: FloatArray
    fine_weight_pos: FloatArray
    fine_center: FloatArray
    cell_bounds: IntArray
    cell_edges: FloatArray
    cell_center: FloatArray
    mass_neg: FloatArray
    mass_pos: FloatArray
    density_neg: FloatArray
    density_pos: FloatArray
    smoothing: float
    reference_prevalence: float
    n: int
    n_eff_neg: float
    n_eff_pos: float
    reference_auc: float
    platt: PlattParams
    threshold: float
    threshold_index: int
    tpr: float
    fpr: float
    pacc_pos: float
    pacc_neg: float
    calibration: CalibrationMap
    map_smoothing: float = MAP_SMOOTHING
    weight_kind: WeightKind = "frequency"

    @property
    def n_cells(self) -> int:
        """Number of cells of the densities."""
        return int(self.cell_bounds.size - 1)


@dataclass(frozen=True)
class ShiftEstimate:
    """The estimated prevalence of one batch, its interval and diagnostics.

    Attributes
    ----------
    prevalence : float
        Estimated positive rate :math:`\\alpha` of the batch.
    ci_low, ci_high : float
        Interval at ``ci_level`` (NaN only when ``n_bootstrap=0``, with a warning).
    reference_prevalence : float
        Positive rate of the reference.
    n : int
        Rows in the batch (of positive weight).
    method : {"mle", "em", "acc", "pacc", "map"}
        The estimator actually used.
    converged : bool
        Whether the estimate meets the estimator's own optimality criterion at the returned
        point (see ``residual``; always true for the closed forms).
    n_iter : int
        Iterations of the estimator (root-finder, EM or the MAP optimiser; 0 for closed forms).
    reference_auc : float
        ROC AUC on the reference; near 0.5 the prevalence cannot be told from the scores.
    fit_pvalue : float
        Parametric-bootstrap p-value of the Cramér-von Mises goodness-of-fit test of the
        label-shift mixture (fitted by ``mle``) against the batch's score distribution. Small:
        the batch is not explained by a change of base rate alone.
    warnings : tuple of str
        Everything the user should know, in plain sentences.
    requested_method : str
        The ``method`` asked for (e.g. ``"auto"``).
    ci_method : {"bootstrap", "profile"}
        How the interval was computed.
    ci_level : float
        Nominal coverage of the interval.
    n_bootstrap : int
        Bootstrap replicates used (for the interval and for ``fit_pvalue``).
    fit_statistic : float
        The Cramér-von Mises statistic :math:`W^2` behind ``fit_pvalue``.
    threshold : float or None
        ``acc``: the threshold used (score units), else None.
    tpr_minus_fpr : float or None
        ``acc``: TPR - FPR at the threshold; ``pacc``: the difference of the class means of
        the calibrated posterior; else None.
    map_fit : MapFit or None
        ``map``: the fitted positive-class density, else None.
    residual : float
        The estimator's optimality residual at the estimate (0 for the closed forms): for
        ``mle`` and ``em`` the projected Newton step of the concave log-likelihood in the
        prevalence (the distance to its maximiser to second order), for ``map`` the infinity
        norm of the projected gradient of the mean negative log-posterior (``map_fit``).
    pcc : float
        Probabilistic classify-and-count: the weighted mean over the batch of the
        reference-calibrated posterior :math:`r(s)` (:func:`reference_posterior`, at each fine
        cell's mean logit). Right when only :math:`P(x)` changed (covariate shift), biased
        towards the reference prevalence under label shift.
    pcc_difference : float
        ``prevalence - pcc``: how much the number depends on assuming label shift.
    pcc_difference_se : float
        Standard error of ``pcc_difference``: the standard deviation (``ddof=1``) of
        ``prevalence - pcc`` over the bootstrap replicates (both recomputed on each replicate
        of target and reference rows, so their correlation counts). NaN without bootstrap
        replicates, or when the interval is [0, 1] because the scores carry no information.
    disagreement : float
        ``pcc_difference / pcc_difference_se``; beyond :data:`DISAGREEMENT_Z` (2.576, two-sided
        1%) sampling does not explain it, and a warning says so.
    rows_prevalence : float
        The rate :func:`posterior` recalibrates the batch's rows at (:func:`rows_rate`):
        ``prevalence`` itself, except where recalibrating at it would be dishonest. At an end
        of [0, 1] every row would get probability exactly 0 (or 1) whatever its score; the
        rows then use the mean of the rate over the bootstrap replicates (the expected rate
        under the estimate's uncertainty, strictly inside (0, 1) whenever some replicate is),
        or, when none was drawn or none leaves the end, the midpoint of the profile-likelihood
        interval. When the scores cannot tell the rate (interval [0, 1] by construction) the
        rows keep the reference prevalence, i.e. :math:`r(s)`. A warning says so, and which
        rate, whenever it differs.
    """

    prevalence: float
    ci_low: float
    ci_high: float
    reference_prevalence: float
    n: int
    method: EstimatedMethod
    converged: bool
    n_iter: int
    reference_auc: float
    fit_pvalue: float
    warnings: tuple[str, ...]
    requested_method: str
    ci_method: CiMethod
    ci_level: float
    n_bootstrap: int
    fit_statistic: float
    threshold: float | None = None
    tpr_minus_fpr: float | None = None
    map_fit: MapFit | None = None
    residual: float = 0.0
    pcc: float = math.nan
    pcc_difference: float = math.nan
    pcc_difference_se: float = math.nan
    disagreement: float = math.nan
    rows_prevalence: float = math.nan


@dataclass(frozen=True)
class _TargetStats:
    """A batch reduced to fine-cell sufficient statistics."""

    rows: FloatArray
    weight: FloatArray
    center: FloatArray
    n_rows: int
    weight_total: float
    n_eff: float
    outside: float


@dataclass(frozen=True)
class _Point:
    """One estimate of one method on one (reference, batch) pair."""

    prevalence: float
    converged: bool
    n_iter: int
    flat: bool = False
    threshold: float | None = None
    tpr_minus_fpr: float | None = None
    map_fit: MapFit | None = None
    residual: float = 0.0


@dataclass(frozen=True)
class _MapSetup:
    """Matrices of the MAP method that depend only on the grid and the nodes."""

    nodes: FloatArray
    cell_basis: shift_map.BandedBasis
    fine_basis: shift_map.BandedBasis
    prior_basis: FloatArray
    reference_fit: PiecewiseLinearFit
    fitted_on: FloatArray
    beta: float
    power: float
    prior: shift_map.BandedBasis  # prior_basis by rows' bands, built once


# --------------------------------------------------------------------------------------------
# Grid helpers
# --------------------------------------------------------------------------------------------


def _to_logit(scores: FloatArray, score_kind: ScoreKind, eps: float) -> FloatArray:
    """Scores on the working logit scale ``u``."""
    if score_kind == "probability":
        result: FloatArray = el.log_odds(np.clip(scores, eps, 1.0 - eps))
        return result
    return scores


def _from_logit(u: float, score_kind: ScoreKind) -> float:
    """A working-scale value back in score units."""
    return float(el.sigmoid(u)) if score_kind == "probability" else float(u)


def _fine_width(ref: ReferenceModel) -> float:
    return (ref.logit_high - ref.logit_low) / ref.n_fine


def fine_index(u: FloatArray, low: float, high: float, n_fine: int) -> IntArray:
    """Fine cell of each value: ``floor((u - low) / width)`` clipped to the grid.

    >>> fine_index(np.array([-9.0, -1.0, -0.5, 0.0, 0.999, 1.0, 9.0]), -1.0, 1.0, 4).tolist()
    [0, 0, 1, 2, 3, 3, 3]
    """
    width = (high - low) / n_fine
    idx = np.floor((u - low) / width)
    np.clip(idx, 0, n_fine - 1, out=idx)
    return idx.astype(np.int64)


def _bincount(idx: IntArray, weights: FloatArray, n_fine: int) -> FloatArray:
    """Weighted counts of fine-cell indices, as float64."""
    return np.asarray(np.bincount(idx, weights=weights, minlength=n_fine), dtype=np.float64)


_fine_index = fine_index


def _fine_midpoints(low: float, high: float, n_fine: int) -> FloatArray:
    width = (high - low) / n_fine
    result: FloatArray = low + width * (np.arange(n_fine, dtype=np.float64) + 0.5)
    return result


def _fine_edges_prob(ref: ReferenceModel) -> FloatArray:
    """Fine-cell edges on the probability scale: 0, expit(interior edges), 1."""
    inner = ref.logit_low + _fine_width(ref) * np.arange(1, ref.n_fine)
    return np.concatenate(([0.0], el.sigmoid(inner), [1.0]))


def _weighted_center(sums: FloatArray, weights: FloatArray, fallback: FloatArray) -> FloatArray:
    safe = np.where(weights > 0.0, weights, 1.0)
    result: FloatArray = np.where(weights > 0.0, sums / safe, fallback)
    return result


def _cell_sum(fine: FloatArray, bounds: IntArray) -> FloatArray:
    result: FloatArray = np.add.reduceat(fine, bounds[:-1])
    return result


def _kish(weight_sum: float, square_sum: float) -> float:
    return weight_sum * weight_sum / square_sum if square_sum > 0.0 else 0.0


def _distinct_auc(neg: FloatArray, pos: FloatArray) -> float:
    """ROC AUC from the classes' weights at increasing distinct scores, ties counted one half
    (Mann-Whitney)."""
    below = np.cumsum(neg) - neg
    total = float(pos.sum()) * float(neg.sum())
    return dot(pos, below + 0.5 * neg) / total


def _auc_null_pvalue(auc: float, n_neg: float, n_pos: float) -> float:
    """Two-sided p-value of AUC = 0.5 (Mann-Whitney normal approximation, Kish sizes)."""
    variance = (n_neg + n_pos + 1.0) / (12.0 * n_neg * n_pos)
    z = abs(auc - 0.5) / math.sqrt(variance)
    return float(math.erfc(z / math.sqrt(2.0)))


def _balanced_mass(weight_neg: FloatArray, weight_pos: FloatArray) -> FloatArray:
    result: FloatArray = 0.5 * weight_neg / weight_neg.sum() + 0.5 * weight_pos / weight_pos.sum()
    return result


def _cell_bounds(balanced: FloatArray, n_cells: int) -> IntArray:
    """Cut the fine grid after the cells where the balanced cumulative crosses k / n_cells.

    Every resulting cell ends at a fine cell of positive mass, so holds reference rows.
    """
    cum = np.cumsum(balanced)
    cum /= cum[-1]
    levels = np.arange(1, n_cells) / n_cells
    cuts = np.searchsorted(cum, levels, side="left") + 1
    n_fine = balanced.size
    last = int(np.flatnonzero(balanced > 0.0)[-1]) + 1
    cuts = cuts[(cuts < last) & (cuts > 0)]
    bounds = np.unique(np.concatenate(([0], cuts, [n_fine])))
    return bounds.astype(np.int64)


def _smoothed_mass(weight: FloatArray, prior: FloatArray, smoothing: float) -> FloatArray:
    """Cell probabilities: (weighted counts + ``smoothing`` spread like ``prior``) normalised."""
    mass = weight + smoothing * prior
    result: FloatArray = mass / float(mass.sum())
    return result


def _grouped_platt(
    center: FloatArray, weight_neg: FloatArray, weight_pos: FloatArray, *, unit: float
) -> PlattParams:
    """Platt fit on the fine cells (each cell's mean logit, class weights as weights; a
    separable fit's target smoothing counts rows in ``unit``, the rows' own)."""
    keep_neg = weight_neg > 0.0
    keep_pos = weight_pos > 0.0
    x = np.concatenate((center[keep_neg], center[keep_pos]))
    y = np.concatenate((np.zeros(int(keep_neg.sum())), np.ones(int(keep_pos.sum()))))
    w = np.concatenate((weight_neg[keep_neg], weight_pos[keep_pos]))
    return fit_platt(x, y, sample_weight=w, score_kind="logit", weight_unit=unit)


def _platt_log_ratio(platt: PlattParams, u: FloatArray, prior: float) -> FloatArray:
    """log f1/f0 implied by a calibrated posterior at ``prior``: logit p(u) - logit prior."""
    log_ratio = platt.intercept + platt.slope * u - _safe_logit(prior)
    result: FloatArray = np.clip(log_ratio, -_LOG_RATIO_CLIP, _LOG_RATIO_CLIP)
    return result


def _safe_logit(p: float) -> float:
    return math.log(p) - math.log1p(-p)


def _rates_at(index: int, weight_neg: FloatArray, weight_pos: FloatArray) -> tuple[float, float]:
    """TPR and FPR of the rule ``fine cell >= index``."""
    tpr = float(weight_pos[index:].sum()) / float(weight_pos.sum())
    fpr = float(weight_neg[index:].sum()) / float(weight_neg.sum())
    return tpr, fpr


def _youden_index(weight_neg: FloatArray, weight_pos: FloatArray) -> int:
    """Fine edge index maximising TPR - FPR (the first of ties)."""
    tpr = np.cumsum(weight_pos[::-1])[::-1] / weight_pos.sum()
    fpr = np.cumsum(weight_neg[::-1])[::-1] / weight_neg.sum()
    return int(np.argmax(tpr - fpr))


def _pacc_means(
    platt: PlattParams, center: FloatArray, weight_neg: FloatArray, weight_pos: FloatArray
) -> tuple[float, float]:
    p = apply_platt(platt, center)
    return (
        dot(p, weight_pos) / float(weight_pos.sum()),
        dot(p, weight_neg) / float(weight_neg.sum()),
    )


def calibration_map(
    center: FloatArray,
    weight_neg: FloatArray,
    weight_pos: FloatArray,
    *,
    platt: PlattParams | None = None,
    smoothing: float = MAP_SMOOTHING,
) -> CalibrationMap:
    """The reference's calibrated posterior at fine resolution, monotone in the score.

    Pool-adjacent-violators (isotonic regression, weighted) of the positive share
    :math:`w_{1j} / (w_{0j} + w_{1j})` over the occupied fine cells, in score order; each
    pooled block :math:`B` becomes a knot at its weighted mean logit with the value

    .. math::

        r_B = \\frac{W_{1B} + s\\,q_B}{W_B + s},

    the block's positive share with ``smoothing`` :math:`s` pseudo-weight at :math:`q_B`, the
    Platt posterior at the knot (``platt``; the reference prevalence :math:`\\pi` without it),
    so no block is exactly 0 or 1 and a block of a few rows (at the ends of the score range)
    leans on the smooth fit, pooled once more to stay non-decreasing. Between knots
    :math:`\\operatorname{logit} r` is linear in the logit score, beyond the outer ones
    constant: the map is continuous, non-decreasing, and follows the scores at the resolution
    the reference supports (a block is as narrow as the labels allow). Isotonic calibration:
    Zadrozny and Elkan (2002); its prior shift: Saerens et al. (2002).

    Parameters
    ----------
    center : ndarray of shape (n_fine,)
        Mean logit of each fine cell.
    weight_neg, weight_pos : ndarray of shape (n_fine,)
        Weighted counts per fine cell and class.
    platt : PlattParams, optional
        A Platt fit on the logit (the pseudo-weight's posterior); default: the prevalence.
    smoothing : float, default :data:`MAP_SMOOTHING` (2)
        Pseudo-weight added to every block. Two rows: on calibrated binormal scores with 500
        reference positives, the mean error of the posterior of rows scored >= 0.6 at a
        prevalence of 1% was 0.036 with half a row at :math:`\\pi`, 0.029 with half a row at
        the Platt posterior, 0.026 with two (0.016 with twenty, which leans on Platt's
        logistic shape where it may be wrong).

    Returns
    -------
    CalibrationMap

    Examples
    --------
    Two cells of three rows each, one positive on the left and two on the right: no violator,
    so two knots, (1 + 0.5 * 0.5) / 3.5 = 0.357 and (2 + 0.25) / 3.5 = 0.643.

    >>> m = calibration_map(np.array([-1.0, 1.0]), np.array([2.0, 1.0]), np.array([1.0, 2.0]),
    ...     smoothing=0.5)
    >>> m.knots.tolist(), np.round(el.sigmoid(m.log_odds), 3).tolist(), m.prior
    ([-1.0, 1.0], [0.357, 0.643], 0.5)
    """
    total = weight_neg + weight_pos
    used = total > 0.0
    w = total[used]
    positive = weight_pos[used]
    x = center[used]
    prior = float(weight_pos.sum()) / float(total.sum())
    fit = isotonic_regression(positive / w, weights=w, increasing=True)
    starts = np.asarray(fit.blocks[:-1], dtype=np.int64)
    block_weight = np.add.reduceat(w, starts)
    knots = np.add.reduceat(w * x, starts) / block_weight
    toward = prior if platt is None else apply_platt(platt, knots)
    shrunk = (np.add.reduceat(positive, starts) + smoothing * toward) / (block_weight + smoothing)
    weights = block_weight + smoothing
    values = isotonic_regression(shrunk, weights=weights, increasing=True).x
    log_odds: FloatArray = el.log_odds(values)
    return CalibrationMap(knots=knots, log_odds=log_odds, weights=weights, prior=prior)


def _map_log_odds(calibration: CalibrationMap, u: FloatArray) -> FloatArray:
    """:math:`\\operatorname{logit} r(u)` of :func:`calibration_map`, interpolated."""
    result: FloatArray = np.interp(u, calibration.knots, calibration.log_odds)
    return result


def _default_n_cells(n_neg: float, n_pos: float) -> int:
    """About a hundred rows of the smaller class per cell, between 5 and 20 cells.

    Cells with few reference rows make the density ratio noisy, and a noisy ratio biases the
    mixture likelihood's maximum upwards at small prevalences: with one cell per ten rows the
    estimate of a 2% batch was 0.007 too high and its 95% interval covered the truth in about
    half of the repetitions; with this rule the bias was 0.001 and coverage 95%, with no wider
    spread (the binned mixture stays exact, so coarse cells cost little efficiency).
    """
    return int(np.clip(round(min(n_neg, n_pos) / 100.0), 5, 20))


# --------------------------------------------------------------------------------------------
# Reference
# --------------------------------------------------------------------------------------------


def _check_positive_int(value: object, name: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def fit_reference(
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    score_kind: ScoreKind = "probability",
    n_cells: int | None = None,
    n_fine: int = 2048,
    smoothing: float = 0.5,
    eps: float = 1e-12,
    map_smoothing: float = MAP_SMOOTHING,
    weight_kind: WeightKind = "frequency",
) -> ReferenceModel:
    """Reduce a labelled reference to the grid statistics every estimator needs.

    Parameters
    ----------
    scores : array-like of shape (n_rows,)
        Reference scores (probabilities in [0, 1], or logits/raw margins).
    y_true : array-like of shape (n_rows,)
        Binary labels.
    sample_weight : array-like of shape (n_rows,), optional
        Non-negative row weights (a row of weight 2 counts as two rows of weight 1).
    score_kind : {"probability", "logit", "raw"}, default "probability"
        Probabilities are mapped to ``logit(clip(z, eps, 1 - eps))``; logits and raw margins
        are used as they are (their probability scale is ``expit``).
    n_cells : int, optional
        Cells of the density estimates, cut at quantiles of the class-balanced reference.
        Default ``clip(round(min(weight_neg, weight_pos) / 100), 5, 20)`` (weighted class
        totals): about a hundred rows of the rarer class per cell where that class lives.
    n_fine : int, default 2048
        Fine cells on the logit scale over the reference's range (the resolution of every
        batch summary, threshold and posterior).
    smoothing : float, default 0.5
        Pseudo-weight added to each class (in weight units, so that weights count as
        repetition), spread over the cells like the balanced reference, so that no class has a
        cell of probability zero.
    eps : float, default 1e-12
        Clip for probability scores before the logit.
    map_smoothing : float, default :data:`MAP_SMOOTHING`
        Pseudo-rows per block of the fine calibration map (:func:`calibration_map`).
    weight_kind : {"frequency", "importance"}, default "frequency"
        ``frequency``: a row of weight k is k rows (weights below 1 on average count in units
        of their mean) in the cells, the bootstrap (which draws that many rows: for integer
        weights exactly the bootstrap of the rows written out) and every test.
        ``importance``: survey weights; the bootstrap draws the rows observed, each keeping
        its weight, sizes are Kish's effective rows, and the fit depends on the weights only
        through their ratios (their scale changes nothing).

    Returns
    -------
    ReferenceModel

    Raises
    ------
    InputError
        Bad scores, labels or weights; a reference without positive or without negative
        rows ("the reference has no positive rows").

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.random(2000) < 0.3
    >>> z = np.where(y, rng.beta(5, 2, 2000), rng.beta(2, 5, 2000))
    >>> ref = fit_reference(z, y)
    >>> round(ref.reference_prevalence, 3), ref.n_cells, ref.reference_auc > 0.9
    (0.302, 6, True)
    """
    kind = check_score_kind(score_kind)
    n_fine = _check_positive_int(n_fine, "n_fine", minimum=2)
    _check_smoothing_eps(smoothing, eps)
    x = check_scores(scores, kind=kind)
    y = check_labels(y_true)
    require_same_length([x, y], ["scores", "y_true"])
    w = check_weights(sample_weight, x.shape[0])
    low, high = grid_range([logit_range(x, sample_weight=w, score_kind=kind, eps=eps)])
    parts = [
        count_reference(
            x[i : i + COUNT_CHUNK],
            y[i : i + COUNT_CHUNK],
            sample_weight=w[i : i + COUNT_CHUNK],
            score_kind=kind,
            logit_low=low,
            logit_high=high,
            n_fine=n_fine,
            eps=eps,
        )
        for i in range(0, max(x.shape[0], 1), COUNT_CHUNK)
    ]
    return fit_reference_counts(
        merge_reference_counts(parts),
        score_kind=kind,
        n_cells=n_cells,
        smoothing=smoothing,
        eps=eps,
        map_smoothing=map_smoothing,
        weight_kind=weight_kind,
    )


def _weight_unit(weight_kind: WeightKind, weight: float, rows: float) -> float:
    """The weight of one row: for frequency weights 1, or their mean where it is below 1
    (:func:`~calib_cli.core.metrics.count_unit_of`); for importance weights their mean, so
    that every pseudo-count scales with the weights and their scale changes nothing."""
    if weight_kind == "frequency" or not (rows > 0.0 and weight > 0.0):
        return count_unit_of(weight, rows)
    return weight / rows


def _check_smoothing_eps(smoothing: float, eps: float) -> None:
    if not (math.isfinite(smoothing) and smoothing > 0.0):
        raise InputError(f"smoothing must be a positive number, got {smoothing!r}")
    if not (math.isfinite(eps) and 0.0 < eps < 0.5):
        raise InputError(f"eps must be in (0, 0.5), got {eps!r}")


#: Rows per chunk when rows are reduced to fine-cell counts. Both engines count in chunks of
#: exactly this many rows, in file order, and add the chunks in order, so the in-memory and the
#: streaming engine produce the same floating-point sums, bit for bit.
COUNT_CHUNK = 1 << 20


@dataclass(frozen=True)
class ReferenceCounts:
    """A labelled reference reduced to what :func:`fit_reference_counts` needs.

    Sums over rows of positive weight, per fine cell of the grid ``[logit_low, logit_high]``
    (``n_fine`` cells, see :func:`fine_index`); built per chunk of rows by
    :func:`count_reference` and added by :func:`merge_reference_counts`.

    Attributes
    ----------
    logit_low, logit_high : float
        The grid's range on the logit scale (from :func:`grid_range`).
    n_fine : int
    rows_neg, rows_pos : ndarray of shape (n_fine,)
        Rows per fine cell and class.
    weight_neg, weight_pos : ndarray of shape (n_fine,)
        Weighted counts per fine cell and class.
    logit_sum : ndarray of shape (n_fine,)
        Weighted sum of the logit ``u`` per fine cell (both classes): the cells' centres.
    square_neg, square_pos : float
        Sums of squared weights per class (Kish effective sizes).
    distinct_logit : ndarray of shape (n_distinct,)
        Distinct logits, increasing (for the exact ROC AUC).
    distinct_neg, distinct_pos : ndarray of shape (n_distinct,)
        Weight of each class at each distinct logit.
    """

    logit_low: float
    logit_high: float
    n_fine: int
    rows_neg: FloatArray
    rows_pos: FloatArray
    weight_neg: FloatArray
    weight_pos: FloatArray
    logit_sum: FloatArray
    square_neg: float
    square_pos: float
    distinct_logit: FloatArray
    distinct_neg: FloatArray
    distinct_pos: FloatArray


def logit_range(
    scores: FloatArray,
    *,
    sample_weight: FloatArray,
    score_kind: ScoreKind = "probability",
    eps: float = 1e-12,
) -> tuple[float, float]:
    """Smallest and largest logit of the rows of positive weight (``(inf, -inf)`` if none).

    Checked scores and weights (one chunk of rows); :func:`grid_range` combines chunks.

    >>> logit_range(np.array([0.5, 0.9, 0.1]), sample_weight=np.array([1.0, 0.0, 1.0]))
    (-2.197224577336219, 0.0)
    """
    used = sample_weight > 0.0
    if not np.any(used):
        return math.inf, -math.inf
    u = _to_logit(scores[used], score_kind, eps)
    return float(u.min()), float(u.max())


def grid_range(ranges: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The fine grid's range from chunks' :func:`logit_range`: their hull, widened by 0.5 on
    each side when (nearly) a single value. Minimum and maximum do not depend on the chunks.

    >>> grid_range([(-1.0, 0.5), (-2.0, 0.0)])
    (-2.0, 0.5)
    >>> grid_range([(0.0, 0.0)])
    (-0.5, 0.5)
    """
    low = min((r[0] for r in ranges), default=math.inf)
    high = max((r[1] for r in ranges), default=-math.inf)
    if not (math.isfinite(low) and math.isfinite(high)):
        return 0.0, 1.0  # no rows of positive weight: fit_reference_counts refuses them
    if high - low < 1e-9 * max(1.0, abs(low)):
        low, high = low - 0.5, high + 0.5
    return low, high


def count_reference(
    scores: FloatArray,
    y_true: FloatArray,
    *,
    sample_weight: FloatArray,
    score_kind: ScoreKind,
    logit_low: float,
    logit_high: float,
    n_fine: int,
    eps: float = 1e-12,
) -> ReferenceCounts:
    """One chunk of checked reference rows reduced to :class:`ReferenceCounts`.

    >>> c = count_reference(np.array([0.2, 0.8, 0.8]), np.array([0.0, 1.0, 0.0]),
    ...     sample_weight=np.ones(3), score_kind="probability", logit_low=-2.0, logit_high=2.0,
    ...     n_fine=4)
    >>> c.rows_neg.tolist(), c.rows_pos.tolist(), c.distinct_neg.tolist(), c.distinct_pos.tolist()
    ([1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0], [1.0, 1.0], [0.0, 1.0])
    """
    used = sample_weight > 0.0
    u = _to_logit(scores[used], score_kind, eps)
    y = y_true[used]
    w = sample_weight[used]
    idx = fine_index(u, logit_low, logit_high, n_fine)
    pos = y == 1.0
    neg = ~pos
    values, inverse = np.unique(u, return_inverse=True)
    return ReferenceCounts(
        logit_low=logit_low,
        logit_high=logit_high,
        n_fine=n_fine,
        rows_neg=np.bincount(idx[neg], minlength=n_fine).astype(np.float64),
        rows_pos=np.bincount(idx[pos], minlength=n_fine).astype(np.float64),
        weight_neg=_bincount(idx[neg], w[neg], n_fine),
        weight_pos=_bincount(idx[pos], w[pos], n_fine),
        logit_sum=_bincount(idx, w * u, n_fine),
        square_neg=float(np.sum(w[neg] ** 2)),
        square_pos=float(np.sum(w[pos] ** 2)),
        distinct_logit=values,
        distinct_neg=_bincount(inverse, w * (1.0 - y), values.size),
        distinct_pos=_bincount(inverse, w * y, values.size),
    )


def merge_reference_counts(parts: Sequence[ReferenceCounts]) -> ReferenceCounts:
    """Chunks' counts added in the order given (on one grid); distinct logits merged."""
    if not parts:
        raise InputError("the reference has no rows")
    first = parts[0]
    for part in parts[1:]:
        if (part.logit_low, part.logit_high, part.n_fine) != (
            first.logit_low,
            first.logit_high,
            first.n_fine,
        ):
            raise InputError("reference counts on different grids cannot be merged")

    def total(name: str) -> FloatArray:
        out: FloatArray = np.array(getattr(first, name), dtype=np.float64, copy=True)
        for part in parts[1:]:
            out += getattr(part, name)
        return out

    square_neg, square_pos = first.square_neg, first.square_pos
    for part in parts[1:]:
        square_neg += part.square_neg
        square_pos += part.square_pos
    if len(parts) == 1:
        values, neg, pos = first.distinct_logit, first.distinct_neg, first.distinct_pos
    else:
        values, inverse = np.unique(
            np.concatenate([p.distinct_logit for p in parts]), return_inverse=True
        )
        neg = _bincount(inverse, np.concatenate([p.distinct_neg for p in parts]), values.size)
        pos = _bincount(inverse, np.concatenate([p.distinct_pos for p in parts]), values.size)
    return replace(
        first,
        rows_neg=total("rows_neg"),
        rows_pos=total("rows_pos"),
        weight_neg=total("weight_neg"),
        weight_pos=total("weight_pos"),
        logit_sum=total("logit_sum"),
        square_neg=square_neg,
        square_pos=square_pos,
        distinct_logit=values,
        distinct_neg=neg,
        distinct_pos=pos,
    )


def fit_reference_counts(
    counts: ReferenceCounts,
    *,
    score_kind: ScoreKind = "probability",
    n_cells: int | None = None,
    smoothing: float = 0.5,
    eps: float = 1e-12,
    map_smoothing: float = MAP_SMOOTHING,
    weight_kind: WeightKind = "frequency",
) -> ReferenceModel:
    """:func:`fit_reference` from a reference already reduced to counts (the streaming
    engine's route; :func:`fit_reference` itself counts and calls this).

    Parameters are those of :func:`fit_reference`; ``counts`` from
    :func:`merge_reference_counts` (its grid's range from :func:`grid_range`).
    """
    kind = check_score_kind(score_kind)
    weights_are = check_weight_kind(weight_kind)
    _check_smoothing_eps(smoothing, eps)
    _check_smoothing_eps(map_smoothing, eps)
    n_fine = counts.n_fine
    low, high = counts.logit_low, counts.logit_high
    rows_neg, rows_pos = counts.rows_neg, counts.rows_pos
    weight_neg, weight_pos = counts.weight_neg, counts.weight_pos
    if not float(rows_pos.sum()) > 0.0:
        raise InputError("the reference has no positive rows (with positive weight)")
    if not float(rows_neg.sum()) > 0.0:
        raise InputError("the reference has no negative rows (with positive weight)")
    center = _weighted_center(
        counts.logit_sum, weight_neg + weight_pos, _fine_midpoints(low, high, n_fine)
    )
    # The weight of one row: 1, or the mean weight where it is below 1 (weights normalised to
    # sum to 1 must not make the reference "one row", drowned by the pseudo-weights); for
    # importance weights always their mean (their scale must change nothing).
    unit = _weight_unit(
        weights_are,
        float(weight_neg.sum()) + float(weight_pos.sum()),
        float(rows_neg.sum()) + float(rows_pos.sum()),
    )
    if weights_are == "frequency":  # a row of weight k is k rows, in the cells and intervals
        n_eff_neg = float(weight_neg.sum()) / unit
        n_eff_pos = float(weight_pos.sum()) / unit
    else:  # the rows observed: thin cells of a few heavy rows bias the estimate upwards
        n_eff_neg = _kish(float(weight_neg.sum()), counts.square_neg)
        n_eff_pos = _kish(float(weight_pos.sum()), counts.square_pos)
    smoothing, map_smoothing = smoothing * unit, map_smoothing * unit
    if n_cells is None:
        n_cells = _default_n_cells(n_eff_neg, n_eff_pos)
    n_cells = _check_positive_int(n_cells, "n_cells")
    bounds = _cell_bounds(_balanced_mass(weight_neg, weight_pos), n_cells)
    cell_edges = np.concatenate(
        ([0.0], el.sigmoid(low + (high - low) / n_fine * bounds[1:-1]), [1.0])
    )
    auc = _distinct_auc(counts.distinct_neg, counts.distinct_pos)
    base = ReferenceModel(
        score_kind=kind,
        eps=float(eps),
        logit_low=low,
        logit_high=high,
        n_fine=n_fine,
        fine_rows_neg=rows_neg,
        fine_rows_pos=rows_pos,
        fine_weight_neg=weight_neg,
        fine_weight_pos=weight_pos,
        fine_center=center,
        cell_bounds=bounds,
        cell_edges=cell_edges,
        cell_center=np.zeros(bounds.size - 1),
        mass_neg=np.zeros(bounds.size - 1),
        mass_pos=np.zeros(bounds.size - 1),
        density_neg=np.zeros(bounds.size - 1),
        density_pos=np.zeros(bounds.size - 1),
        smoothing=float(smoothing),
        reference_prevalence=0.0,
        n=round(float(rows_neg.sum() + rows_pos.sum())),
        n_eff_neg=n_eff_neg,
        n_eff_pos=n_eff_pos,
        reference_auc=auc,
        platt=PlattParams(
            slope=0.0,
            intercept=0.0,
            score_kind="logit",
            converged=True,
            n_iter=0,
            separable=False,
        ),
        threshold=0.0,
        threshold_index=_youden_index(weight_neg, weight_pos),
        tpr=0.0,
        fpr=0.0,
        pacc_pos=0.0,
        pacc_neg=0.0,
        calibration=calibration_map(center, weight_neg, weight_pos),
        map_smoothing=float(map_smoothing),
        weight_kind=weights_are,
    )
    return _rebuild(base, rows_neg, rows_pos, weight_neg, weight_pos)


def _rebuild(
    base: ReferenceModel,
    rows_neg: FloatArray,
    rows_pos: FloatArray,
    weight_neg: FloatArray,
    weight_pos: FloatArray,
    *,
    calibrate: bool = True,
) -> ReferenceModel:
    """The reference recomputed from (possibly resampled) fine counts on the same grid.

    ``calibrate=False`` keeps ``base``'s Platt fit and PACC means (replicates of methods that
    do not use them).
    """
    bounds = base.cell_bounds
    pooled = _cell_sum(weight_neg + weight_pos, bounds)
    balanced = _cell_sum(_balanced_mass(base.fine_weight_neg, base.fine_weight_pos), bounds)
    sums = _cell_sum(base.fine_center * (weight_neg + weight_pos), bounds)
    mids = 0.5 * (
        base.logit_low
        + _fine_width(base) * bounds[:-1]
        + base.logit_low
        + _fine_width(base) * bounds[1:]
    )
    cell_center = _weighted_center(sums, pooled, mids)
    mass_neg = _smoothed_mass(_cell_sum(weight_neg, bounds), balanced, base.smoothing)
    mass_pos = _smoothed_mass(_cell_sum(weight_pos, bounds), balanced, base.smoothing)
    widths = np.diff(base.cell_edges)
    safe_widths = np.where(widths > 0.0, widths, 1.0)
    platt, pacc_pos, pacc_neg = base.platt, base.pacc_pos, base.pacc_neg
    if calibrate:
        unit = _weight_unit(  # the rows' unit, as the reference's smoothing counts it
            base.weight_kind,
            float(weight_neg.sum()) + float(weight_pos.sum()),
            float(rows_neg.sum()) + float(rows_pos.sum()),
        )
        platt = _grouped_platt(base.fine_center, weight_neg, weight_pos, unit=unit)
        pacc_pos, pacc_neg = _pacc_means(platt, base.fine_center, weight_neg, weight_pos)
    tpr, fpr = _rates_at(base.threshold_index, weight_neg, weight_pos)
    calibration = calibration_map(
        base.fine_center, weight_neg, weight_pos, platt=platt, smoothing=base.map_smoothing
    )
    total_pos = float(weight_pos.sum())
    threshold_u = base.logit_low + _fine_width(base) * base.threshold_index
    return replace(
        base,
        fine_rows_neg=rows_neg,
        fine_rows_pos=rows_pos,
        fine_weight_neg=weight_neg,
        fine_weight_pos=weight_pos,
        cell_center=cell_center,
        mass_neg=mass_neg,
        mass_pos=mass_pos,
        density_neg=mass_neg / safe_widths,
        density_pos=mass_pos / safe_widths,
        reference_prevalence=total_pos / (total_pos + float(weight_neg.sum())),
        platt=platt,
        threshold=_from_logit(threshold_u, base.score_kind),
        tpr=tpr,
        fpr=fpr,
        pacc_pos=pacc_pos,
        pacc_neg=pacc_neg,
        calibration=calibration,
    )


def _resample_fine(
    rows: FloatArray, weight: FloatArray, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """A bootstrap draw of fine-cell row counts; each drawn row gets its cell's mean weight."""
    n_rows = round(float(rows.sum()))
    if n_rows == 0:
        return rows, weight
    drawn = rng.multinomial(n_rows, rows / rows.sum()).astype(np.float64)
    mean_weight = np.where(rows > 0.0, weight / np.where(rows > 0.0, rows, 1.0), 0.0)
    return drawn, drawn * mean_weight


def _resample_units(
    weight: FloatArray, unit: float, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """A bootstrap draw of frequency-weighted fine cells: ``sum(weight) / unit`` rows drawn
    with probabilities ``weight / sum(weight)``, each of weight ``unit``.

    A row of weight k stands for k rows, so this is the bootstrap of the rows written out (for
    integer weights and ``unit`` 1 exactly the draw :func:`_resample_fine` makes of them)."""
    total = float(weight.sum())
    n_rows = round(total / unit)
    if n_rows == 0:
        return weight / unit, weight
    drawn = rng.multinomial(n_rows, weight / total).astype(np.float64)
    return drawn, drawn * unit


def _replicate_reference(
    ref: ReferenceModel, rng: np.random.Generator, *, calibrate: bool
) -> ReferenceModel:
    """A stratified bootstrap replicate of the reference on the same grid and cells: of its
    rows each with its weight (importance weights), or of the rows its frequency weights
    stand for."""
    if ref.weight_kind == "frequency":
        unit = _weight_unit(
            "frequency",
            float(ref.fine_weight_neg.sum()) + float(ref.fine_weight_pos.sum()),
            float(ref.fine_rows_neg.sum()) + float(ref.fine_rows_pos.sum()),
        )
        rows_neg, weight_neg = _resample_units(ref.fine_weight_neg, unit, rng)
        rows_pos, weight_pos = _resample_units(ref.fine_weight_pos, unit, rng)
    else:
        rows_neg, weight_neg = _resample_fine(ref.fine_rows_neg, ref.fine_weight_neg, rng)
        rows_pos, weight_pos = _resample_fine(ref.fine_rows_pos, ref.fine_weight_pos, rng)
    return _rebuild(ref, rows_neg, rows_pos, weight_neg, weight_pos, calibrate=calibrate)


# --------------------------------------------------------------------------------------------
# Target
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetCounts:
    """One batch reduced to fine-cell sums on a reference's grid (mergeable by addition).

    Built per chunk of rows by :func:`count_target` and added by :func:`merge_target_counts`;
    :func:`estimate_prevalence` takes it in place of the scores.

    Attributes
    ----------
    rows : ndarray of shape (n_fine,)
        Rows of positive weight per fine cell.
    weight : ndarray of shape (n_fine,)
        Weighted counts per fine cell.
    logit_sum : ndarray of shape (n_fine,)
        Weighted sum of the logit per fine cell.
    size : int
        Rows, whatever their weight.
    weight_square : float
        Sum of squared weights (Kish effective size).
    outside_weight : float
        Weight of the rows outside the reference's range.
    """

    rows: FloatArray
    weight: FloatArray
    logit_sum: FloatArray
    size: int
    weight_square: float
    outside_weight: float


def count_target(
    reference: ReferenceModel,
    target_scores: FloatArray,
    *,
    target_weight: FloatArray | None = None,
    group_codes: IntArray | None = None,
    n_groups: int = 1,
) -> tuple[TargetCounts, ...]:
    """One chunk of checked target rows reduced to :class:`TargetCounts`, one per group
    (``group_codes`` in ``[0, n_groups)``; all rows in group 0 without them).

    >>> rng = np.random.default_rng(0)
    >>> y = rng.random(1000) < 0.5
    >>> ref = fit_reference(np.where(y, rng.beta(5, 2, 1000), rng.beta(2, 5, 1000)), y)
    >>> a, b = count_target(ref, np.array([0.1, 0.9, 0.5]), group_codes=np.array([0, 1, 1]),
    ...                     n_groups=2)
    >>> a.size, b.size, float(b.rows.sum())
    (1, 2, 2.0)
    """
    n_fine = reference.n_fine
    w = np.ones(target_scores.shape[0]) if target_weight is None else target_weight
    codes = np.zeros(target_scores.shape[0], np.int64) if group_codes is None else group_codes
    u = _to_logit(target_scores, reference.score_kind, reference.eps)
    idx = fine_index(u, reference.logit_low, reference.logit_high, n_fine) + codes * n_fine
    size = n_groups * n_fine

    def per_group(values: FloatArray) -> FloatArray:
        result: FloatArray = _bincount(idx, values, size).reshape(n_groups, n_fine)
        return result

    rows = per_group((w > 0.0).astype(np.float64))
    weight = per_group(w)
    logit_sum = per_group(w * u)
    sizes = np.bincount(codes, minlength=n_groups)
    squares = _bincount(codes, w * w, n_groups)
    outside = (u < reference.logit_low) | (u > reference.logit_high)
    outside_weight = _bincount(codes[outside], w[outside], n_groups)
    return tuple(
        TargetCounts(
            rows=rows[g],
            weight=weight[g],
            logit_sum=logit_sum[g],
            size=int(sizes[g]),
            weight_square=float(squares[g]),
            outside_weight=float(outside_weight[g]),
        )
        for g in range(n_groups)
    )


def merge_target_counts(parts: Sequence[TargetCounts]) -> TargetCounts:
    """Chunks' counts of one batch added in the order given."""
    if not parts:
        raise InputError("the target has no rows")
    rows = parts[0].rows.copy()
    weight = parts[0].weight.copy()
    logit_sum = parts[0].logit_sum.copy()
    size, square, outside = parts[0].size, parts[0].weight_square, parts[0].outside_weight
    for part in parts[1:]:
        rows += part.rows
        weight += part.weight
        logit_sum += part.logit_sum
        size += part.size
        square += part.weight_square
        outside += part.outside_weight
    return TargetCounts(rows, weight, logit_sum, size, square, outside)


def _target_counts_of(
    ref: ReferenceModel, target_scores: npt.ArrayLike, target_weight: npt.ArrayLike | None
) -> TargetCounts:
    """A batch's rows checked and counted in chunks of :data:`COUNT_CHUNK` rows."""
    x = check_scores(target_scores, kind=ref.score_kind)
    if x.size == 0:
        raise InputError("the target has no rows")
    w = check_weights(target_weight, x.shape[0])
    return merge_target_counts(
        [
            count_target(ref, x[i : i + COUNT_CHUNK], target_weight=w[i : i + COUNT_CHUNK])[0]
            for i in range(0, x.shape[0], COUNT_CHUNK)
        ]
    )


def _summarise_target(
    ref: ReferenceModel, target_scores: npt.ArrayLike, target_weight: npt.ArrayLike | None
) -> _TargetStats:
    """One O(n) pass: fine-cell row counts, weighted counts and mean logits of the batch."""
    return _target_stats(ref, _target_counts_of(ref, target_scores, target_weight))


def _target_stats(ref: ReferenceModel, counts: TargetCounts) -> _TargetStats:
    """A batch's counts as the statistics the estimators use."""
    if counts.size == 0:
        raise InputError("the target has no rows")
    if counts.rows.shape != (ref.n_fine,):
        raise InputError(
            f"target counts have {counts.rows.size} fine cells, the reference {ref.n_fine}"
        )
    n_rows = round(float(counts.rows.sum()))
    if n_rows == 0:
        raise InputError("the target has no rows with positive weight")
    center = _weighted_center(counts.logit_sum, counts.weight, ref.fine_center)
    total = float(counts.weight.sum())
    return _TargetStats(
        rows=counts.rows,
        weight=counts.weight,
        center=center,
        n_rows=n_rows,
        weight_total=total,
        n_eff=_kish(total, counts.weight_square),
        outside=counts.outside_weight / total,
    )


def _replicate_target(stats: _TargetStats, rng: np.random.Generator) -> _TargetStats:
    rows, weight = _resample_fine(stats.rows, stats.weight, rng)
    return replace(stats, rows=rows, weight=weight, weight_total=float(weight.sum()))


# --------------------------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------------------------


def _mixture_mle(counts: FloatArray, p0: FloatArray, p1: FloatArray) -> tuple[float, int, bool]:
    """argmax over [0, 1] of sum c log((1 - a) p0 + a p1), with p0, p1 > 0.

    Returns the maximiser, the root-finder's iterations and whether the likelihood is flat
    (p0 == p1 on every occupied cell, so every alpha fits equally well; then 0 is returned).
    """
    used = counts > 0.0
    c, q0, q1 = counts[used], p0[used], p1[used]
    diff = q1 - q0
    if not np.any(np.abs(diff) > 1e-12 * np.maximum(q0, q1)):
        return 0.0, 0, True

    def slope(a: float) -> float:
        return float(np.sum(c * diff / ((1.0 - a) * q0 + a * q1)))

    if slope(0.0) <= 0.0:
        return 0.0, 0, False
    if slope(1.0) >= 0.0:
        return 1.0, 0, False
    root, info = brentq(
        slope, 0.0, 1.0, xtol=1e-300, rtol=4.0 * np.finfo(float).eps, maxiter=500, full_output=True
    )
    return float(root), int(info.iterations), False


def _mixture_residual(counts: FloatArray, p0: FloatArray, p1: FloatArray, a: float) -> float:
    """Projected Newton step at ``a`` of the mean log-likelihood ``sum c log((1-a) p0 + a p1)``.

    With :math:`d = p_1 - p_0` and :math:`m = (1-a) p_0 + a p_1`: slope
    :math:`\\sum c\\, d / m / C`, curvature :math:`\\sum c\\, d^2 / m^2 / C` (:math:`C = \\sum c`);
    the step is the distance to the maximiser over [0, 1] to second order, 0 at a KKT point.
    """
    used = counts > 0.0
    c, q0, q1 = counts[used], p0[used], p1[used]
    if c.size == 0:
        return 0.0
    diff = q1 - q0
    mix = (1.0 - a) * q0 + a * q1
    total = float(c.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = float(np.sum(c * diff / mix)) / total
        curvature = float(np.sum(c * (diff / mix) ** 2)) / total
    return newton_distance(a, slope, curvature)


def _checked_mle(counts: FloatArray, p0: FloatArray, p1: FloatArray) -> _Point:
    """:func:`_mixture_mle` with its own criterion: Newton distance at most ``ROOT_TOL``.

    A root that fails it (it should not: bracketing keeps the root inside its bracket) is
    polished once, by bracketing again around it.
    """
    a, n_iter, flat = _mixture_mle(counts, p0, p1)
    if flat:
        return _Point(prevalence=a, converged=True, n_iter=n_iter, flat=True)
    res = _mixture_residual(counts, p0, p1, a)
    if not res <= ROOT_TOL:
        used = counts > 0.0
        c, q0, q1 = counts[used], p0[used], p1[used]

        def slope(x: float) -> float:
            return float(np.sum(c * (q1 - q0) / ((1.0 - x) * q0 + x * q1)))

        width = min(res, 1.0) if math.isfinite(res) else 1.0
        lo, hi = max(0.0, a - 2.0 * width), min(1.0, a + 2.0 * width)
        if slope(lo) > 0.0 > slope(hi):
            root, info = brentq(slope, lo, hi, xtol=1e-300, maxiter=500, full_output=True)
            a, n_iter = float(root), n_iter + int(info.iterations)
            res = _mixture_residual(counts, p0, p1, a)
    return _Point(prevalence=a, converged=res <= ROOT_TOL, n_iter=n_iter, residual=res)


def _loglik(counts: FloatArray, p0: FloatArray, p1: FloatArray, a: float) -> float:
    used = counts > 0.0
    mix = (1.0 - a) * p0[used] + a * p1[used]
    return float(np.sum(counts[used] * el.log(mix)))  # counts[used] > 0: no 0 log 0


def _estimate_mle(ref: ReferenceModel, stats: _TargetStats) -> _Point:
    counts = _cell_sum(stats.weight, ref.cell_bounds)
    return _checked_mle(counts, ref.mass_neg, ref.mass_pos)


def _estimate_em(
    ref: ReferenceModel, stats: _TargetStats, *, tol: float, max_iter: int, iterate: bool
) -> _Point:
    """Saerens et al. EM on the fine cells; ``iterate=False`` solves its fixed point exactly.

    The fixed point maximises :math:`\\ell(a) = \\sum c \\log(1 - a + a r)`; EM's step is
    :math:`a (1 - a) \\ell'(a)`. Converged when the projected Newton step of :math:`\\ell`
    (:func:`_mixture_residual`) is at most ``tol``, checked before each update and at the
    returned point. EM never stops early, so there is nothing to restart: ``max_iter`` is its
    whole budget.
    """
    used = stats.weight > 0.0
    c = stats.weight[used]
    ratio = el.exp(_platt_log_ratio(ref.platt, stats.center[used], ref.reference_prevalence))
    ones = np.ones_like(ratio)
    if not iterate:
        return _checked_mle(c, ones, ratio)
    flat = bool(np.all(np.abs(ratio - 1.0) <= 1e-12))
    total = float(c.sum())
    a = ref.reference_prevalence
    n_iter = 0
    res = _mixture_residual(c, ones, ratio, a)
    while not res <= tol and n_iter < max_iter:
        n_iter += 1
        a = min(max(float(np.sum(c * (a * ratio / (1.0 - a + a * ratio)))) / total, 0.0), 1.0)
        res = _mixture_residual(c, ones, ratio, a)
    return _Point(
        prevalence=a, converged=res <= tol, n_iter=n_iter, flat=flat, residual=0.0 if flat else res
    )


def _estimate_acc(ref: ReferenceModel, stats: _TargetStats, threshold_index: int) -> _Point:
    tpr, fpr = _rates_at(threshold_index, ref.fine_weight_neg, ref.fine_weight_pos)
    cc = float(stats.weight[threshold_index:].sum()) / float(stats.weight.sum())
    gap = tpr - fpr
    threshold_u = ref.logit_low + _fine_width(ref) * threshold_index
    threshold = _from_logit(threshold_u, ref.score_kind)
    if gap <= 0.0:
        return _Point(min(max(cc, 0.0), 1.0), True, 0, True, threshold, gap)
    a = (cc - fpr) / gap
    return _Point(min(max(a, 0.0), 1.0), True, 0, False, threshold, gap)


def _pcc(ref: ReferenceModel, stats: _TargetStats, prior: float | None = None) -> float:
    """Weighted mean of the reference-calibrated posterior at the fine cells' mean logits
    (with ``prior``: the map moved from the reference's prevalence to that one)."""
    log_odds = _map_log_odds(ref.calibration, stats.center)
    if prior is not None:
        log_odds = log_odds + _safe_logit(prior) - _safe_logit(ref.calibration.prior)
    r = el.sigmoid(log_odds)
    return dot(r, stats.weight) / stats.weight_total


def _replicate_prior(ref: ReferenceModel, rng: np.random.Generator) -> float:
    """The reference prevalence of an unstratified bootstrap replicate: a binomial draw of
    the Kish effective number of reference rows (kept off 0 and 1 by half a row).

    The interval's bootstrap is stratified (class totals fixed), which is right for the
    class-conditional densities but leaves out the sampling error of the reference's rate,
    and PCC moves with that rate: each replicate's PCC moves its calibration map to this
    prevalence. Without it the spread of ``prevalence - pcc`` came out about 20% too small
    (3,000-row batches and reference, no shift: 5% of batches beyond 2.576 standard
    errors instead of 1%; with it 1.7% of 120)."""
    weight_neg = float(ref.fine_weight_neg.sum())
    weight_pos = float(ref.fine_weight_pos.sum())
    square = weight_neg**2 / ref.n_eff_neg + weight_pos**2 / ref.n_eff_pos
    n_eff = max(1, round((weight_neg + weight_pos) ** 2 / square))
    drawn = float(rng.binomial(n_eff, ref.reference_prevalence)) / n_eff
    half = 0.5 / n_eff
    return min(max(drawn, half), 1.0 - half)


def _estimate_pacc(ref: ReferenceModel, stats: _TargetStats) -> _Point:
    p = apply_platt(ref.platt, stats.center)
    pcc = dot(p, stats.weight) / float(stats.weight.sum())
    gap = ref.pacc_pos - ref.pacc_neg
    if gap <= 0.0:
        return _Point(min(max(pcc, 0.0), 1.0), True, 0, True, None, gap)
    a = (pcc - ref.pacc_neg) / gap
    return _Point(min(max(a, 0.0), 1.0), True, 0, False, None, gap)


def _map_setup(
    ref: ReferenceModel, map_nodes: int | npt.ArrayLike, beta: float, power: float
) -> _MapSetup:
    if isinstance(map_nodes, int | np.integer) and not isinstance(map_nodes, bool):
        nodes = shift_map.uniform_nodes(int(map_nodes))
    else:
        nodes = shift_map.check_nodes(np.asarray(map_nodes, dtype=np.float64))
    if not (math.isfinite(beta) and beta >= 0.0):
        raise InputError(f"map_beta must be a non-negative number, got {beta!r}")
    if not (math.isfinite(power) and power >= 1.0):
        raise InputError(f"map_power must be a number >= 1, got {power!r}")
    edges = ref.cell_edges
    cell_basis = shift_map.BandedBasis.of(
        shift_map.cdf_basis(edges[1:], nodes) - shift_map.cdf_basis(edges[:-1], nodes)
    )
    fine_edges = _fine_edges_prob(ref)
    fine_basis = shift_map.BandedBasis.of(
        shift_map.cdf_basis(fine_edges[1:], nodes) - shift_map.cdf_basis(fine_edges[:-1], nodes)
    )
    prior_basis = shift_map.interp_basis(el.sigmoid(ref.fine_center), nodes)
    reference_fit = shift_map.fit_piecewise_linear(ref.fine_weight_pos, fine_basis, nodes)
    return _MapSetup(
        nodes,
        cell_basis,
        fine_basis,
        prior_basis,
        reference_fit,
        ref.fine_weight_pos,
        float(beta),
        float(power),
        shift_map.BandedBasis.of(prior_basis),
    )


def replicate_tol(n_eff: float) -> float:
    """Residual tolerance of a bootstrap replicate's fit over ``n_eff`` effective rows:
    ``REPLICATE_SHARE / sqrt(n_eff)``, at least ``shift_map.TOL`` (see ``REPLICATE_SHARE``).

    >>> round(replicate_tol(10_000), 12), replicate_tol(1e20) == shift_map.TOL
    (0.0005, True)
    """
    return max(shift_map.TOL, REPLICATE_SHARE / math.sqrt(max(n_eff, 1.0)))


def _estimate_map(
    ref: ReferenceModel,
    stats: _TargetStats,
    setup: _MapSetup,
    start: float,
    start_fit: MapFit | None = None,
) -> _Point:
    """``map`` on one (reference, batch) pair; a bootstrap replicate passes ``start_fit``.

    A replicate starts from the point estimate's reference density and fit (warm start), and
    is solved to :func:`replicate_tol` of its rows: a few percent of its sampling spread.
    """
    reference_fit = setup.reference_fit
    replicate = start_fit is not None
    tol = replicate_tol(stats.n_eff) if replicate else shift_map.TOL
    if ref.fine_weight_pos is not setup.fitted_on:  # a bootstrap replicate of the reference
        reference_fit = shift_map.fit_piecewise_linear(
            ref.fine_weight_pos,
            setup.fine_basis,
            setup.nodes,
            start=reference_fit.heights,
            tol=replicate_tol(ref.n_eff_pos) if replicate else shift_map.TOL,
        )
    counts = _cell_sum(stats.weight, ref.cell_bounds)
    prior_weights = ref.fine_weight_neg / float(ref.fine_weight_neg.sum())
    keep = prior_weights > 0.0
    a, fit, converged, n_iter = shift_map.fit_map(
        counts,
        ref.mass_neg,
        setup.cell_basis,
        prior_weights[keep],
        setup.prior.take(keep),
        reference_fit,
        beta=setup.beta,
        power=setup.power,
        start_prevalence=start,
        start_heights=None if start_fit is None else start_fit.heights,
        tol=tol,
    )
    return _Point(
        prevalence=a, converged=converged, n_iter=n_iter, map_fit=fit, residual=fit.residual
    )


def _estimate(
    method: EstimatedMethod,
    ref: ReferenceModel,
    stats: _TargetStats,
    *,
    threshold_index: int,
    setup: _MapSetup | None,
    em_tol: float,
    em_max_iter: int,
    iterate: bool,
    start: float,
    start_fit: MapFit | None = None,
) -> _Point:
    if method == "mle":
        return _estimate_mle(ref, stats)
    if method == "em":
        return _estimate_em(ref, stats, tol=em_tol, max_iter=em_max_iter, iterate=iterate)
    if method == "acc":
        return _estimate_acc(ref, stats, threshold_index)
    if method == "pacc":
        return _estimate_pacc(ref, stats)
    if setup is None:  # pragma: no cover - map always gets a setup
        raise InputError("map needs its node setup")
    return _estimate_map(ref, stats, setup, start, start_fit)


# --------------------------------------------------------------------------------------------
# Diagnostics
# --------------------------------------------------------------------------------------------


def _cvm(counts: FloatArray, model: FloatArray) -> float:
    """Discrete Cramér-von Mises distance sum_k (F_hat_k - F_k)^2 p_k (per row)."""
    empirical = np.cumsum(counts) / float(counts.sum())
    fitted = np.cumsum(model)
    return float(np.sum((empirical - fitted) ** 2 * model))


def _fit_test(
    ref: ReferenceModel,
    stats: _TargetStats,
    n_sim: int,
    rng: np.random.Generator,
    *,
    simulate_reference: bool,
) -> tuple[float, float]:
    """Cramér-von Mises statistic of the mle mixture and its parametric-bootstrap p-value."""
    counts = _cell_sum(stats.weight, ref.cell_bounds)
    a, _, _ = _mixture_mle(counts, ref.mass_neg, ref.mass_pos)
    model = (1.0 - a) * ref.mass_neg + a * ref.mass_pos
    n_target = max(1, round(stats.n_eff))
    statistic = n_target * _cvm(counts, model)
    if n_sim == 0:
        return statistic, math.nan
    balanced = _cell_sum(_balanced_mass(ref.fine_weight_neg, ref.fine_weight_pos), ref.cell_bounds)
    n_neg = max(1, round(ref.n_eff_neg))
    n_pos = max(1, round(ref.n_eff_pos))
    exceed = 0
    for _ in range(n_sim):
        if simulate_reference:
            sim_neg = _smoothed_mass(
                rng.multinomial(n_neg, ref.mass_neg).astype(np.float64),
                balanced,
                ref.smoothing * n_neg / float(ref.fine_weight_neg.sum()),
            )
            sim_pos = _smoothed_mass(
                rng.multinomial(n_pos, ref.mass_pos).astype(np.float64),
                balanced,
                ref.smoothing * n_pos / float(ref.fine_weight_pos.sum()),
            )
        else:
            sim_neg, sim_pos = ref.mass_neg, ref.mass_pos
        sim_counts = rng.multinomial(n_target, model).astype(np.float64)
        a_sim, _, _ = _mixture_mle(sim_counts, sim_neg, sim_pos)
        sim_model = (1.0 - a_sim) * sim_neg + a_sim * sim_pos
        if n_target * _cvm(sim_counts, sim_model) >= statistic:
            exceed += 1
    return statistic, (1.0 + exceed) / (n_sim + 1.0)


def _profile_interval(
    ref: ReferenceModel, stats: _TargetStats, a_hat: float, level: float
) -> tuple[float, float]:
    """{a : 2 (l(a_hat) - l(a)) <= chi2_1(level)} for the mle likelihood."""
    counts = _cell_sum(stats.weight, ref.cell_bounds)
    scale = stats.n_eff / stats.weight_total  # likelihood in effective rows
    cut = 0.5 * float(chdtri(1, 1.0 - level))  # the chi-square(1) quantile at `level`
    top = scale * _loglik(counts, ref.mass_neg, ref.mass_pos, a_hat)

    def drop(a: float) -> float:
        return top - scale * _loglik(counts, ref.mass_neg, ref.mass_pos, a) - cut

    low = 0.0 if drop(0.0) <= 0.0 else float(brentq(drop, 0.0, a_hat, xtol=1e-14))
    high = 1.0 if drop(1.0) <= 0.0 else float(brentq(drop, a_hat, 1.0, xtol=1e-14))
    return low, high


# --------------------------------------------------------------------------------------------
# Public estimator
# --------------------------------------------------------------------------------------------


def _check_method(method: str) -> ShiftMethod:
    for choice in ("auto", "mle", "em", "acc", "pacc", "map"):
        if method == choice:
            return choice
    raise InputError(f"method must be one of {', '.join(_METHODS)}, got {method!r}")


def _threshold_index(ref: ReferenceModel, threshold: float | None) -> int:
    if threshold is None:
        return ref.threshold_index
    value = float(threshold)
    if not math.isfinite(value):
        raise InputError(f"threshold must be a finite number, got {threshold!r}")
    if ref.score_kind == "probability":
        if not 0.0 <= value <= 1.0:
            raise InputError(f"threshold must be in [0, 1] for probability scores, got {value!r}")
        value = float(el.log_odds(min(max(value, ref.eps), 1.0 - ref.eps)))
    index = round((value - ref.logit_low) / _fine_width(ref))
    return int(min(max(index, 0), ref.n_fine))


def estimate_prevalence(
    reference: ReferenceModel,
    target_scores: npt.ArrayLike | None = None,
    *,
    target_counts: TargetCounts | None = None,
    method: ShiftMethod = "auto",
    target_weight: npt.ArrayLike | None = None,
    n_bootstrap: int = 200,
    ci_level: float = 0.95,
    ci_method: CiMethod = "bootstrap",
    resample_reference: bool = True,
    rng: np.random.Generator | None = None,
    threshold: float | None = None,
    map_nodes: int | npt.ArrayLike = MAP_NODES,
    map_beta: float = MAP_BETA,
    map_power: float = MAP_POWER,
    em_tol: float = 1e-10,
    em_max_iter: int = 10_000,
) -> ShiftEstimate:
    """Estimate the positive rate of an unlabeled batch, with an interval and diagnostics.

    Parameters
    ----------
    reference : ReferenceModel
        From :func:`fit_reference`.
    target_scores : array-like of shape (n_rows,)
        Scores of the batch, of the reference's ``score_kind``.
    target_counts : TargetCounts, optional
        The batch already counted (:func:`count_target`, :func:`merge_target_counts`), in
        place of ``target_scores`` (and ``target_weight``): the streaming engine's route. The
        scores are counted the same way, so both routes give identical estimates.
    method : {"auto", "mle", "em", "acc", "pacc", "map"}, default "auto"
        Estimator (see the module notes). ``auto`` is ``mle`` whatever the data (no test
        switches it). (``mle`` rather than ``em``: the binned densities assume nothing about
        the scores' shape, while ``em`` relies on Platt scaling, which is biased when the
        likelihood ratio is not logistic in the score's logit, e.g. binormal scores of unequal
        variances.)
    target_weight : array-like of shape (n_rows,), optional
        Row weights of the batch.
    n_bootstrap : int, default 200
        Replicates for the percentile interval and for ``fit_pvalue`` (0: neither).
    ci_level : float, default 0.95
        Nominal coverage.
    ci_method : {"bootstrap", "profile"}, default "bootstrap"
        ``profile`` (``mle`` only) is the profile-likelihood interval, which ignores the
        reference's sampling error.
    resample_reference : bool, default True
        Resample the reference rows in the bootstrap too (and simulate them in the fit test).
    rng : numpy.random.Generator, optional
        Source of randomness; default ``np.random.default_rng(0)`` (reproducible).
    threshold : float, optional
        ``acc`` threshold in score units, rounded to the nearest fine-grid edge; default the
        reference's TPR - FPR maximiser.
    map_nodes : int or array-like, default 10
        ``map``: number of equal intervals of [0, 1] (probability scale), or the node
        positions themselves (0 first, 1 last).
    map_beta : float, default 1000
        ``map``: prior strength :math:`\\beta` (the prior is not scaled with the batch size, so
        the shape is freer in larger batches).
    map_power : float, default 1
        ``map``: prior power :math:`p \\ge 1`. The defaults trade adaptivity for bias: in the
        reference-001 scenario (50k rows, 2.3% positives whose score shape changed) they cut
        the error of ``mle`` by about a third and its calibration error by half, while under
        pure label shift ``map`` stays within about one ``mle`` error of the truth. A weaker
        prior (``map_beta=100, map_power=2``) adapts more (error cut by three quarters) but
        over-estimates by 0.02-0.05 on a batch of a few thousand rows whose shape did not
        change.
    em_tol, em_max_iter
        ``em`` stops when the prevalence moves by at most ``em_tol``, or after
        ``em_max_iter`` iterations (then ``converged`` is false, with a warning). Bootstrap
        replicates solve the same fixed-point equation by bracketing.

    Returns
    -------
    ShiftEstimate

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> y = rng.random(4000) < 0.3
    >>> ref = fit_reference(np.where(y, rng.beta(5, 2, 4000), rng.beta(2, 5, 4000)), y)
    >>> t = rng.random(3000) < 0.1
    >>> batch = np.where(t, rng.beta(5, 2, 3000), rng.beta(2, 5, 3000))
    >>> est = estimate_prevalence(ref, batch, method="mle", n_bootstrap=50)
    >>> round(est.prevalence, 2), est.ci_low < 0.1 < est.ci_high, est.method
    (0.09, True, 'mle')
    """
    requested = _check_method(method)
    n_bootstrap = _check_positive_int(n_bootstrap, "n_bootstrap", minimum=0)
    if not (math.isfinite(ci_level) and 0.0 < ci_level < 1.0):
        raise InputError(f"ci_level must be in (0, 1), got {ci_level!r}")
    if ci_method not in ("bootstrap", "profile"):
        raise InputError(f"ci_method must be bootstrap or profile, got {ci_method!r}")
    if not (math.isfinite(em_tol) and em_tol > 0.0):
        raise InputError(f"em_tol must be a positive number, got {em_tol!r}")
    em_max_iter = _check_positive_int(em_max_iter, "em_max_iter")
    if rng is None:
        rng = np.random.default_rng(0)
    ref = reference
    if target_counts is not None and target_scores is None:
        stats = _target_stats(ref, target_counts)
    elif target_scores is not None and target_counts is None:
        stats = _summarise_target(ref, target_scores, target_weight)
    else:
        raise InputError("estimate_prevalence needs target_scores or target_counts (one)")
    threshold_index = _threshold_index(ref, threshold)
    warnings: list[str] = []

    statistic, pvalue = _fit_test(
        ref, stats, n_bootstrap, rng, simulate_reference=resample_reference
    )
    # auto is mle whatever the data: see the module notes for why no test switches it.
    used: EstimatedMethod = "mle" if requested == "auto" else requested
    if ci_method == "profile" and used != "mle":
        raise InputError(f"ci_method 'profile' is only available for method mle, not {used}")

    return _estimate_and_interval(
        ref,
        stats,
        used,
        requested,
        warnings,
        statistic=statistic,
        pvalue=pvalue,
        n_bootstrap=n_bootstrap,
        ci_level=ci_level,
        ci_method=ci_method,
        resample_reference=resample_reference,
        rng=rng,
        threshold_index=threshold_index,
        map_nodes=map_nodes,
        map_beta=map_beta,
        map_power=map_power,
        em_tol=em_tol,
        em_max_iter=em_max_iter,
    )


def _estimate_and_interval(
    ref: ReferenceModel,
    stats: _TargetStats,
    used: EstimatedMethod,
    requested: ShiftMethod,
    warnings: list[str],
    *,
    statistic: float,
    pvalue: float,
    n_bootstrap: int,
    ci_level: float,
    ci_method: CiMethod,
    resample_reference: bool,
    rng: np.random.Generator,
    threshold_index: int,
    map_nodes: int | npt.ArrayLike,
    map_beta: float,
    map_power: float,
    em_tol: float,
    em_max_iter: int,
) -> ShiftEstimate:
    """The point estimate, its interval and the warnings."""
    setup = _map_setup(ref, map_nodes, map_beta, map_power) if used == "map" else None
    start = _estimate_mle(ref, stats).prevalence if used == "map" else 0.0
    point = _estimate(
        used,
        ref,
        stats,
        threshold_index=threshold_index,
        setup=setup,
        em_tol=em_tol,
        em_max_iter=em_max_iter,
        iterate=True,
        start=start,
    )

    ci_low = ci_high = math.nan
    difference_se = math.nan
    n_failed = 0
    draws = np.empty(0)
    if ci_method == "profile":
        ci_low, ci_high = _profile_interval(ref, stats, point.prevalence, ci_level)
    elif n_bootstrap > 0:
        draws = np.empty(n_bootstrap)
        differences = np.empty(n_bootstrap)
        # PCC's extra draws come from a child generator: the interval's draws are unchanged.
        prior_rng = rng.spawn(1)[0]
        for b in range(n_bootstrap):
            ref_b = (
                _replicate_reference(ref, rng, calibrate=used in ("em", "pacc"))
                if resample_reference
                else ref
            )
            stats_b = _replicate_target(stats, rng)
            rep = _estimate(
                used,
                ref_b,
                stats_b,
                threshold_index=threshold_index,
                setup=setup,
                em_tol=em_tol,
                em_max_iter=em_max_iter,
                iterate=False,
                start=point.prevalence,
                start_fit=point.map_fit,
            )
            draws[b] = rep.prevalence
            prior_b = _replicate_prior(ref, prior_rng) if resample_reference else None
            differences[b] = rep.prevalence - _pcc(ref_b, stats_b, prior_b)
            n_failed += int(not rep.converged)
        tail = 0.5 * (1.0 - ci_level)
        ci_low, ci_high = (float(v) for v in np.quantile(draws, [tail, 1.0 - tail]))
        ci_low = min(ci_low, point.prevalence)
        ci_high = max(ci_high, point.prevalence)
        if n_bootstrap > 1:
            difference_se = float(np.std(differences, ddof=1))
    else:
        warnings.append("n_bootstrap is 0: no interval and no fit_pvalue were computed")

    if stats.n_rows < FEW_ROWS_WARN and ci_method == "bootstrap" and n_bootstrap > 0:
        # The bootstrap of a handful of rows cannot vary enough: add the profile interval.
        mle_point = _estimate_mle(ref, stats).prevalence
        low, high = _profile_interval(ref, stats, mle_point, ci_level)
        ci_low, ci_high = min(ci_low, low), max(ci_high, high)
    prevalence = point.prevalence
    identifiable = (
        _auc_null_pvalue(ref.reference_auc, ref.n_eff_neg, ref.n_eff_pos) < IDENTIFIABILITY_LEVEL
    )
    if not identifiable and not point.flat:
        ci_low, ci_high = 0.0, 1.0
        warnings.append(
            "the reference AUC does not differ significantly from 0.5: the scores cannot tell "
            "positives from negatives, so any prevalence fits and the interval is [0, 1]"
        )
    one_cell = _one_cell(ref, stats)
    if not point.flat and one_cell:
        # The batch tells the density ratio at one score: the likelihood is monotone in the
        # prevalence, whose estimate is an end of [0, 1] however many rows say it; a batch of
        # one score (a model outage's default score, say) gets no confident number.
        ci_low, ci_high = 0.0, 1.0
    if point.flat:
        prevalence = ref.reference_prevalence
        ci_low, ci_high = 0.0, 1.0
        warnings.append(
            "the scores carry no information about the prevalence here (the reference "
            "positive and negative score distributions coincide where the batch lies): the "
            "estimate is the reference prevalence and the interval is [0, 1]"
        )
    if point.flat or not identifiable or stats.n_rows < FEW_ROWS_WARN:
        # no measure of sampling: a bootstrap of a handful of rows cannot vary enough
        difference_se = math.nan
    uninformative = point.flat or not identifiable or one_cell
    rows = _rows_rate(
        prevalence,
        draws,
        reference_prevalence=ref.reference_prevalence,
        uninformative=uninformative,
        profile=lambda: _profile_interval(ref, stats, prevalence, ci_level),
        floor=PREVALENCE_FLOOR,
    )
    rows_prevalence = rows.rate
    pcc = _pcc(ref, stats)
    difference = prevalence - pcc
    disagreement = difference / difference_se if difference_se > 0.0 else math.nan
    warnings.extend(_diagnostic_warnings(ref, stats, used, point, pvalue, n_failed, n_bootstrap))
    if rows_prevalence != prevalence:
        warnings.append(_rows_rate_warning(prevalence, rows, ci_level))
    if abs(disagreement) > DISAGREEMENT_Z:
        warnings.append(
            f"{used} says {prevalence:.4g}, PCC (the mean reference-calibrated probability) "
            f"{pcc:.4g}: {abs(disagreement):.1f} standard errors apart, more than sampling "
            f"explains (|disagreement| > {DISAGREEMENT_Z:.3g}). The scores alone cannot tell "
            f"why: {prevalence:.4g} is right if only the base rate changed (label shift), "
            f"{pcc:.4g} if only the mix of cases changed (covariate shift)"
        )
    return ShiftEstimate(
        prevalence=prevalence,
        ci_low=ci_low,
        ci_high=ci_high,
        reference_prevalence=ref.reference_prevalence,
        n=stats.n_rows,
        method=used,
        converged=point.converged,
        n_iter=point.n_iter,
        reference_auc=ref.reference_auc,
        fit_pvalue=pvalue,
        warnings=tuple(warnings),
        requested_method=requested,
        ci_method=ci_method,
        ci_level=float(ci_level),
        n_bootstrap=n_bootstrap,
        fit_statistic=statistic,
        threshold=point.threshold,
        tpr_minus_fpr=point.tpr_minus_fpr,
        map_fit=point.map_fit,
        residual=point.residual,
        pcc=pcc,
        pcc_difference=difference,
        pcc_difference_se=difference_se,
        disagreement=disagreement,
        rows_prevalence=rows_prevalence,
    )


@dataclass(frozen=True)
class _RowsRate:
    """:func:`rows_rate`'s rate and where it came from, for the warning that names it.

    The warning must say what the number is: the mean over replicates when some were drawn
    and left the end, else the midpoint of the profile-likelihood interval (whose bounds the
    report may not hold: ``--bootstrap 0`` reports no interval), else a floor.
    """

    rate: float
    source: Literal["estimate", "reference", "replicates", "profile", "floor"]
    n_replicates: int
    profile: tuple[float, float] | None = None


def rows_rate(
    prevalence: float,
    replicates: FloatArray,
    *,
    reference_prevalence: float,
    uninformative: bool,
    profile: Callable[[], tuple[float, float]] | None = None,
    floor: float = PREVALENCE_FLOOR,
) -> float:
    """The rate a batch's rows are recalibrated at (``ShiftEstimate.rows_prevalence``).

    The prior-shift formula at :math:`\alpha = 0` gives every row probability exactly 0,
    whatever its score (a fraud scored 0.93 included), and at :math:`\alpha = 1` exactly 1:
    an estimate at an end of [0, 1] says the rate is *small*, not that no row can be
    positive. So:

    * ``uninformative`` (the scores cannot tell the rate: interval [0, 1] by construction):
      the reference prevalence, i.e. the rows keep :math:`r(s)`, the only figure the data
      support;
    * ``prevalence`` strictly inside (0, 1): ``prevalence`` itself (nothing changes);
    * at 0 or 1: the mean of ``replicates`` (the bootstrap replicates' rates), the expected
      rate under the estimate's sampling uncertainty; if no replicate leaves the end (or
      there are none), the midpoint of the ``profile`` likelihood interval; at worst
      ``floor`` from the end. The result is strictly inside (0, 1).

    >>> rows_rate(0.0, np.array([0.0, 0.0, 0.002, 0.002]), reference_prevalence=0.1,
    ...           uninformative=False)
    0.001
    >>> rows_rate(0.03, np.array([0.02, 0.04]), reference_prevalence=0.1, uninformative=False)
    0.03
    >>> rows_rate(0.0, np.array([0.0, 0.9]), reference_prevalence=0.1, uninformative=True)
    0.1
    """
    return _rows_rate(
        prevalence,
        replicates,
        reference_prevalence=reference_prevalence,
        uninformative=uninformative,
        profile=profile,
        floor=floor,
    ).rate


def _rows_rate(
    prevalence: float,
    replicates: FloatArray,
    *,
    reference_prevalence: float,
    uninformative: bool,
    profile: Callable[[], tuple[float, float]] | None,
    floor: float,
) -> _RowsRate:
    """:func:`rows_rate`'s rule, keeping which branch gave the rate."""
    n = int(replicates.size)
    if uninformative:
        return _RowsRate(float(reference_prevalence), "reference", n)
    if 0.0 < prevalence < 1.0:
        return _RowsRate(float(prevalence), "estimate", n)
    mean = float(np.mean(replicates)) if n else math.nan
    if 0.0 < mean < 1.0:
        return _RowsRate(mean, "replicates", n)
    bounds = None
    if profile is not None:
        low, high = profile()
        bounds = (float(low), float(high))
        mid = 0.5 * (bounds[0] + bounds[1])
        if 0.0 < mid < 1.0:
            return _RowsRate(mid, "profile", n, bounds)
    return _RowsRate(floor if prevalence == 0.0 else 1.0 - floor, "floor", n, bounds)


def _rows_rate_warning(prevalence: float, rows: _RowsRate, ci_level: float) -> str:
    """The warning of a batch whose rows use another rate than its estimate, naming where
    that rate came from (the replicates, the profile interval with its bounds, or a floor)."""
    if rows.source == "reference":
        return (
            f"the rows are recalibrated at the reference prevalence {rows.rate:.4g}, not "
            f"at the estimate {prevalence:.4g}: the scores cannot tell this batch's rate, so "
            "'calibrated' is the reference-calibrated probability r(s) and the decisions are "
            "the static rule's; get labels for this batch, or a reference whose scores "
            "separate the classes"
        )
    end = "0" if prevalence == 0.0 else "1"
    s = "s" if rows.n_replicates != 1 else ""
    if rows.n_replicates == 0:
        no_replicate = "no bootstrap replicate was drawn"
    elif rows.n_replicates == 1:
        no_replicate = f"the one bootstrap replicate is {end} too"
    else:
        no_replicate = f"the {rows.n_replicates} bootstrap replicates are all {end} too"
    if rows.source == "replicates":
        origin = f"the mean rate over the {rows.n_replicates} bootstrap replicate{s}"
    elif rows.source == "profile" and rows.profile is not None:
        low, high = rows.profile
        origin = (
            f"the midpoint of the {100.0 * ci_level:g}% profile-likelihood interval "
            f"[{low:.4g}, {high:.4g}], as {no_replicate}"
        )
    else:
        interval = (
            "there is no profile-likelihood interval"
            if rows.profile is None
            else f"the profile-likelihood interval is [{rows.profile[0]:.4g}, "
            f"{rows.profile[1]:.4g}]"
        )
        origin = f"{abs(rows.rate - float(end)):.0e} from {end}, as {no_replicate} and {interval}"
    # A floor's rate is 1e-06 from the end: 4 digits would print 0.999999 as 1.
    rate = f"{rows.rate:.7g}" if rows.source == "floor" else f"{rows.rate:.4g}"
    return (
        f"the estimate is {end}, an end of [0, 1]: recalibrated at it every row would get "
        f"probability exactly {end} whatever its score, so the rows use {rate} "
        f"(rows_prevalence), {origin}; read the estimate with its interval, and check the "
        "flagged rows by hand or with labels"
    )


def _one_cell(ref: ReferenceModel, stats: _TargetStats) -> bool:
    """Whether a batch of more than one row has every row in one cell of the densities."""
    occupied = _cell_sum(stats.weight, ref.cell_bounds) > 0.0
    return stats.n_rows > 1 and int(occupied.sum()) == 1


def _cell_scores(ref: ReferenceModel, cell: int) -> str:
    """A cell of the densities as the scores it holds, in score units ("scores 0.48 to 1");
    the end cells hold the scores beyond the reference's range too."""
    width = _fine_width(ref)
    low = _from_logit(ref.logit_low + width * float(ref.cell_bounds[cell]), ref.score_kind)
    high = _from_logit(ref.logit_low + width * float(ref.cell_bounds[cell + 1]), ref.score_kind)
    first, last = cell == 0, cell == ref.n_cells - 1
    if ref.score_kind == "probability":
        low, high = (0.0 if first else low), (1.0 if last else high)
    elif first and last:
        return "every score"
    elif first:
        return f"scores up to {high:.4g}"
    elif last:
        return f"scores from {low:.4g} up"
    return f"scores {low:.4g} to {high:.4g}"


def _one_cell_warning(ref: ReferenceModel, stats: _TargetStats) -> str:
    """The warning of a batch in one cell of the densities (:func:`_one_cell`).

    The densities are piecewise constant on a few dozen cells, much coarser than the fine grid
    the batch is counted on: a batch of many distinct scores can fill one cell. The warning
    names the cell's scores and the batch's distinct scores as far as the fine grid tells them
    (at least one per occupied fine cell), and asks whether all scores are equal only when one
    fine cell holds them all.
    """
    cell = int(np.flatnonzero(_cell_sum(stats.weight, ref.cell_bounds) > 0.0)[0])
    fine = np.flatnonzero(stats.weight > 0.0)
    where = (
        f"every score of the batch falls in one cell of the densities, {_cell_scores(ref, cell)}"
    )
    consequence = (
        "the densities are constant across a cell, so the batch tells a single likelihood "
        "ratio, the estimate rests on it alone, and the interval is [0, 1]"
    )
    if fine.size == 1:
        at = _from_logit(float(stats.center[fine[0]]), ref.score_kind)
        return (
            f"{where}, and its {stats.n_rows} rows in one cell of the fine score grid, at about "
            f"{at:.4g} (are all scores equal?): {consequence}"
        )
    return (
        f"{where}, though its {stats.n_rows} rows hold at least {fine.size} distinct scores "
        f"({fine.size} cells of the fine score grid): {consequence}"
    )


def _diagnostic_warnings(
    ref: ReferenceModel,
    stats: _TargetStats,
    used: EstimatedMethod,
    point: _Point,
    pvalue: float,
    n_failed: int,
    n_bootstrap: int,
) -> list[str]:
    out: list[str] = []
    if ref.reference_auc < AUC_WARN:
        out.append(
            f"the reference AUC is {ref.reference_auc:.3f} (below {AUC_WARN}): the scores "
            "barely separate the classes, so the prevalence is weakly identifiable and its "
            "interval is wide"
        )
    if stats.n_rows < FEW_ROWS_WARN:
        out.append(
            f"the batch has only {stats.n_rows} row{'s' if stats.n_rows != 1 else ''}: the "
            "estimate is very uncertain"
        )
    if _one_cell(ref, stats):
        out.append(_one_cell_warning(ref, stats))
    if stats.outside > 0.01:
        out.append(
            f"{100.0 * stats.outside:.1f}% of the batch's weight lies outside the reference's "
            "score range; those rows are counted in the end cells"
        )
    if math.isfinite(pvalue) and pvalue < FIT_WARN_PVALUE:
        out.append(
            f"the batch is not explained by a change of base rate alone (fit_pvalue "
            f"{pvalue:.3g}): the score distribution of a class changed too"
        )
    if used in ("acc", "pacc") and point.tpr_minus_fpr is not None:
        gap = point.tpr_minus_fpr
        if gap <= 0.0:
            out.append(
                f"{used}: the reference rates do not separate the classes (difference "
                f"{gap:.3g}); the unadjusted count is reported"
            )
        elif gap < SEPARATION_WARN:
            out.append(
                f"{used}: TPR - FPR is only {gap:.3g} (below {SEPARATION_WARN}); the "
                "adjustment divides by it, so the estimate is unstable"
            )
    if not point.converged:
        out.append(
            f"{used} did not converge in {point.n_iter} iterations; the estimate is the last "
            "iterate"
        )
    if n_bootstrap > 0 and n_failed > 0.1 * n_bootstrap:
        out.append(
            f"{used} did not converge in {n_failed} of {n_bootstrap} bootstrap replicates; "
            "the interval may be unreliable"
        )
    return out


# --------------------------------------------------------------------------------------------
# Posterior under the new prior
# --------------------------------------------------------------------------------------------


def reference_posterior(reference: ReferenceModel, target_scores: npt.ArrayLike) -> FloatArray:
    """The reference-calibrated probability :math:`r(s)` of each row (no shift assumed).

    The reference's fine calibration map (:func:`calibration_map`) at each score: what the
    score meant on the reference. Its mean over a batch is PCC, and the *static* decision
    flags a row when it is at least the Bayes threshold.

    Examples
    --------
    >>> rng = np.random.default_rng(2)
    >>> y = rng.random(4000) < 0.5
    >>> ref = fit_reference(np.where(y, rng.beta(5, 2, 4000), rng.beta(2, 5, 4000)), y)
    >>> r = reference_posterior(ref, [0.2, 0.5, 0.8])
    >>> bool(r[0] < r[1] < r[2]), bool(abs(r[1] - 0.5) < 0.1)
    (True, True)
    """
    x = check_scores(target_scores, kind=reference.score_kind)
    u = _to_logit(x, reference.score_kind, reference.eps)
    result: FloatArray = el.sigmoid(_map_log_odds(reference.calibration, u))
    return result


def _map_shape_log_odds(reference: ReferenceModel, fit: MapFit, prior_shift: float) -> FloatArray:
    """``map``: the knots' log-odds with the change of the positive class's shape.

    The MAP density is identified by the batch only through its mass per cell, so the change
    is taken per cell, :math:`\\log((W P_{1k} + s b_k) / (W P_{1k}^{\\mathrm{ref}} + s b_k))`
    (the fitted and the reference's piecewise-linear densities integrated over cell :math:`k`,
    each with the reference histogram's pseudo-weight: :math:`W` the reference's positive
    weight, :math:`s` the smoothing, :math:`b_k` the balanced reference's share of the cell;
    so a cell where the reference's density is 0 gets a bounded change), interpolated
    linearly in the logit between the cells' centres (constant beyond the outer ones), and
    added to :math:`\\operatorname{logit} r + \\operatorname{logit}\\alpha -
    \\operatorname{logit}\\pi` at each knot; weighted pool-adjacent-violators then make the
    knots' log-odds non-decreasing."""
    calibration = reference.calibration
    edges = reference.cell_edges
    basis = shift_map.cdf_basis(edges[1:], fit.nodes) - shift_map.cdf_basis(edges[:-1], fit.nodes)
    balanced = _cell_sum(
        _balanced_mass(reference.fine_weight_neg, reference.fine_weight_pos),
        reference.cell_bounds,
    )
    pseudo = reference.smoothing * balanced
    total_pos = float(reference.fine_weight_pos.sum())
    fitted = np.maximum(rows_dot(basis, fit.heights), 0.0) * total_pos + pseudo
    original = np.maximum(rows_dot(basis, fit.reference_heights), 0.0) * total_pos + pseudo
    change = el.log(fitted) - el.log(original)
    at_knots = np.interp(calibration.knots, reference.cell_center, change)
    raw = np.clip(calibration.log_odds + prior_shift + at_knots, -_LOG_RATIO_CLIP, _LOG_RATIO_CLIP)
    result: FloatArray = isotonic_regression(raw, weights=calibration.weights, increasing=True).x
    return result


def posterior(
    reference: ReferenceModel,
    estimate: ShiftEstimate | float,
    target_scores: npt.ArrayLike,
    *,
    method: EstimatedMethod | None = None,
) -> FloatArray:
    """Calibrated probability of each row under the estimated prevalence.

    The prior-shift formula (Saerens et al. 2002) applied to the reference's fine calibration
    map :math:`r(s)` (:func:`calibration_map`, calibrated at the reference prevalence
    :math:`\\pi`):

    .. math::

        p'(s) = \\frac{a\\,r(s)}{a\\,r(s) + b\\,(1 - r(s))}, \\qquad
        a = \\alpha / \\pi, \\quad b = (1 - \\alpha) / (1 - \\pi),

    i.e. :math:`\\operatorname{logit} p' = \\operatorname{logit} r + \\operatorname{logit}
    \\alpha - \\operatorname{logit}\\pi`, for every method. ``map`` also changed the positive
    class's score density: its odds are multiplied by :math:`f_1(z) / f_1^{\\mathrm{ref}}(z)`
    (the fitted and the reference's piecewise-linear densities) at the map's knots, made
    non-decreasing. The result is continuous and non-decreasing in the score (linear in
    log-odds between the map's knots), and with :math:`\\alpha = \\pi` it is :math:`r(s)`
    (:func:`reference_posterior`).

    Parameters
    ----------
    reference : ReferenceModel
    estimate : ShiftEstimate or float
        An estimate (its ``rows_prevalence``, its ``method``, and for ``map`` its density), or
        a prevalence in [0, 1].
    target_scores : array-like of shape (n_rows,)
    method : {"mle", "em", "acc", "pacc"}, optional
        Required when ``estimate`` is a number (the formula is the same for these four);
        ``map`` needs a ``ShiftEstimate``.

    Returns
    -------
    ndarray of shape (n_rows,)

    Examples
    --------
    Hand-worked: a reference of 16 rows (:math:`\\pi = 0.5`), 8 scored 0.2 of which 2 are
    positive (:math:`r = 0.25`) and 8 scored 0.8 of which 6 are (:math:`r = 0.75`). At
    :math:`\\alpha = 0.2`, :math:`a = 0.4`, :math:`b = 1.6`, so a score of 0.8 becomes
    :math:`0.3 / (0.3 + 0.4) = 0.4286` and one of 0.2 becomes :math:`0.1 / (0.1 + 1.2) =
    0.0769`.

    >>> ref = fit_reference([0.2] * 8 + [0.8] * 8, [1, 1] + [0] * 6 + [1] * 6 + [0, 0],
    ...     map_smoothing=1e-9)
    >>> np.round(reference_posterior(ref, [0.2, 0.8]), 4).tolist()
    [0.25, 0.75]
    >>> np.round(posterior(ref, 0.2, [0.2, 0.8], method="mle"), 4).tolist()
    [0.0769, 0.4286]
    """
    fit: MapFit | None = None
    if isinstance(estimate, ShiftEstimate):
        alpha = estimate.rows_prevalence
        if math.isnan(alpha):
            alpha = estimate.prevalence
        if estimate.method == "map":
            fit = estimate.map_fit
    else:
        alpha = float(estimate)
        if method is None:
            raise InputError("posterior needs method= when the estimate is a number")
        if method == "map":
            raise InputError("posterior with method map needs the ShiftEstimate (its density)")
        if method not in ("mle", "em", "acc", "pacc"):
            raise InputError(f"method must be one of mle, em, acc, pacc, got {method!r}")
    if not (math.isfinite(alpha) and 0.0 <= alpha <= 1.0):
        raise InputError(f"prevalence must be in [0, 1], got {alpha!r}")
    x = check_scores(target_scores, kind=reference.score_kind)
    u = _to_logit(x, reference.score_kind, reference.eps)
    if alpha == 0.0:
        return np.zeros_like(u)
    if alpha == 1.0:
        return np.ones_like(u)
    shift = _safe_logit(alpha) - _safe_logit(reference.calibration.prior)
    calibration = reference.calibration
    if fit is None:
        log_odds = calibration.log_odds + shift
    else:
        log_odds = _map_shape_log_odds(reference, fit, shift)
    result: FloatArray = el.sigmoid(np.interp(u, calibration.knots, log_odds))
    return result


# --------------------------------------------------------------------------------------------
# Decisions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecisionCosts:
    """Expected (and, with labels, realised) cost per row of two decision rules.

    Both rules flag a row when its calibrated probability is at least ``threshold``; the
    *static* rule uses the reference-calibrated probability, the *shifted* rule the probability
    under the estimated prevalence. Expected costs take the shifted probabilities as
    :math:`P(y = 1)` for every row (no labels needed).

    Attributes
    ----------
    threshold : float
        Bayes-optimal threshold ``cost_fp / (cost_fp + cost_fn)``.
    cost_fp, cost_fn : float
        Cost of a false positive and of a false negative.
    expected_cost_static, expected_cost_shifted : float
        Expected cost per row of each rule.
    flagged_static, flagged_shifted : float
        Weighted share of rows each rule flags.
    realised_cost_static, realised_cost_shifted : float or None
        Cost per row against the labels, when labels are given.
    """

    threshold: float
    cost_fp: float
    cost_fn: float
    expected_cost_static: float
    expected_cost_shifted: float
    flagged_static: float
    flagged_shifted: float
    realised_cost_static: float | None = None
    realised_cost_shifted: float | None = None


def _check_costs(cost_fp: float, cost_fn: float) -> tuple[float, float]:
    fp, fn = float(cost_fp), float(cost_fn)
    if not (math.isfinite(fp) and fp >= 0.0 and math.isfinite(fn) and fn >= 0.0):
        raise InputError(f"costs must be non-negative numbers, got FP={cost_fp!r}, FN={cost_fn!r}")
    if fp + fn <= 0.0:
        raise InputError("costs FP and FN cannot both be zero")
    return fp, fn


def bayes_threshold(cost_fp: float, cost_fn: float) -> float:
    """The Bayes-optimal threshold on a calibrated probability: ``FP / (FP + FN)``.

    Flagging a row of probability :math:`c` costs :math:`(1 - c)\\,FP` in expectation, passing
    it :math:`c\\,FN`; flagging is cheaper exactly when :math:`c \\ge FP / (FP + FN)`
    (reference 001, "Precision, Risk Thresholds and Loss Functions").

    >>> round(bayes_threshold(0.05, 1.0), 4)
    0.0476
    """
    fp, fn = _check_costs(cost_fp, cost_fn)
    return fp / (fp + fn)


def expected_cost(
    decisions: npt.ArrayLike,
    y_prob: npt.ArrayLike,
    *,
    cost_fp: float,
    cost_fn: float,
    sample_weight: npt.ArrayLike | None = None,
) -> float:
    """Expected cost per row of decisions when ``y_prob`` is each row's P(y = 1).

    :math:`\\frac{1}{\\sum w} \\sum_i w_i [d_i (1 - p_i) FP + (1 - d_i) p_i FN]`.

    >>> expected_cost([1, 0], [0.9, 0.2], cost_fp=1.0, cost_fn=2.0)
    0.25
    """
    fp, fn = _check_costs(cost_fp, cost_fn)
    p = check_scores(y_prob, name="y_prob")
    d = check_labels(decisions, name="decision")
    require_same_length([d, p], ["decisions", "y_prob"])
    w = check_weights(sample_weight, p.shape[0])
    total = float(w.sum())
    if total <= 0.0:
        raise InputError("expected_cost needs rows with positive weight")
    return dot(w, d * (1.0 - p) * fp + (1.0 - d) * p * fn) / total


def realised_cost(
    decisions: npt.ArrayLike,
    y_true: npt.ArrayLike,
    *,
    cost_fp: float,
    cost_fn: float,
    sample_weight: npt.ArrayLike | None = None,
) -> float:
    """Cost per row of decisions against the labels: FP per false positive, FN per miss.

    >>> realised_cost([1, 0, 1], [1, 1, 0], cost_fp=1.0, cost_fn=2.0)
    1.0
    """
    fp, fn = _check_costs(cost_fp, cost_fn)
    y = check_labels(y_true)
    d = check_labels(decisions, name="decision")
    require_same_length([d, y], ["decisions", "y_true"])
    w = check_weights(sample_weight, y.shape[0])
    total = float(w.sum())
    if total <= 0.0:
        raise InputError("realised_cost needs rows with positive weight")
    return dot(w, d * (1.0 - y) * fp + (1.0 - d) * y * fn) / total


def decision_costs(
    static_prob: npt.ArrayLike,
    shifted_prob: npt.ArrayLike,
    *,
    cost_fp: float,
    cost_fn: float,
    y_true: npt.ArrayLike | None = None,
    sample_weight: npt.ArrayLike | None = None,
) -> DecisionCosts:
    """Compare the static and the re-estimated decision rule at the Bayes threshold.

    Parameters
    ----------
    static_prob : array-like of shape (n_rows,)
        Probabilities calibrated at the reference prior (e.g. ``posterior(ref,
        ref.reference_prevalence, scores, method="em")``).
    shifted_prob : array-like of shape (n_rows,)
        Probabilities under the estimated prevalence (:func:`posterior`).
    cost_fp, cost_fn : float
        Costs of a false positive and a false negative.
    y_true : array-like of shape (n_rows,), optional
        Labels, when known: adds the realised costs.
    sample_weight : array-like of shape (n_rows,), optional

    Returns
    -------
    DecisionCosts

    Examples
    --------
    >>> r = decision_costs([0.6, 0.4], [0.3, 0.1], cost_fp=1.0, cost_fn=1.0)
    >>> r.threshold, r.flagged_static, r.flagged_shifted, r.expected_cost_shifted
    (0.5, 0.5, 0.0, 0.2)
    """
    threshold = bayes_threshold(cost_fp, cost_fn)
    static = check_scores(static_prob, name="static_prob")
    shifted = check_scores(shifted_prob, name="shifted_prob")
    require_same_length([static, shifted], ["static_prob", "shifted_prob"])
    w = check_weights(sample_weight, static.shape[0])
    d_static = (static >= threshold).astype(np.float64)
    d_shifted = (shifted >= threshold).astype(np.float64)
    total = float(w.sum())
    if total <= 0.0:
        raise InputError("decision_costs needs rows with positive weight")
    realised_static: float | None = None
    realised_shifted: float | None = None
    if y_true is not None:
        realised_static = realised_cost(
            d_static, y_true, cost_fp=cost_fp, cost_fn=cost_fn, sample_weight=w
        )
        realised_shifted = realised_cost(
            d_shifted, y_true, cost_fp=cost_fp, cost_fn=cost_fn, sample_weight=w
        )
    expected_static = expected_cost(
        d_static, shifted, cost_fp=cost_fp, cost_fn=cost_fn, sample_weight=w
    )
    expected_shifted = expected_cost(
        d_shifted, shifted, cost_fp=cost_fp, cost_fn=cost_fn, sample_weight=w
    )
    return DecisionCosts(
        threshold=threshold,
        cost_fp=float(cost_fp),
        cost_fn=float(cost_fn),
        expected_cost_static=expected_static,
        expected_cost_shifted=expected_shifted,
        flagged_static=dot(w, d_static) / total,
        flagged_shifted=dot(w, d_shifted) / total,
        realised_cost_static=realised_static,
        realised_cost_shifted=realised_shifted,
    )


def merge_decision_costs(parts: Sequence[tuple[float, DecisionCosts]]) -> DecisionCosts:
    """Chunks' :func:`decision_costs` (each with its total weight) as those of all their rows:
    every figure is a per-row mean, so the whole is the weight-weighted mean of the parts,
    added in the order given.

    >>> a = decision_costs([0.6], [0.3], cost_fp=1.0, cost_fn=1.0)
    >>> b = decision_costs([0.4], [0.1], cost_fp=1.0, cost_fn=1.0)
    >>> merge_decision_costs([(1.0, a), (1.0, b)]).flagged_static
    0.5
    """
    if not parts:
        raise InputError("decision costs of no rows")
    total = 0.0
    for weight, _ in parts:
        total += weight
    first = parts[0][1]

    def mean(field: str) -> float | None:
        out = 0.0
        for weight, part in parts:
            value = getattr(part, field)
            if value is None:
                return None
            out += weight * float(value)
        return out / total

    def required(field: str) -> float:
        value = mean(field)
        return math.nan if value is None else value

    return replace(
        first,
        expected_cost_static=required("expected_cost_static"),
        expected_cost_shifted=required("expected_cost_shifted"),
        flagged_static=required("flagged_static"),
        flagged_shifted=required("flagged_shifted"),
        realised_cost_static=mean("realised_cost_static"),
        realised_cost_shifted=mean("realised_cost_shifted"),
    )
