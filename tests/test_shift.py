"""Tests of label-shift estimation (calib_cli.core.shift).

References used:
- accuracy: the Fisher information of the mixture with the *known* beta densities (scipy
  quad), and the delta-method standard errors of ACC / PACC from the known distributions;
- MLE: brute-force grid maximisation of the same binned likelihood, cells counted with
  ``np.searchsorted`` on the published cell edges;
- EM: a hand iteration of Saerens et al.'s update on per-row Platt posteriors;
- reference 001: the 97.7%-negatives scenario with a changed positive-score shape, and the
  Bayes threshold of its disease example (0.05 / 1.05);
- the profile interval: the chi-square(1) likelihood drop evaluated by hand.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats
from scipy.integrate import quad
from scipy.special import expit, logit

from calib_cli.core import shift as sh
from calib_cli.core import shift_map as sm
from calib_cli.core.platt import apply_platt
from calib_cli.errors import InputError

F0 = stats.beta(2, 5)
F1 = stats.beta(5, 2)


def _sample(rng: np.random.Generator, n: int, prevalence: float) -> tuple[np.ndarray, np.ndarray]:
    y = rng.random(n) < prevalence
    z = np.where(y, rng.beta(5, 2, n), rng.beta(2, 5, n))
    return z, y


@pytest.fixture(scope="module")
def big_reference() -> sh.ReferenceModel:
    z, y = _sample(np.random.default_rng(20240501), 100_000, 0.5)
    return sh.fit_reference(z, y)


@pytest.fixture(scope="module")
def small_reference() -> sh.ReferenceModel:
    z, y = _sample(np.random.default_rng(7), 4000, 0.3)
    return sh.fit_reference(z, y)


# ------------------------------------------------------------------------------------------
# Accuracy under exact label shift
# ------------------------------------------------------------------------------------------


def _mle_se(alpha: float, n: int) -> float:
    """1 / sqrt(n I(alpha)), I the Fisher information of the mixture with the true densities."""

    def integrand(z: float) -> float:
        f0, f1 = F0.pdf(z), F1.pdf(z)
        return float((f1 - f0) ** 2 / ((1 - alpha) * f0 + alpha * f1))

    info = float(quad(integrand, 0.0, 1.0, limit=200)[0])
    return 1.0 / math.sqrt(n * info)


def _acc_se(alpha: float, n: int, threshold: float, n_ref: int) -> float:
    """Delta method for (CC - FPR) / (TPR - FPR): target and reference binomial errors."""
    tpr, fpr = F1.sf(threshold), F0.sf(threshold)
    q = (1 - alpha) * fpr + alpha * tpr
    var = q * (1 - q) / n
    var += ((1 - alpha) ** 2 * fpr * (1 - fpr) + alpha**2 * tpr * (1 - tpr)) / (n_ref / 2)
    return float(math.sqrt(var) / (tpr - fpr))


def _pacc_se(alpha: float, n: int, n_ref: int) -> float:
    """Same for PACC with the true posterior at the balanced reference, p = f1 / (f0 + f1)."""

    def post(z: float) -> float:
        return float(F1.pdf(z) / (F0.pdf(z) + F1.pdf(z)))

    def moment(dist: stats.rv_continuous, k: int) -> float:
        return float(quad(lambda z: post(z) ** k * dist.pdf(z), 0.0, 1.0, limit=200)[0])

    m0, m1 = moment(F0, 1), moment(F1, 1)
    v0, v1 = moment(F0, 2) - m0**2, moment(F1, 2) - m1**2
    mean = (1 - alpha) * m0 + alpha * m1
    var_mix = (1 - alpha) * moment(F0, 2) + alpha * moment(F1, 2) - mean**2
    var = var_mix / n + ((1 - alpha) ** 2 * v0 + alpha**2 * v1) / (n_ref / 2)
    return math.sqrt(var) / (m1 - m0)


@pytest.mark.parametrize("alpha", [0.001, 0.01, 0.05, 0.2, 0.5])
@pytest.mark.parametrize("n", [1_000, 10_000, 100_000])
def test_exact_label_shift_errors_within_four_standard_errors(
    big_reference: sh.ReferenceModel, alpha: float, n: int
) -> None:
    """Documented tolerance: |error| < 4 standard errors (all four estimators).

    For mle and em the standard error is the larger of the efficient one, from the Fisher
    information of the true densities (target sampling only), and the bootstrap one, which
    adds the reference's sampling error: at small prevalences a 100k-row reference moves the
    estimate by as much as the batch does (too few negatives in the positives' score range).
    acc and pacc use their own delta-method SE, reference error included.
    """
    rng = np.random.default_rng(int(alpha * 1e6) + n)
    z, _ = _sample(rng, n, alpha)
    efficient = _mle_se(alpha, n)
    for method in ("mle", "em"):
        est = sh.estimate_prevalence(
            big_reference, z, method=method, n_bootstrap=50, rng=np.random.default_rng(0)
        )
        se = max(efficient, (est.ci_high - est.ci_low) / (2 * 1.96))
        assert abs(est.prevalence - alpha) < 4 * se, (method, est.prevalence, se)
        assert est.converged and est.method == method
    acc = sh.estimate_prevalence(big_reference, z, method="acc", n_bootstrap=0)
    assert acc.threshold is not None
    assert abs(acc.prevalence - alpha) < 4 * _acc_se(alpha, n, acc.threshold, 100_000)
    pacc = sh.estimate_prevalence(big_reference, z, method="pacc", n_bootstrap=0)
    assert abs(pacc.prevalence - alpha) < 4 * _pacc_se(alpha, n, 100_000)


def test_estimates_agree_with_each_other_and_interval_contains_truth(
    small_reference: sh.ReferenceModel,
) -> None:
    z, _ = _sample(np.random.default_rng(4), 3000, 0.15)
    for method in ("mle", "em", "acc", "pacc", "map"):
        est = sh.estimate_prevalence(small_reference, z, method=method, n_bootstrap=40)
        assert est.ci_low <= est.prevalence <= est.ci_high
        # map lets the positive shape move, which costs some bias under pure label shift
        assert abs(est.prevalence - 0.15) < (0.03 if method == "map" else 0.02), method
        if method != "map":
            assert est.ci_low < 0.15 < est.ci_high, method
        assert est.n == 3000 and est.requested_method == method
        assert est.reference_prevalence == pytest.approx(small_reference.reference_prevalence)


def _coverage(method: sh.EstimatedMethod, n_rep: int, n_bootstrap: int) -> float:
    rng = np.random.default_rng(99)
    alpha = 0.2
    covered = 0
    for _ in range(n_rep):
        z_ref, y_ref = _sample(rng, 3000, 0.3)
        ref = sh.fit_reference(z_ref, y_ref, n_fine=512)
        z, _ = _sample(rng, 2000, alpha)
        est = sh.estimate_prevalence(ref, z, method=method, n_bootstrap=n_bootstrap, rng=rng)
        covered += est.ci_low <= alpha <= est.ci_high
    return covered / n_rep


@pytest.mark.slow
def test_bootstrap_interval_coverage_mle() -> None:
    """95% bootstrap intervals (target and reference resampled) cover in 90-99% of 200 runs."""
    assert 0.90 <= _coverage("mle", 200, 80) <= 0.99


@pytest.mark.slow
def test_bootstrap_interval_coverage_em() -> None:
    assert 0.90 <= _coverage("em", 200, 60) <= 0.99


# ------------------------------------------------------------------------------------------
# Reference 001: the positive class changes shape
# ------------------------------------------------------------------------------------------


def _scenario_001(seed: int) -> tuple[sh.ReferenceModel, np.ndarray, float]:
    """97.7% negatives; the positive scores move from beta(4, 2) to beta(3, 3)."""
    rng = np.random.default_rng(seed)
    n = 50_000
    y = rng.random(n) < 0.023
    ref = sh.fit_reference(np.where(y, rng.beta(4, 2, n), rng.beta(1.5, 8, n)), y)
    t = rng.random(n) < 0.0234
    return ref, np.where(t, rng.beta(3, 3, n), rng.beta(1.5, 8, n)), 0.0234


def test_reference_001_scenario_map_beats_mle_and_em() -> None:
    grid = np.linspace(0.01, 0.99, 99)
    f0, f1 = stats.beta(1.5, 8).pdf(grid), stats.beta(3, 3).pdf(grid)
    errors: dict[str, list[float]] = {"mle": [], "em": [], "map": []}
    curve: dict[str, list[float]] = {"mle": [], "em": [], "map": []}
    for seed in (11, 12, 13):
        ref, z, alpha = _scenario_001(seed)
        truth = alpha * f1 / ((1 - alpha) * f0 + alpha * f1)
        for method in errors:
            est = sh.estimate_prevalence(ref, z, method=method, n_bootstrap=0)  # type: ignore[arg-type]
            assert est.converged, (method, est.residual)
            errors[method].append(abs(est.prevalence - alpha))
            c = sh.posterior(ref, est, grid)
            curve[method].append(float(np.sqrt(np.mean((c - truth) ** 2))))
    for other in ("mle", "em"):
        assert np.mean(errors["map"]) < 0.8 * np.mean(errors[other])
        assert np.mean(curve["map"]) < 0.7 * np.mean(curve[other])


@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize(("beta", "power"), [(1000.0, 1.0), (10.0, 2.0), (1.0, 1.0)])
def test_reference_001_map_is_optimal_and_never_worse_than_the_old_fit(
    seed: int, beta: float, power: float
) -> None:
    """The map fit converges by its own KKT criterion, says nothing about convergence, and its
    log-posterior is at least the one the former TNC fit in reference 001's log-heights reaches
    from the same start on the same problem (before the change small-beta fits stopped several
    nats short at heights stuck near 0)."""
    ref, z, _ = _scenario_001(seed)
    est = sh.estimate_prevalence(
        ref, z, method="map", n_bootstrap=0, map_beta=beta, map_power=power
    )
    assert est.converged and est.map_fit is not None
    assert est.residual == est.map_fit.residual <= sm.TOL
    assert not any("did not converge" in w for w in est.warnings)
    # the same problem, solved as the former code did
    setup = sh._map_setup(ref, 10, beta, power)
    stats = sh._summarise_target(ref, z, None)
    counts = sh._cell_sum(stats.weight, ref.cell_bounds)
    prior_w = ref.fine_weight_neg / ref.fine_weight_neg.sum()
    keep = prior_w > 0
    args = (
        counts,
        ref.mass_neg,
        setup.cell_basis.dense(),
        prior_w[keep],
        setup.prior_basis[keep],
        setup.prior_basis[keep] @ setup.reference_fit.heights,
        setup.nodes,
    )
    start = sh._estimate_mle(ref, stats).prevalence
    theta0 = np.r_[logit(min(max(start, 1e-6), 1 - 1e-6)), setup.reference_fit.log_heights]
    old = optimize.minimize(
        lambda th: sm.map_objective(th, *args, beta=beta, power=power),
        theta0,
        jac=True,
        method="TNC",
        bounds=[(-30.0, 30.0)] + [(-40.0, 40.0)] * (theta0.size - 1),
        options={"maxfun": 5000, "gtol": 1e-9, "ftol": 0.0, "xtol": 0.0},
    )
    new = -est.map_fit.log_posterior / counts.sum()
    assert new <= float(old.fun) + 1e-10  # mean objective; rounding is about 1e-15


def test_reference_001_scenario_auto_stays_mle_and_reports_the_misfit() -> None:
    """The fit p-value is a diagnostic: it rejects here, and auto still uses mle (it used to
    switch to map)."""
    ref, z, _ = _scenario_001(11)
    est = sh.estimate_prevalence(ref, z[:20_000], method="auto", n_bootstrap=100)
    assert est.fit_pvalue < sh.FIT_WARN_PVALUE
    assert est.method == "mle" and est.requested_method == "auto" and est.map_fit is None
    assert any("not explained by a change of base rate alone" in w for w in est.warnings)


def test_auto_keeps_mle_under_exact_label_shift(small_reference: sh.ReferenceModel) -> None:
    """Under exact label shift the only warning is the disagreement with PCC (the shift
    itself, far beyond sampling at 5,000 rows)."""
    z, _ = _sample(np.random.default_rng(5), 5000, 0.1)
    est = sh.estimate_prevalence(small_reference, z, n_bootstrap=60)
    assert est.method == "mle" and est.fit_pvalue > sh.FIT_WARN_PVALUE
    assert len(est.warnings) == 1 and "PCC" in est.warnings[0]
    assert est.disagreement < -sh.DISAGREEMENT_Z


# ------------------------------------------------------------------------------------------
# Independent references for mle, em and the profile interval
# ------------------------------------------------------------------------------------------


def _cell_counts(ref: sh.ReferenceModel, z: np.ndarray) -> np.ndarray:
    cells = np.searchsorted(ref.cell_edges[1:-1], z, side="right")
    return np.bincount(cells, minlength=ref.n_cells).astype(float)


def _loglik(ref: sh.ReferenceModel, counts: np.ndarray, a: np.ndarray) -> np.ndarray:
    mix = (1 - a[:, None]) * ref.mass_neg + a[:, None] * ref.mass_pos
    return np.asarray(np.log(mix) @ counts)


@pytest.mark.parametrize("alpha", [0.03, 0.3, 0.7])
def test_mle_is_the_grid_maximiser_of_the_binned_likelihood(
    small_reference: sh.ReferenceModel, alpha: float
) -> None:
    z, _ = _sample(np.random.default_rng(int(alpha * 100)), 2000, alpha)
    est = sh.estimate_prevalence(small_reference, z, method="mle", n_bootstrap=0)
    assert est.converged and est.residual <= sh.ROOT_TOL
    counts = _cell_counts(small_reference, z)
    grid = np.linspace(0.0, 1.0, 200_001)
    best = grid[np.argmax(_loglik(small_reference, counts, grid))]
    assert est.prevalence == pytest.approx(best, abs=1e-5)
    # solved to machine precision: the derivative vanishes at the estimate
    mix = (
        1 - est.prevalence
    ) * small_reference.mass_neg + est.prevalence * small_reference.mass_pos
    slope = counts @ ((small_reference.mass_pos - small_reference.mass_neg) / mix)
    assert abs(slope) < 1e-9 * counts.sum()


def test_mle_boundary_solutions() -> None:
    z, y = _sample(np.random.default_rng(8), 4000, 0.5)
    ref = sh.fit_reference(z, y)
    only_neg = np.random.default_rng(9).beta(1, 30, 500)  # far below the positives
    only_pos = np.random.default_rng(9).beta(30, 1, 500)
    assert sh.estimate_prevalence(ref, only_neg, method="mle", n_bootstrap=0).prevalence == 0.0
    assert sh.estimate_prevalence(ref, only_pos, method="mle", n_bootstrap=0).prevalence == 1.0


def test_profile_interval_is_the_chi_square_drop(small_reference: sh.ReferenceModel) -> None:
    z, _ = _sample(np.random.default_rng(10), 1500, 0.25)
    est = sh.estimate_prevalence(
        small_reference, z, method="mle", ci_method="profile", n_bootstrap=0
    )
    counts = _cell_counts(small_reference, z)
    top = _loglik(small_reference, counts, np.array([est.prevalence]))[0]
    for bound in (est.ci_low, est.ci_high):
        drop = top - _loglik(small_reference, counts, np.array([bound]))[0]
        assert drop == pytest.approx(0.5 * stats.chi2.ppf(0.95, 1), abs=1e-6)
    assert est.ci_method == "profile" and est.ci_low < 0.25 < est.ci_high
    with pytest.raises(InputError, match="profile"):
        sh.estimate_prevalence(small_reference, z, method="em", ci_method="profile")


def test_em_matches_a_hand_iteration() -> None:
    # Distinct, well separated scores: every row has its own fine cell, so the binned EM is
    # exactly the per-row EM of Saerens et al.
    z_ref = np.array([0.05, 0.1, 0.2, 0.3, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 0.35, 0.65])
    y_ref = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0])
    ref = sh.fit_reference(z_ref, y_ref)
    target = np.array([0.15, 0.4, 0.55, 0.75, 0.85])
    prior = 6 / 12
    p = apply_platt(ref.platt, logit(target))
    a = prior
    for _ in range(100_000):
        post = (a / prior) * p / ((a / prior) * p + ((1 - a) / (1 - prior)) * (1 - p))
        new = float(post.mean())
        if abs(new - a) <= 1e-14:
            a = new
            break
        a = new
    est = sh.estimate_prevalence(ref, target, method="em", n_bootstrap=0, em_tol=1e-14)
    assert est.converged and est.n_iter > 1 and est.residual <= 1e-14
    assert est.prevalence == pytest.approx(a, abs=1e-10)
    # and the per-row posterior is the prior shift of the reference's fine calibration map
    r = sh.reference_posterior(ref, target)
    expected = (a / prior) * r / ((a / prior) * r + ((1 - a) / (1 - prior)) * (1 - r))
    np.testing.assert_allclose(sh.posterior(ref, est, target), expected, rtol=1e-9)


def test_em_reports_non_convergence() -> None:
    z, y = _sample(np.random.default_rng(12), 3000, 0.3)
    ref = sh.fit_reference(z, y)
    target, _ = _sample(np.random.default_rng(13), 1000, 0.05)
    est = sh.estimate_prevalence(ref, target, method="em", n_bootstrap=0, em_max_iter=2)
    assert not est.converged and est.n_iter == 2
    assert any("em did not converge in 2 iterations" in w for w in est.warnings)


def test_acc_at_a_given_threshold_is_the_hand_formula(small_reference: sh.ReferenceModel) -> None:
    z, _ = _sample(np.random.default_rng(14), 2000, 0.2)
    est = sh.estimate_prevalence(small_reference, z, method="acc", threshold=0.5, n_bootstrap=0)
    assert est.threshold is not None
    t = est.threshold
    assert t == pytest.approx(0.5, abs=0.01)  # snapped to the fine grid
    # TPR/FPR from the reference rows themselves (rebuilt here from the same seed)
    z_ref, y_ref = _sample(np.random.default_rng(7), 4000, 0.3)
    tpr = np.mean(z_ref[y_ref] >= t)
    fpr = np.mean(z_ref[~y_ref] >= t)
    expected = (np.mean(z >= t) - fpr) / (tpr - fpr)
    assert est.prevalence == pytest.approx(expected, abs=2e-3)
    assert est.tpr_minus_fpr == pytest.approx(tpr - fpr, abs=2e-3)


# ------------------------------------------------------------------------------------------
# Degenerate inputs
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["mle", "em", "acc", "pacc", "map", "auto"])
def test_identical_class_densities_give_a_warning_and_a_wide_interval(method: str) -> None:
    rng = np.random.default_rng(15)
    y = rng.random(4000) < 0.3
    ref = sh.fit_reference(rng.beta(2, 5, 4000), y)  # f1 == f0
    est = sh.estimate_prevalence(ref, rng.beta(2, 5, 1000), method=method, n_bootstrap=30)  # type: ignore[arg-type]
    assert est.ci_high - est.ci_low >= 0.99
    assert any("AUC" in w for w in est.warnings)
    assert not math.isnan(est.prevalence)


def test_exactly_equal_scores_in_the_reference_are_flagged() -> None:
    ref = sh.fit_reference(np.full(10, 0.4), [0, 1] * 5)
    est = sh.estimate_prevalence(ref, [0.4, 0.4, 0.4], method="mle", n_bootstrap=10)
    assert (est.ci_low, est.ci_high) == (0.0, 1.0)
    assert est.prevalence == pytest.approx(0.5)
    assert any("carry no information" in w for w in est.warnings)


@pytest.mark.parametrize("method", ["mle", "em", "acc", "pacc", "map", "auto"])
def test_one_row_target(small_reference: sh.ReferenceModel, method: str) -> None:
    est = sh.estimate_prevalence(small_reference, [0.7], method=method, n_bootstrap=20)  # type: ignore[arg-type]
    assert est.n == 1
    assert 0.0 <= est.ci_low <= est.prevalence <= est.ci_high <= 1.0
    assert est.ci_high - est.ci_low > 0.5  # not a confident number from one row
    assert any("only 1 row" in w for w in est.warnings)


@pytest.mark.parametrize("method", ["mle", "em", "acc", "pacc", "map"])
def test_constant_target(small_reference: sh.ReferenceModel, method: str) -> None:
    est = sh.estimate_prevalence(small_reference, np.full(300, 0.8), method=method, n_bootstrap=20)  # type: ignore[arg-type]
    assert 0.0 <= est.prevalence <= 1.0 and not math.isnan(est.fit_pvalue)
    assert any("falls in one cell" in w for w in est.warnings)
    # one score tells one likelihood ratio: no confident number (it was [1, 1] for mle)
    assert (est.ci_low, est.ci_high) == (0.0, 1.0)


def _one_cell_warning(est: sh.ShiftEstimate) -> str:
    (warning,) = [w for w in est.warnings if "one cell of the densities" in w]
    return warning


def test_one_cell_warning_of_many_distinct_scores(small_reference: sh.ReferenceModel) -> None:
    """A batch of 50 distinct scores inside the top cell of the densities: the warning names
    that cell's scores and the distinct scores, and does not ask whether all are equal (it
    said "one cell of the score grid (are all scores equal?)" of 193 distinct scores)."""
    edge = float(small_reference.cell_edges[-2])
    step = 0.05  # in logit, far wider than a fine cell: each score its own fine cell
    assert step > 2.0 * (small_reference.logit_high - small_reference.logit_low) / 2048
    scores = expit(logit(edge) + 0.1 + step * np.arange(50))
    est = sh.estimate_prevalence(small_reference, scores, n_bootstrap=20)
    warning = _one_cell_warning(est)
    assert warning.startswith(
        f"every score of the batch falls in one cell of the densities, scores {edge:.4g} to 1, "
        "though its 50 rows hold at least 50 distinct scores (50 cells of the fine score grid):"
    )
    assert "equal?" not in warning and "score grid (" not in warning
    assert (est.ci_low, est.ci_high) == (0.0, 1.0)  # the behaviour is unchanged


def test_one_cell_warning_of_one_score(small_reference: sh.ReferenceModel) -> None:
    """Every row at 0.8: one fine cell, so the warning asks whether all scores are equal and
    gives the score, inside the density cell that holds 0.8."""
    est = sh.estimate_prevalence(small_reference, np.full(300, 0.8), n_bootstrap=20)
    k = int(np.searchsorted(small_reference.cell_edges, 0.8, side="right")) - 1
    low, high = small_reference.cell_edges[k], small_reference.cell_edges[k + 1]
    assert _one_cell_warning(est).startswith(
        f"every score of the batch falls in one cell of the densities, scores {low:.4g} to "
        f"{high:.4g}, and its 300 rows in one cell of the fine score grid, at about 0.8 (are "
        "all scores equal?):"
    )


def test_one_cell_warning_in_logit_units() -> None:
    """Logit scores: the cell is named in logits, the top cell open above."""
    z, y = _sample(np.random.default_rng(7), 4000, 0.3)
    ref = sh.fit_reference(logit(z), y, score_kind="logit", n_cells=4)
    edge = float(logit(ref.cell_edges[-2]))  # cell_edges are on the probability scale
    est = sh.estimate_prevalence(ref, [edge + 0.5, edge + 0.7], n_bootstrap=0)
    assert f"one cell of the densities, scores from {edge:.4g} up, though its 2 rows" in (
        _one_cell_warning(est)
    )


def test_reference_without_a_class_is_refused() -> None:
    with pytest.raises(InputError, match="the reference has no positive rows"):
        sh.fit_reference([0.1, 0.2, 0.3], [0, 0, 0])
    with pytest.raises(InputError, match="the reference has no negative rows"):
        sh.fit_reference([0.1, 0.2, 0.3], [1, 1, 1])
    with pytest.raises(InputError, match="the reference has no positive rows"):
        sh.fit_reference([0.1, 0.2, 0.3], [0, 1, 0], sample_weight=[1, 0, 1])


def test_bad_inputs_are_refused(small_reference: sh.ReferenceModel) -> None:
    with pytest.raises(InputError, match="the target has no rows"):
        sh.estimate_prevalence(small_reference, [])
    with pytest.raises(InputError, match="outside"):
        sh.estimate_prevalence(small_reference, [0.2, 1.5])
    with pytest.raises(InputError, match="method must be one of"):
        sh.estimate_prevalence(small_reference, [0.2], method="magic")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="ci_level"):
        sh.estimate_prevalence(small_reference, [0.2], ci_level=1.5)
    with pytest.raises(InputError, match="n_bootstrap"):
        sh.estimate_prevalence(small_reference, [0.2], n_bootstrap=-1)
    with pytest.raises(InputError, match="map_power"):
        sh.estimate_prevalence(small_reference, [0.2], method="map", map_power=0.5)
    with pytest.raises(InputError, match="no rows with positive weight"):
        sh.estimate_prevalence(small_reference, [0.2, 0.3], target_weight=[0, 0])
    with pytest.raises(InputError, match="score_kind"):
        sh.fit_reference([0.1, 0.9], [0, 1], score_kind="odds")  # type: ignore[arg-type]


def test_no_bootstrap_says_so(small_reference: sh.ReferenceModel) -> None:
    est = sh.estimate_prevalence(small_reference, [0.2, 0.7, 0.4], method="mle", n_bootstrap=0)
    assert math.isnan(est.ci_low) and math.isnan(est.fit_pvalue)
    assert any("n_bootstrap is 0" in w for w in est.warnings)


# ------------------------------------------------------------------------------------------
# Invariants
# ------------------------------------------------------------------------------------------


def test_weights_count_as_repetition() -> None:
    rng = np.random.default_rng(16)
    z, y = _sample(rng, 1500, 0.3)
    w = rng.integers(1, 4, 1500)
    weighted = sh.fit_reference(z, y, sample_weight=w)
    repeated = sh.fit_reference(np.repeat(z, w), np.repeat(y, w))
    np.testing.assert_allclose(weighted.mass_neg, repeated.mass_neg, rtol=1e-12)
    np.testing.assert_allclose(weighted.mass_pos, repeated.mass_pos, rtol=1e-12)
    assert weighted.reference_auc == pytest.approx(repeated.reference_auc, rel=1e-12)
    t, _ = _sample(rng, 800, 0.2)
    tw = rng.integers(1, 4, 800)
    for method in ("mle", "em", "acc", "pacc"):
        a = sh.estimate_prevalence(
            weighted, t, target_weight=tw, method=method, n_bootstrap=0
        ).prevalence
        b = sh.estimate_prevalence(repeated, np.repeat(t, tw), method=method, n_bootstrap=0)
        assert a == pytest.approx(b.prevalence, abs=1e-9), method


@pytest.mark.parametrize("scale", [1e-9, 1e-4, 0.3])
def test_reference_weights_below_one_count_in_units_of_their_mean(scale: float) -> None:
    """Weights normalised to sum to 1 (or any scale below 1 on average) are not a reference of
    "one row" drowned by the pseudo-weights: every method gives the estimate of the same
    weights scaled to a mean of 1 (it gave 0 with a zero-width interval at 1e-4)."""
    rng = np.random.default_rng(23)
    z, y = _sample(rng, 3000, 0.25)
    w = np.where(y == 1, 1.0, rng.choice([0.5, 1.5], y.size))
    w /= w.mean()  # a mean of exactly 1, up to rounding: the rows' own scale
    t, _ = _sample(rng, 900, 0.4)
    base = sh.fit_reference(z, y, sample_weight=w)
    scaled = sh.fit_reference(z, y, sample_weight=w * scale)
    assert scaled.n_cells == base.n_cells
    np.testing.assert_allclose(scaled.mass_pos, base.mass_pos, rtol=1e-9)
    np.testing.assert_allclose(scaled.mass_neg, base.mass_neg, rtol=1e-9)
    for method in ("mle", "em", "pacc", "map"):
        got = sh.estimate_prevalence(scaled, t, method=method, n_bootstrap=0).prevalence
        want = sh.estimate_prevalence(base, t, method=method, n_bootstrap=0).prevalence
        assert got == pytest.approx(want, abs=1e-6), method
        assert 0.3 < got < 0.5, method


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_target_permutation_invariance_and_no_mutation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    z_ref, y_ref = _sample(rng, 600, 0.4)
    ref = sh.fit_reference(z_ref, y_ref)
    t, _ = _sample(rng, 300, 0.3)
    before = t.copy()
    shuffled = rng.permutation(t)
    a = sh.estimate_prevalence(ref, t, method="mle", n_bootstrap=15, rng=np.random.default_rng(1))
    b = sh.estimate_prevalence(
        ref, shuffled, method="mle", n_bootstrap=15, rng=np.random.default_rng(1)
    )
    np.testing.assert_array_equal(t, before)
    assert a.prevalence == pytest.approx(b.prevalence, abs=1e-12)
    assert (a.ci_low, a.ci_high, a.fit_pvalue) == pytest.approx(
        (b.ci_low, b.ci_high, b.fit_pvalue), abs=1e-12
    )


def test_same_seed_same_answer(small_reference: sh.ReferenceModel) -> None:
    z, _ = _sample(np.random.default_rng(17), 500, 0.3)
    a = sh.estimate_prevalence(small_reference, z, rng=np.random.default_rng(5), n_bootstrap=30)
    b = sh.estimate_prevalence(small_reference, z, rng=np.random.default_rng(5), n_bootstrap=30)
    assert (a.prevalence, a.ci_low, a.ci_high, a.fit_pvalue, a.warnings) == (
        b.prevalence,
        b.ci_low,
        b.ci_high,
        b.fit_pvalue,
        b.warnings,
    )


def test_logit_scores_give_the_same_estimate() -> None:
    z, y = _sample(np.random.default_rng(18), 3000, 0.3)
    t, _ = _sample(np.random.default_rng(19), 1000, 0.1)
    by_prob = sh.fit_reference(z, y)
    by_logit = sh.fit_reference(logit(z), y, score_kind="logit")
    for method in ("mle", "em", "map"):
        a = sh.estimate_prevalence(by_prob, t, method=method, n_bootstrap=0).prevalence
        b = sh.estimate_prevalence(by_logit, logit(t), method=method, n_bootstrap=0).prevalence
        assert a == pytest.approx(b, abs=1e-9), method


# ------------------------------------------------------------------------------------------
# Posterior and decisions
# ------------------------------------------------------------------------------------------


def test_posterior_is_the_prior_shift_of_the_fine_map(
    small_reference: sh.ReferenceModel,
) -> None:
    """Every non-map method: a r / (a r + b (1 - r)), r the reference's fine map."""
    ref = small_reference
    z = np.linspace(0.01, 0.99, 50)
    a_, pi = 0.07, ref.reference_prevalence
    r = sh.reference_posterior(ref, z)
    a, b = a_ / pi, (1 - a_) / (1 - pi)
    for method in ("mle", "em", "acc", "pacc"):
        c = sh.posterior(ref, a_, z, method=method)  # type: ignore[arg-type]
        np.testing.assert_allclose(c, a * r / (a * r + b * (1 - r)), rtol=1e-12)


