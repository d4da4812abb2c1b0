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
quasi-Newton memory or line search often gets past a stall); :class:`Convergence` is what it
then reports: ``converged``, the ``residual`` at the returned point and the iterations used.

References
----------
J. Nocedal and S. J. Wright, *Numerical Optimization*, 2nd ed., Springer 2006, sections 12.3
(KKT conditions) and 16.7 (projected gradient for bound constraints).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from calib_cli.types import FloatArray

__all__ = [
    "Convergence",
    "newton_distance",
    "projected_gradient",
    "projected_gradient_residual",
    "with_one_restart",
]


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


def with_one_restart(
    solve: Callable[[FloatArray, int], tuple[FloatArray, int]],
    residual: Callable[[FloatArray], float],
    x0: FloatArray,
    *,
    tol: float,
    max_iter: int,
) -> tuple[FloatArray, Convergence]:
    """Run ``solve`` from ``x0``, check ``residual`` at its point, restart once if it fails.

    ``solve(x, budget)`` returns a point and the iterations it used (at most ``budget``);
    ``max_iter`` is the budget of both runs together, so a fit stopped by the cap is not
    restarted, while one stopped early (a stalled line search) is restarted from its point with
    what remains. The returned point is the one with the smaller residual.

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
        x2, used2 = solve(x, max_iter - used)
        used += used2
        res2 = residual(x2)
        if not res2 > res:  # the restart never makes the answer worse
            x, res = x2, res2
    return x, Convergence(converged=bool(res <= tol), residual=float(res), n_iter=int(used))
