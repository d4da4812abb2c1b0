"""estimate-shift after a user review: honest rows at a boundary estimate, frequency weights
that count as rows, importance weights whose scale changes nothing, backtest coverage over
informative intervals, the --history messages and --ci-method's refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.special import expit

from calib_cli.core import shift as sh
from calib_cli.errors import UsageError
from calib_cli.workflows.estimate_shift import (
    EstimateShiftRequest,
    _backtest_method,
    run_backtest,
    run_estimate_shift,
)

PI = 0.10


def _draw(n: int, rate: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Scores calibrated at a base rate of 0.10 (binormal, the review's gen.py) for a
    population at ``rate``; returns (scores, labels)."""
    y = (rng.random(n) < rate).astype(np.int64)
    z = rng.normal(np.where(y == 1, 1.0, -1.0), 1.0)
    return expit(np.log(PI / (1.0 - PI)) + 2.0 * z), y


@pytest.fixture(scope="module")
def reference() -> sh.ReferenceModel:
    scores, y = _draw(20_000, PI, np.random.default_rng(1))
    return sh.fit_reference(scores, y)


# ------------------------------------------------------------- 1. rows at a boundary estimate


def _boundary_batch(reference: sh.ReferenceModel) -> tuple[sh.ShiftEstimate, np.ndarray]:
    """A batch of 5,000 rows at a rate of 0.001 whose estimate is exactly 0."""
    for seed in range(100):
        scores, _ = _draw(5000, 0.001, np.random.default_rng(seed))
        est = sh.estimate_prevalence(reference, scores, n_bootstrap=100)
        if est.prevalence == 0.0:
            return est, scores
    raise AssertionError("no batch estimated at 0")  # pragma: no cover


def test_rows_of_a_zero_estimate_are_not_all_zero(reference: sh.ReferenceModel) -> None:
    """The review: at a true rate of 0.001, 11 of 20 batches were estimated at 0 and every row
    got calibrated 0, frauds scored 0.93 included. The estimate stays 0 (a benchmark measures
    its error); the rows use the mean rate over the bootstrap replicates."""
    est, scores = _boundary_batch(reference)
    assert est.prevalence == 0.0 and est.ci_high > 0.0
    assert 0.0 < est.rows_prevalence <= est.ci_high
    fraud = sh.posterior(reference, est, [0.93])[0]
    # the prior-shift formula at the rows' rate, by hand
    r = sh.reference_posterior(reference, [0.93])[0]
    odds = r / (1 - r) * (est.rows_prevalence / (1 - est.rows_prevalence)) / (PI / (1 - PI))
    assert fraud == pytest.approx(odds / (1 + odds), rel=0.02)
    assert fraud > 0.01
    assert np.all(sh.posterior(reference, est, scores) > 0.0)
    assert any("an end of [0, 1]" in w and "rows_prevalence" in w for w in est.warnings)


def test_rows_of_an_interior_estimate_use_it(reference: sh.ReferenceModel) -> None:
    scores, _ = _draw(5000, 0.05, np.random.default_rng(3))
    est = sh.estimate_prevalence(reference, scores, n_bootstrap=50)
    assert 0.0 < est.prevalence < 1.0
    assert est.rows_prevalence == est.prevalence
    assert not any("rows_prevalence" in w for w in est.warnings)
    np.testing.assert_array_equal(
        sh.posterior(reference, est, scores), sh.posterior(reference, est.prevalence, scores,
                                                           method="mle"),
    )  # fmt: skip


def test_rows_keep_the_reference_rate_when_the_scores_carry_no_information() -> None:
    """A reference of AUC ~0.5: any prevalence fits ([0, 1]), so the rows keep r(s) instead
    of being recalibrated at an arbitrary end of [0, 1]."""
    rng = np.random.default_rng(4)
    y = (rng.random(3000) < PI).astype(np.int64)
    ref = sh.fit_reference(rng.random(3000), y)
    target = rng.random(2000)
    est = sh.estimate_prevalence(ref, target, n_bootstrap=30)
    assert (est.ci_low, est.ci_high) == (0.0, 1.0)
    assert est.rows_prevalence == ref.reference_prevalence
    np.testing.assert_allclose(
        sh.posterior(ref, est, target), sh.reference_posterior(ref, target), rtol=1e-12
    )
    if est.prevalence != ref.reference_prevalence:
        assert any("reference prevalence" in w for w in est.warnings)


