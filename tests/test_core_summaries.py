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
