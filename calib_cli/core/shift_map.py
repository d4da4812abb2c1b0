"""MAP estimation of a prevalence together with the shape of the positive-class score density.

This is the method of reference 001 ("What happens when the distribution changes?"). The
negative-class density :math:`f_0` stays as estimated on the reference; the positive-class
density is a normalised piecewise-linear function on nodes
:math:`0 = \\zeta_0 < \\zeta_1 < \\dots < \\zeta_m = 1` of the probability scale,

.. math::

    f_1(z; h) = \\frac{\\zeta_{k+1} - z}{\\zeta_{k+1} - \\zeta_k} h_k
              + \\frac{z - \\zeta_k}{\\zeta_{k+1} - \\zeta_k} h_{k+1},
    \\qquad z \\in [\\zeta_k, \\zeta_{k+1}],

(reference 001 prints the two weights swapped; this is ordinary linear interpolation, as its
``np.interp`` code does) with heights :math:`h \\ge 0`, :math:`w \\cdot h = 1` (:math:`w` the
trapezoid weights, :func:`trapezoid_weights`: the integral of a piecewise-linear function is
exactly :math:`w \\cdot h`). The estimate maximises

.. math::

    \\sum_k c_k \\log\\big[(1 - \\alpha) P_{0k} + \\alpha P_{1k}(h)\\big]
    - \\beta \\int_0^1 g\\big(f_1(z; h) - f_1^{\\mathrm{ref}}(z)\\big)^p f_0(z)\\,dz,
    \\qquad g(x) = \\sqrt{1 + x^2} - 1.

The likelihood is the binned (grouped) form of reference 001's: :math:`c_k` are the target's
weighted counts in the cells of the score grid, :math:`P_{0k}` the negative class's cell
probabilities and :math:`P_{1k}(h) = (A h)_k = \\int_{\\text{cell } k} f_1(z; h)\\,dz`,
computed exactly (the cumulative of a piecewise-linear density is piecewise quadratic and
linear in the heights). The prior integral is the expectation over the reference negatives,
:math:`\\sum_j \\pi_{0j}\\, g(\\cdot)^p` on the fine grid, i.e. :math:`f_0(z)\\,dz` is the
negatives' empirical measure. :math:`f_1^{\\mathrm{ref}}` is the maximum-likelihood
piecewise-linear fit (same nodes) to the reference positives (:func:`fit_piecewise_linear`).

Parametrisation (a point on the boundary must be reachable)
-----------------------------------------------------------
Reference 001 writes :math:`h_i = e^{q_i} / M(q)`. Then :math:`\\partial / \\partial q_j =
h_j(\\dots)` vanishes with :math:`h_j`: a height that starts near 0 (e.g. at a node where the
reference has no positives) can never move back, and fits stop at points that are not optimal
in :math:`(\\alpha, h)`. Here instead

.. math::

    h = \\frac{v}{w \\cdot v}, \\qquad v \\ge 0, \\qquad v_{k^*} = h^{\\mathrm{ref}}_{k^*}
    \\text{ fixed},

with :math:`k^*` the node of the largest reference height (fixing one node removes the scale
direction :math:`v \\to s v`, which leaves :math:`h` unchanged), and :math:`\\alpha \\in [0, 1]`
itself: a box, where zero heights and a zero prevalence are ordinary bound-constrained points.
With :math:`S = w \\cdot v` and :math:`G = \\nabla_h` of the objective,
:math:`\\partial / \\partial v_j = (G_j - w_j\\, G \\cdot h) / S`, and

.. math::

    \\partial_\\alpha = \\sum_k c_k \\frac{P_{1k} - P_{0k}}{m_k},
    \\qquad
    G = \\alpha \\sum_k \\frac{c_k}{m_k} \\nabla_h P_{1k}
      - \\beta \\sum_j \\pi_{0j}\\, p\\, g(D_j)^{p-1} \\frac{D_j}{\\sqrt{1 + D_j^2}}
      \\nabla_h f_1(z_j)

(log-posterior; :math:`D = f_1(\\cdot; h) - f_1^{\\mathrm{ref}}`,
:math:`m_k = (1-\\alpha) P_{0k} + \\alpha P_{1k}`). The fit minimises the negative
log-posterior divided by the total count under the bounds by projected Newton steps with the
exact Hessian (Bertsekas 1982, :func:`calib_cli.core.convergence.projected_newton`): eleven
coordinates with the default nodes, so a dense factorisation per iteration costs less than the
objective.

Convergence is the project's own (:mod:`calib_cli.core.convergence`): the infinity norm of
the projected gradient of that *mean* objective in :math:`(\\alpha, v)` at the returned point,
at most ``tol``; a fit that fails it is restarted once from its point, by L-BFGS-B. The
reference density :func:`fit_piecewise_linear` is the same kind of fit without the scale
problem: it maximises the concave :math:`\\sum_k n_k \\log (A v)_k - N\\, w \\cdot v` over
:math:`v \\ge 0`, whose maximiser has :math:`w \\cdot v = 1` and is the constrained
maximum-likelihood density (the same solver, its Hessian
:math:`A^\\top \\operatorname{diag}(n / (N (Av)^2)) A`).

Every product is added in a fixed order and every Newton step solved in Python floats
(:class:`BandedBasis`, :mod:`calib_cli.core.dots`): a fit's path, so its answer, has the same
bits under every BLAS kernel, where OpenBLAS's Haswell and Prescott kernels gave heights
differing in their second digit along flat directions of the posterior. The exception is the
L-BFGS-B restart of a fit whose Newton run stalls (SciPy's, through BLAS), which no fit of
the tests or of ``bench/bench_map.py`` has needed.

References
----------
References/001: MAP estimation of the base rate and the positive-class density (prior and
gradients; its log-height parametrisation is replaced here as explained above).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from calib_cli.core import elementary as el
from calib_cli.core.convergence import (
    Convergence,
    NewtonObjective,
    projected_gradient_residual,
    projected_newton,
    with_one_restart,
)
from calib_cli.core.dots import dot, rows_dot, weighted_columns
from calib_cli.core.lazy_scipy import minimize
from calib_cli.errors import InputError
from calib_cli.types import FloatArray

__all__ = [
    "BandedBasis",
    "MapFit",
    "PiecewiseLinearFit",
    "cdf_basis",
    "check_nodes",
    "fit_map",
    "fit_piecewise_linear",
    "heights",
    "interp_basis",
    "map_objective",
    "trapezoid_weights",
    "uniform_nodes",
]

#: Bounds on the log-heights q of :func:`map_objective` (heights within e^±40 of each other).
Q_BOUND = 40.0
#: Bounds on logit(alpha) of :func:`map_objective`.
LOGIT_BOUND = 30.0
_TINY = float(np.finfo(np.float64).tiny)
#: Default tolerance on the projected gradients (of the mean objectives, per unit count; for
#: :func:`fit_map` in coordinates scaled by the Gauss-Newton diagonal, where a component g
#: means a possible gain of about g^2 / 2 per count). The objectives are known to about
#: 1e-15 per count, so no line search resolves components much below 3e-8 (sqrt(2e-15)); the
#: prevalence then moves by well under 1e-7 of itself.
TOL = 1e-7


@dataclass(frozen=True)
class PiecewiseLinearFit:
    """A maximum-likelihood piecewise-linear density on [0, 1] (see :func:`fit_piecewise_linear`).

    Attributes
    ----------
    nodes : ndarray of shape (m + 1,)
        Node positions, 0 first and 1 last.
    log_heights : ndarray of shape (m,)
        :math:`\\log(h_i / h_0)` for :math:`i \\ge 1`, clipped to ``±Q_BOUND`` (reference 001's
        log-height coordinates of the same density, e.g. for :func:`map_objective`; a zero
        height is the clip).
    heights : ndarray of shape (m + 1,)
        The density at the nodes, non-negative, integrating to 1 (:math:`w \\cdot h = 1`).
    converged : bool
        Whether the projected-gradient residual at the fit is at most the tolerance.
    n_iter : int
        Optimiser iterations (a restart included).
    residual : float
        Infinity norm of the projected gradient of the mean objective at the fit.
    """

    nodes: FloatArray
    log_heights: FloatArray
    heights: FloatArray
    converged: bool
    n_iter: int
    residual: float = math.nan


@dataclass(frozen=True)
class MapFit:
    """The shape part of a MAP fit (reference 001), reported with a ``map`` estimate.

    Attributes
    ----------
    nodes : ndarray of shape (m + 1,)
        Node positions on the probability scale, 0 first and 1 last.
    heights : ndarray of shape (m + 1,)
        Fitted positive-class density at the nodes, :math:`f_1(\\zeta_i)`.
    reference_heights : ndarray of shape (m + 1,)
        The reference positives' piecewise-linear density at the nodes (the prior's centre).
    beta : float
        Prior strength :math:`\\beta`.
    power : float
        Prior power :math:`p`.
    log_posterior : float
        The maximised objective (log-likelihood plus log-prior, unnormalised).
    prior_penalty : float
        :math:`\\int g(f_1 - f_1^{\\mathrm{ref}})^p f_0\\,dz` at the optimum (0: no shape change).
    converged : bool
        Whether the KKT residual is at most the tolerance (see :func:`fit_map`).
    n_iter : int
        Optimiser iterations (a restart included).
    residual : float
        Infinity norm of the projected gradient of the mean objective in the scaled
        coordinates of :func:`fit_map` at the fit.
    """

    nodes: FloatArray
    heights: FloatArray
    reference_heights: FloatArray
    beta: float
    power: float
    log_posterior: float
    prior_penalty: float
    converged: bool = True
    n_iter: int = 0
    residual: float = math.nan


def uniform_nodes(m: int) -> FloatArray:
    """``m`` equal intervals on [0, 1]: ``m + 1`` nodes.

    >>> uniform_nodes(4).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    if isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 1:
        raise InputError(f"map_nodes must be a positive integer, got {m!r}")
    return np.linspace(0.0, 1.0, int(m) + 1)


