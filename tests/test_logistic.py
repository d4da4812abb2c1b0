"""The one logistic solver (calib_cli.core.logistic): its criterion checked independently.

References: the gradient of the weighted mean log loss written out here, central differences
of the loss, scipy's brentq on the offset model's score equation, and the inverse Fisher
information computed with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize
from scipy.special import expit

from calib_cli.core.logistic import fit_logistic


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)) * np.array([1.0, 30.0]) + np.array([0.0, 500.0])
    y = (rng.random(n) < expit(0.8 * x[:, 0] - 0.02 * (x[:, 1] - 500.0) - 1.0)).astype(float)
    return x, y, rng.uniform(0.5, 2.0, n)


def _mean_loss(x: np.ndarray, y: np.ndarray, w: np.ndarray, c: float, b: np.ndarray) -> float:
    eta = c + x @ b
    return float(w @ (np.logaddexp(0.0, eta) - y * eta)) / float(w.sum())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_returned_point_meets_the_criterion_checked_independently(seed: int) -> None:
    x, y, w = _data(3000, seed)
    fit = fit_logistic(x, y, w, tol=1e-10)
    assert fit.converged and fit.residual <= 1e-10
    # gradient of the mean loss in standardised coordinates, written out here
    mean = (w @ x) / w.sum()
    sd = np.sqrt((w @ (x - mean) ** 2) / w.sum())
    r = w * (expit(fit.intercept + x @ fit.coef) - y) / w.sum()
    grad = np.r_[r @ ((x - mean) / sd), r.sum()]
    assert np.max(np.abs(grad)) <= 1e-10
    # and by central differences of the loss along the standardised directions (the
    # intercept moves with a coefficient so that the feature is centred): step 1e-4, rounding
    # noise 1e-16 / 1e-4, truncation 1e-8
    theta = np.r_[fit.intercept, fit.coef]
    directions = [np.r_[1.0, 0.0, 0.0]]
    directions += [np.r_[-mean[k] / sd[k], np.eye(2)[k] / sd[k]] for k in range(2)]
    for d in directions:
        up, down = theta + 1e-4 * d, theta - 1e-4 * d
        slope = _mean_loss(x, y, w, up[0], up[1:]) - _mean_loss(x, y, w, down[0], down[1:])
        assert abs(slope / 2e-4) < 1e-7


def test_capped_iterations_are_not_converged() -> None:
    x, y, w = _data(2000, 3)
    fit = fit_logistic(x, y, w, max_iter=1)
    assert not fit.converged and fit.n_iter == 1 and fit.residual > 1e-10


def test_offset_model_is_the_root_of_its_score_equation() -> None:
    x, y, w = _data(2000, 4)
    off = 0.5 * x[:, 0]
    fit = fit_logistic(np.empty((y.size, 0)), y, w, offset=off, covariance=True)
    a = optimize.brentq(lambda a: float(w @ (y - expit(a + off))), -10, 10, xtol=1e-14)
    assert fit.converged and fit.intercept == pytest.approx(a, abs=1e-10)
    mu = expit(a + off)
    assert fit.covariance is not None
    assert fit.covariance[0, 0] == pytest.approx(1.0 / float(w @ (mu * (1 - mu))), rel=1e-8)


def test_covariance_is_the_inverse_information() -> None:
    x, y, w = _data(2000, 5)
    fit = fit_logistic(x, y, w, covariance=True)
    mu = expit(fit.intercept + x @ fit.coef)
    design = np.column_stack([np.ones(y.size), x])
    expected = np.linalg.inv(design.T @ (design * (w * mu * (1 - mu))[:, None]))
    assert fit.covariance is not None
    np.testing.assert_allclose(fit.covariance, expected, rtol=1e-7)


def test_constant_feature_gets_zero_and_weights_count_as_repetition() -> None:
    x, y, _ = _data(500, 6)
    x[:, 1] = 3.0
    w = np.random.default_rng(6).integers(1, 4, y.size).astype(float)
    fit = fit_logistic(x, y, w)
    rep = fit_logistic(
        np.repeat(x, w.astype(int), axis=0), np.repeat(y, w.astype(int)), np.ones(int(w.sum()))
    )
    assert fit.coef[1] == 0.0 and fit.converged and rep.converged
    assert fit.coef[0] == pytest.approx(rep.coef[0], abs=1e-8)
    assert fit.intercept == pytest.approx(rep.intercept, abs=1e-8)
