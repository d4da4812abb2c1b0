"""Beta calibration: recovery of a known map, and the constrained likelihood optimum via SciPy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit

from calib_cli.core.beta import BetaParams, apply_beta, fit_beta
from calib_cli.core.platt import apply_platt, fit_platt
from calib_cli.errors import InputError


def _neg_log_lik(theta: np.ndarray, p: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    z = theta[2] + theta[0] * np.log(p) - theta[1] * np.log1p(-p)
    return float(np.sum(w * (np.logaddexp(0.0, z) - y * z)))


def _reference(p: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The constrained maximum-likelihood (a, b, c) by L-BFGS-B with a, b >= 0 (no Newton)."""
    best = None
    for start in ([1.0, 1.0, 0.0], [0.0, 0.0, 0.0]):
        res = minimize(
            _neg_log_lik,
            np.array(start),
            args=(p, y, w),
            method="L-BFGS-B",
            bounds=[(0.0, None), (0.0, None), (None, None)],
            options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 10_000},
        )
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    return np.asarray(best.x)


def test_recovers_a_known_beta_map() -> None:
    rng = np.random.default_rng(1)
    p = rng.beta(2.0, 3.0, 400_000)
    a, b, c = 2.0, 0.5, 0.3
    y = (rng.uniform(size=p.size) < expit(c + a * np.log(p) - b * np.log1p(-p))).astype(float)
    params = fit_beta(p, y)
    assert params.converged
    assert params.a == pytest.approx(a, abs=0.05)
    assert params.b == pytest.approx(b, abs=0.05)
    assert params.c == pytest.approx(c, abs=0.05)


def test_saturated_hand_worked_case() -> None:
    # Three distinct scores with label rates 1/4, 2/4, 4/5: three parameters fit them exactly,
    # so the optimum solves logit(rate_k) = a ln p_k - b ln(1 - p_k) + c (a 3x3 linear system,
    # solution a = 0.5739, b = 1.2185, c = -0.4468: both coefficients positive).
    p = np.repeat([0.2, 0.5, 0.8], [4, 4, 5])
    y = np.array([1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 0], dtype=float)
    grid = np.array([0.2, 0.5, 0.8])
    design = np.column_stack([np.log(grid), -np.log1p(-grid), np.ones(3)])
    rates = np.array([0.25, 0.5, 0.8])
    exact = np.linalg.solve(design, np.log(rates / (1.0 - rates)))
    params = fit_beta(p, y)
    assert params.converged
    np.testing.assert_allclose([params.a, params.b, params.c], exact, atol=1e-9)
    np.testing.assert_allclose(apply_beta(params, grid), rates, atol=1e-10)


def test_unconstrained_case_matches_scipy() -> None:
    rng = np.random.default_rng(2)
    p = rng.uniform(0.01, 0.99, 500)
    y = (rng.uniform(size=p.size) < expit(2.0 * np.log(p) - 1.5 * np.log1p(-p) + 0.5)).astype(float)
    w = rng.uniform(0.5, 2.0, p.size)
    params = fit_beta(p, y, sample_weight=w)
    ref = _reference(p, y, w)
    assert params.a > 0.0 and params.b > 0.0
    np.testing.assert_allclose([params.a, params.b, params.c], ref, atol=2e-5)
    theta = np.array([params.a, params.b, params.c])
    assert _neg_log_lik(theta, p, y, w) <= _neg_log_lik(ref, p, y, w) + 1e-10


@pytest.mark.parametrize("seed", [3, 4, 5, 6])
def test_constrained_cases_match_scipy(seed: int) -> None:
    # Labels that rise then fall with the score: the unconstrained fit has a negative
    # coefficient, so the optimum lies on a face of {a >= 0, b >= 0}.
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 0.99, 50)
    rate = 0.5 + 0.4 * np.sin(seed + 5.0 * p)
    y = (rng.uniform(size=p.size) < rate).astype(float)
    w = rng.uniform(0.5, 2.0, p.size)
    params = fit_beta(p, y, sample_weight=w)
    ref = _reference(p, y, w)
    theta = np.array([params.a, params.b, params.c])
    assert params.a >= 0.0 and params.b >= 0.0 and params.converged
    assert _neg_log_lik(theta, p, y, w) == pytest.approx(_neg_log_lik(ref, p, y, w), abs=1e-9)
    np.testing.assert_allclose(theta, ref, atol=1e-4)