def test_rows_rate_rule() -> None:
    assert sh.rows_rate(
        0.0, np.array([0.0, 0.004]), reference_prevalence=0.1, uninformative=False
    ) == pytest.approx(0.002)
    assert sh.rows_rate(
        1.0, np.array([1.0, 0.9]), reference_prevalence=0.1, uninformative=False
    ) == (pytest.approx(0.95))
    # no replicate leaves the end: the profile interval's midpoint, else a floor
    assert sh.rows_rate(
        0.0, np.zeros(3), reference_prevalence=0.1, uninformative=False, profile=lambda: (0, 0.01)
    ) == pytest.approx(0.005)
    assert sh.rows_rate(0.0, np.empty(0), reference_prevalence=0.1, uninformative=False) == 1e-6


def _all_high_batch() -> np.ndarray:
    """300 rows scored as positives a half standard deviation above the reference's: the
    estimate is 1, and so is every bootstrap replicate (measured: 50 of 50)."""
    z = np.random.default_rng(5).normal(1.5, 1.0, 300)
    return expit(np.log(PI / (1.0 - PI)) + 2.0 * z)


def _rows_warning(est: sh.ShiftEstimate) -> str:
    (warning,) = [w for w in est.warnings if "rows_prevalence" in w]
    return warning


def test_rows_warning_names_the_profile_interval_without_replicates(
    reference: sh.ReferenceModel,
) -> None:
    """With --bootstrap 0 (or --ci-method profile) the rows use the midpoint of the
    profile-likelihood interval, not a mean over replicates none of which was drawn; the
    warning says so and gives the interval's bounds (the report's ci_low/ci_high are null)."""
    scores = _all_high_batch()
    # the profile interval, as --ci-method profile reports it
    profiled = sh.estimate_prevalence(reference, scores, ci_method="profile")
    low, high = profiled.ci_low, profiled.ci_high
    assert profiled.prevalence == 1.0 and 0.9 < low < high == 1.0
    for est in (profiled, sh.estimate_prevalence(reference, scores, n_bootstrap=0)):
        assert est.rows_prevalence == pytest.approx(0.5 * (low + high), rel=1e-12)
        warning = _rows_warning(est)
        assert "bootstrap replicates;" not in warning and "mean rate" not in warning
        assert (
            f"the rows use {0.5 * (low + high):.4g} (rows_prevalence), the midpoint of the 95% "
            f"profile-likelihood interval [{low:.4g}, 1], as no bootstrap replicate was drawn;"
        ) in warning


def test_rows_warning_names_the_replicates_that_stay_at_the_end(
    reference: sh.ReferenceModel,
) -> None:
    """Replicates were drawn but every one is at 1 (the bootstrap interval is [1, 1]): the
    rows use the profile interval's midpoint, and the warning says why."""
    scores = _all_high_batch()
    est = sh.estimate_prevalence(reference, scores, n_bootstrap=50)
    assert (est.prevalence, est.ci_low, est.ci_high) == (1.0, 1.0, 1.0)
    low = sh.estimate_prevalence(reference, scores, ci_method="profile").ci_low
    assert est.rows_prevalence == pytest.approx(0.5 * (low + 1.0), rel=1e-12)
    assert (
        f"the midpoint of the 95% profile-likelihood interval [{low:.4g}, 1], as the 50 "
        "bootstrap replicates are all 1 too;"
    ) in _rows_warning(est)


def test_rows_warning_names_the_mean_over_replicates(reference: sh.ReferenceModel) -> None:
    """Some replicate leaves 0: the rows use their mean, and the warning says how many."""
    est, _ = _boundary_batch(reference)
    assert est.ci_high > 0.0
    assert (
        f"so the rows use {est.rows_prevalence:.4g} (rows_prevalence), the mean rate over the "
        "100 bootstrap replicates;"
    ) in _rows_warning(est)


