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