def test_posterior_at_the_reference_prior_is_the_fine_map(
    small_reference: sh.ReferenceModel,
) -> None:
    z = np.linspace(0.01, 0.99, 50)
    static = sh.posterior(small_reference, small_reference.reference_prevalence, z, method="em")
    np.testing.assert_allclose(static, sh.reference_posterior(small_reference, z), rtol=1e-12)


def test_posterior_moves_with_the_prevalence_and_handles_the_ends(
    small_reference: sh.ReferenceModel,
) -> None:
    z = np.linspace(0.05, 0.95, 19)
    for method in ("mle", "em"):
        low = sh.posterior(small_reference, 0.01, z, method=method)
        high = sh.posterior(small_reference, 0.5, z, method=method)
        assert np.all(high > low)
        assert np.all(sh.posterior(small_reference, 0.0, z, method=method) == 0.0)
        assert np.all(sh.posterior(small_reference, 1.0, z, method=method) == 1.0)
    with pytest.raises(InputError, match="needs the ShiftEstimate"):
        sh.posterior(small_reference, 0.1, z, method="map")
    with pytest.raises(InputError, match="needs method"):
        sh.posterior(small_reference, 0.1, z)


def test_map_posterior_uses_the_fitted_density() -> None:
    ref, z, _ = _scenario_001(12)
    est = sh.estimate_prevalence(ref, z, method="map", n_bootstrap=0)
    assert est.map_fit is not None
    grid = np.linspace(0.05, 0.95, 19)
    by_map = sh.posterior(ref, est, grid)
    by_mle_shape = sh.posterior(ref, est.prevalence, grid, method="mle")
    assert not np.allclose(by_map, by_mle_shape, atol=1e-3)


