"""Beta calibration (Kull, Silva Filho and Flach 2017).

The calibrated probability is a logistic regression on two features of the score ``p``:

.. math::

    \\operatorname{logit} q = a \\ln p - b \\ln(1 - p) + c, \\qquad a, b \\ge 0,

equivalently :math:`q = 1 / (1 + 1 / (e^c \\, p^a / (1 - p)^b))`. The family contains the
identity (``a = b = 1, c = 0``) and Platt scaling on the logit (``a = b``); with ``a, b >= 0``
it is non-decreasing in ``p``. Scores are clipped to ``[eps, 1 - eps]`` before the logarithms.

The paper fits an unconstrained logistic regression on the features ``[ln p, -ln(1 - p)]``
and, if a coefficient is negative, refits without that feature. This module returns the exact
constrained maximum-likelihood estimate, which contains that procedure: if the unconstrained
fit is feasible it is the answer; otherwise the optimum lies on a face of the constraint set,
so the fits with ``a = 0``, with ``b = 0`` and with ``a = b = 0`` are computed and the feasible
one with the lowest loss is kept (the paper's refit whenever that refit is feasible and best).

When a threshold on the score separates the classes, the maximum-likelihood estimate does not
exist (coefficients grow without bound); as for Platt scaling, the fit then uses Platt's target
smoothing (:mod:`calib_cli.core.platt`; its rows counted by weight, weights below 1 on average
in units of their mean), whose optimum is finite, and reports ``separable=True``.

References
----------
M. Kull, T. Silva Filho and P. Flach, "Beta calibration: a well-founded and easily
implemented improvement on logistic calibration for binary classifiers", AISTATS 2017.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from calib_cli.core import elementary as el
from calib_cli.core.checks import check_fit_data, check_scores
from calib_cli.core.fit_support import check_weight_unit
from calib_cli.core.logistic import LogisticFit, fit_logistic
from calib_cli.core.platt import _check_eps, _check_tol, _is_separable, _smoothed_targets
from calib_cli.types import FloatArray

__all__ = ["BetaParams", "apply_beta", "fit_beta"]


@dataclass(frozen=True)
class BetaParams:
    """A fitted beta calibration map ``q = expit(a ln p - b ln(1 - p) + c)``.

    Attributes
    ----------
    a, b : float
        Non-negative coefficients of ``ln p`` and ``-ln(1 - p)``.
    c : float
        Intercept.
    converged : bool
        Whether the fit that produced the coefficients (on its face of the constraint set)
        meets the gradient criterion of :func:`calib_cli.core.logistic.fit_logistic`.
    n_iter : int
        Newton iterations used, summed over the fits tried.
    separable : bool, default False
        Whether the score (quasi-)separated the classes in the fit data; the fit then used
        Platt's target smoothing, because the plain maximum-likelihood coefficients are
        infinite. (False for artifacts saved before it was recorded.)
    """

    kind: ClassVar[str] = "beta"

    a: float
    b: float
    c: float
    converged: bool
    n_iter: int
    separable: bool = False


def _beta_features(p: FloatArray, eps: float) -> FloatArray:
    """Columns ``ln p`` and ``-ln(1 - p)`` of the clipped scores, shape (n, 2)."""
    clipped = np.clip(p, eps, 1.0 - eps)
    return np.column_stack((el.log(clipped), -el.log1p(-clipped)))


def fit_beta(
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    eps: float = 1e-12,
    tol: float = 1e-10,
    max_iter: int = 100,
    weight_unit: float | None = None,
) -> BetaParams:
    """Fit beta calibration by weighted maximum likelihood with ``a, b >= 0``.

    Parameters
    ----------
    scores : array-like of shape (n_rows,)
        Probability scores in [0, 1] (logits or raw scores: apply ``expit`` first).
    y_true : array-like of shape (n_rows,)
        Binary labels (0/1 or booleans); both classes must carry positive weight.
    sample_weight : array-like of shape (n_rows,), optional
        Non-negative row weights; a row of weight 2 counts exactly as two rows of weight 1.
    eps : float, default 1e-12
        Scores are clipped to ``[eps, 1 - eps]`` before the logarithms (use the same value in
        :func:`apply_beta`).
    tol, max_iter
        Newton stopping rule (see :func:`calib_cli.core.platt.fit_platt`).
    weight_unit : float, optional
        The weight that counts as one row in the target smoothing of separable data (see
        :func:`calib_cli.core.platt.fit_platt`): by default 1, or the mean positive weight
        when that is below 1.

    Returns
    -------
    BetaParams
        ``a``, ``b``, ``c``, ``converged``, ``n_iter``, ``separable``.

    Notes
    -----
    Maximises :math:`\\sum_i w_i [y_i \\log q_i + (1 - y_i) \\log(1 - q_i)]` with
    :math:`\\operatorname{logit} q_i = a \\ln p_i - b \\ln(1 - p_i) + c` over ``a, b >= 0``
    (see the module docstring for how the constraint is handled). If a threshold on the score
    separates the classes, the fit reports ``separable=True`` and uses Platt's targets
    :math:`(N_+ + 1) / (N_+ + 2)` and :math:`1 / (N_- + 2)` instead of the labels.

    References
    ----------
    M. Kull, T. Silva Filho and P. Flach, "Beta calibration", AISTATS 2017, section 3.

    Examples
    --------
    >>> params = fit_beta([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9], [0, 0, 1, 0, 1, 0, 1, 1])
    >>> params.converged, params.a >= 0.0, params.b >= 0.0, params.separable
    (True, True, True, False)
    >>> fit_beta([0.2, 0.4, 0.6, 0.8], [0, 0, 1, 1]).separable
    True
    """
    eps = _check_eps(eps)
    tol, max_iter = _check_tol(tol, max_iter)
    p, y, w = check_fit_data(scores, y_true, sample_weight)
    unit = check_weight_unit(weight_unit, w)
    features = _beta_features(p, eps)
    separable = _is_separable(features[:, 0], y, w)
    targets = _smoothed_targets(y, w, unit) if separable else y

    def fit_face(columns: list[int]) -> LogisticFit:
        return fit_logistic(features[:, columns], targets, w, tol=tol, max_iter=max_iter)

    best = fit_face([0, 1])
    n_iter = best.n_iter
    coef = best.coef.copy()
    if np.any(coef < 0.0):
        # The optimum lies on a face: a = 0, b = 0, or both (always feasible; listed last).
        feasible: list[tuple[float, int, LogisticFit, list[int]]] = []
        for rank, columns in enumerate(([1], [0], [])):
            fit = fit_face(columns)
            n_iter += fit.n_iter
            if not np.any(fit.coef < 0.0):
                feasible.append((fit.loss, rank, fit, columns))
        _, _, best, columns = min(feasible, key=lambda item: (item[0], item[1]))
        coef = np.zeros(2)
        coef[columns] = best.coef
    return BetaParams(
        a=float(coef[0]),
        b=float(coef[1]),
        c=best.intercept,
        converged=best.converged,
        n_iter=n_iter,
        separable=separable,
    )


def apply_beta(params: BetaParams, scores: npt.ArrayLike, *, eps: float = 1e-12) -> FloatArray:
    """Calibrated probabilities ``expit(a ln p - b ln(1 - p) + c)`` for probability scores.

    Parameters
    ----------
    params : BetaParams
        A fitted map from :func:`fit_beta`.
    scores : array-like of shape (n_rows,)
        Probability scores in [0, 1].
    eps : float, default 1e-12
        Clip before the logarithms (use the value given to the fit).

    Returns
    -------
    ndarray of shape (n_rows,)
        Calibrated probabilities.

    Examples
    --------
    >>> identity = BetaParams(a=1.0, b=1.0, c=0.0, converged=True, n_iter=0)
    >>> apply_beta(identity, [0.2, 0.7]).round(12).tolist()
    [0.2, 0.7]
    """
    eps = _check_eps(eps)
    features = _beta_features(check_scores(scores), eps)
    result: FloatArray = el.sigmoid(
        params.c + params.a * features[:, 0] + params.b * features[:, 1]
    )
    return result