def test_rows_warning_of_the_floor() -> None:
    """Neither a replicate nor the profile interval leaves the end: the floor, printed with
    the digits that tell it from the end."""
    rows = sh._rows_rate(
        1.0, np.ones(3), reference_prevalence=0.1, uninformative=False,
        profile=lambda: (1.0, 1.0), floor=1e-6,
    )  # fmt: skip
    assert rows.rate == 1.0 - 1e-6
    assert (
        "so the rows use 0.999999 (rows_prevalence), 1e-06 from 1, as the 3 bootstrap "
        "replicates are all 1 too and the profile-likelihood interval is [1, 1];"
    ) in sh._rows_rate_warning(1.0, rows, 0.95)


def test_workflow_rows_and_decisions_at_a_zero_estimate(tmp_path: Path) -> None:
    """End to end: a batch estimated at 0 writes no row at calibrated 0, flags its
    high-scored rows, and reports rows_prevalence in the JSON."""
    rng = np.random.default_rng(1)
    scores, y = _draw(20_000, PI, rng)
    ref_path, tgt_path, out = tmp_path / "ref.csv", tmp_path / "t.csv", tmp_path / "o.csv"
    pl.DataFrame({"score": scores, "label": y}).write_csv(ref_path)
    ref = sh.fit_reference(scores, y)
    for seed in range(100):
        t_scores, _ = _draw(5000, 0.001, np.random.default_rng(seed))
        t_scores = np.concatenate([t_scores, [0.93]])  # a fraud, scored 0.93
        if sh.estimate_prevalence(ref, t_scores, n_bootstrap=0).prevalence == 0.0:
            break
    pl.DataFrame({"score": t_scores}).write_csv(tgt_path)
    request = EstimateShiftRequest(
        reference=str(ref_path), target=str(tgt_path), costs="1:20", n_bootstrap=50,
        output=str(out),
    )  # fmt: skip
    result = run_estimate_shift(request)
    est = result.batches[0].estimate
    assert est.prevalence == 0.0 and est.rows_prevalence > 0.0
    rows = pl.read_csv(out)
    assert rows["calibrated"].min() > 0.0  # type: ignore[operator]
    assert rows["calibrated"][-1] > 0.05 and rows["decision"][-1] == 1
    decision = result.batches[0].decision
    assert decision is not None and decision.expected_cost_shifted > 0.0
    from calib_cli.report.payloads import estimate_shift_payload

    assert estimate_shift_payload(result)["rows_prevalence"] == est.rows_prevalence


# ----------------------------------------------------- 2. frequency weights count as rows