def test_bayes_threshold_reference_001() -> None:
    # disease example: treating costs 0.05 when healthy, not treating costs 1 when sick
    assert sh.bayes_threshold(0.05, 1.0) == pytest.approx(0.05 / 1.05)
    assert sh.bayes_threshold(1.0, 1.0) == 0.5
    with pytest.raises(InputError, match="both be zero"):
        sh.bayes_threshold(0.0, 0.0)
    with pytest.raises(InputError, match="non-negative"):
        sh.bayes_threshold(-1.0, 1.0)


def test_expected_and_realised_cost_by_hand() -> None:
    d, p, y = [1, 1, 0, 0], [0.9, 0.3, 0.2, 0.6], [1, 0, 0, 1]
    # expected: 0.1*2 + 0.7*2 + 0.2*5 + 0.6*5 = 5.6 over 4 rows
    assert sh.expected_cost(d, p, cost_fp=2.0, cost_fn=5.0) == pytest.approx(1.4)
    # realised: one false positive (2) and one miss (5) over 4 rows
    assert sh.realised_cost(d, y, cost_fp=2.0, cost_fn=5.0) == pytest.approx(1.75)
    w = [2, 1, 1, 1]
    assert sh.realised_cost(d, y, cost_fp=2.0, cost_fn=5.0, sample_weight=w) == pytest.approx(7 / 5)


