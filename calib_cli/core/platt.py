"""Platt scaling: a logistic regression of the labels on the model's log-odds.

The fitted map is

.. math::

    p = \\sigma(\\text{intercept} + \\text{slope} \\cdot x), \\qquad
    x = \\begin{cases} \\operatorname{logit}(\\operatorname{clip}(s, \\varepsilon,
    1 - \\varepsilon)) & \\text{probability scores} \\\\ s & \\text{logit or raw scores,}
    \\end{cases}

with :math:`\\sigma` the logistic function (``scipy.special.expit``). The two coefficients
maximise the weighted Bernoulli log-likelihood

.. math::

    \\ell(a, c) = \\sum_i w_i \\,[\\, t_i \\log p_i + (1 - t_i) \\log(1 - p_i) \\,],

where the targets :math:`t_i` are the labels, or with Platt's target smoothing

.. math::

    t_+ = \\frac{N_+ + 1}{N_+ + 2}, \\qquad t_- = \\frac{1}{N_- + 2}

with :math:`N_\\pm` the rows of positives and negatives (Platt 1999, section 2.2), counted by
weight: a row of weight 2 is two rows, and weights below 1 on average count in units of their
mean (:func:`calib_cli.core.fit_support.check_weight_unit`), so weights normalised to sum to 1
give the targets, and the fit, of the same weights scaled to a mean of 1.

The fit is the project's one logistic solver (:func:`calib_cli.core.logistic.fit_logistic`):
Newton's method on standardised features, converged when the gradient of the mean loss there
has infinity norm at most ``tol``, checked at the returned point. When the
classes are (quasi-)separated by the score, the unsmoothed maximum-likelihood estimate does not
exist (the slope grows without bound); the fit detects that before iterating, reports
``separable=True`` and returns the finite fit with Platt's target smoothing instead, which is
the regularisation Platt proposed for exactly this case.

References
----------
J. Platt, "Probabilistic Outputs for Support Vector Machines and Comparisons to Regularized
Likelihood Methods", Advances in Large Margin Classifiers, 1999.
References/004: Platt scaling with Platt's target smoothing.
A. Albert and J. A. Anderson, "On the existence of maximum likelihood estimates in logistic
regression models", Biometrika 71, 1984 (separation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from calib_cli.core import elementary as el
from calib_cli.core.checks import (
    check_fit_data,
    check_score_kind,
    check_scores,
)
from calib_cli.core.fit_support import check_weight_unit
from calib_cli.core.logistic import fit_logistic
from calib_cli.errors import InputError
from calib_cli.types import FloatArray, ScoreKind

__all__ = ["PlattParams", "apply_platt", "fit_platt"]

_SCORE_KINDS = ("probability", "logit", "raw")


@dataclass(frozen=True)
class PlattParams:
    """A fitted Platt map ``p = expit(intercept + slope * x)``.

    Attributes
    ----------
    slope, intercept : float
        Coefficients of the logistic map on ``x`` (the logit of a probability score, or the
        logit/raw score itself).
    score_kind : {"probability", "logit", "raw"}
        What the scores were, and so how :func:`apply_platt` turns them into ``x``.
    converged : bool
        Whether the gradient of the mean log loss (standardised coordinates) is at most
        ``tol`` at the returned coefficients.
    n_iter : int
        Newton iterations used.
    separable : bool
        Whether the score (quasi-)separated the classes in the fit data; the fit then used
        Platt's target smoothing, because the plain maximum-likelihood slope is infinite.
    """

    kind: ClassVar[str] = "platt"

    slope: float
    intercept: float
    score_kind: ScoreKind
    converged: bool
    n_iter: int
    separable: bool


def _check_eps(eps: float, *, upper: float = 0.5, name: str = "eps") -> float:
    value = float(eps)
    if not (math.isfinite(value) and 0.0 < value < upper):
        raise InputError(f"{name} must be in (0, {upper}), got {eps!r}")
    return value


def _check_tol(tol: float, max_iter: int) -> tuple[float, int]:
    value = float(tol)
    if not (math.isfinite(value) and value > 0.0):
        raise InputError(f"tol must be a positive number, got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int | np.integer) or max_iter < 1:
        raise InputError(f"max_iter must be a positive integer, got {max_iter!r}")
    return value, int(max_iter)


def _is_separable(x: FloatArray, y: FloatArray, w: FloatArray) -> bool:
    """Whether a threshold on ``x`` (quasi-)separates the classes among rows of positive weight.

    In one dimension with an intercept, the maximum-likelihood estimate exists exactly when
    neither ``max(x | y=0) <= min(x | y=1)`` nor ``max(x | y=1) <= min(x | y=0)`` holds, unless
    ``x`` is constant (then the slope is simply zero).
    """
    used = w > 0.0
    pos = x[used & (y == 1.0)]
    neg = x[used & (y == 0.0)]
    lo = min(float(pos.min()), float(neg.min()))
    hi = max(float(pos.max()), float(neg.max()))
    if lo == hi:
        return False
    return bool(neg.max() <= pos.min() or pos.max() <= neg.min())


def _smoothed_targets(y: FloatArray, w: FloatArray, weight_unit: float) -> FloatArray:
    """Platt's targets: (N+ + 1) / (N+ + 2) for positives, 1 / (N- + 2) for negatives, with
    N+ and N- each class's weight in rows of weight ``weight_unit``
    (:func:`calib_cli.core.fit_support.check_weight_unit`).

    >>> y = np.array([1.0, 0.0, 0.0])
    >>> _smoothed_targets(y, np.array([2.0, 1.0, 1.0]), 1.0).tolist()
    [0.75, 0.25, 0.25]
    >>> _smoothed_targets(y, np.array([0.5, 0.25, 0.25]), 0.25).tolist()
    [0.75, 0.25, 0.25]
    """
    n_pos = float(np.sum(w[y == 1.0])) / weight_unit
    n_neg = float(np.sum(w[y == 0.0])) / weight_unit
    t_pos = (n_pos + 1.0) / (n_pos + 2.0)
    t_neg = 1.0 / (n_neg + 2.0)
    return np.where(y == 1.0, t_pos, t_neg)


def _platt_features(scores: FloatArray, score_kind: ScoreKind, eps: float) -> FloatArray:
    if score_kind == "probability":
        result: FloatArray = el.log_odds(np.clip(scores, eps, 1.0 - eps))
        return result
    return scores


def fit_platt(
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    score_kind: ScoreKind = "probability",
    target_smoothing: bool = False,
    eps: float = 1e-12,
    tol: float = 1e-10,
    max_iter: int = 100,
    weight_unit: float | None = None,
) -> PlattParams:
    """Fit Platt scaling: ``p = expit(intercept + slope * x)`` by weighted maximum likelihood.

    Parameters
    ----------
    scores : array-like of shape (n_rows,)
        Classifier scores: probabilities in [0, 1] (``score_kind="probability"``, then
        ``x = logit(clip(score, eps, 1 - eps))``) or logits/raw margins (``x = score``).
    y_true : array-like of shape (n_rows,)
        Binary labels (0/1 or booleans); both classes must carry positive weight.
    sample_weight : array-like of shape (n_rows,), optional
        Non-negative row weights; a row of weight 2 counts exactly as two rows of weight 1.
    score_kind : {"probability", "logit", "raw"}, default "probability"
        What the scores are.
    target_smoothing : bool, default False
        Fit to Platt's targets ``(N+ + 1)/(N+ + 2)`` and ``1/(N- + 2)`` instead of 1 and 0
        (rows counted by weight, in units of ``weight_unit``). Used automatically when the
        data are separable.
    eps : float, default 1e-12
        Probability scores are clipped to ``[eps, 1 - eps]`` before the logit. Pass the same
        value to :func:`apply_platt`.
    tol : float, default 1e-10
        Stop when every component of the gradient of the mean log loss (in standardised
        coordinates) is at most ``tol``.
    max_iter : int, default 100
        Maximum number of Newton iterations.
    weight_unit : float, optional
        The weight that counts as one row in ``N+`` and ``N-``: by default 1, or the mean
        positive weight when that is below 1
        (:func:`calib_cli.core.fit_support.check_weight_unit`), so any scale of weights below
        1 on average gives the same map. A fit on aggregated points (a summary's cells) passes
        the unit of the rows behind them.

    Returns
    -------
    PlattParams
        ``slope``, ``intercept``, ``score_kind``, ``converged``, ``n_iter``, ``separable``.

    Notes
    -----
    The loss is :math:`-\\sum_i w_i [t_i \\log p_i + (1 - t_i) \\log(1 - p_i)]` with
    :math:`p_i = \\sigma(c + a x_i)`; gradient :math:`\\sum_i w_i (p_i - t_i) (x_i, 1)`,
    Hessian :math:`\\sum_i w_i p_i (1 - p_i) (x_i, 1)(x_i, 1)^T`. Without target smoothing the
    result equals an unpenalised logistic regression on ``x`` (e.g. scikit-learn's
    ``LogisticRegression(C=np.inf)``). If a threshold on the score separates the classes, the
    maximum-likelihood slope is infinite: the fit reports ``separable=True`` and uses target
    smoothing, which has a finite optimum. The sign of ``slope`` is the sign of the difference
    between the weighted mean ``x`` of positives and of negatives, so the map is
    non-decreasing whenever the scores rank positives higher on average.

    References
    ----------
    J. Platt, "Probabilistic Outputs for Support Vector Machines and Comparisons to
    Regularized Likelihood Methods", 1999.

    Examples
    --------
    >>> params = fit_platt([0.1, 0.3, 0.3, 0.6, 0.8, 0.9], [0, 0, 1, 0, 1, 1])
    >>> params.converged, params.separable, params.slope > 0
    (True, False, True)
    >>> fit_platt([0.2, 0.4, 0.6, 0.8], [0, 0, 1, 1]).separable
    True
    """
    kind = check_score_kind(score_kind)
    eps = _check_eps(eps)
    tol, max_iter = _check_tol(tol, max_iter)
    raw, y, w = check_fit_data(scores, y_true, sample_weight, score_kind=kind)
    x = _platt_features(raw, kind, eps)
    unit = check_weight_unit(weight_unit, w)
    separable = _is_separable(x, y, w)
    targets = _smoothed_targets(y, w, unit) if (target_smoothing or separable) else y
    fit = fit_logistic(x[:, None], targets, w, tol=tol, max_iter=max_iter)
    return PlattParams(
        slope=float(fit.coef[0]),
        intercept=fit.intercept,
        score_kind=kind,
        converged=fit.converged,
        n_iter=fit.n_iter,
        separable=separable,
    )


def apply_platt(params: PlattParams, scores: npt.ArrayLike, *, eps: float = 1e-12) -> FloatArray:
    """Calibrated probabilities ``expit(intercept + slope * x)`` for new scores.

    Parameters
    ----------
    params : PlattParams
        A fitted map from :func:`fit_platt`.
    scores : array-like of shape (n_rows,)
        Scores of the same kind as at fit time (``params.score_kind``).
    eps : float, default 1e-12
        Clip for probability scores before the logit (use the value given to the fit).

    Returns
    -------
    ndarray of shape (n_rows,)
        Calibrated probabilities.

    Examples
    --------
    >>> params = PlattParams(slope=1.0, intercept=0.0, score_kind="probability",
    ...                      converged=True, n_iter=0, separable=False)
    >>> apply_platt(params, [0.25, 0.5]).round(12).tolist()
    [0.25, 0.5]
    """
    eps = _check_eps(eps)
    x = _platt_features(check_scores(scores, kind=params.score_kind), params.score_kind, eps)
    result: FloatArray = el.sigmoid(params.intercept + params.slope * x)
    return result