def check_nodes(nodes: FloatArray) -> FloatArray:
    """Nodes as float64: at least two, strictly increasing, 0 first and 1 last."""
    arr = np.asarray(nodes, dtype=np.float64)
    if arr.ndim != 1 or arr.size < 2:
        raise InputError(f"map_nodes must hold at least 2 positions, got {arr.size}")
    if not np.all(np.isfinite(arr)) or arr[0] != 0.0 or arr[-1] != 1.0:
        raise InputError("map_nodes must start at 0 and end at 1")
    if np.any(np.diff(arr) <= 0.0):
        raise InputError("map_nodes must be strictly increasing")
    return arr


def trapezoid_weights(nodes: FloatArray) -> FloatArray:
    """Weights ``w`` with ``integral of f = w @ heights`` for a piecewise-linear ``f`` (exact).

    >>> trapezoid_weights(np.array([0.0, 0.5, 1.0])).tolist()
    [0.25, 0.5, 0.25]
    """
    gaps = np.diff(nodes)
    w = np.zeros(nodes.size)
    w[:-1] += gaps / 2.0
    w[1:] += gaps / 2.0
    return w


def heights(log_heights: FloatArray, weights: FloatArray) -> FloatArray:
    """Node heights ``h = E / M`` with ``E = (1, exp(q_1), ..., exp(q_m))``, ``M = w @ E``.

    Reference 001's log-height coordinates (used by :func:`map_objective`). Computed stably
    (scaled by the largest exponent).

    >>> h = heights(np.zeros(2), trapezoid_weights(np.array([0.0, 0.5, 1.0])))
    >>> h.tolist()
    [1.0, 1.0, 1.0]
    """
    full = np.concatenate(([0.0], log_heights))
    e = el.exp(full - full.max())
    result: FloatArray = e / dot(weights, e)
    return result