@settings(max_examples=50, deadline=None)
@given(
    probs=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40),
    other=st.lists(st.booleans(), min_size=40, max_size=40),
    cost_fp=st.floats(0.01, 10.0),
    cost_fn=st.floats(0.01, 10.0),
)
def test_bayes_threshold_minimises_expected_cost(
    probs: list[float], other: list[bool], cost_fp: float, cost_fn: float
) -> None:
    p = np.array(probs)
    t = sh.bayes_threshold(cost_fp, cost_fn)
    best = sh.expected_cost(p >= t, p, cost_fp=cost_fp, cost_fn=cost_fn)
    rival = sh.expected_cost(np.array(other[: p.size]), p, cost_fp=cost_fp, cost_fn=cost_fn)
    assert best <= rival + 1e-12


def test_decision_costs_static_versus_shifted() -> None:
    ref, _, _ = _scenario_001(13)
    rng = np.random.default_rng(0)
    y = rng.random(20_000) < 0.2  # a different prior: the static rule over-flags less
    target = np.where(y, rng.beta(4, 2, 20_000), rng.beta(1.5, 8, 20_000))
    est = sh.estimate_prevalence(ref, target, method="em", n_bootstrap=0)
    static = sh.posterior(ref, ref.reference_prevalence, target, method="em")
    shifted = sh.posterior(ref, est, target)
    result = sh.decision_costs(static, shifted, cost_fp=1.0, cost_fn=4.0, y_true=y)
    assert result.threshold == pytest.approx(0.2)
    assert result.expected_cost_shifted <= result.expected_cost_static
    assert result.realised_cost_static is not None and result.realised_cost_shifted is not None
    assert result.realised_cost_shifted < result.realised_cost_static
    no_labels = sh.decision_costs(static, shifted, cost_fp=1.0, cost_fn=4.0)
    assert no_labels.realised_cost_static is None


