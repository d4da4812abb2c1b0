"""The benchmark's efficient floor for exact label-shift batches, against a simulation of the
maximum-likelihood estimate that knows the class densities."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

from bench import bench_drift


def _mle(counts: np.ndarray, f0: np.ndarray, f1: np.ndarray) -> float:
    """The mixture MLE of the positive share, clipped to [0, 1] (score equation's root)."""

    def score(p: float) -> float:
        return float(np.sum(counts * (f1 - f0) / (p * f1 + (1.0 - p) * f0)))

    if score(0.0) <= 0.0:
        return 0.0
    if score(1.0) >= 0.0:
        return 1.0
    return brentq(score, 0.0, 1.0, xtol=1e-12)


@pytest.mark.parametrize("rate", [0.01, 0.2])
def test_efficient_floor_is_the_error_of_the_known_density_mle(
    rate: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a pool whose scores take 4 values: the floor's equal-mass bins hold one value each
    monkeypatch.setattr(bench_drift, "FLOOR_BINS", 4)
    monkeypatch.setattr(bench_drift, "BATCH_ROWS", 2000)
    f0 = np.array([0.4, 0.3, 0.2, 0.1])
    f1 = np.array([0.1, 0.2, 0.3, 0.4])
    # a pool of 40,000 rows with these class densities; the quantile edges split the values
    per_class = 20_000
    values = np.array([0.1, 0.2, 0.3, 0.4])
    pool_scores = np.concatenate([np.repeat(values, (f * per_class).astype(int)) for f in (f0, f1)])
    pool_y = np.repeat([False, True], per_class)
    k = round(rate * 2000)
    floor = bench_drift.efficient_floor(pool_scores, pool_y, np.array([k / 2000]))[0]
    rng = np.random.default_rng(5)
    errors = []
    for _ in range(2000):
        counts = rng.multinomial(k, f1) + rng.multinomial(2000 - k, f0)
        errors.append(abs(_mle(counts.astype(float), f0, f1) - k / 2000))
    simulated = float(np.mean(errors))
    # Monte Carlo error of the mean of 2,000 absolute errors: under 3% (sd / mean of |N| is
    # 0.76); the asymptotic formula is within a few percent at 2,000 rows
    assert simulated == pytest.approx(floor, rel=0.08)
