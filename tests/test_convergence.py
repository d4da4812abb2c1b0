"""The project's own convergence criteria (calib_cli.core.convergence)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calib_cli.core.convergence import (
    Convergence,
    newton_distance,
    projected_gradient,
    projected_gradient_residual,
    projected_newton,
    with_one_restart,
)


def test_projected_gradient_is_zero_exactly_at_kkt_points() -> None:
    # min (x - c)^2 / 2 on [0, 1]: the KKT point is clip(c); the gradient there is x - c.
    for c in (-2.0, 0.3, 5.0):
        x = min(max(c, 0.0), 1.0)
        assert projected_gradient_residual([x], [x - c], lower=0.0, upper=1.0) == 0.0
    # away from it, the residual is the distance to the projected gradient step
    np.testing.assert_allclose(
        projected_gradient([0.5, 0.0, 1.0], [0.2, -0.3, -4.0], lower=0.0, upper=1.0),
        [0.2, -0.3, 0.0],
    )
    assert projected_gradient_residual([], []) == 0.0
    assert projected_gradient_residual([0.5], [math.nan]) == math.inf


def test_newton_distance_is_the_distance_to_the_maximiser_of_a_quadratic() -> None:
    # l(x) = -k (x - m)^2 / 2: slope k (m - x), curvature k: exact for a quadratic
    for m, x in ((0.3, 0.1), (0.3, 0.9), (-1.0, 0.4), (2.0, 0.4)):
        k = 7.0
        expected = abs(min(max(m, 0.0), 1.0) - x)
        assert newton_distance(x, k * (m - x), k) == pytest.approx(expected, abs=1e-15)
    assert newton_distance(0.5, 1.0, 0.0) == math.inf
    assert newton_distance(1.0, 1.0, 0.0) == 0.0


def test_one_restart_only_when_stopped_early() -> None:
    calls: list[int] = []

    def stall(x: np.ndarray, budget: int) -> tuple[np.ndarray, int]:
        calls.append(budget)
        n = min(2, budget)
        return x / 2.0**n, n

    def residual(x: np.ndarray) -> float:
        return float(abs(x[0]))

    x, conv = with_one_restart(stall, residual, np.array([1.0]), tol=1e-3, max_iter=10)
    assert calls == [10, 8] and conv == Convergence(False, 0.0625, 4) and x[0] == 0.0625
    calls.clear()
    _, capped = with_one_restart(stall, residual, np.array([1.0]), tol=1e-3, max_iter=2)
    assert calls == [2] and not capped.converged and capped.n_iter == 2


@pytest.mark.parametrize("seed", range(8))
def test_projected_newton_solves_box_constrained_problems(seed: int) -> None:
    # f(x) = q(x) + sum exp(x) (convex, not quadratic) on a box with some bounds active at
    # the solution; checked against L-BFGS-B run to 1e-13 and by the projected gradient.
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    k = 8
    root = rng.normal(size=(k, k))
    a = root @ root.T / k + 0.05 * np.eye(k)
    b = rng.normal(scale=2.0, size=k)
    lo, hi = np.where(rng.random(k) < 0.7, 0.0, -np.inf), np.where(rng.random(k) < 0.3, 1.0, np.inf)

    def value_grad(x: np.ndarray) -> tuple[float, np.ndarray]:
        e = np.exp(x)
        return float(x @ a @ x / 2 - b @ x + e.sum()), a @ x - b + e

    def fun(x: np.ndarray):  # type: ignore[no-untyped-def]
        value, grad = value_grad(x)
        return value, grad, lambda: a + np.diag(np.exp(x))

    x, n_iter = projected_newton(fun, np.full(k, 0.5), lower=lo, upper=hi, tol=1e-12, max_iter=100)
    assert n_iter < 30
    assert projected_gradient_residual(x, value_grad(x)[1], lower=lo, upper=hi) <= 1e-12
    ref = minimize(
        value_grad,
        np.full(k, 0.5),
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(lo, hi, strict=True)),
        options={"ftol": 0.0, "gtol": 1e-13, "maxiter": 10_000},
    )
    assert value_grad(x)[0] <= float(ref.fun) + 1e-12


def test_projected_newton_handles_an_indefinite_hessian_and_stops_at_the_cap() -> None:
    # f(x, y) = (x^2 - 1)^2 + y^2 from near the saddle x = 0: the Hessian is indefinite there,
    # the modified step still descends, and the fit ends at x = 1 (inside [0, 2]).
    def fun(p: np.ndarray):  # type: ignore[no-untyped-def]
        x, y = p
        grad = np.array([4 * x * (x * x - 1), 2 * y])
        hess = np.array([[12 * x * x - 4, 0.0], [0.0, 2.0]])
        return float((x * x - 1) ** 2 + y * y), grad, lambda: hess

    p, _ = projected_newton(fun, [0.1, 0.3], lower=0.0, upper=2.0, tol=1e-12, max_iter=50)
    assert p[0] == pytest.approx(1.0, abs=1e-12) and p[1] == pytest.approx(0.0, abs=1e-12)
    capped, n_capped = projected_newton(
        fun, [0.1, 0.3], lower=0.0, upper=2.0, tol=1e-12, max_iter=1
    )
    assert n_capped == 1 and abs(capped[0] - 1.0) > 1e-3


def test_restart_may_use_another_solver() -> None:
    used: list[str] = []

    def first(x: np.ndarray, budget: int) -> tuple[np.ndarray, int]:
        used.append("first")
        return x, 1

    def second(x: np.ndarray, budget: int) -> tuple[np.ndarray, int]:
        used.append("second")
        return x * 0.0, 2

    x, conv = with_one_restart(
        first, lambda x: float(abs(x[0])), np.array([1.0]), tol=1e-6, max_iter=10, restart=second
    )
    assert used == ["first", "second"] and conv == Convergence(True, 0.0, 3) and x[0] == 0.0