def _log_heights(h: FloatArray) -> FloatArray:
    """``log(h_i / h_0)`` for ``i >= 1``, zero heights at the clip ``±Q_BOUND``."""
    tiny = np.finfo(np.float64).tiny
    logs = el.log(np.maximum(h, tiny))
    result: FloatArray = np.clip(logs[1:] - logs[0], -Q_BOUND, Q_BOUND)
    return result


def interp_basis(z: FloatArray, nodes: FloatArray) -> FloatArray:
    """Matrix ``B`` of shape (len(z), m + 1) with ``f(z) = B @ heights`` (hat functions)."""
    basis = np.empty((z.size, nodes.size))
    eye = np.eye(nodes.size)
    for i in range(nodes.size):
        basis[:, i] = np.interp(z, nodes, eye[i])
    return basis


def cdf_basis(z: FloatArray, nodes: FloatArray) -> FloatArray:
    """Matrix ``C`` of shape (len(z), m + 1) with ``F(z) = C @ heights`` (exact cumulative).

    For ``z`` in interval ``k`` with ``t = (z - zeta_k) / gap_k``, the cumulative is the
    trapezoids before ``k`` plus ``gap_k t (h_k (1 - t/2) + h_{k+1} t/2)``.

    >>> nodes = np.array([0.0, 0.5, 1.0])
    >>> (cdf_basis(np.array([0.5, 1.0]), nodes) @ np.ones(3)).tolist()
    [0.5, 1.0]
    """
    zc = np.clip(z, 0.0, 1.0)
    gaps = np.diff(nodes)
    k = np.clip(np.searchsorted(nodes, zc, side="right") - 1, 0, gaps.size - 1)
    t = (zc - nodes[k]) / gaps[k]
    eye = np.eye(nodes.size)
    out = np.empty((z.size, nodes.size))
    for i in range(nodes.size):
        e = eye[i]
        cum = np.concatenate(([0.0], np.cumsum(gaps * (e[:-1] + e[1:]) / 2.0)))
        out[:, i] = cum[k] + gaps[k] * t * (e[k] * (1.0 - t / 2.0) + e[k + 1] * t / 2.0)
    return out


def _chain_to_q(grad_h: FloatArray, h: FloatArray, weights: FloatArray) -> FloatArray:
    """Gradient in q_1..q_m from a gradient in the heights: ``h_j (G_j - w_j G.h)``."""
    full = h * (grad_h - weights * dot(grad_h, h))
    result: FloatArray = full[1:]
    return result


