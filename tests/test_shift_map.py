"""Tests of the MAP machinery of reference 001 (calib_cli.core.shift_map).

References used: scipy.integrate.quad and np.interp for the piecewise-linear density and its
cumulative, scipy.optimize.check_grad / central differences for every analytic gradient, and
the exact bracketed maximum-likelihood solution for the beta -> infinity limit of the MAP fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import quad
from scipy.optimize import brentq, check_grad, minimize

from calib_cli.core import shift_map as sm
from calib_cli.errors import InputError


def _cells(nodes: np.ndarray, edges: np.ndarray) -> np.ndarray:
    return sm.cdf_basis(edges[1:], nodes) - sm.cdf_basis(edges[:-1], nodes)


def test_uniform_nodes_and_checks() -> None:
    assert sm.uniform_nodes(3).tolist() == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])
    with pytest.raises(InputError, match="map_nodes must be a positive integer"):
        sm.uniform_nodes(0)
    with pytest.raises(InputError, match="start at 0 and end at 1"):
        sm.check_nodes(np.array([0.1, 1.0]))
    with pytest.raises(InputError, match="strictly increasing"):
        sm.check_nodes(np.array([0.0, 0.5, 0.5, 1.0]))


def test_heights_integrate_to_one_and_fix_h0() -> None:
    rng = np.random.default_rng(0)
    nodes = np.sort(np.concatenate(([0.0, 1.0], rng.random(6))))
    weights = sm.trapezoid_weights(nodes)
    q = rng.normal(size=nodes.size - 1) * 3
    h = sm.heights(q, weights)
    # trapezoid rule of the piecewise-linear function = its exact integral (quad reference)
    integral = float(
        quad(lambda z: np.interp(z, nodes, h), 0.0, 1.0, points=nodes[1:-1], limit=200)[0]
    )
    assert integral == pytest.approx(1.0, abs=1e-10)
    assert float(weights @ h) == pytest.approx(1.0, rel=1e-14)
    # h_0 = 1 / M and h_i = exp(q_i) / M (reference 001's parameterisation)
    e = np.concatenate(([1.0], np.exp(q)))
    big_m = float(np.sum(0.5 * (e[1:] + e[:-1]) * np.diff(nodes)))
    np.testing.assert_allclose(h, e / big_m, rtol=1e-12)


def test_interp_and_cdf_basis_against_numpy_and_quad() -> None:
    rng = np.random.default_rng(1)
    nodes = np.array([0.0, 0.2, 0.45, 0.7, 1.0])
    h = rng.random(5) + 0.1
    z = np.concatenate(([0.0, 1.0, 0.2], rng.random(20)))
    np.testing.assert_allclose(sm.interp_basis(z, nodes) @ h, np.interp(z, nodes, h), rtol=1e-13)
    cdf = sm.cdf_basis(z, nodes) @ h
    expected = [
        quad(lambda s: np.interp(s, nodes, h), 0.0, zz, points=nodes[1:-1], limit=200)[0]
        for zz in z
    ]
    np.testing.assert_allclose(cdf, expected, atol=1e-12)


def test_fit_piecewise_linear_recovers_a_triangle() -> None:
    # density 2z on [0, 1] is piecewise linear on any nodes: heights 2 * nodes
    rng = np.random.default_rng(2)
    sample = np.sqrt(rng.random(200_000))
    nodes = sm.uniform_nodes(4)
    edges = np.linspace(0.0, 1.0, 201)
    counts = np.histogram(sample, bins=edges)[0].astype(float)
    fit = sm.fit_piecewise_linear(counts, _cells(nodes, edges), nodes)
    assert fit.converged and fit.residual <= sm.TOL
    np.testing.assert_allclose(fit.heights[1:], 2 * nodes[1:], atol=0.03)
    assert fit.heights[0] < 0.03


def _density_kkt(counts: np.ndarray, basis: np.ndarray, h: np.ndarray, w: np.ndarray) -> float:
    """KKT residual of max sum n log(A h) s.t. h >= 0, w.h = 1, by central differences.

    The Lagrangian's gradient in h is -A^T(n / A h) / N + lambda w with lambda = 1 (the
    multiplier of w.h = 1 is N / N, from h . gradient = -1); a free height needs 0, a zero
    height a non-negative value. Differences of the mean log-likelihood along each e_j,
    step 1e-6 (one-sided at a zero height).
    """
    used = counts > 0  # cells without counts add 0 (and may have probability 0)
    n = counts[used] / counts.sum()
    basis = basis[used]

    def f(x: np.ndarray) -> float:
        return -float(n @ np.log(basis @ x))

    out = []
    for j in range(h.size):
        e = np.zeros(h.size)
        e[j] = 1e-6
        inside = h[j] > 1e-6
        d = (f(h + e) - f(h - e)) / 2e-6 if inside else (f(h + e) - f(h)) / 1e-6
        g = d + w[j]
        out.append(abs(g) if h[j] > 1e-6 else max(-g, 0.0))
    return max(out)


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_fit_piecewise_linear_is_a_kkt_point(seed: int) -> None:
    # Beta(3, 2) has density 0 at 0: the optimum puts h_0 on its bound, where reference 001's
    # log-heights could never arrive. The KKT residual by central differences is small.
    rng = np.random.default_rng(seed)
    nodes = sm.uniform_nodes(5)
    edges = np.linspace(0.0, 1.0, 41)
    counts = np.histogram(rng.beta(3, 2, 5000), bins=edges)[0].astype(float)
    basis = _cells(nodes, edges)
    fit = sm.fit_piecewise_linear(counts, basis, nodes)
    w = sm.trapezoid_weights(nodes)
    assert fit.converged and fit.residual <= sm.TOL
    assert float(w @ fit.heights) == pytest.approx(1.0, abs=1e-12)
    assert np.all(fit.heights >= 0.0)
    assert _density_kkt(counts, basis, fit.heights, w) < 1e-5


def test_fit_piecewise_linear_reports_non_convergence_when_capped() -> None:
    rng = np.random.default_rng(3)
    nodes = sm.uniform_nodes(5)
    edges = np.linspace(0.0, 1.0, 41)
    counts = np.histogram(rng.beta(3, 2, 5000), bins=edges)[0].astype(float)
    fit = sm.fit_piecewise_linear(counts, _cells(nodes, edges), nodes, max_iter=1)
    assert not fit.converged and fit.n_iter == 1 and fit.residual > sm.TOL


@dataclass(frozen=True)
class Problem:
    nodes: np.ndarray
    basis: np.ndarray
    mass_neg: np.ndarray
    counts: np.ndarray
    prior_w: np.ndarray
    prior_basis: np.ndarray
    reference: sm.PiecewiseLinearFit

    @property
    def reference_density(self) -> np.ndarray:
        return np.asarray(self.prior_basis @ self.reference.heights)

    def args(self) -> tuple[np.ndarray, ...]:
        return (
            self.counts,
            self.mass_neg,
            self.basis,
            self.prior_w,
            self.prior_basis,
            self.reference_density,
            self.nodes,
        )


def _problem(seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    nodes = sm.uniform_nodes(6)
    edges = np.linspace(0.0, 1.0, 31)
    basis = _cells(nodes, edges)
    mass_neg = np.histogram(rng.beta(2, 6, 4000), bins=edges)[0] + 0.5
    mass_neg = mass_neg / mass_neg.sum()
    counts = np.histogram(np.concatenate((rng.beta(2, 6, 3000), rng.beta(4, 2, 300))), bins=edges)[
        0
    ].astype(float)
    prior_z = rng.random(200)
    prior_w = rng.random(200)
    prior_w /= prior_w.sum()
    ref_counts = np.histogram(rng.beta(5, 2, 2000), bins=edges)[0].astype(float)
    reference = sm.fit_piecewise_linear(ref_counts, basis, nodes)
    return Problem(
        nodes, basis, mass_neg, counts, prior_w, sm.interp_basis(prior_z, nodes), reference
    )


@pytest.mark.parametrize("power", [1.0, 1.5, 2.0, 3.0])
@pytest.mark.parametrize("beta", [0.0, 10.0, 1000.0])
def test_map_objective_gradient_matches_finite_differences(power: float, beta: float) -> None:
    prob = _problem(4)
    args = prob.args()
    rng = np.random.default_rng(5)
    for _ in range(5):
        theta = np.concatenate(([rng.normal(-2.0, 1.0)], rng.normal(0.0, 1.0, 6)))

        def value(th: np.ndarray) -> float:
            return sm.map_objective(th, *args, beta=beta, power=power)[0]

        def grad(th: np.ndarray) -> np.ndarray:
            return sm.map_objective(th, *args, beta=beta, power=power)[1]

        err = check_grad(value, grad, theta, epsilon=1e-7)
        assert err < 1e-5 * max(1.0, float(np.linalg.norm(grad(theta))))


def test_map_objective_is_reference_001_log_posterior() -> None:
    # Hand evaluation: -(sum c log((1-a) P0 + a P1) - beta * sum pi g(D)^p) / sum c.
    prob = _problem(6)
    weights = sm.trapezoid_weights(prob.nodes)
    theta = np.array([-1.5, 0.3, -0.2, 0.1, 0.5, -0.4, 0.2])
    h = sm.heights(theta[1:], weights)
    a = 1.0 / (1.0 + np.exp(1.5))
    mix = (1 - a) * prob.mass_neg + a * (prob.basis @ h)
    d = prob.prior_basis @ h - prob.reference_density
    g = np.sqrt(1 + d**2) - 1
    expected = -(prob.counts @ np.log(mix) - 7.0 * prob.prior_w @ g**2) / prob.counts.sum()
    got = sm.map_objective(theta, *prob.args(), beta=7.0, power=2.0)[0]
    assert got == pytest.approx(float(expected), rel=1e-12)


def test_map_with_a_huge_prior_is_the_mle_with_the_reference_shape() -> None:
    prob = _problem(7)
    p0 = prob.mass_neg
    p1 = prob.basis @ prob.reference.heights

    def slope(a: float) -> float:
        return float(np.sum(prob.counts * (p1 - p0) / ((1 - a) * p0 + a * p1)))

    exact = brentq(slope, 1e-9, 1 - 1e-9, xtol=1e-14)
    a, fit, converged, _ = sm.fit_map(
        prob.counts,
        p0,
        prob.basis,
        prob.prior_w,
        prob.prior_basis,
        prob.reference,
        beta=1e9,
        power=1.0,
        start_prevalence=0.5,
    )
    assert converged and fit.converged and fit.residual <= sm.TOL
    assert a == pytest.approx(exact, abs=1e-4)
    np.testing.assert_allclose(fit.heights, prob.reference.heights, atol=1e-3)
    assert fit.prior_penalty < 1e-8


def _fit(prob: Problem, beta: float, power: float = 2.0) -> tuple[float, sm.MapFit, bool, int]:
    return sm.fit_map(
        prob.counts,
        prob.mass_neg,
        prob.basis,
        prob.prior_w,
        prob.prior_basis,
        prob.reference,
        beta=beta,
        power=power,
        start_prevalence=0.1,
    )


def test_map_without_prior_fits_better_than_with() -> None:
    prob = _problem(8)
    _, free, ok_free, _ = _fit(prob, 0.0)
    _, tied, ok_tied, _ = _fit(prob, 1e4)
    assert ok_free and ok_tied
    assert free.prior_penalty > tied.prior_penalty
    assert free.log_posterior >= tied.log_posterior + tied.beta * tied.prior_penalty - 1e-6


def _map_kkt(prob: Problem, a: float, fit: sm.MapFit, beta: float, power: float) -> float:
    """KKT residual of the MAP fit in (alpha, h), by central differences of the hand formula.

    Minimise F(a, h) = -(sum c log((1-a) P0 + a A h) - beta sum pi g(B h - f_ref)^p) / C over
    0 <= a <= 1, h >= 0, w.h = 1. With the multiplier lambda = -h . grad_h F of w.h = 1 (F
    evaluated off the constraint surface is the same formula), the reduced gradient
    grad_h F + lambda w must vanish on positive heights and be >= 0 on zero ones; the same for
    a on [0, 1]. Differences with step 1e-7 (one-sided at a bound): error about 1e-8.
    """
    w = sm.trapezoid_weights(prob.nodes)
    ref = prob.reference_density
    total = prob.counts.sum()

    def f(x: np.ndarray) -> float:
        alpha, h = x[0], x[1:]
        mix = (1 - alpha) * prob.mass_neg + alpha * (prob.basis @ h)
        d = prob.prior_basis @ h - ref
        g = d * d / (np.sqrt(1 + d * d) + 1)
        return -float(prob.counts @ np.log(mix) - beta * prob.prior_w @ g**power) / total

    x = np.concatenate(([a], fit.heights))
    step = 1e-7
    grad = np.empty(x.size)
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = step
        lo = x - e if x[j] > step else x
        grad[j] = (f(x + e) - f(lo)) / (x[j] + step - lo[j])
    reduced = grad.copy()
    reduced[1:] -= float(fit.heights @ grad[1:]) * w
    out = []
    for j in range(x.size):
        r = reduced[j]
        at_lower = x[j] <= step
        at_upper = j == 0 and x[j] >= 1 - step
        out.append(max(-r, 0.0) if at_lower else (max(r, 0.0) if at_upper else abs(r)))
    return max(out)


def _old_tnc_fit(prob: Problem, beta: float, power: float) -> float:
    """The mean objective reached by the previous code: TNC in reference 001's (logit a, q).

    A copy of the former fit_map's call (map_objective is unchanged), from the same start.
    """
    q0 = prob.reference.log_heights
    theta0 = np.concatenate(([np.log(0.1 / 0.9)], q0))
    result = minimize(
        lambda th: sm.map_objective(th, *prob.args(), beta=beta, power=power),
        theta0,
        jac=True,
        method="TNC",
        bounds=[(-30.0, 30.0)] + [(-40.0, 40.0)] * q0.size,
        options={"maxfun": 5000, "gtol": 1e-9, "ftol": 0.0, "xtol": 0.0},
    )
    return float(result.fun)


@pytest.mark.parametrize("seed", [4, 8, 9])
@pytest.mark.parametrize(("beta", "power"), [(0.0, 1.0), (1.0, 1.0), (10.0, 2.0), (1e4, 2.0)])
def test_map_is_a_kkt_point_and_never_worse_than_the_old_fit(
    seed: int, beta: float, power: float
) -> None:
    prob = _problem(seed)
    a, fit, converged, n_iter = _fit(prob, beta, power)
    assert converged and fit.converged and fit.residual <= sm.TOL and n_iter == fit.n_iter
    # Independent check, first-order optimality by differences. The fit's own tolerance is on
    # gradients scaled by 1/sqrt(curvature), curvatures here are below 1e4, so unscaled
    # components stay below TOL * 100 = 1e-5.
    assert _map_kkt(prob, a, fit, beta, power) < 1e-5
    # the log-posterior is never worse than the old TNC fit's (mean objective; the bound is
    # the rounding of the objective, ~1e-15 per count, with a wide margin)
    old = _old_tnc_fit(prob, beta, power)
    new = -fit.log_posterior / prob.counts.sum()
    assert new <= old + 1e-10


def test_map_small_prior_moves_a_height_from_zero() -> None:
    # The reference density is 0 at node 0 (beta(5, 2) positives); the target's positives
    # (beta(2, 6)-like, with the negatives) want mass there. Reference 001's log-heights
    # start at the clip and cannot move; the fit in (alpha, v) does, and gains nats.
    prob = _problem(4)
    assert prob.reference.heights[0] == 0.0
    _, fit, converged, _ = _fit(prob, 0.0)
    assert converged and fit.heights[0] > 0.1
    assert -fit.log_posterior / prob.counts.sum() < _old_tnc_fit(prob, 0.0, 2.0) - 1e-4


def test_fit_map_reports_non_convergence_when_capped() -> None:
    prob = _problem(8)
    a, fit, converged, n_iter = sm.fit_map(
        prob.counts,
        prob.mass_neg,
        prob.basis,
        prob.prior_w,
        prob.prior_basis,
        prob.reference,
        beta=1.0,
        power=2.0,
        start_prevalence=0.5,
        max_iter=1,
    )
    assert not converged and not fit.converged and n_iter == 1 and fit.residual > sm.TOL
    assert 0.0 <= a <= 1.0


def test_fit_map_refuses_bad_options() -> None:
    prob = _problem(9)
    with pytest.raises(InputError, match="map_power"):
        _fit(prob, 1.0, power=0.5)
    with pytest.raises(InputError, match="map_beta"):
        _fit(prob, -1.0)


def _lbfgsb_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the fits skip projected Newton: its 0 iterations fail the criterion, so the whole
    fit is the L-BFGS-B restart (the solver before the change)."""

    def no_newton(fun, x0, **_):  # type: ignore[no-untyped-def]
        return np.asarray(x0, dtype=float), 0

    monkeypatch.setattr(sm, "projected_newton", no_newton)