def test_dip_puts_the_optimum_on_a_face() -> None:
    # Scores {0.2, 0.5, 0.8} with label rates 1/2, 1/4, 1/2 (a dip): the unconstrained fit
    # has a negative coefficient, and the constrained optimum has a = 0 or b = 0.
    p = np.array([0.2, 0.2, 0.5, 0.5, 0.5, 0.5, 0.8, 0.8, 0.2, 0.2, 0.8, 0.8])
    y = np.array([1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 1, 0], dtype=float)
    params = fit_beta(p, y)
    ref = _reference(p, y, np.ones_like(p))
    assert min(params.a, params.b) == 0.0
    np.testing.assert_allclose([params.a, params.b, params.c], ref, atol=1e-5)


def test_platt_is_the_special_case_a_equals_b() -> None:
    rng = np.random.default_rng(7)
    p = rng.uniform(0.01, 0.99, 300_000)
    logits = np.log(p) - np.log1p(-p)
    y = (rng.uniform(size=p.size) < expit(0.6 * logits - 0.2)).astype(float)
    beta = fit_beta(p, y)
    platt = fit_platt(p, y)
    assert beta.a == pytest.approx(beta.b, abs=0.02)
    grid = np.linspace(0.05, 0.95, 19)
    np.testing.assert_allclose(apply_beta(beta, grid), apply_platt(platt, grid), atol=5e-3)


def test_apply_formula_and_identity() -> None:
    identity = BetaParams(a=1.0, b=1.0, c=0.0, converged=True, n_iter=0)
    grid = np.linspace(0.0, 1.0, 11)
    np.testing.assert_allclose(apply_beta(identity, grid), np.clip(grid, 1e-12, 1 - 1e-12))
    params = BetaParams(a=2.0, b=0.5, c=-0.3, converged=True, n_iter=4)
    inner = grid[1:-1]
    expected = 1.0 / (1.0 + 1.0 / (np.exp(-0.3) * inner**2.0 / (1.0 - inner) ** 0.5))
    np.testing.assert_allclose(apply_beta(params, inner), expected, rtol=1e-13)
    assert BetaParams.kind == "beta"


def test_separable_data_give_a_finite_monotone_map() -> None:
    p = np.array([0.05, 0.1, 0.2, 0.3, 0.6, 0.7, 0.8, 0.95])
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    params = fit_beta(p, y)
    assert params.separable  # reported, as Platt's fit reports it
    assert not fit_beta(p, [0, 0, 0, 1, 0, 1, 1, 1]).separable
    assert all(np.isfinite([params.a, params.b, params.c]))
    out = apply_beta(params, np.linspace(0, 1, 101))
    assert np.all(np.diff(out) >= 0.0) and np.all((out > 0.0) & (out < 1.0))
    fitted = apply_beta(params, p)
    assert np.all(fitted[y == 1] > 0.5) and np.all(fitted[y == 0] < 0.5)


def test_inputs_not_mutated_and_bad_input_refused() -> None:
    p = np.array([0.1, 0.4, 0.35, 0.8])
    y = np.array([0, 0, 1, 1])
    w = np.array([1.0, 2.0, 1.0, 1.0])
    copies = p.copy(), y.copy(), w.copy()
    fit_beta(p, y, sample_weight=w)
    for before, after in zip(copies, (p, y, w), strict=True):
        np.testing.assert_array_equal(before, after)
    with pytest.raises(InputError, match="eps must be in"):
        fit_beta(p, y, eps=1.0)
    with pytest.raises(InputError, match="outside \\[0, 1\\]"):
        fit_beta([0.1, 3.0], [0, 1])
    with pytest.raises(InputError, match="no negative rows"):
        fit_beta([0.1, 0.3], [1, 1])