def _check_budget(tol: float, max_iter: int) -> tuple[float, int]:
    if not (math.isfinite(tol) and tol > 0.0):
        raise InputError(f"tol must be a positive number, got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int | np.integer) or max_iter < 1:
        raise InputError(f"max_iter must be a positive integer, got {max_iter!r}")
    return float(tol), int(max_iter)


Objective = Callable[[FloatArray], tuple[float, FloatArray]]


def _lbfgsb(
    objective: Objective, lower: FloatArray, upper: FloatArray, tol: float
) -> Callable[[FloatArray, int], tuple[FloatArray, int]]:
    """An L-BFGS-B run from a point with an iteration budget (the fallback restart of
    :func:`_newton_then_lbfgsb`).

    Its own stopping rule is a quarter of ``tol`` on the same projected gradient, and no
    relative-decrease rule (``ftol=0``): whether it stopped for that or because its line
    search could not lower the objective any more is decided afterwards, by the residual.
    """

    def solve(x0: FloatArray, budget: int) -> tuple[FloatArray, int]:
        result = minimize(
            objective,
            np.clip(x0, lower, upper),
            jac=True,
            method="L-BFGS-B",
            bounds=list(zip(lower.tolist(), upper.tolist(), strict=True)),
            options={"maxiter": budget, "maxfun": 4 * budget + 20, "ftol": 0.0, "gtol": tol / 4},
        )
        x: FloatArray = np.clip(np.asarray(result.x, dtype=np.float64), lower, upper)
        return x, min(int(result.nit), budget)

    return solve


class _LastPoint:
    """``fun`` remembering its last evaluation: the criterion and the value at the returned
    point, evaluated after the solver, cost nothing more (the point is the solver's last)."""

    def __init__(self, fun: NewtonObjective) -> None:
        self.fun = fun
        self.x: FloatArray | None = None
        self.result: tuple[float, FloatArray, Callable[[], FloatArray]] | None = None

    def __call__(self, x: FloatArray) -> tuple[float, FloatArray, Callable[[], FloatArray]]:
        last = self.x
        if self.result is not None and last is not None and bool((x == last).all()):
            return self.result
        self.result = self.fun(x)
        self.x = np.array(x, dtype=np.float64, copy=True)
        return self.result


def _newton_then_lbfgsb(
    fun: NewtonObjective,
    x0: FloatArray,
    *,
    lower: FloatArray,
    upper: FloatArray,
    tol: float,
    max_iter: int,
) -> tuple[FloatArray, Convergence, float]:
    """Projected Newton from ``x0``; L-BFGS-B from its point only if that fails the criterion.

    The criterion (:func:`projected_gradient_residual` of ``fun``'s gradient at most ``tol``)
    is evaluated on the returned point, never taken from a solver; ``max_iter`` caps the
    iterations of both solvers together (:func:`with_one_restart`). Returns the point, how
    the fit ended and the objective's value there.
    """
    remembered = _LastPoint(fun)

    def newton(x: FloatArray, budget: int) -> tuple[FloatArray, int]:
        return projected_newton(remembered, x, lower=lower, upper=upper, tol=tol, max_iter=budget)

    def value_and_gradient(x: FloatArray) -> tuple[float, FloatArray]:
        value, grad, _ = remembered(x)
        return value, grad

    def residual(x: FloatArray) -> float:
        return projected_gradient_residual(x, remembered(x)[1], lower=lower, upper=upper)

    x, conv = with_one_restart(
        newton,
        residual,
        x0,
        tol=tol,
        max_iter=max_iter,
        restart=_lbfgsb(value_and_gradient, lower, upper, tol),
    )
    return x, conv, remembered(x)[0]


def _heights_start(start: FloatArray | None, weights: FloatArray) -> FloatArray:
    m1 = weights.size
    if start is None:
        return np.ones(m1)
    arr = np.asarray(start, dtype=np.float64)
    if arr.shape == (m1 - 1,):  # log-heights (reference 001's coordinates)
        return heights(arr, weights)
    if arr.shape != (m1,) or not np.all(np.isfinite(arr)) or np.any(arr < 0.0):
        raise InputError(f"start must hold {m1} non-negative heights, got shape {arr.shape}")
    total = dot(weights, arr)
    return arr / total if total > 0.0 else np.ones(m1)


def fit_piecewise_linear(
    counts: FloatArray,
    cell_basis: FloatArray | BandedBasis,
    nodes: FloatArray,
    *,
    start: FloatArray | None = None,
    tol: float = TOL,
    max_iter: int = 5000,
) -> PiecewiseLinearFit:
    """Maximum-likelihood piecewise-linear density from binned counts.

    Maximises :math:`\\sum_k n_k \\log P_k(h)` over heights :math:`h \\ge 0` with
    :math:`w \\cdot h = 1`, where :math:`P_k(h) = (A h)_k` is the exact probability of cell
    ``k`` (``cell_basis`` is ``A``, the difference of :func:`cdf_basis` at the cell edges). It
    minimises the convex

    .. math::

        F(v) = -\\sum_k \\frac{n_k}{N} \\log (A v)_k + w \\cdot v, \\qquad v \\ge 0,

    (:math:`N = \\sum_k n_k`) by projected Newton steps with the exact Hessian
    :math:`A^\\top \\operatorname{diag}(n / (N (A v)^2)) A`
    (:func:`calib_cli.core.convergence.projected_newton`): the normalisation is a Lagrange
    term whose multiplier is known (at a minimiser :math:`v \\cdot \\nabla F = 0` gives
    :math:`w \\cdot v = 1`), so there is no scale direction and zero heights are ordinary
    bound-constrained points. Converged when the projected gradient of :math:`F` at the fit
    has infinity norm at most ``tol`` (one restart from the returned point by L-BFGS-B
    otherwise).

    Parameters
    ----------
    counts : ndarray of shape (n_cells,)
        Weighted counts per cell (non-negative, positive total).
    cell_basis : ndarray of shape (n_cells, m + 1)
        Cell probabilities per unit height at each node.
    nodes : ndarray of shape (m + 1,)
        Node positions.
    start : ndarray of shape (m + 1,) or (m,), optional
        Starting heights (or log-heights :math:`q_1..q_m`); default the uniform density.
    tol : float, default TOL (1e-7)
        Tolerance on the projected gradient of :math:`F` (per unit count).
    max_iter : int, default 5000
        Cap on iterations (Newton, and L-BFGS-B in a restart), the restart included.

    Returns
    -------
    PiecewiseLinearFit

    Examples
    --------
    >>> nodes = uniform_nodes(2)
    >>> edges = np.linspace(0.0, 1.0, 5)
    >>> basis = cdf_basis(edges[1:], nodes) - cdf_basis(edges[:-1], nodes)
    >>> fit = fit_piecewise_linear(np.array([1.0, 1.0, 1.0, 1.0]), basis, nodes)
    >>> np.round(fit.heights, 4).tolist(), fit.converged
    ([1.0, 1.0, 1.0], True)
    """
    tol, max_iter = _check_budget(tol, max_iter)
    total = float(counts.sum())
    if not total > 0.0:
        raise InputError("a piecewise-linear density needs counts with a positive total")
    weights = trapezoid_weights(nodes)
    used = counts > 0.0
    share = counts[used] / total
    a_used = BandedBasis.of(cell_basis).take(used)
    tiny = np.finfo(np.float64).tiny

    def objective(v: FloatArray) -> tuple[float, FloatArray, Callable[[], FloatArray]]:
        prob = np.maximum(a_used.apply(v), tiny)
        ratio = share / prob
        value = dot(weights, v) - dot(share, el.log(prob))
        grad: FloatArray = weights - a_used.rapply(ratio)

        def hessian() -> FloatArray:
            return a_used.gram(ratio / prob)

        return value, grad, hessian

    m1 = nodes.size
    v, conv, _ = _newton_then_lbfgsb(
        objective,
        _heights_start(start, weights),
        lower=np.zeros(m1),
        upper=np.full(m1, np.inf),
        tol=tol,
        max_iter=max_iter,
    )
    h = v / dot(weights, v)
    return PiecewiseLinearFit(
        nodes=nodes,
        log_heights=_log_heights(h),
        heights=h,
        converged=conv.converged,
        n_iter=conv.n_iter,
        residual=conv.residual,
    )


def _g(x: FloatArray) -> FloatArray:
    """g(x) = sqrt(1 + x^2) - 1, computed as x^2 / (sqrt(1 + x^2) + 1) (no cancellation)."""
    result: FloatArray = x * x / (np.sqrt(1.0 + x * x) + 1.0)
    return result


@dataclass(frozen=True)
class _MapTerms:
    """The mean negative log-posterior at (alpha, h) and its gradients in alpha and h."""

    value: float
    grad_alpha: float
    grad_h: FloatArray
    penalty: float


def _map_terms(
    alpha: float,
    h: FloatArray,
    counts: FloatArray,
    mass_neg: FloatArray,
    cell_basis: FloatArray,
    prior_weights: FloatArray,
    prior_basis: FloatArray,
    reference_density: FloatArray,
    *,
    beta: float,
    power: float,
) -> _MapTerms:
    """Reference 001's negative log-posterior divided by the total count, in (alpha, h).

    ``counts`` must be positive (cells without counts add nothing and are left out).
    """
    total = float(counts.sum())
    mass_pos = rows_dot(cell_basis, h)
    mix = np.maximum((1.0 - alpha) * mass_neg + alpha * mass_pos, np.finfo(np.float64).tiny)
    ratio = counts / mix
    diff = rows_dot(prior_basis, h) - reference_density
    gd = _g(diff)
    penalty = dot(prior_weights, el.power(gd, power))
    value = -(dot(counts, el.log(mix)) - beta * penalty) / total
    grad_alpha = -dot(ratio, mass_pos - mass_neg) / total
    grad_h: FloatArray = -alpha * weighted_columns(ratio, cell_basis) / total
    if beta > 0.0:
        lifted = el.power(gd, power - 1.0)
        dpen = prior_weights * power * lifted * diff / np.sqrt(1.0 + diff * diff)
        grad_h = grad_h + beta * weighted_columns(dpen, prior_basis) / total
    return _MapTerms(value, grad_alpha, grad_h, penalty)


@dataclass(frozen=True)
class BandedBasis:
    """A basis matrix ``B`` of shape (n, m + 1) kept by the band of each row, for products
    added in a fixed order (the same bits under every BLAS kernel, unlike a BLAS product).

    Each row's non-zeros lie in ``width`` adjacent columns from ``first``: two for hat
    functions (:func:`interp_basis`), two or three for a cell's probabilities (differences of
    :func:`cdf_basis`) when cells are narrower than the node gaps; ``width`` is the widest
    row's (up to every column: then the products are dense ones, in a fixed order still).
    Then ``B h`` takes ``width`` multiply-adds per row, :math:`B^\\top u` and the Gram matrix
    :math:`B^\\top \\operatorname{diag}(s) B` one ``numpy.bincount`` each (which adds its
    terms in the order given), instead of products over the whole matrix. Build it with :meth:`of`;
    :func:`fit_map` and :func:`fit_piecewise_linear` accept it in place of the matrix (a
    bootstrap builds it once and takes rows with :meth:`take`).

    Attributes
    ----------
    columns : int
        ``m + 1``.
    first : ndarray of shape (n,)
        Each row's first column of its band (the band stays inside the matrix).
    band : ndarray of shape (n, width)
        ``B[i, first[i] + t]``.

    Examples
    --------
    >>> basis = BandedBasis.of(interp_basis(np.array([0.25, 0.5]), uniform_nodes(2)))
    >>> basis.gram(np.array([1.0, 2.0])).tolist()
    [[0.25, 0.25, 0.0], [0.25, 2.25, 0.0], [0.0, 0.0, 0.0]]
    >>> basis.apply(np.array([1.0, 3.0, 5.0])).tolist(), basis.rapply(np.array([1.0, 1.0])).tolist()
    ([2.0, 3.0], [0.5, 1.5, 0.0])
    """

    columns: int
    first: npt.NDArray[np.intp]
    _band_t: FloatArray = field(repr=False)  # (width, n): the band's columns, contiguous
    _columns_t: npt.NDArray[np.intp] = field(repr=False)  # (width, n)
    _pair_index: npt.NDArray[np.intp] = field(repr=False)  # (n, width^2)
    _pairs: FloatArray = field(repr=False)  # (n, width^2)

    @classmethod
    def of(cls, basis: FloatArray | BandedBasis) -> BandedBasis:
        """From the matrix ``B`` (or ``B`` already banded, returned as it is)."""
        if isinstance(basis, BandedBasis):
            return basis
        matrix = np.ascontiguousarray(basis, dtype=np.float64)
        n, m1 = matrix.shape
        nonzero = matrix != 0.0
        first = np.argmax(nonzero, axis=1)
        last = m1 - 1 - np.argmax(nonzero[:, ::-1], axis=1)
        last = np.where(nonzero.any(axis=1), last, first)
        width = int(np.max(last - first)) + 1 if n else 1
        first = np.minimum(first, m1 - width).astype(np.intp)
        columns = first[:, None] + np.arange(width)
        band = np.take_along_axis(matrix, columns, axis=1)
        # each pair's product first (the same bits for (a, b) and (b, a)), times s later
        pairs = (band[:, :, None] * band[:, None, :]).reshape(n, width * width)
        pair_index = (columns[:, :, None] * m1 + columns[:, None, :]).reshape(n, width * width)
        return cls(
            int(m1),
            first,
            np.ascontiguousarray(band.T),
            np.ascontiguousarray(columns.T),
            pair_index,
            pairs,
        )

    @property
    def band(self) -> FloatArray:
        """``B[i, first[i] + t]``, shape (n, width)."""
        return self._band_t.T

    def dense(self) -> FloatArray:
        """``B`` as a matrix."""
        out = np.zeros((self.first.size, self.columns))
        np.put_along_axis(out, self._columns_t.T, self._band_t.T, axis=1)
        return out

    def take(self, rows: npt.NDArray[np.bool_]) -> BandedBasis:
        """The basis of a subset of the rows (a boolean mask)."""
        index = np.flatnonzero(rows)
        return BandedBasis(
            self.columns,
            self.first.take(index),
            self._band_t.take(index, axis=1),
            self._columns_t.take(index, axis=1),
            self._pair_index.take(index, axis=0),
            self._pairs.take(index, axis=0),
        )

    def apply(self, h: FloatArray) -> FloatArray:
        """``B h``: each row's band, its columns added in order (a sum along the band's
        columns, which NumPy adds one after the other)."""
        out: FloatArray = np.add.reduce(self._band_t * h[self._columns_t], axis=0)
        return out

    def rapply(self, u: FloatArray) -> FloatArray:
        """``u B`` (that is ``B^T u``): each column's terms added in a fixed order (the band's
        first column over the rows, then its second, ...)."""
        sums = np.bincount(
            self._columns_t.ravel(), weights=(self._band_t * u).ravel(), minlength=self.columns
        )
        out: FloatArray = sums.astype(np.float64, copy=False)  # float64 already (weights)
        return out

    def gram(self, s: FloatArray) -> FloatArray:
        """``B^T diag(s) B``, shape (m + 1, m + 1): each entry's terms added in the order of
        the rows (exactly symmetric)."""
        m1 = self.columns
        terms = (self._pairs * s[:, None]).ravel()
        sums = np.bincount(self._pair_index.ravel(), weights=terms, minlength=m1 * m1)
        out: FloatArray = sums.astype(np.float64, copy=False).reshape(m1, m1)
        return out


@dataclass(frozen=True)
class _MapData:
    """One MAP problem's arrays, with the constants of :func:`_map_derivatives` computed once.

    ``share``: the target's counts over their total (positive cells only), ``mass_neg`` and
    ``cell_basis`` of those cells; ``prior_scale``: :math:`\\beta \\pi_{0j} / C` at the prior's
    points; ``beta_per_count``: :math:`\\beta / C`.
    """

    share: FloatArray
    mass_neg: FloatArray
    cell_basis: BandedBasis
    prior_weights: FloatArray
    prior_scale: FloatArray
    prior: BandedBasis
    reference_density: FloatArray
    beta_per_count: float
    power: float


def _map_derivatives(
    alpha: float, h: FloatArray, data: _MapData
) -> tuple[float, float, FloatArray, Callable[[], FloatArray]]:
    """:func:`_map_terms`' value and gradients, and the exact Hessian in ``(alpha, h)``.

    With :math:`r = c / (m C)`, :math:`q = c / (m^2 C)`, :math:`\\delta = A h - P_0` and
    :math:`\\phi = g^p` (convex: :math:`\\phi'' = p g^{p-1} / s^3 + p (p-1) g^{p-1}
    (s + 1) / s^2`, :math:`s = \\sqrt{1 + D^2}`),

    .. math::

        H_{\\alpha\\alpha} = q \\cdot \\delta^2, \\quad
        H_{h\\alpha} = -A^\\top r + \\alpha A^\\top (q \\delta), \\quad
        H_{hh} = \\alpha^2 A^\\top \\operatorname{diag}(q) A
               + \\frac{\\beta}{C} B^\\top \\operatorname{diag}(\\pi_0 \\phi''(D)) B.

    Returns ``(value, grad_alpha, grad_h, hessian)``, ``hessian()`` of shape (m + 2, m + 2),
    alpha first (computed once, on the first call).
    """
    power, cell_basis = data.power, data.cell_basis
    delta = cell_basis.apply(h) - data.mass_neg
    mix = np.maximum(data.mass_neg + alpha * delta, _TINY)
    ratio = data.share / mix
    grad_alpha = -dot(ratio, delta)
    grad_h: FloatArray = (-alpha) * cell_basis.rapply(ratio)
    value = -dot(data.share, el.log(mix))
    lifted: FloatArray | None = None
    if data.beta_per_count > 0.0:
        diff = data.prior.apply(h) - data.reference_density
        root = np.sqrt(1.0 + diff * diff)
        gd = diff * diff / (root + 1.0)
        if power == 1.0:
            value += data.beta_per_count * dot(data.prior_weights, gd)
            grad_h += data.prior.rapply(data.prior_scale * (diff / root))
        else:
            lifted = el.power(gd, power - 1.0)
            value += data.beta_per_count * dot(data.prior_weights, lifted * gd)
            grad_h += data.prior.rapply((power * data.prior_scale) * lifted * (diff / root))
    cache: list[FloatArray] = []

    def hessian() -> FloatArray:
        if cache:
            return cache[0]
        share = ratio / mix
        out = np.empty((h.size + 1, h.size + 1))
        out[0, 0] = dot(share, delta * delta)
        cross = cell_basis.rapply(alpha * share * delta - ratio)
        out[0, 1:] = cross
        out[1:, 0] = cross
        block = (alpha * alpha) * cell_basis.gram(share)
        if data.beta_per_count > 0.0:
            if lifted is None:  # p = 1
                second = 1.0 / (root * root * root)
            else:
                second = power * lifted / (root * root * root) + power * (power - 1.0) * lifted * (
                    root + 1.0
                ) / (root * root)
            block += data.prior.gram(data.prior_scale * second)
        out[1:, 1:] = block
        cache.append(out)
        return out

    return value, grad_alpha, grad_h, hessian


def map_objective(
    theta: FloatArray,
    counts: FloatArray,
    mass_neg: FloatArray,
    cell_basis: FloatArray,
    prior_weights: FloatArray,
    prior_basis: FloatArray,
    reference_density: FloatArray,
    nodes: FloatArray,
    *,
    beta: float,
    power: float,
) -> tuple[float, FloatArray]:
    """Negative log-posterior of reference 001 divided by the total count, and its gradient.

    In reference 001's coordinates ``theta = (logit alpha, q_1, ..., q_m)`` (heights
    :func:`heights`; :func:`fit_map` works in ``(alpha, v)`` instead, see the module notes).
    ``counts``, ``mass_neg``: target counts and negative-class probabilities per cell;
    ``cell_basis``: ``A`` with ``P_1 = A h``; ``prior_weights``: the negatives' probability
    ``pi_0j`` at the prior's integration points; ``prior_basis``: ``B`` with
    ``f_1(z_j) = B h`` there; ``reference_density``: ``f_1^ref(z_j)``. Dividing by the total
    count leaves the maximiser unchanged and keeps the gradient of order one.
    """
    weights = trapezoid_weights(nodes)
    alpha = float(expit(float(theta[0])))
    h = heights(theta[1:], weights)
    used = counts > 0.0
    terms = _map_terms(
        alpha,
        h,
        counts[used],
        mass_neg[used],
        cell_basis[used],
        prior_weights,
        prior_basis,
        reference_density,
        beta=beta,
        power=power,
    )
    grad_t = alpha * (1.0 - alpha) * terms.grad_alpha
    return terms.value, np.concatenate(([grad_t], _chain_to_q(terms.grad_h, h, weights)))


def _map_scale(curvature: FloatArray, s: float) -> FloatArray:
    """Scales ``d = 1 / sqrt(H_jj)`` of ``(alpha, v)`` from the Gauss-Newton diagonal at a point.

    ``H_jj`` is the diagonal of the mean objective's Gauss-Newton Hessian (likelihood:
    :math:`\\sum c\\, (\\partial m / \\partial x_j)^2 / m^2 / C`; prior: its exact second
    derivative along the coordinate), floored at ``1e-6`` times the largest. In ``x / d`` the
    problem is about equally curved in every coordinate, and a gradient component
    :math:`g_j d_j` has the meaning of a Newton decrement: moving along coordinate ``j`` can
    lower the mean objective by about :math:`(g_j d_j)^2 / 2`. ``curvature`` is the diagonal
    of the exact Hessian in ``(alpha, h)`` (:func:`_map_derivatives`), which is that
    Gauss-Newton diagonal; in ``v`` it is divided by :math:`S^2`, ``S = w . v``.
    """
    diag = np.concatenate((curvature[:1], curvature[1:] / (s * s)))
    top = float(np.max(diag)) if np.all(np.isfinite(diag)) else 0.0
    if not top > 0.0:
        return np.ones(diag.size)
    result: FloatArray = 1.0 / np.sqrt(np.maximum(diag, 1e-6 * top))
    return result


def _hessian_in_v(
    full: FloatArray,
    grad_h: FloatArray,
    h: FloatArray,
    weights: FloatArray,
    free: npt.NDArray[np.bool_],
    s: float,
) -> FloatArray:
    """The Hessian in ``(alpha, v_free)`` from the one in ``(alpha, h)`` (``full``), with
    ``h = v / S``, ``S = w . v``: ``dh/dv = J = (I - h w^T) / S`` (its columns of the free
    nodes), and the curvature of ``h`` itself adds ``(2 (G.h) w w^T - G w^T - w G^T) / S^2``
    (``G`` the gradient in ``h``). With ``M`` the (symmetric) block in ``h`` and ``c`` its
    alpha row: ``c J = (c - (c.h) w^T) / S`` and
    ``J^T M J = (M - w (Mh)^T - (Mh) w^T + (h.Mh) w w^T) / S^2``: products of vectors in a
    fixed order, only the free rows and columns formed."""
    row, block = full[0, 1:], full[1:, 1:]
    weights_free = weights[free]
    mh_all = np.add.reduce(block * h, axis=1)  # NumPy's sum along each row
    turn = np.outer(mh_all[free], weights_free)
    bend = np.outer(grad_h[free], weights_free)
    out = np.empty((weights_free.size + 1, weights_free.size + 1))
    out[0, 0] = full[0, 0]
    cross = (row[free] - dot(row, h) * weights_free) / s
    out[0, 1:] = cross
    out[1:, 0] = cross
    out[1:, 1:] = (
        block[free][:, free]
        - turn
        - turn.T
        + (dot(h, mh_all) + 2.0 * dot(grad_h, h)) * np.outer(weights_free, weights_free)
        - bend
        - bend.T
    ) / (s * s)
    return out


def fit_map(
    counts: FloatArray,
    mass_neg: FloatArray,
    cell_basis: FloatArray | BandedBasis,
    prior_weights: FloatArray,
    prior_basis: FloatArray | BandedBasis,
    reference: PiecewiseLinearFit,
    *,
    beta: float,
    power: float,
    start_prevalence: float,
    start_heights: FloatArray | None = None,
    tol: float = TOL,
    max_iter: int = 5000,
) -> tuple[float, MapFit, bool, int]:
    """Maximise reference 001's log-posterior in ``(alpha, h)`` (projected Newton, bounds).

    Works in :math:`x = (\\alpha, v_{-k^*})` with :math:`0 \\le \\alpha \\le 1`,
    :math:`v \\ge 0`, :math:`h = v / (w \\cdot v)` and :math:`v_{k^*}` fixed at the largest
    reference height (module notes). Starts from ``start_prevalence`` (clipped to
    [1e-6, 1 - 1e-6]) and ``start_heights`` (default: the reference shape; a bootstrap
    replicate starts from the point estimate's). Converged when the projected gradient of
    the mean negative log-posterior in :math:`y = x / d` has infinity norm at most ``tol`` at
    the returned point: the KKT conditions of the box, in coordinates scaled by the
    Gauss-Newton diagonal at the start (:func:`_map_scale`), so that a component
    :math:`g_j d_j` is the square root of twice the gain still possible along it.

    The solver is :func:`calib_cli.core.convergence.projected_newton` with the exact Hessian
    (:func:`_map_derivatives` in :math:`(\\alpha, h)`, carried to :math:`v` through
    :math:`h = v / S`; eleven coordinates with the default nodes, so a dense factorisation per
    iteration is cheap). When its point fails the criterion, one restart from it by L-BFGS-B.
    ``cell_basis`` and ``prior_basis`` (``B``, shape (n_prior, m + 1)) may be given as
    :class:`BandedBasis`.

    Returns
    -------
    prevalence : float
    fit : MapFit
        With ``converged``, ``n_iter`` and ``residual``.
    converged : bool
        ``fit.converged``.
    n_iter : int
        ``fit.n_iter``.

    Examples
    --------
    >>> nodes = uniform_nodes(2)
    >>> edges = np.linspace(0.0, 1.0, 5)
    >>> basis = cdf_basis(edges[1:], nodes) - cdf_basis(edges[:-1], nodes)
    >>> ref = fit_piecewise_linear(np.array([1.0, 2.0, 3.0, 4.0]), basis, nodes)
    >>> mid = (edges[1:] + edges[:-1]) / 2
    >>> neg = np.array([0.4, 0.3, 0.2, 0.1])
    >>> a, fit, ok, _ = fit_map(np.array([38.0, 29.0, 21.0, 12.0]), neg, basis, neg,
    ...     interp_basis(mid, nodes), ref, beta=100.0, power=2.0, start_prevalence=0.5)
    >>> ok, bool(0.0 < a < 0.2), fit.residual <= 1e-6
    (True, True, True)
    """
    if not (math.isfinite(beta) and beta >= 0.0):
        raise InputError(f"map_beta must be a non-negative number, got {beta!r}")
    if not (math.isfinite(power) and power >= 1.0):
        raise InputError(f"map_power must be a number >= 1, got {power!r}")
    tol, max_iter = _check_budget(tol, max_iter)
    nodes = reference.nodes
    weights = trapezoid_weights(nodes)
    prior = BandedBasis.of(prior_basis)
    reference_density = prior.apply(reference.heights)
    used = counts > 0.0
    total = float(counts.sum())
    data = _MapData(
        share=counts[used] / total,
        mass_neg=mass_neg[used],
        cell_basis=BandedBasis.of(cell_basis).take(used),
        prior_weights=prior_weights,
        prior_scale=(beta / total) * prior_weights,
        prior=prior,
        reference_density=reference_density,
        beta_per_count=beta / total,
        power=float(power),
    )
    pin = int(np.argmax(reference.heights))
    pinned = float(reference.heights[pin])
    free = np.arange(nodes.size) != pin
    keep = np.r_[True, free]  # alpha and the free heights, in the order of y

    a0 = float(np.clip(start_prevalence, 1e-6, 1.0 - 1e-6))
    v0 = reference.heights
    if start_heights is not None:
        sh = np.asarray(start_heights, dtype=np.float64)
        if sh.shape == v0.shape and np.all(np.isfinite(sh)) and sh[pin] > 0.0:
            v0 = np.maximum(sh, 0.0) * (pinned / float(sh[pin]))
    s0 = dot(weights, v0)
    start = _map_derivatives(a0, v0 / s0, data) if np.any(used) else None
    curvature = np.diagonal(start[3]()) if start is not None else None
    # Coordinates y = x / d, d from the Gauss-Newton diagonal at the start (see _map_scale).
    unit = _map_scale(curvature, s0)[keep] if curvature is not None else np.ones(keep.size)
    unit_outer = np.outer(unit, unit)
    y0 = np.concatenate(([a0], v0[free])) / unit

    def unpack(y: FloatArray) -> tuple[float, FloatArray, float]:
        v = np.empty(nodes.size)
        v[pin] = pinned
        v[free] = y[1:] * unit[1:]
        s = dot(weights, v)
        return float(y[0] * unit[0]), v / s, s

    def objective(y: FloatArray) -> tuple[float, FloatArray, Callable[[], FloatArray]]:
        alpha, h, s = unpack(y)
        nonlocal start
        if start is not None and np.array_equal(y, y0):
            derivatives, start = start, None  # the start's, computed for the scales
        else:
            derivatives = _map_derivatives(alpha, h, data)
        value, grad_alpha, grad_h, hessian_ah = derivatives
        gh = dot(grad_h, h)
        grad = np.concatenate(([grad_alpha], ((grad_h - weights * gh) / s)[free])) * unit

        def hessian() -> FloatArray:
            result: FloatArray = (
                _hessian_in_v(hessian_ah(), grad_h, h, weights, free, s) * unit_outer
            )
            return result

        return value, grad, hessian

    def no_data(y: FloatArray) -> tuple[float, FloatArray, Callable[[], FloatArray]]:
        return 0.0, np.zeros(y.size), lambda: np.zeros((y.size, y.size))

    lower = np.zeros(nodes.size)
    upper = np.concatenate(([1.0 / unit[0]], np.full(nodes.size - 1, np.inf)))
    fun = objective if np.any(used) else no_data
    x, conv, value = _newton_then_lbfgsb(
        fun, y0, lower=lower, upper=upper, tol=tol, max_iter=max_iter
    )
    alpha, h, _ = unpack(x)
    penalty = dot(prior_weights, el.power(_g(prior.apply(h) - reference_density), power))
    fit = MapFit(
        nodes=nodes,
        heights=h,
        reference_heights=reference.heights,
        beta=float(beta),
        power=float(power),
        log_posterior=-value * float(counts.sum()),
        prior_penalty=penalty,
        converged=conv.converged,
        n_iter=conv.n_iter,
        residual=conv.residual,
    )
    return alpha, fit, conv.converged, conv.n_iter
