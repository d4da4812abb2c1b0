"""The summaries the commands report, against independent references."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

from calib_cli.core.metrics import calibration_effect
from calib_cli.core.pca import pca_strata


def test_calibration_effect_matches_scikit_learn() -> None:
    rng = np.random.default_rng(0)
    y = (rng.random(500) < 0.2).astype(float)
    before = np.clip(rng.random(500) * 0.6 + 0.3 * y, 0, 1)
    after = np.clip(before * 0.5, 0, 1)
    w = rng.integers(1, 4, 500).astype(float)
    effect = calibration_effect(y, before, after, sample_weight=w)
    assert effect.mean_score_before == pytest.approx(np.average(before, weights=w), rel=1e-12)
    assert effect.base_rate == pytest.approx(np.average(y, weights=w), rel=1e-12)
    assert effect.before is not None and effect.after is not None
    assert effect.after.log_loss == pytest.approx(log_loss(y, after, sample_weight=w), rel=1e-10)
    assert effect.before.brier == pytest.approx(
        brier_score_loss(y, before, sample_weight=w), rel=1e-10
    )
    assert effect.after.auc == pytest.approx(roc_auc_score(y, after, sample_weight=w), rel=1e-10)


def test_calibration_effect_without_labels_or_probabilities() -> None:
    effect = calibration_effect(None, [-2.0, 3.0], [0.1, 0.9], before_are_probabilities=False)
    assert effect.mean_score_before is None
    assert effect.mean_score_after == pytest.approx(0.5)
    assert effect.before is None and effect.after is None and effect.base_rate is None


def test_pca_strata_label_rates_are_weighted_counts() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 2))
    x[:, 1] = x[:, 0] + 0.1 * rng.normal(size=300)
    y = (x[:, 0] > 0.5).astype(float)
    w = rng.integers(1, 3, 200).astype(float)
    out = pca_strata(
        x[:200],
        x[200:],
        n_strata=3,
        names=["a", "b"],
        reference_labels=y[:200],
        reference_weights=w,
    )
    assert out.n_strata == 3 and out.explained_variance_ratio > 0.95
    for name, rate in out.reference_label_rate.items():
        rows = out.reference_strata == name
        assert rate == pytest.approx(np.dot(w[rows], y[:200][rows]) / w[rows].sum())
    assert sorted(set(out.target_strata.tolist())) <= ["pc1", "pc2", "pc3"]


def test_normalised_weights_give_the_unweighted_calibration_errors() -> None:
    from calib_cli.core.metrics import reliability_summary

    rng = np.random.default_rng(0)
    n = 3000
    p = rng.beta(2, 8, n)
    y = (rng.random(n) < np.clip(p * 1.3, 0, 1)).astype(float)
    plain = reliability_summary(y, p, n_bootstrap=100, rng=np.random.default_rng(1))
    for scale in (1.0 / n, 0.5):
        scaled = reliability_summary(
            y, p, sample_weight=np.full(n, scale), n_bootstrap=100, rng=np.random.default_rng(1)
        )
        assert scaled.ece == pytest.approx(plain.ece, rel=1e-12)
        assert scaled.ece_debiased == pytest.approx(plain.ece_debiased, rel=1e-9)
        assert scaled.ece_debiased > 0.0
        assert scaled.ece_ci == pytest.approx(plain.ece_ci, rel=1e-9)
        assert scaled.ece_debiased_ci == pytest.approx(plain.ece_debiased_ci, rel=1e-9)


@pytest.mark.parametrize("engine", ["memory", "summary"])
def test_normalised_frequency_weights_count_in_rows_in_every_interval_and_test(
    engine: str,
) -> None:
    """Frequency weights below 1 on average count in units of their mean (the README's
    promise): weights of 1/n give the unweighted file's Wilson, DeLong and Wald intervals,
    Hosmer-Lemeshow and Spiegelhalter, not those of a file of one row; the weight totals
    stay in the weights' own units. Weights of 1 or more are counts (2 is two rows)."""
    from calib_cli.core.metrics import ReliabilitySummary, reliability_summary
    from calib_cli.summaries.figures import reliability_from_summary
    from calib_cli.summaries.summary import summarize_arrays

    rng = np.random.default_rng(5)
    n = 2000
    p = rng.beta(2, 6, n)
    y = (rng.random(n) < np.clip(p * 1.2, 0, 1)).astype(float)

    def figures(w: np.ndarray | None) -> ReliabilitySummary:
        if engine == "memory":
            return reliability_summary(y, p, sample_weight=w)
        return reliability_from_summary(summarize_arrays(y, p, sample_weight=w)).reliability

    plain, scaled, doubled = figures(None), figures(np.full(n, 1.0 / n)), figures(np.full(n, 2.0))
    for name in ("auc_ci", "calibration_intercept_ci", "calibration_slope_ci"):
        assert getattr(scaled, name) == pytest.approx(getattr(plain, name), rel=1e-9), name
    for name in ("hosmer_lemeshow", "spiegelhalter_z", "auc", "calibration_slope", "ece"):
        assert getattr(scaled, name) == pytest.approx(getattr(plain, name), rel=1e-9), name
    for got, want in zip(scaled.bins, plain.bins, strict=True):
        assert (got.observed_ci_low, got.observed_ci_high) == pytest.approx(
            (want.observed_ci_low, want.observed_ci_high), rel=1e-9, nan_ok=True
        )
        assert got.count == pytest.approx(want.count / n, rel=1e-12)  # the weights' units
    assert scaled.weight_total == pytest.approx(1.0, rel=1e-12)
    # weights of 2 are two rows each: narrower intervals, a statistic twice as large
    assert doubled.hosmer_lemeshow == pytest.approx(2.0 * plain.hosmer_lemeshow, rel=1e-9)
    width = plain.auc_ci[1] - plain.auc_ci[0]
    assert doubled.auc_ci[1] - doubled.auc_ci[0] < 0.75 * width