# ------------------------------------------------------------------------------------------
# Scale
# ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_ten_million_rows_in_seconds(small_reference: sh.ReferenceModel) -> None:
    rng = np.random.default_rng(20)
    z, _ = _sample(rng, 10_000_000, 0.1)
    start = time.perf_counter()
    est = sh.estimate_prevalence(small_reference, z, method="em", n_bootstrap=50)
    p = sh.posterior(small_reference, est, z)
    elapsed = time.perf_counter() - start
    assert p.shape == z.shape
    assert abs(est.prevalence - 0.1) < 0.02
    assert elapsed < 20.0


@pytest.mark.slow
def test_small_prevalence_mle_is_unbiased_enough_and_covers() -> None:
    """The default cells keep enough reference rows each: at a 2% batch the upward bias of the
    binned likelihood stays a fraction of the spread (it was 1.2 spreads with 90 cells)."""
    rng = np.random.default_rng(11)
    estimates, covered = [], 0
    for _ in range(30):
        y = rng.random(3000) < 0.3
        reference = sh.fit_reference(np.where(y, rng.beta(5, 2, 3000), rng.beta(2, 5, 3000)), y)
        t = rng.random(2000) < 0.02
        z = np.where(t, rng.beta(5, 2, 2000), rng.beta(2, 5, 2000))
        est = sh.estimate_prevalence(reference, z, method="mle", n_bootstrap=60, rng=rng)
        estimates.append(est.prevalence)
        covered += est.ci_low <= 0.02 <= est.ci_high
    values = np.array(estimates)
    assert abs(values.mean() - 0.02) < 0.5 * values.std()
    assert covered >= 25


