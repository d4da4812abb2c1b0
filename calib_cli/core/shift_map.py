"""MAP estimation of a prevalence together with the shape of the positive-class score density.

This is the method of reference 001 ("What happens when the distribution changes?"). The
negative-class density :math:`f_0` stays as estimated on the reference; the positive-class
density is a normalised piecewise-linear function on nodes
:math:`0 = \\zeta_0 < \\zeta_1 < \\dots < \\zeta_m = 1` of the probability scale,

.. math::

    f_1(z; q) = \\frac{\\zeta_{k+1} - z}{\\zeta_{k+1} - \\zeta_k} h_k
              + \\frac{z - \\zeta_k}{\\zeta_{k+1} - \\zeta_k} h_{k+1},
    \\qquad z \\in [\\zeta_k, \\zeta_{k+1}],

(reference 001 prints the two weights swapped; this is ordinary linear interpolation, as its
``np.interp`` code does) with heights

.. math::

    h_0 = \\frac{1}{M(q)}, \\qquad h_i = \\frac{e^{q_i}}{M(q)} \\; (i = 1, \\dots, m),
    \\qquad M(q) = \\sum_{i=1}^{m} \\tfrac12 (e^{q_i} + e^{q_{i-1}})(\\zeta_i - \\zeta_{i-1}),

with :math:`q_0 = 0` fixed (a free :math:`h_0` makes the heights scale-invariant, a flat
direction that the reference found breaks convergence). Every :math:`q \\in \\mathbb{R}^m`
gives a density on [0, 1]. The estimate maximises

.. math::

    \\sum_k c_k \\log\\big[(1 - \\alpha) P_{0k} + \\alpha P_{1k}(q)\\big]
    - \\beta \\int_0^1 g\\big(f_1(z; q) - f_1^{\\mathrm{ref}}(z)\\big)^p f_0(z)\\,dz,
    \\qquad g(x) = \\sqrt{1 + x^2} - 1,

jointly in :math:`(\\operatorname{logit} \\alpha, q)` with analytic gradients (the bounded
truncated-Newton method ``TNC``, as in reference 001's notebook: unlike L-BFGS-B it calls no
BLAS, whose thread start-up dominates problems this small on a busy machine). The
likelihood is the binned (grouped) form of reference 001's: :math:`c_k` are the target's
weighted counts in the cells of the score grid, :math:`P_{0k}` the negative class's cell
probabilities and :math:`P_{1k}(q) = \\int_{\\text{cell } k} f_1(z; q)\\,dz`, computed exactly
(the cumulative of a piecewise-linear density is piecewise quadratic and linear in the
heights). The prior integral is the expectation over the reference negatives,
:math:`\\sum_j \\pi_{0j}\\, g(\\cdot)^p` on the fine grid, i.e. :math:`f_0(z)\\,dz` is the
negatives' empirical measure. :math:`f_1^{\\mathrm{ref}}` is the maximum-likelihood
piecewise-linear fit (same nodes) to the reference positives (:func:`fit_piecewise_linear`).

Gradients (with :math:`D = f_1(\\cdot; q) - f_1^{\\mathrm{ref}}`,
:math:`m_k = (1-\\alpha) P_{0k} + \\alpha P_{1k}`, :math:`t = \\operatorname{logit}\\alpha`):

.. math::

    \\partial_t = \\alpha (1 - \\alpha) \\sum_k c_k \\frac{P_{1k} - P_{0k}}{m_k},
    \\qquad
    \\nabla_h = \\alpha \\sum_k \\frac{c_k}{m_k} \\nabla_h P_{1k}
      - \\beta \\sum_j \\pi_{0j}\\, p\\, g(D_j)^{p-1} \\frac{D_j}{\\sqrt{1 + D_j^2}}
      \\nabla_h f_1(z_j),

and :math:`\\partial h_i / \\partial q_j = \\delta_{ij} h_j - h_i w_j h_j`, with :math:`w` the
trapezoid weights (:math:`M = \\sum_i w_i e^{q_i}`), so
:math:`\\partial/\\partial q_j = h_j (G_j - w_j\\, G \\cdot h)` for a gradient :math:`G` in
:math:`h`.

References
----------
References/001: MAP estimation of the base rate and the positive-class density (prior,
parameterisation and gradients).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, logit

from calib_cli.errors import InputError
from calib_cli.types import FloatArray

__all__ = [
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

#: Bounds on the log-heights q (relative to node 0): heights within e^±40 of each other.
Q_BOUND = 40.0
#: Bounds on logit(alpha) during the MAP fit: alpha within about 1e-13 of 0 and 1.
LOGIT_BOUND = 30.0


@dataclass(frozen=True)
class PiecewiseLinearFit:
    """A maximum-likelihood piecewise-linear density on [0, 1] (see :func:`fit_piecewise_linear`).

    Attributes
    ----------
    nodes : ndarray of shape (m + 1,)
        Node positions, 0 first and 1 last.
    log_heights : ndarray of shape (m,)
        The free parameters :math:`q_1, \\dots, q_m` (:math:`q_0 = 0`).
    heights : ndarray of shape (m + 1,)
        The density at the nodes (integrates to 1 by the trapezoid rule, which is exact).
    converged : bool
        Whether the optimiser (TNC) reported success.
    n_iter : int
        Optimiser iterations.
    """

    nodes: FloatArray
    log_heights: FloatArray
    heights: FloatArray
    converged: bool
    n_iter: int


@dataclass(frozen=True)
class MapFit:
    """The shape part of a MAP fit (reference 001), reported with a ``map`` estimate.

    Attributes
    ----------
    nodes : ndarray of shape (m + 1,)
        Node positions on the probability scale, 0 first and 1 last.
    heights : ndarray of shape (m + 1,)
        Fitted positive-class density at the nodes, :math:`f_1(\\zeta_i; q)`.
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
    """

    nodes: FloatArray
    heights: FloatArray
    reference_heights: FloatArray
    beta: float
    power: float
    log_posterior: float
    prior_penalty: float


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

    Computed stably (scaled by the largest exponent).

    >>> h = heights(np.zeros(2), trapezoid_weights(np.array([0.0, 0.5, 1.0])))
    >>> h.tolist()
    [1.0, 1.0, 1.0]
    """
    full = np.concatenate(([0.0], log_heights))
    e = np.exp(full - full.max())
    result: FloatArray = e / float(weights @ e)
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
    full = h * (grad_h - weights * float(grad_h @ h))
    result: FloatArray = full[1:]
    return result


