"""Convergence decided by the project: residuals checked on the returned point.

An optimiser's status flag says why *it* stopped (a line search could not lower the objective
below one ulp, an iteration cap, a tolerance of its own), and which of these happens can depend
on the last bits of a floating-point sum, so on the CPU's BLAS kernel. Every iterative fit in
:mod:`calib_cli.core` therefore decides convergence itself, from the optimality conditions at
the point it returns:

* for a minimisation of a smooth :math:`f` over a box :math:`l \\le x \\le u`, the
  Karush-Kuhn-Tucker conditions hold exactly when the *projected gradient*

  .. math::

      r(x) = x - P_{[l, u]}\\big(x - \\nabla f(x)\\big)

  vanishes (:math:`P` clips each coordinate to its bounds): inside the box :math:`r_j` is the
  gradient, on a bound it is the part of the gradient that points out of the box, which must
  be 0 or point outwards. Its infinity norm is :func:`projected_gradient_residual`. Fits state
  it for an objective scaled to the problem (e.g. the *mean* loss per unit weight), so one
  tolerance fits every data size;
* where an objective is one-dimensional and concave (a prevalence), the projected Newton step
  :func:`newton_distance` is the distance to the maximiser to second order, in the units of
  the parameter.

A fit that fails its criterion is restarted once from the point it returned (a fresh
quasi-Newton memory or line search often gets past a stall, possibly with another solver);
:class:`Convergence` is what it then reports: ``converged``, the ``residual`` at the returned
point and the iterations used.

Small box-constrained fits with an analytic Hessian use :func:`projected_newton`, whose
stopping rule is the same residual: it stops as soon as the residual is at most the tolerance,
and whether that happened is still decided afterwards, on the returned point.

References
----------
J. Nocedal and S. J. Wright, *Numerical Optimization*, 2nd ed., Springer 2006, sections 12.3
(KKT conditions) and 16.7 (projected gradient for bound constraints).

D. P. Bertsekas, "Projected Newton methods for optimization problems with simple
constraints", *SIAM J. Control and Optimization* 20(2), 221-246, 1982.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from calib_cli.core.dots import dot, shifted_cholesky_solve
from calib_cli.types import FloatArray

__all__ = [
    "Convergence",
    "newton_distance",
    "projected_gradient",
    "projected_gradient_residual",
    "projected_newton",
    "with_one_restart",
]

#: A smooth objective for :func:`projected_newton`: at ``x`` its value, gradient and a function
#: returning its Hessian there (called at most once per accepted point, so it can reuse what
#: the value and gradient computed).
NewtonObjective = Callable[[FloatArray], tuple[float, FloatArray, Callable[[], FloatArray]]]

#: :func:`projected_newton`: sufficient-decrease constant of the Armijo rule ...
_ARMIJO = 1e-4
#: ... reductions of the step tried before the line search counts as stalled ...
_MAX_HALVINGS = 40
#: ... (a step whose decrease the objective's rounding hides, below this times max(1, |f|),
#: is taken if it lowers the residual) ...
_NOISE = 64.0 * float(np.finfo(np.float64).eps)
#: ... and the largest width of the band next to a bound where a coordinate whose gradient
#: points out of the box is held on the bound (Bertsekas' epsilon).
_ACTIVE_BAND = 1e-3


@dataclass(frozen=True)
class Convergence:
    """How an iterative fit ended, judged by the project's own criterion.

    Attributes
    ----------
    converged : bool
        Whether ``residual <= tol`` at the returned point (after at most one restart).
    residual : float
        The fit's optimality residual at the returned point (see the fit's documentation for
        which one; ``nan`` when it could not be evaluated).
    n_iter : int
        Iterations used, the restart included.

    Examples
    --------
    >>> Convergence(converged=True, residual=3e-12, n_iter=7)
    Convergence(converged=True, residual=3e-12, n_iter=7)
    """

    converged: bool
    residual: float
    n_iter: int


def projected_gradient(
    x: npt.ArrayLike,
    grad: npt.ArrayLike,
    *,
    lower: npt.ArrayLike | None = None,
    upper: npt.ArrayLike | None = None,
) -> FloatArray:
    """The projected gradient :math:`x - P_{[l, u]}(x - \\nabla f)` of a minimisation.

    Parameters
    ----------
    x : array-like of shape (k,)
        The point (inside the box).
    grad : array-like of shape (k,)
        Gradient of the objective at ``x``.
    lower, upper : array-like of shape (k,) or float, optional
        Bounds (``-inf`` / ``+inf`` when omitted).

    Returns
    -------
    ndarray of shape (k,)
        Zero exactly at a KKT point. Inside the box it is the gradient; at a lower bound a
        positive gradient component (which could only push the point out of the box) gives 0.

    Examples
    --------
    >>> projected_gradient([0.0, 0.5, 1.0], [2.0, -0.25, -3.0], lower=0.0, upper=1.0).tolist()
    [0.0, -0.25, 0.0]
    """
    xa = np.asarray(x, dtype=np.float64)
    ga = np.asarray(grad, dtype=np.float64)
    lo = -np.inf if lower is None else np.asarray(lower, dtype=np.float64)
    hi = np.inf if upper is None else np.asarray(upper, dtype=np.float64)
    result: FloatArray = xa - np.clip(xa - ga, lo, hi)
    return result


def projected_gradient_residual(
    x: npt.ArrayLike,
    grad: npt.ArrayLike,
    *,
    lower: npt.ArrayLike | None = None,
    upper: npt.ArrayLike | None = None,
) -> float:
    """Infinity norm of :func:`projected_gradient`: the KKT residual of a box-bounded fit.

    ``nan`` in, ``inf`` out: a point whose gradient is not finite is never converged.

    Examples
    --------
    >>> projected_gradient_residual([0.0, 2.0], [5.0, 0.25], lower=[0.0, 0.0])
    0.25
    """
    r = projected_gradient(x, grad, lower=lower, upper=upper)
    if r.size == 0:
        return 0.0
    value = float(np.max(np.abs(r)))
    return value if math.isfinite(value) else math.inf


def newton_distance(
    x: float, slope: float, curvature: float, *, lower: float = 0.0, upper: float = 1.0
) -> float:
    """Length of the projected Newton step of a concave one-dimensional maximisation.

    For :math:`\\ell` concave with :math:`\\ell'(x) = ` ``slope`` and
    :math:`-\\ell''(x) = ` ``curvature`` :math:`> 0`, the step
    :math:`|P_{[l, u]}(x + \\ell'/(-\\ell'')) - x|` is the distance from ``x`` to the maximiser
    over :math:`[l, u]` to second order (exactly 0 at a KKT point, also on a bound).

    Examples
    --------
    >>> newton_distance(0.25, 0.5, 10.0)  # the maximiser of -5 (x - 0.3)^2 is 0.3
    0.04999999999999999
    >>> newton_distance(0.0, -1.0, 10.0)  # at the lower bound, slope pointing out: optimal
    0.0
    """
    if not (math.isfinite(slope) and math.isfinite(curvature)):
        return math.inf
    if curvature <= 0.0:
        # flat (no information): only the sign of the slope on a bound can certify optimality
        if slope == 0.0 or (x <= lower and slope < 0.0) or (x >= upper and slope > 0.0):
            return 0.0
        return math.inf
    target = min(max(x + slope / curvature, lower), upper)
    return abs(target - x)


def projected_newton(
    fun: NewtonObjective,
    x0: npt.ArrayLike,
    *,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
    tol: float,
    max_iter: int,
) -> tuple[FloatArray, int]:
    """Minimise a smooth function over a box by Bertsekas' projected Newton method.

    Each iteration holds on its bound every coordinate within
    :math:`\\varepsilon = \\min(r, 10^{-3})` of a bound whose gradient points out of the box
    (:math:`r` the :func:`projected_gradient_residual`), takes a Newton step
    :math:`-H_{FF}^{-1} g_F` on the other, free, coordinates and a diagonally scaled
    gradient step :math:`-g_j / H_{jj}` on the held ones, and searches along the projected
    path :math:`x(t) = P_{[l, u]}(x + t d)` for the Armijo decrease
    :math:`f(x) - f(x(t)) \\ge \\sigma\\, g \\cdot (x - x(t))`, :math:`\\sigma = 10^{-4}`:
    first :math:`t = 1`, then the :math:`t` at which a free coordinate first reaches its bound
    (a nearly flat direction otherwise loses the compensation between its coordinates when
    one of them is clipped), then halvings. A Hessian that is not positive definite on the
    free coordinates (Cholesky fails) is shifted by the smallest multiple of the identity of a
    doubling sequence that makes it so (Nocedal and Wright, Algorithm 3.3), so the step is
    always a descent direction; every step is solved in a fixed order, the same bits under
    every BLAS kernel. A coordinate next to its bound that the Newton step would push through it is
    held where it is as well (the step on the others is then the Newton step on that face).
    Near the solution the step is the Newton step with the active set identified, and
    convergence is quadratic. Where the objective's rounding hides the decrease (changes
    below :math:`64\\,\\epsilon \\max(1, |f|)`), a step is taken if it lowers the residual.

    It stops when the residual :math:`\\lVert x - P(x - \\nabla f)\\rVert_\\infty` is at most
    ``tol``, after ``max_iter`` iterations, or when the line search stalls (no accepted step
    in 40 reductions, or a Hessian that is not finite); the caller decides convergence from the
    returned point (see :func:`with_one_restart`).

    Parameters
    ----------
    fun : callable
        ``fun(x) -> (value, gradient, hessian)``, ``hessian()`` the Hessian at ``x``, shape
        ``(k, k)`` (called only at accepted points).
    x0 : array-like of shape (k,)
        Start (clipped to the box).
    lower, upper : array-like of shape (k,) or float
        Bounds (infinite ones allowed).
    tol : float
        Stopping tolerance on the projected-gradient residual.
    max_iter : int
        Cap on Newton iterations.

    Returns
    -------
    x : ndarray of shape (k,)
    n_iter : int
        Newton iterations taken.

    References
    ----------
    D. P. Bertsekas, "Projected Newton methods for optimization problems with simple
    constraints", SIAM J. Control Optim. 20(2), 1982 (the method, with the band
    :math:`\\varepsilon` and the Armijo rule along the projected path).

    Examples
    --------
    >>> c = np.array([2.0, -1.0])  # min |x - c|^2 / 2 over [0, 1]^2: the answer is (1, 0)
    >>> def fun(x):
    ...     return float((x - c) @ (x - c)) / 2, x - c, lambda: np.eye(2)
    >>> x, n = projected_newton(fun, [0.5, 0.5], lower=0.0, upper=1.0, tol=1e-12, max_iter=50)
    >>> x.tolist(), n
    ([1.0, 0.0], 1)
    """
    x: FloatArray = np.array(x0, dtype=np.float64, copy=True).reshape(-1)
    lo = np.broadcast_to(np.asarray(lower, dtype=np.float64), x.shape)
    hi = np.broadcast_to(np.asarray(upper, dtype=np.float64), x.shape)
    x = np.minimum(np.maximum(x, lo), hi)
    f, g, hess = fun(x)
    res = _residual(x, g, lo, hi)
    n_iter = 0
    while n_iter < max_iter and res > tol and math.isfinite(f):
        band = min(res, _ACTIVE_BAND)
        h = np.asarray(hess(), dtype=np.float64)
        if not np.isfinite(h).all():
            break
        n_iter += 1
        near_lo, near_hi = x - lo <= band, hi - x <= band
        outward = (near_lo & (g > 0.0)) | (near_hi & (g < 0.0))
        held = outward
        for _ in range(x.size):
            d = _newton_step(h, g, ~held)
            # a coordinate next to its bound that the step would push through it is held
            # too, where it is (the step on the others assumed it moves)
            through = ~held & ((near_lo & (d < 0.0)) | (near_hi & (d > 0.0)))
            if not through.any():
                break
            held = held | through
        if outward.any():
            diag = np.diagonal(h)[outward]
            d[outward] = -g[outward] / np.where(diag > 0.0, diag, 1.0)
        noise = _NOISE * max(1.0, abs(f))
        # where the step first takes a free coordinate onto its bound: tried after t = 1
        reach = np.full(x.size, np.inf)
        np.divide(lo - x, d, out=reach, where=(d < 0.0) & ~held)
        np.divide(hi - x, d, out=reach, where=(d > 0.0) & ~held)
        block = float(reach.min())
        t, step = 1.0, None
        for _ in range(_MAX_HALVINGS):
            xt = np.minimum(np.maximum(x + t * d, lo), hi)
            ft, gt, hess_t = fun(xt)
            decrease = dot(g, x - xt)
            if decrease > 0.0 and ft <= f - _ARMIJO * decrease:
                step = (xt, ft, gt, hess_t)
                break
            if ft <= f + noise:
                res_t = _residual(xt, gt, lo, hi)
                if res_t < res:
                    step = (xt, ft, gt, hess_t)
                    break
            t = block if 0.0 < block < t else 0.5 * t
            block = 0.0
        if step is None:
            break
        x, f, g, hess = step
        res = _residual(x, g, lo, hi)
    return x, n_iter


def _residual(x: FloatArray, grad: FloatArray, lo: FloatArray, hi: FloatArray) -> float:
    """:func:`projected_gradient_residual` without its argument conversions (inner loops)."""
    value = float(np.max(np.abs(x - np.minimum(np.maximum(x - grad, lo), hi))))
    return value if math.isfinite(value) else math.inf


def _newton_step(hessian: FloatArray, grad: FloatArray, free: npt.NDArray[np.bool_]) -> FloatArray:
    """``-H_FF^-1 g_F`` on the free coordinates (0 elsewhere).

    By Cholesky factorisation when ``H_FF`` is positive definite; otherwise of
    ``H_FF + tau I`` with the smallest ``tau`` of a doubling sequence that makes it so
    (:func:`calib_cli.core.dots.shifted_cholesky_solve`): a descent direction either way. In
    Python floats, in a fixed order (a LAPACK factorisation's last bits depend on the BLAS
    kernel, and a fit's path, so its answer, on those bits); an ``H_FF`` that is not finite
    gives the scaled gradient step.
    """
    d = np.zeros(grad.size)
    if not free.any():
        return d
    if free.all():
        sub, gf = hessian, grad
    else:
        index = np.flatnonzero(free)
        sub, gf = hessian[index[:, None], index], grad[index]
    solved = shifted_cholesky_solve(sub, gf)
    if solved is not None:
        d[free] = -solved[0]
        return d
    diag = np.abs(np.diagonal(sub))
    d[free] = -gf / np.where(np.isfinite(diag) & (diag > 0.0), diag, 1.0)
    return d


def with_one_restart(
    solve: Callable[[FloatArray, int], tuple[FloatArray, int]],
    residual: Callable[[FloatArray], float],
    x0: FloatArray,
    *,
    tol: float,
    max_iter: int,
    restart: Callable[[FloatArray, int], tuple[FloatArray, int]] | None = None,
) -> tuple[FloatArray, Convergence]:
    """Run ``solve`` from ``x0``, check ``residual`` at its point, restart once if it fails.

    ``solve(x, budget)`` returns a point and the iterations it used (at most ``budget``);
    ``max_iter`` is the budget of both runs together, so a fit stopped by the cap is not
    restarted, while one stopped early (a stalled line search) is restarted from its point with
    what remains, by ``restart`` (another solver, e.g. L-BFGS-B after a projected Newton
    method) or, by default, ``solve`` again. The returned point is the one with the smaller
    residual.

    Examples
    --------
    >>> def halve(x, budget):  # a "solver" that halves x per iteration but stops after 3
    ...     n = min(3, budget)
    ...     return x / 2.0**n, n
    >>> x, conv = with_one_restart(halve, lambda x: float(abs(x[0])), np.array([1.0]),
    ...                            tol=0.02, max_iter=100)
    >>> x.tolist(), conv
    ([0.015625], Convergence(converged=True, residual=0.015625, n_iter=6))
    """
    x, used = solve(x0, max_iter)
    res = residual(x)
    if not res <= tol and used < max_iter:
        x2, used2 = (solve if restart is None else restart)(x, max_iter - used)
        used += used2
        res2 = residual(x2)
        if not res2 > res:  # the restart never makes the answer worse
            x, res = x2, res2
    return x, Convergence(converged=bool(res <= tol), residual=float(res), n_iter=int(used))