def test_density_posterior_never_reverses_the_scores() -> None:
    rng = np.random.default_rng(12)
    y = rng.random(5000) < 0.2
    reference = sh.fit_reference(np.where(y, rng.beta(5, 2, 5000), rng.beta(2, 5, 5000)), y)
    z = np.sort(rng.random(20000))
    for prevalence in (0.01, 0.2, 0.7):
        calibrated = sh.posterior(reference, prevalence, z, method="mle")
        assert np.all(np.diff(calibrated) >= 0.0)


# ------------------------------------------------------- counts: the streaming route (issue 10)


def test_fine_index_on_edge_values() -> None:
    """Cell edges belong to the cell above; the top edge and beyond to the last cell; values
    below the grid to the first; values just below an edge to the cell below (one ulp below
    may round onto the edge: both engines use this one function, so they agree regardless)."""
    low, high, n = -2.0, 2.0, 8
    width = (high - low) / n
    edges = low + width * np.arange(n + 1)
    below = edges[1:-1] - 1e-9 * width
    u = np.concatenate(([-np.inf, -1e300, low], edges[1:-1], below, [high, 1e300, np.inf]))
    got = sh.fine_index(u, low, high, n)
    expected = np.concatenate(([0, 0, 0], np.arange(1, n), np.arange(0, n - 1), [n - 1] * 3))
    assert got.tolist() == expected.tolist()
    assert got.dtype == np.int64