@pytest.mark.parametrize("seed", range(6))
def test_newton_density_fit_is_a_kkt_point_and_matches_lbfgsb(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Random shapes with empty stretches (heights on the bound 0 at one or both ends), random
    # node positions; KKT checked by central differences of the hand formula, independently of
    # the fit's own gradient, and the objective against an L-BFGS-B solution of the same
    # problem: a convex F with residual r is within about r^2 / curvature of its minimum.
    rng = np.random.default_rng(100 + seed)
    nodes = np.sort(np.concatenate(([0.0, 1.0], rng.uniform(0.05, 0.95, 5))))
    edges = np.linspace(0.0, 1.0, 61)
    low, high = rng.uniform(0.0, 0.3), rng.uniform(0.7, 1.0)
    sample = low + (high - low) * rng.beta(rng.uniform(1, 4), rng.uniform(1, 4), 3000)
    counts = np.histogram(sample, bins=edges)[0].astype(float)
    basis = _cells(nodes, edges)
    w = sm.trapezoid_weights(nodes)
    fit = sm.fit_piecewise_linear(counts, basis, nodes)
    assert fit.converged and fit.residual <= sm.TOL and fit.n_iter < 30
    assert np.all(fit.heights >= 0.0) and float(w @ fit.heights) == pytest.approx(1.0, abs=1e-12)
    assert _density_kkt(counts, basis, fit.heights, w) < 1e-5

    def mean_objective(h: np.ndarray) -> float:
        n = counts / counts.sum()
        used = n > 0
        return -float(n[used] @ np.log(basis[used] @ h))

    with monkeypatch.context() as patch:
        _lbfgsb_only(patch)
        old = sm.fit_piecewise_linear(counts, basis, nodes)
    assert old.converged
    assert mean_objective(fit.heights) == pytest.approx(mean_objective(old.heights), abs=1e-10)


@pytest.mark.parametrize("seed", [4, 8, 9, 11])
@pytest.mark.parametrize(("beta", "power"), [(0.0, 1.0), (3.0, 1.0), (10.0, 1.5), (1e4, 2.0)])
def test_newton_map_fit_is_a_kkt_point_and_matches_lbfgsb(
    seed: int, beta: float, power: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Problem 4's reference density is 0 at node 0 (a height starting on its bound); small
    # priors move heights to and from 0. Signs at the bounds and first-order conditions by
    # differences (_map_kkt); the objective equals the L-BFGS-B fit's within the rounding
    # and tolerance of the criterion (both converged: residual TOL in scaled coordinates is a
    # possible gain of about TOL^2 / 2 per count in each coordinate).
    prob = _problem(seed)
    a, fit, converged, n_iter = _fit(prob, beta, power)
    assert converged and fit.residual <= sm.TOL and n_iter < 40
    assert 0.0 <= a <= 1.0 and np.all(fit.heights >= 0.0)
    assert _map_kkt(prob, a, fit, beta, power) < 1e-5
    with monkeypatch.context() as patch:
        _lbfgsb_only(patch)
        _, old, old_converged, _ = _fit(prob, beta, power)
    assert old_converged
    total = prob.counts.sum()
    new_value, old_value = -fit.log_posterior / total, -old.log_posterior / total
    assert new_value <= old_value + 1e-12
    assert new_value == pytest.approx(old_value, abs=1e-10)


def test_map_exact_hessian_matches_differences_of_the_gradient() -> None:
    # _map_derivatives' Hessian in (alpha, h), against central differences of its gradient.
    prob = _problem(4)
    rng = np.random.default_rng(7)
    for beta, power in [(0.0, 1.0), (10.0, 1.0), (10.0, 1.5), (1e3, 2.0), (5.0, 3.0)]:
        total = prob.counts.sum()
        data = sm._MapData(
            share=prob.counts / total,
            mass_neg=prob.mass_neg,
            cell_basis=sm.BandedBasis.of(prob.basis),
            prior_weights=prob.prior_w,
            prior_scale=beta / total * prob.prior_w,
            prior=sm.BandedBasis.of(prob.prior_basis),
            reference_density=prob.reference_density,
            beta_per_count=beta / total,
            power=power,
        )
        x = np.concatenate(([0.1], rng.random(prob.nodes.size) + 0.2))

        def grad(z: np.ndarray) -> np.ndarray:
            _, ga, gh, _ = sm._map_derivatives(float(z[0]), z[1:], data)  # noqa: B023
            return np.concatenate(([ga], gh))

        hessian = sm._map_derivatives(float(x[0]), x[1:], data)[3]()
        steps = np.eye(x.size) * 1e-6
        numeric = np.column_stack([(grad(x + e) - grad(x - e)) / 2e-6 for e in steps])
        np.testing.assert_allclose(hessian, numeric, atol=1e-7 * np.abs(hessian).max())


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(["hat", "cells", "wide cells", "dense"]),
    n=st.integers(1, 60),
)
def test_banded_basis_products_are_the_dense_ones(seed: int, kind: str, n: int) -> None:
    # B h, B^T u and B^T diag(s) B by rows' bands, against NumPy's dense products, for hat
    # functions (two columns per row), cell probabilities (two or three), cells wider than
    # the node gaps, and a dense matrix (one band of every column).
    rng = np.random.default_rng(seed)
    nodes = np.sort(np.concatenate(([0.0, 1.0], rng.random(int(rng.integers(1, 9))))))
    nodes = np.unique(nodes)
    if kind == "hat":
        dense = sm.interp_basis(np.concatenate((nodes, rng.random(n))), nodes)
    elif kind in ("cells", "wide cells"):
        edges = np.sort(rng.random(n + 1) ** (1 if kind == "cells" else 0.2))
        dense = sm.cdf_basis(edges[1:], nodes) - sm.cdf_basis(edges[:-1], nodes)
    else:
        dense = rng.random((n, nodes.size))
    basis = sm.BandedBasis.of(dense)
    h, u, s = rng.random(nodes.size), rng.normal(size=dense.shape[0]), rng.random(dense.shape[0])
    scale = 1.0 + np.abs(dense).sum()
    np.testing.assert_allclose(basis.apply(h), dense @ h, rtol=0, atol=1e-14 * scale)
    np.testing.assert_allclose(basis.rapply(u), u @ dense, rtol=0, atol=1e-13 * scale)
    gram = basis.gram(s)
    np.testing.assert_allclose(gram, (dense.T * s) @ dense, rtol=0, atol=1e-13 * scale)
    assert np.array_equal(gram, gram.T)  # each pair's product first: exactly symmetric
    assert np.array_equal(basis.dense(), dense)
    np.testing.assert_array_equal(  # every non-zero is inside its row's band
        np.take_along_axis(dense, basis.first[:, None] + np.arange(basis.band.shape[1]), 1),
        basis.band,
    )
    assert np.count_nonzero(basis.band) == np.count_nonzero(dense)
    keep = s > 0.5
    part = basis.take(keep)
    np.testing.assert_allclose(
        part.gram(s[keep]), (dense[keep].T * s[keep]) @ dense[keep], rtol=0, atol=1e-13 * scale
    )
    assert sm.BandedBasis.of(basis) is basis


def test_banded_basis_of_hat_functions_has_two_columns() -> None:
    nodes = sm.uniform_nodes(10)
    basis = sm.BandedBasis.of(sm.interp_basis(np.linspace(0.0, 1.0, 101), nodes))
    assert basis.band.shape == (101, 2)
    edges = np.array([0.0, 0.02, 0.05, 0.15, 0.5])  # the third cell straddles the node 0.1
    cells = sm.BandedBasis.of(sm.cdf_basis(edges[1:], nodes) - sm.cdf_basis(edges[:-1], nodes))
    assert cells.band.shape[1] == 5  # the last cell, 0.15-0.5, spans columns 1-5
    assert cells.first.tolist() == [0, 0, 0, 1]


@pytest.mark.parametrize("seed", range(6))
def test_hessian_in_v_is_the_chain_rule_through_h(seed: int) -> None:
    # _hessian_in_v against the dense chain rule J^T M J + the curvature of h = v / S, and
    # against central differences of the gradient in (alpha, v_free) of a smooth function
    rng = np.random.default_rng(seed)
    m1 = int(rng.integers(3, 12))
    weights = sm.trapezoid_weights(np.sort(np.concatenate(([0.0, 1.0], rng.random(m1 - 2)))))
    free = np.ones(m1, dtype=bool)
    free[int(rng.integers(m1))] = False
    # f(alpha, h) = a quadratic with a symmetric Hessian; its gradient in h is G
    q = rng.normal(size=(m1 + 1, m1 + 1))
    full = q @ q.T
    lin = rng.normal(size=m1 + 1)
    v = rng.uniform(0.2, 2.0, m1)
    alpha = 0.3

    def grad_in_v(x: np.ndarray) -> np.ndarray:
        vv = v.copy()
        vv[free] = x[1:]
        s = float(weights @ vv)
        z = np.concatenate(([x[0]], vv / s))
        g = lin + full @ z  # gradient in (alpha, h)
        gh = g[1:]
        return np.concatenate(([g[0]], ((gh - weights * float(gh @ (vv / s))) / s)[free]))

    s = float(weights @ v)
    h = v / s
    z = np.concatenate(([alpha], h))
    grad_h = (lin + full @ z)[1:]
    got = sm._hessian_in_v(full, grad_h, h, weights, free, s)
    jac = (np.eye(m1)[:, free] - np.outer(h, weights[free])) / s
    gh = float(grad_h @ h)
    wf = weights[free]
    bend = np.outer(grad_h[free], wf)
    dense = np.empty_like(got)
    dense[0, 0] = full[0, 0]
    dense[0, 1:] = dense[1:, 0] = full[0, 1:] @ jac
    dense[1:, 1:] = jac.T @ full[1:, 1:] @ jac + (2 * gh * np.outer(wf, wf) - bend - bend.T) / s**2
    np.testing.assert_allclose(got, dense, rtol=1e-12, atol=1e-12 * np.abs(dense).max())
    x = np.concatenate(([alpha], v[free]))
    steps = np.eye(x.size) * 1e-6
    numeric = np.column_stack([(grad_in_v(x + e) - grad_in_v(x - e)) / 2e-6 for e in steps])
    np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-6 * np.abs(got).max())
