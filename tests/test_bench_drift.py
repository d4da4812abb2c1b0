"""The benchmark's oracle for exact label-shift batches (the maximum-likelihood estimate that
knows the class densities), against hand-worked cases, and its efficient floor against a
simulation of that oracle."""

from __future__ import annotations

import numpy as np
import pytest

from bench import bench_drift


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
        errors.append(abs(bench_drift.known_density_mle(counts.astype(float), f0, f1) - k / 2000))
    simulated = float(np.mean(errors))
    # Monte Carlo error of the mean of 2,000 absolute errors: under 3% (sd / mean of |N| is
    # 0.76); the asymptotic formula is within a few percent at 2,000 rows
    assert simulated == pytest.approx(floor, rel=0.08)


def test_known_density_mle_hand_worked() -> None:
    # two bins: the batch's share in bin 2 is 0.25 + 0.5 p, so p = (share - 0.25) / 0.5
    f0, f1 = np.array([0.75, 0.25]), np.array([0.25, 0.75])
    assert bench_drift.known_density_mle(np.array([60.0, 40.0]), f0, f1) == pytest.approx(
        0.3, abs=1e-10
    )
    # a share outside [0.25, 0.75] is clipped at the end it passes
    assert bench_drift.known_density_mle(np.array([90.0, 10.0]), f0, f1) == 0.0
    assert bench_drift.known_density_mle(np.array([10.0, 90.0]), f0, f1) == 1.0


def test_known_density_mle_count_where_one_class_never_is() -> None:
    # a row in bin 3, where only positives live: the estimate cannot be 0
    f0, f1 = np.array([0.8, 0.2, 0.0]), np.array([0.2, 0.3, 0.5])
    p = bench_drift.known_density_mle(np.array([80.0, 19.0, 1.0]), f0, f1)
    assert 0.0 < p < 1.0
    # the score equation holds at the root (bins 1 and 2 only would give about 0.0)
    mix = p * f1 + (1.0 - p) * f0
    counts = np.array([80.0, 19.0, 1.0])
    assert abs(float(np.sum(counts * (f1 - f0) / mix))) < 1e-6 * counts.sum()


def test_oracle_estimates_recovers_batches_from_their_pool() -> None:
    # a pool of two well-separated classes: the oracle's error on exact batches is small and
    # shrinks with the batch's noise only
    rng = np.random.default_rng(3)
    pool_y = rng.random(20_000) < 0.3
    pool_scores = np.where(pool_y, rng.normal(1.0, 1.0, 20_000), rng.normal(-1.0, 1.0, 20_000))
    rows, batch, truth = bench_drift.exact_batches(pool_y, reps=3, rng=rng)
    found = bench_drift.oracle_estimates(pool_scores, pool_y, pool_scores[rows], batch)
    assert found.prevalence.shape == truth.shape
    floor = bench_drift.efficient_floor(pool_scores, pool_y, truth)
    # 27 batches: their mean error is near the efficient floor (within the Monte Carlo noise
    # of 27 absolute errors, about 15%, and a few percent of asymptotics; 0.82-0.99 over 5 seeds)
    assert float(np.mean(np.abs(found.prevalence - truth))) == pytest.approx(
        float(np.mean(floor)), rel=0.3
    )