def _aggregated(scores: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    table = (
        pl.DataFrame({"score": np.round(scores, 3), "label": y})
        .group_by(["score", "label"])
        .len()
        .sort(["score", "label"])
    )
    return (
        table["score"].to_numpy(),
        table["label"].to_numpy(),
        table["len"].to_numpy().astype(np.float64),
    )


def _figures(est: sh.ShiftEstimate) -> list[float]:
    return [est.prevalence, est.ci_low, est.ci_high, est.fit_pvalue, est.disagreement]


def test_aggregated_counts_give_the_intervals_of_the_rows_written_out() -> None:
    """A reference aggregated to (score, label, n) with n as frequency weights: the same
    replicates as the rows themselves (the bootstrap draws the rows the weights stand for),
    so the same interval, fit p-value and disagreement. Before: intervals 14x wider,
    fit_pvalue ~1 and disagreement -0.4 instead of -9.5."""
    rng = np.random.default_rng(5)
    scores, y = _draw(20_000, PI, rng)
    scores = np.round(scores, 3)
    batch, _ = _draw(5000, 0.03, rng)
    s_agg, y_agg, n_agg = _aggregated(scores, y)
    rows = sh.fit_reference(scores, y)
    counted = sh.fit_reference(s_agg, y_agg, sample_weight=n_agg)
    a = sh.estimate_prevalence(rows, batch, n_bootstrap=100, rng=np.random.default_rng(7))
    b = sh.estimate_prevalence(counted, batch, n_bootstrap=100, rng=np.random.default_rng(7))
    np.testing.assert_allclose(_figures(b), _figures(a), rtol=1e-9, atol=1e-12)
    assert a.disagreement < -2.576  # the shift is detected either way


def test_weight_two_counts_as_two_rows() -> None:
    rng = np.random.default_rng(6)
    scores, y = _draw(3000, PI, rng)
    batch, _ = _draw(2000, 0.2, rng)
    twice = sh.fit_reference(np.repeat(scores, 2), np.repeat(y, 2))
    weighted = sh.fit_reference(scores, y, sample_weight=np.full(scores.size, 2.0))
    a = sh.estimate_prevalence(twice, batch, n_bootstrap=100, rng=np.random.default_rng(8))
    b = sh.estimate_prevalence(weighted, batch, n_bootstrap=100, rng=np.random.default_rng(8))
    np.testing.assert_allclose(_figures(b), _figures(a), rtol=1e-9, atol=1e-12)


def test_importance_weights_keep_the_variance_of_the_rows_observed() -> None:
    """The same aggregated counts read as importance weights: the bootstrap draws the rows
    observed (about 1,500 distinct scores), so the interval is wider than the frequency one."""
    rng = np.random.default_rng(5)
    scores, y = _draw(20_000, PI, rng)
    batch, _ = _draw(5000, 0.03, rng)
    s_agg, y_agg, n_agg = _aggregated(scores, y)
    frequency = sh.fit_reference(s_agg, y_agg, sample_weight=n_agg)
    importance = sh.fit_reference(s_agg, y_agg, sample_weight=n_agg, weight_kind="importance")
    assert frequency.n_eff_neg == pytest.approx(float(np.sum(n_agg[y_agg == 0])))
    assert importance.n_eff_neg < 0.2 * frequency.n_eff_neg
    f = sh.estimate_prevalence(frequency, batch, n_bootstrap=100)
    i = sh.estimate_prevalence(importance, batch, n_bootstrap=100)
    assert i.ci_high - i.ci_low > 1.5 * (f.ci_high - f.ci_low)


# -------------------------------------------------- 3. importance weights: scale changes nothing


def test_importance_weights_scale_changes_no_figure() -> None:
    """Weights 1/negative_rate (resample --weight-col-out) and the same times 0.1: the same
    estimate and interval (the review: 0.0489 vs 0.0463)."""
    rng = np.random.default_rng(9)
    scores, y = _draw(20_000, PI, rng)
    keep = (y == 1) | (rng.random(y.size) < 0.1)
    iw = np.where(y[keep] == 1, 1.0, 10.0)
    batch, _ = _draw(4000, 0.03, rng)
    ests = []
    for scale in (1.0, 0.1, 1e-4):
        ref = sh.fit_reference(
            scores[keep], y[keep], sample_weight=iw * scale, weight_kind="importance"
        )
        ests.append(sh.estimate_prevalence(ref, batch, n_bootstrap=50))
    for other in ests[1:]:
        np.testing.assert_allclose(_figures(other)[:4], _figures(ests[0])[:4], rtol=1e-9)
        # PCC's map leans on a Platt fit, solved to a tolerance: the same to 1%
        assert other.disagreement == pytest.approx(ests[0].disagreement, rel=0.01)
    assert ests[0].prevalence == pytest.approx(0.03, abs=0.012)


# ------------------------------------------------------- 4. backtest coverage, informative only


def test_backtest_coverage_leaves_out_intervals_of_zero_to_one() -> None:
    truth = np.array([0.1, 0.1, 0.1, 0.1])
    estimate = np.array([0.1, 0.1, 0.3, 0.1])
    low = np.array([0.0, 0.0, 0.25, 0.05])
    high = np.array([1.0, 1.0, 0.35, 0.15])
    method = _backtest_method("history_blend", truth, estimate, low, high)
    assert method.coverage == 0.5 and method.coverage_batches == 2
    none = _backtest_method("x", truth, estimate, np.zeros(4), np.ones(4))
    assert none.coverage is None and none.coverage_batches == 0


def _labelled_weeks(tmp_path: Path, weeks: range, *, seed: int) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    scores, y = _draw(4000, PI, rng)
    ref = tmp_path / "ref.csv"
    pl.DataFrame({"score": scores, "label": y}).write_csv(ref)
    parts = []
    for week in weeks:
        s, t = _draw(400, 0.05 + 0.1 * rng.random(), rng)
        parts.append(pl.DataFrame({"week": [week] * s.size, "score": s, "label": t}))
    target = tmp_path / f"weeks_{weeks.start}.csv"
    pl.concat(parts).write_csv(target)
    return ref, target


def test_backtest_warns_of_the_intervals_it_does_not_count(tmp_path: Path) -> None:
    ref, target = _labelled_weeks(tmp_path, range(1, 11), seed=10)
    warned: list[str] = []
    request = EstimateShiftRequest(
        reference=str(ref), target=str(target), batch_col="week", backtest=True, n_bootstrap=10
    )
    result = run_backtest(request, warn=warned.append)
    blend = next(m for m in result.methods if m.name == "history_blend")
    assert blend.coverage is None and blend.coverage_batches == 0  # 10 batches: all [0, 1]
    every = "history_blend: every one of its 10 intervals is [0, 1]"
    assert any(w.startswith(every) for w in warned)


# ------------------------------------------------------------------- 6. --history messages


def test_history_after_the_target_says_no_past_batch_is_usable(tmp_path: Path) -> None:
    ref, history = _labelled_weeks(tmp_path, range(101, 131), seed=11)
    _, target = _labelled_weeks(tmp_path, range(31, 33), seed=12)
    warned: list[str] = []
    request = EstimateShiftRequest(
        reference=str(ref), target=str(target), batch_col="week", history=str(history),
        n_bootstrap=0,
    )  # fmt: skip
    run_estimate_shift(request, warn=warned.append)
    assert any(
        "have 0 usable past batches (of the history's 30" in w and "needs 19" in w for w in warned
    ), warned
    assert not any("30 past batches are too few" in w for w in warned)


def test_history_warns_when_the_label_delay_leaves_no_labels(tmp_path: Path) -> None:
    ref, history = _labelled_weeks(tmp_path, range(1, 31), seed=13)
    _, target = _labelled_weeks(tmp_path, range(31, 33), seed=14)
    warned: list[str] = []
    request = EstimateShiftRequest(
        reference=str(ref), target=str(target), batch_col="week", history=str(history),
        label_delay=50, n_bootstrap=0,
    )  # fmt: skip
    run_estimate_shift(request, warn=warned.append)
    assert any("--label-delay 50 leaves none of the history's 30 batches" in w for w in warned)


# --------------------------------------------------------------------- 7. --ci-method profile


def test_profile_with_backtest_is_refused(tmp_path: Path) -> None:
    ref, target = _labelled_weeks(tmp_path, range(1, 6), seed=15)
    request = EstimateShiftRequest(
        reference=str(ref), target=str(target), batch_col="week", backtest=True,
        ci_method="profile",
    )  # fmt: skip
    with pytest.raises(UsageError, match="--ci-method profile would change nothing"):
        run_backtest(request)


def test_profile_with_auto_is_the_mle_profile(tmp_path: Path) -> None:
    ref, target = _labelled_weeks(tmp_path, range(1, 2), seed=16)
    request = EstimateShiftRequest(reference=str(ref), target=str(target), ci_method="profile")
    est = run_estimate_shift(request).batches[0].estimate
    assert est.method == "mle" and est.ci_method == "profile"
    refused = EstimateShiftRequest(
        reference=str(ref), target=str(target), ci_method="profile", method="em"
    )
    with pytest.raises(UsageError, match="auto runs mle"):
        run_estimate_shift(refused)