def fit_piecewise_linear(
    counts: FloatArray,
    cell_basis: FloatArray,
    nodes: FloatArray,
    *,
    start: FloatArray | None = None,
    tol: float = 1e-9,
    max_iter: int = 5000,
) -> PiecewiseLinearFit:
    """Maximum-likelihood piecewise-linear density from binned counts.

    Maximises :math:`\\sum_k n_k \\log P_k(q)` with :math:`P_k(q) = (A h(q))_k` the exact
    probability of cell ``k`` (``cell_basis`` is ``A``, the difference of :func:`cdf_basis` at
    the cell edges).

    Parameters
    ----------
    counts : ndarray of shape (n_cells,)
        Weighted counts per cell (non-negative, positive total).
    cell_basis : ndarray of shape (n_cells, m + 1)
        Cell probabilities per unit height at each node.
    nodes : ndarray of shape (m + 1,)
        Node positions.
    start : ndarray of shape (m,), optional
        Starting log-heights (default zeros: the uniform density).
    tol, max_iter
        Projected-gradient tolerance and cap on function evaluations of TNC.

    Returns
    -------
    PiecewiseLinearFit

    Examples
    --------
    >>> nodes = uniform_nodes(2)
    >>> edges = np.linspace(0.0, 1.0, 5)
    >>> basis = cdf_basis(edges[1:], nodes) - cdf_basis(edges[:-1], nodes)
    >>> fit = fit_piecewise_linear(np.array([1.0, 1.0, 1.0, 1.0]), basis, nodes)
    >>> np.round(fit.heights, 4).tolist()
    [1.0, 1.0, 1.0]
    """
    total = float(counts.sum())
    if not total > 0.0:
        raise InputError("a piecewise-linear density needs counts with a positive total")
    weights = trapezoid_weights(nodes)
    used = counts > 0.0
    n_used = counts[used]
    a_used = cell_basis[used]
    tiny = np.finfo(np.float64).tiny

    def objective(q: FloatArray) -> tuple[float, FloatArray]:
        h = heights(q, weights)
        prob = np.maximum(a_used @ h, tiny)
        value = -float(n_used @ np.log(prob)) / total
        grad_h = -(a_used.T @ (n_used / prob)) / total
        return value, _chain_to_q(grad_h, h, weights)

    m = nodes.size - 1
    result = minimize(
        objective,
        np.zeros(m) if start is None else np.asarray(start, dtype=np.float64),
        jac=True,
        method="TNC",
        bounds=[(-Q_BOUND, Q_BOUND)] * m,
        options={"maxfun": max_iter, "gtol": tol, "ftol": 0.0, "xtol": 0.0},
    )
    q = np.asarray(result.x, dtype=np.float64)
    return PiecewiseLinearFit(
        nodes=nodes,
        log_heights=q,
        heights=heights(q, weights),
        converged=bool(result.success),
        n_iter=int(result.nit),
    )


