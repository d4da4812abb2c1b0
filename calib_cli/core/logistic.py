"""The one weighted logistic-regression solver of calib (Platt, beta calibration, Cox slope).

It minimises the weighted mean log loss with fractional targets and an optional offset,

.. math::

    L(c, b) = \\frac{1}{W} \\sum_i w_i \\big[\\log(1 + e^{\\eta_i}) - t_i \\eta_i\\big],
    \\qquad \\eta_i = o_i + c + x_i^T b, \\qquad W = \\sum_i w_i,

with gradient :math:`\\frac1W \\sum_i w_i (p_i - t_i)(1, x_i)` and Hessian
:math:`\\frac1W \\sum_i w_i p_i (1 - p_i)(1, x_i)(1, x_i)^T`, :math:`p_i = \\sigma(\\eta_i)`.
Grouped data (one row per distinct score with its total weight :math:`w` and positive weight
:math:`w t`) give the same likelihood.

Method: Newton's method on standardised features (each feature centred and scaled to unit
weighted spread, so that one tolerance fits every scale), each step solving
:math:`(H + 10^{-14} I)\\, s = -g` (a tiny Levenberg-Marquardt ridge keeps it defined when
features are collinear on the data or rows are saturated). A step is shortened by halving
until it is accepted: when the directional derivative at the trial point is still
non-positive (the loss is convex, so it then fell along the whole step; this test needs no
loss difference, which rounding hides near the optimum), or when the Armijo decrease holds.
If no halving is accepted (the loss is flat to rounding), the one restart is a full Newton
step kept when it lowers the gradient's norm; then the fit stops.

Convergence, decided here and checked at the returned point: the infinity norm of the
gradient of the *mean* loss in the standardised coordinates is at most ``tol``. Each
component is a weighted covariance of the residual :math:`p - t` with a unit-spread feature,
so the criterion is the same for 100 rows or 10 million and for any scale of the score.
``max_iter`` caps the Newton iterations, the restart included. A converged fit takes one
more Newton step (kept when the gradient's norm does not grow): the error then falls from
about ``tol / curvature`` to rounding level, for the price of one iteration.

Covariance: ``covariance=True`` gives the inverse Fisher information, right when the weights are
frequency weights (a row of weight 2 is two rows). For importance (survey) weights,
:func:`sandwich_covariance` gives the robust (Huber-White) covariance
:math:`H^{-1} \big(\\sum_i w_i^2 g_i g_i^T\big) H^{-1}` from the same fit.

References
----------
J. Nocedal and S. J. Wright, *Numerical Optimization*, 2nd ed., 2006 (Newton's method with
line search, chapter 3). H. White, "A heteroskedasticity-consistent covariance matrix
estimator and a direct test for heteroskedasticity", Econometrica 48, 1980. T. Lumley,
*Complex Surveys*, 2010, section 6.1 (weighted logistic regression under survey weights).
D. R. Cox, "Two further applications of a model for binary
regression", Biometrika 45, 1958.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from calib_cli.core import elementary as el
from calib_cli.core.dots import dot, gram, inverse, matmul, rows_dot, solve, weighted_columns
from calib_cli.types import FloatArray

__all__ = ["LogisticFit", "fit_logistic", "loss_and_prob", "sandwich_covariance"]

_RIDGE = 1e-14  # added to the diagonal of the standardised Hessian (Levenberg-Marquardt)


@dataclass(frozen=True)
class LogisticFit:
    """A weighted logistic regression (see :func:`fit_logistic`).

    Attributes
    ----------
    coef : ndarray of shape (d,)
        Coefficients on the original features (0 for a feature constant on the data).
    intercept : float
        Intercept on the original features.
    loss : float
        Weighted mean log loss at the fit.
    converged : bool
        Whether ``residual <= tol``.
    n_iter : int
        Newton iterations, a restart included.
    residual : float
        Infinity norm of the gradient of the mean loss in standardised coordinates.
    covariance : ndarray of shape (d + 1, d + 1) or None
        Inverse Fisher information :math:`(\\sum_i w_i p_i (1 - p_i) (1, x_i)(1, x_i)^T)^{-1}`
        of ``(intercept, coef...)`` at the fit (Wald intervals; weights as counts), when asked
        for and the information is not numerically singular.
    """

    coef: FloatArray
    intercept: float
    loss: float
    converged: bool
    n_iter: int
    residual: float
    covariance: FloatArray | None = None


def loss_and_prob(
    z: FloatArray, t: FloatArray, w: FloatArray, total: float
) -> tuple[float, FloatArray, FloatArray]:
    """Weighted mean loss ``sum w (log(1 + e^z) - t z) / total``, ``p = expit(z)``, ``p (1 - p)``.

    All from one ``e = exp(-|z|)``: ``log(1 + e^z) = max(z, 0) + log1p(e)``,
    ``p = 1 / (1 + e)`` for ``z >= 0`` and ``e / (1 + e)`` otherwise, and
    ``p (1 - p) = e / (1 + e)^2`` (no overflow, no cancellation in ``1 - p``).

    >>> loss, p, v = loss_and_prob(np.array([0.0]), np.array([1.0]), np.array([1.0]), 1.0)
    >>> round(loss, 12), p.tolist(), v.tolist()
    (0.69314718056, [0.5], [0.25])
    """
    e = el.exp(-np.abs(z))
    softplus = np.maximum(z, 0.0) + el.log1p(e)
    loss = dot(w, softplus - t * z) / total
    inv = 1.0 / (1.0 + e)
    p = np.where(z >= 0.0, inv, e * inv)
    return loss, p, e * inv * inv


def fit_logistic(
    features: FloatArray,
    targets: FloatArray,
    weights: FloatArray,
    *,
    offset: FloatArray | None = None,
    start: FloatArray | None = None,
    tol: float = 1e-10,
    max_iter: int = 100,
    covariance: bool = False,
) -> LogisticFit:
    """Weighted logistic regression with intercept (and optional offset) by damped Newton.

    Parameters
    ----------
    features : ndarray of shape (n, d)
        Covariates (``d`` may be 0: an intercept-only model, e.g. with an offset).
    targets : ndarray of shape (n,)
        Targets in [0, 1] (fractional for Platt's smoothing or grouped rows).
    weights : ndarray of shape (n,)
        Non-negative weights; rows of weight 0 take no part (also not in the scaling).
    offset : ndarray of shape (n,), optional
        Known part of the linear predictor (coefficient fixed at 1).
    start : ndarray of shape (d + 1,), optional
        Starting ``(intercept, coef...)`` on the original features; default ``coef = 0`` and
        the intercept at the logit of the weighted mean target (without an offset) or 0.
    tol : float, default 1e-10
        Tolerance on the infinity norm of the gradient of the mean loss (standardised).
    max_iter : int, default 100
        Newton iterations, a restart included.
    covariance : bool, default False
        Also return the inverse Fisher information at the fit.

    Returns
    -------
    LogisticFit

    Examples
    --------
    >>> x = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> fit = fit_logistic(x, np.array([0.0, 1.0, 0.0, 1.0]), np.ones(4))
    >>> fit.converged, fit.residual <= 1e-10, round(float(fit.coef[0]), 6)
    (True, True, 0.908184)
    """
    if not np.all(weights > 0.0):
        used = weights > 0.0
        features, targets, weights = features[used], targets[used], weights[used]
        offset = None if offset is None else offset[used]
    d = features.shape[1]
    total = float(weights.sum())
    mean = weighted_columns(weights, features) / total
    centred = features - mean
    scale = np.sqrt(weighted_columns(weights, centred * centred) / total)
    # A feature with (numerically) zero spread is collinear with the intercept: coefficient 0.
    varying = (scale > 0.0) & (
        features.max(axis=0, initial=-np.inf) > features.min(axis=0, initial=np.inf)
    )
    z_feat = centred[:, varying] / scale[varying]
    k = z_feat.shape[1]
    base = np.zeros(targets.size) if offset is None else offset

    theta = np.zeros(k + 1)
    if start is not None:
        coef0 = np.asarray(start, dtype=np.float64)[1:]
        theta[:k] = coef0[varying] * scale[varying]
        theta[k] = float(start[0]) + dot(coef0[varying], mean[varying])
    elif offset is None:
        rate = min(max(dot(weights, targets) / total, 1e-300), 1.0 - 1e-16)
        theta[k] = math.log(rate) - math.log1p(-rate)

    def linear(th: FloatArray) -> FloatArray:
        out: FloatArray = rows_dot(z_feat, th[:k]) + th[k]
        return out

    def gradient(p: FloatArray) -> FloatArray:
        resid = weights * (p - targets)
        grad = np.empty(k + 1)
        grad[:k] = weighted_columns(resid, z_feat)
        grad[k] = resid.sum()
        return grad / total

    def hessian(p_q: FloatArray) -> FloatArray:
        curv = weights * p_q
        hess = np.empty((k + 1, k + 1))
        hess[:k, :k] = gram(z_feat, curv)
        hess[:k, k] = weighted_columns(curv, z_feat)
        hess[k, :k] = hess[:k, k]
        hess[k, k] = curv.sum()
        return hess / total

    z = base + linear(theta)
    loss, p, p_q = loss_and_prob(z, targets, weights, total)
    grad = gradient(p)
    n_iter = 0
    restarted = False
    while True:
        residual = float(np.max(np.abs(grad)))
        if residual <= tol or n_iter >= max_iter or not math.isfinite(residual):
            break
        n_iter += 1
        hess = hessian(p_q)
        hess[np.diag_indices(k + 1)] += _RIDGE
        step = solve(hess, -grad)
        dz = linear(step)
        slope = dot(grad, step)
        t = 1.0
        accepted = False
        while t >= 1e-16:
            trial_z = z + t * dz
            trial_loss, trial_p, trial_pq = loss_and_prob(trial_z, targets, weights, total)
            trial_grad = gradient(trial_p)
            # convex loss: a non-positive directional derivative at the trial point means the
            # loss fell along the whole step; else ask for the Armijo decrease
            if dot(trial_grad, step) <= 0.0 or trial_loss <= loss + 1e-4 * t * slope:
                accepted = True
                break
            t *= 0.5
        if not accepted:
            # Stalled at rounding level: the restart is one full Newton step judged by the
            # criterion itself (accepted when it lowers the gradient's norm), then stop.
            if restarted:
                break
            restarted = True
            t = 1.0
            trial_z = z + dz
            trial_loss, trial_p, trial_pq = loss_and_prob(trial_z, targets, weights, total)
            trial_grad = gradient(trial_p)
            if not float(np.max(np.abs(trial_grad))) < residual:
                break
        theta = theta + t * step
        z, loss, p, p_q, grad = trial_z, trial_loss, trial_p, trial_pq, trial_grad
    residual = float(np.max(np.abs(grad)))
    if residual <= tol and n_iter < max_iter:
        # Polish: one more Newton step from a converged point (quadratic convergence takes
        # the error to rounding level), kept only if the gradient's norm does not grow.
        hess = hessian(p_q)
        hess[np.diag_indices(k + 1)] += _RIDGE
        step = solve(hess, -grad)
        trial_z = z + linear(step)
        trial_loss, trial_p, trial_pq = loss_and_prob(trial_z, targets, weights, total)
        trial_grad = gradient(trial_p)
        trial_residual = float(np.max(np.abs(trial_grad)))
        if trial_residual <= residual:
            n_iter += 1
            theta = theta + step
            z, loss, p, p_q, grad = trial_z, trial_loss, trial_p, trial_pq, trial_grad
            residual = trial_residual
    coef = np.zeros(d)
    coef[varying] = theta[:k] / scale[varying]
    intercept = float(theta[k]) - dot(coef[varying], mean[varying])
    cov: FloatArray | None = None
    if covariance:
        cov = _covariance(hessian(p_q) * total, scale, mean, varying)
    return LogisticFit(
        coef=coef,
        intercept=intercept,
        loss=loss,
        converged=bool(residual <= tol),
        n_iter=n_iter,
        residual=residual,
        covariance=cov,
    )


def _covariance(
    info_std: FloatArray, scale: FloatArray, mean: FloatArray, varying: npt.NDArray[np.bool_]
) -> FloatArray | None:
    """Inverse information of ``(intercept, coef...)`` from the standardised information.

    ``theta_std = (b_std, c_std)`` maps to the original ``intercept = c_std - sum b_std mean /
    scale`` and ``coef = b_std / scale``: a linear map ``T``, so the covariance is
    ``T inv(I_std) T^T``. None when the information is singular to rounding (its smallest
    eigenvalue below 1e-12 of its largest); constant features get ``nan`` rows.
    """
    k = info_std.shape[0] - 1
    if not np.all(np.isfinite(info_std)):
        return None
    eig = np.linalg.eigvalsh(info_std)
    if not (eig[0] > 1e-12 * eig[-1] and eig[-1] > 0.0):
        return None
    cov_std = inverse(info_std)
    d = varying.size
    idx = np.flatnonzero(varying)
    transform = np.zeros((d + 1, k + 1))
    transform[0, k] = 1.0
    transform[0, :k] = -mean[idx] / scale[idx]
    transform[1 + idx, np.arange(k)] = 1.0 / scale[idx]
    result: FloatArray = matmul(matmul(transform, cov_std), transform.T)
    result[1 + np.flatnonzero(~varying), :] = np.nan
    result[:, 1 + np.flatnonzero(~varying)] = np.nan
    return result


def sandwich_covariance(
    features: FloatArray,
    fit: LogisticFit,
    *,
    square_pos: FloatArray,
    square_neg: FloatArray,
    offset: FloatArray | None = None,
) -> FloatArray | None:
    """Robust (sandwich) covariance of ``(intercept, coef...)`` for importance weights.

    .. math::

        \\widehat{\\mathrm{Var}}(\\hat\theta) = H^{-1} M H^{-1}, \\qquad
        H = \\sum_i w_i p_i (1 - p_i) X_i X_i^T, \\qquad
        M = \\sum_i w_i^2 (p_i - y_i)^2 X_i X_i^T,

    with :math:`X_i = (1, x_i)`: the linearisation of the weighted score equations, whose
    terms :math:`w_i (p_i - y_i) X_i` are independent across the rows actually observed
    (Huber 1967, White 1980; for survey weights, Binder 1983). With frequency weights use
    ``fit.covariance`` (:math:`H^{-1}`) instead. Rows may be grouped: row ``i`` of
    ``features`` stands for rows sharing its covariates, with ``square_pos[i]`` the sum of the
    squared weights of its positives and ``square_neg[i]`` of its negatives (for single rows
    ``w**2 * y`` and ``w**2 * (1 - y)``), so that
    :math:`M = \\sum_i [S^+_i (1 - p_i)^2 + S^-_i p_i^2] X_i X_i^T`. No small-sample
    correction (HC0).

    Parameters
    ----------
    features : ndarray of shape (n, d)
        The covariates of the fit (``d`` may be 0).
    fit : LogisticFit
        A fit of :func:`fit_logistic` on these rows with ``covariance=True``.
    square_pos, square_neg : ndarray of shape (n,)
        Sums of squared weights of the positives and negatives of each row.
    offset : ndarray of shape (n,), optional
        The offset of the fit.

    Returns
    -------
    ndarray of shape (d + 1, d + 1) or None
        None when ``fit.covariance`` is None; ``nan`` rows and columns for constant features.

    Examples
    --------
    >>> x = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> y = np.array([0.0, 1.0, 0.0, 1.0])
    >>> fit = fit_logistic(x, y, np.ones(4), covariance=True)
    >>> cov = sandwich_covariance(x, fit, square_pos=y, square_neg=1.0 - y)
    >>> bool(cov[1, 1] < fit.covariance[1, 1])  # residuals smaller than the model expects
    True
    """
    if fit.covariance is None:
        return None
    bread = fit.covariance
    constant = np.isnan(np.diag(bread))
    eta = rows_dot(features, fit.coef) + fit.intercept
    if offset is not None:
        eta = eta + offset
    _, p, _ = loss_and_prob(eta, np.zeros(eta.size), np.zeros(eta.size), 1.0)
    design = np.concatenate((np.ones((eta.size, 1)), features), axis=1)
    scale = square_pos * (1.0 - p) ** 2 + square_neg * p * p
    meat = gram(design, scale)
    clean = np.where(np.isnan(bread), 0.0, bread)
    result: FloatArray = matmul(matmul(clean, meat), clean)
    result[constant, :] = np.nan
    result[:, constant] = np.nan
    return result