def test_reference_counts_merge_in_any_chunking_to_the_same_integer_counts() -> None:
    rng = np.random.default_rng(11)
    z, y = _sample(rng, 5000, 0.3)
    w = np.ones(5000)
    low, high = sh.grid_range([sh.logit_range(z, sample_weight=w)])
    whole = sh.count_reference(
        z, y, sample_weight=w, score_kind="probability", logit_low=low, logit_high=high, n_fine=64
    )
    cuts = [0, 17, 1000, 1001, 4200, 5000]
    parts = [
        sh.count_reference(
            z[a:b],
            y[a:b],
            sample_weight=w[a:b],
            score_kind="probability",
            logit_low=low,
            logit_high=high,
            n_fine=64,
        )
        for a, b in itertools.pairwise(cuts)
    ]
    merged = sh.merge_reference_counts(parts)
    for name in ("rows_neg", "rows_pos", "weight_neg", "weight_pos", "distinct_logit"):
        np.testing.assert_array_equal(getattr(merged, name), getattr(whole, name))
    np.testing.assert_allclose(merged.logit_sum, whole.logit_sum, rtol=1e-12, atol=1e-9)
    assert sh.grid_range(
        [sh.logit_range(z[a:b], sample_weight=w[a:b]) for a, b in itertools.pairwise(cuts)]
    ) == (low, high)