def _g(x: FloatArray) -> FloatArray:
    """g(x) = sqrt(1 + x^2) - 1, computed as x^2 / (sqrt(1 + x^2) + 1) (no cancellation)."""
    result: FloatArray = x * x / (np.sqrt(1.0 + x * x) + 1.0)
    return result


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

    ``theta = (logit alpha, q_1, ..., q_m)``. ``counts``, ``mass_neg``: target counts and
    negative-class probabilities per cell; ``cell_basis``: ``A`` with ``P_1 = A h``;
    ``prior_weights``: the negatives' probability ``pi_0j`` at the prior's integration points;
    ``prior_basis``: ``B`` with ``f_1(z_j) = B h`` there; ``reference_density``:
    ``f_1^ref(z_j)``. Dividing by the total count leaves the maximiser unchanged and keeps the
    gradient of order one for the optimiser.
    """
    total = float(counts.sum())
    weights = trapezoid_weights(nodes)
    t = float(theta[0])
    alpha = float(expit(t))
    h = heights(theta[1:], weights)
    mass_pos = cell_basis @ h
    mix = (1.0 - alpha) * mass_neg + alpha * mass_pos
    tiny = np.finfo(np.float64).tiny
    mix = np.maximum(mix, tiny)
    used = counts > 0.0
    loglik = float(counts[used] @ np.log(mix[used]))
    ratio = np.where(used, counts / mix, 0.0)
    diff = prior_basis @ h - reference_density
    gd = _g(diff)
    penalty = float(prior_weights @ gd**power)
    value = -(loglik - beta * penalty) / total
    grad_t = -alpha * (1.0 - alpha) * float(ratio @ (mass_pos - mass_neg)) / total
    dpen = prior_weights * power * gd ** (power - 1.0) * diff / np.sqrt(1.0 + diff * diff)
    grad_h = (-alpha * (cell_basis.T @ ratio) + beta * (prior_basis.T @ dpen)) / total
    grad = np.concatenate(([grad_t], _chain_to_q(grad_h, h, weights)))
    return value, grad


def fit_map(
    counts: FloatArray,
    mass_neg: FloatArray,
    cell_basis: FloatArray,
    prior_weights: FloatArray,
    prior_basis: FloatArray,
    reference: PiecewiseLinearFit,
    *,
    beta: float,
    power: float,
    start_prevalence: float,
    tol: float = 1e-9,
    max_iter: int = 5000,
) -> tuple[float, MapFit, bool, int]:
    """Maximise reference 001's log-posterior in ``(logit alpha, q)`` with TNC.

    Starts from ``start_prevalence`` (clipped to [1e-6, 1 - 1e-6]) and the reference shape.

    Returns
    -------
    prevalence : float
    fit : MapFit
    converged : bool
        The optimiser's success flag.
    n_iter : int
        Optimiser iterations.

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
    >>> ok, bool(0.0 < a < 0.2)
    (True, True)
    """
    if not (math.isfinite(beta) and beta >= 0.0):
        raise InputError(f"map_beta must be a non-negative number, got {beta!r}")
    if not (math.isfinite(power) and power >= 1.0):
        raise InputError(f"map_power must be a number >= 1, got {power!r}")
    nodes = reference.nodes
    reference_density = prior_basis @ reference.heights
    start = float(np.clip(start_prevalence, 1e-6, 1.0 - 1e-6))
    theta0 = np.concatenate(([float(logit(start))], reference.log_heights))
    m = nodes.size - 1
    args = (counts, mass_neg, cell_basis, prior_weights, prior_basis, reference_density, nodes)
    result = minimize(
        lambda th: map_objective(th, *args, beta=beta, power=power),
        theta0,
        jac=True,
        method="TNC",
        bounds=[(-LOGIT_BOUND, LOGIT_BOUND)] + [(-Q_BOUND, Q_BOUND)] * m,
        options={"maxfun": max_iter, "gtol": tol, "ftol": 0.0, "xtol": 0.0},
    )
    theta = np.asarray(result.x, dtype=np.float64)
    weights = trapezoid_weights(nodes)
    h = heights(theta[1:], weights)
    total = float(counts.sum())
    value, _ = map_objective(theta, *args, beta=beta, power=power)
    penalty = float(prior_weights @ _g(prior_basis @ h - reference_density) ** power)
    fit = MapFit(
        nodes=nodes,
        heights=h,
        reference_heights=reference.heights,
        beta=float(beta),
        power=float(power),
        log_posterior=-value * total,
        prior_penalty=penalty,
    )
    return float(expit(theta[0])), fit, bool(result.success), int(result.nit)