def test_fit_reference_is_fit_reference_counts_of_its_counts() -> None:
    """One implementation: the in-memory fit counts its rows and calls the counts' fit."""
    rng = np.random.default_rng(12)
    z, y = _sample(rng, 3000, 0.25)
    w = rng.uniform(0.5, 2.0, 3000)
    ref = sh.fit_reference(z, y, sample_weight=w)
    low, high = sh.grid_range([sh.logit_range(z, sample_weight=w)])
    counts = sh.count_reference(
        z,
        y,
        sample_weight=w,
        score_kind="probability",
        logit_low=low,
        logit_high=high,
        n_fine=2048,
    )
    again = sh.fit_reference_counts(sh.merge_reference_counts([counts]))
    for name in ("fine_weight_pos", "fine_center", "mass_neg", "mass_pos", "cell_center"):
        np.testing.assert_array_equal(getattr(again, name), getattr(ref, name))
    assert (again.reference_auc, again.platt, again.threshold) == (
        ref.reference_auc,
        ref.platt,
        ref.threshold,
    )


@pytest.mark.parametrize("method", ["mle", "em", "acc", "pacc", "map"])
def test_estimates_from_counts_equal_estimates_from_scores(
    small_reference: sh.ReferenceModel, method: str
) -> None:
    rng = np.random.default_rng(13)
    z, _ = _sample(rng, 2500, 0.15)
    from_scores = sh.estimate_prevalence(
        small_reference,
        z,
        method=method,
        n_bootstrap=20,
        rng=np.random.default_rng(1),  # type: ignore[arg-type]
    )
    (counts,) = sh.count_target(small_reference, z)
    from_counts = sh.estimate_prevalence(
        small_reference,
        target_counts=counts,
        method=method,  # type: ignore[arg-type]
        n_bootstrap=20,
        rng=np.random.default_rng(1),
    )
    assert replace(from_counts, map_fit=None) == replace(from_scores, map_fit=None)
    if method == "map":
        assert from_counts.map_fit is not None and from_scores.map_fit is not None
        np.testing.assert_array_equal(from_counts.map_fit.heights, from_scores.map_fit.heights)


def test_target_counts_per_group_are_the_counts_of_each_group(
    small_reference: sh.ReferenceModel,
) -> None:
    rng = np.random.default_rng(14)
    z = rng.random(3000)
    codes = rng.integers(0, 3, 3000)
    parts = sh.count_target(small_reference, z, group_codes=codes, n_groups=3)
    for code, part in enumerate(parts):
        (alone,) = sh.count_target(small_reference, z[codes == code])
        np.testing.assert_array_equal(part.rows, alone.rows)
        np.testing.assert_array_equal(part.weight, alone.weight)
        np.testing.assert_array_equal(part.logit_sum, alone.logit_sum)
        assert part.size == alone.size == int((codes == code).sum())


def test_bootstrap_resamples_cells_as_rows() -> None:
    """The bootstrap draws fine-cell counts from a multinomial with the cells' row shares:
    exactly the distribution of the cell counts of n rows drawn with replacement."""
    rows = np.array([5.0, 0.0, 3.0, 2.0])
    draws = np.array(
        [sh._resample_fine(rows, rows, np.random.default_rng(s))[0] for s in range(4000)]
    )
    assert np.all(draws.sum(axis=1) == 10)
    np.testing.assert_allclose(draws.mean(axis=0), rows, atol=0.1)
    np.testing.assert_allclose(draws.var(axis=0), 10 * (rows / 10) * (1 - rows / 10), rtol=0.1)


def test_estimate_needs_scores_or_counts_but_not_both(
    small_reference: sh.ReferenceModel,
) -> None:
    (counts,) = sh.count_target(small_reference, np.array([0.2, 0.4]))
    with pytest.raises(InputError, match="target_scores or target_counts"):
        sh.estimate_prevalence(small_reference)
    with pytest.raises(InputError, match="target_scores or target_counts"):
        sh.estimate_prevalence(small_reference, [0.2], target_counts=counts)
    with pytest.raises(InputError, match="no rows"):
        sh.merge_target_counts([])


@pytest.mark.parametrize("seed", [11])
def test_map_replicates_solved_to_their_noise_move_the_interval_by_under_2_percent(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bootstrap replicates of ``map`` stop at ``replicate_tol(n) = 0.05 / sqrt(n)`` (at most
    about 5% of a standard error) instead of the point estimate's tolerance. With the same draws
    (the generator's use does not depend on the tolerance), the interval's ends move by less
    than 2% of its width against replicates solved to ``shift_map.TOL``."""
    ref, z, _ = _scenario_001(seed)
    z = z[:6_500]  # a weekly batch of the benchmark's size
    assert sh.replicate_tol(z.size) > 100 * sm.TOL  # the looser tolerance is in use

    def interval() -> tuple[float, float]:
        est = sh.estimate_prevalence(
            ref, z, method="map", n_bootstrap=60, rng=np.random.default_rng(seed)
        )
        return est.ci_low, est.ci_high

    low, high = interval()
    monkeypatch.setattr(sh, "REPLICATE_SHARE", 1e-12)  # every replicate to shift_map.TOL
    exact_low, exact_high = interval()
    width = exact_high - exact_low
    assert width > 0.0
    assert abs(low - exact_low) <= 0.02 * width
    assert abs(high - exact_high) <= 0.02 * width
