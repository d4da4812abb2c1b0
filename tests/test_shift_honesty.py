"""estimate-shift says what its number assumes, and recalibrated rows keep their resolution.

Reference values first (PCC and the per-row posterior by hand), then the behaviour on
simulated data whose true posterior is known, then the workflow (both engines) and one run of
the installed command.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.special import expit, logit
from scipy.stats import norm

from calib_cli.core import shift as sh
from calib_cli.report.payloads import estimate_shift_payload
from calib_cli.workflows.estimate_shift import EstimateShiftRequest, run_estimate_shift
from tests.conftest import RunCalib

# Binormal scores on the logit scale with unequal variances (the likelihood ratio is not
# logistic), a 2.5% reference rate and about 500 reference positives: the coarse cells of the
# densities are few and wide, which is where a per-cell posterior lost the top scores.
NEG, POS = (-4.5, 1.0), (-1.0, 1.5)
REFERENCE_RATE = 0.025


def _draw(rng: np.random.Generator, n: int, rate: float) -> tuple[np.ndarray, np.ndarray]:
    y = rng.random(n) < rate
    u = np.where(y, rng.normal(POS[0], POS[1], n), rng.normal(NEG[0], NEG[1], n))
    return u, y


def _true_posterior(u: np.ndarray, rate: float) -> np.ndarray:
    ratio = norm.logpdf(u, *POS) - norm.logpdf(u, *NEG)
    result: np.ndarray = expit(ratio + logit(rate))
    return result


@pytest.fixture(scope="module")
def calibrated_reference() -> sh.ReferenceModel:
    """Scores calibrated on the reference: each row's score is its true posterior there."""
    u, y = _draw(np.random.default_rng(0), 20_000, REFERENCE_RATE)
    return sh.fit_reference(_true_posterior(u, REFERENCE_RATE), y)


def _hand_reference() -> sh.ReferenceModel:
    """16 rows, pi = 0.5: 8 scored 0.2 of which 2 positive, 8 scored 0.8 of which 6."""
    scores = [0.2] * 8 + [0.8] * 8
    labels = [1, 1] + [0] * 6 + [1] * 6 + [0, 0]
    return sh.fit_reference(scores, labels, map_smoothing=1e-9)


# ------------------------------------------------------------------------------------------
# Reference values
# ------------------------------------------------------------------------------------------


def test_posterior_is_the_prior_shift_formula_by_hand() -> None:
    """r = 0.25 and 0.75; at alpha = 0.2, a = 0.4 and b = 1.6: 0.3 / 0.7 and 0.1 / 1.3."""
    ref = _hand_reference()
    np.testing.assert_allclose(sh.reference_posterior(ref, [0.2, 0.8]), [0.25, 0.75], atol=1e-9)
    np.testing.assert_allclose(
        sh.posterior(ref, 0.2, [0.2, 0.8], method="mle"), [0.1 / 1.3, 0.3 / 0.7], rtol=1e-8
    )
    # between the two knots the log-odds are linear in the logit score
    middle = sh.posterior(ref, 0.5, [0.5], method="em")[0]
    assert middle == pytest.approx(0.5, abs=1e-9)


def test_pcc_by_hand() -> None:
    """PCC of a batch of 0.2, 0.2, 0.8 on the hand reference: (0.25 + 0.25 + 0.75) / 3."""
    est = sh.estimate_prevalence(_hand_reference(), [0.2, 0.2, 0.8], n_bootstrap=0)
    assert est.pcc == pytest.approx(1.25 / 3, abs=1e-9)
    assert est.pcc_difference == pytest.approx(est.prevalence - 1.25 / 3, abs=1e-9)
    # without replicates there is no standard error and no disagreement figure
    assert np.isnan(est.pcc_difference_se) and np.isnan(est.disagreement)


def test_pcc_is_the_mean_reference_posterior_of_the_rows(
    calibrated_reference: sh.ReferenceModel,
) -> None:
    u, _ = _draw(np.random.default_rng(1), 5000, 0.05)
    scores = _true_posterior(u, REFERENCE_RATE)
    weights = np.random.default_rng(2).uniform(0.5, 2.0, scores.size)
    est = sh.estimate_prevalence(calibrated_reference, scores, target_weight=weights, n_bootstrap=0)
    by_row = np.average(sh.reference_posterior(calibrated_reference, scores), weights=weights)
    assert est.pcc == pytest.approx(by_row, abs=2e-4)  # fine cells' mean logit vs each row's


# ------------------------------------------------------------------------------------------
# auto no longer depends on the goodness-of-fit p-value
# ------------------------------------------------------------------------------------------


def test_auto_choice_does_not_follow_the_p_value(
    calibrated_reference: sh.ReferenceModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    u, _ = _draw(np.random.default_rng(3), 3000, 0.05)
    scores = _true_posterior(u, REFERENCE_RATE)
    chosen = {}
    for pvalue in (1e-9, 0.9):
        monkeypatch.setattr(sh, "_fit_test", lambda *args, p=pvalue, **kwargs: (1.0, p))
        est = sh.estimate_prevalence(calibrated_reference, scores, n_bootstrap=20)
        assert est.fit_pvalue == pvalue
        chosen[pvalue] = (est.method, est.prevalence)
    assert chosen[1e-9] == chosen[0.9]
    assert chosen[0.9][0] == "mle"


# ------------------------------------------------------------------------------------------
# Recalibrated rows keep their resolution
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [REFERENCE_RATE, 0.01, 0.06])
def test_top_scores_follow_the_true_posterior(rate: float) -> None:
    """Rows scored >= 0.6: mean absolute error to the true posterior below 0.05 on average
    over three references, with and without shift, for mle (auto) and map (measured: 0.016,
    0.030, 0.007 for mle at 2.5%, 1%, 6%; the per-cell posterior it replaces: 0.023, 0.040,
    0.011, and far worse where the top cell is wide, see the next test)."""
    errors: dict[str, list[float]] = {"mle": [], "map": []}
    for seed in range(3):
        u, y = _draw(np.random.default_rng(seed), 20_000, REFERENCE_RATE)
        reference = sh.fit_reference(_true_posterior(u, REFERENCE_RATE), y)
        u, _ = _draw(np.random.default_rng(100 + seed), 50_000, rate)
        scores = _true_posterior(u, REFERENCE_RATE)
        top = scores >= 0.6
        for method, found in errors.items():
            est = sh.estimate_prevalence(reference, scores, method=method, n_bootstrap=0)  # type: ignore[arg-type]
            calibrated = sh.posterior(reference, est, scores[top])
            found.append(float(np.mean(np.abs(calibrated - _true_posterior(u[top], rate)))))
    for method, found in errors.items():
        assert np.mean(found) < 0.05, (method, rate, found)


def test_posterior_is_monotone_and_keeps_the_top_scores(
    calibrated_reference: sh.ReferenceModel,
) -> None:
    grid = np.linspace(0.001, 0.999, 2000)
    for alpha in (REFERENCE_RATE, 0.005, 0.2):
        c = sh.posterior(calibrated_reference, alpha, grid, method="mle")
        assert np.all(np.diff(c) >= 0.0)
        assert np.max(np.abs(np.diff(c))) < 0.05  # no jumps: it follows the score
    # calibrated scores, no shift: a 0.97 stays near 0.97
    r = sh.reference_posterior(calibrated_reference, [0.97])[0]
    assert r == pytest.approx(0.97, abs=0.03)


def test_a_wide_top_cell_no_longer_caps_the_scores() -> None:
    """The sample reference (2.6% positives, 5 cells, the top one from about 0.1 up): the 79
    rows scored >= 0.3 have a positive rate of 0.30 and a mean score of 0.39; the per-cell
    posterior gave every one of them at most 0.14, the fine map 0.37 on average."""
    sample = Path(__file__).resolve().parent.parent / "sample_data" / "transactions.csv"
    frame = pl.read_csv(sample)
    scores, labels = frame["score"].to_numpy(), frame["label"].to_numpy()
    reference = sh.fit_reference(scores, labels)
    top = scores >= 0.3
    calibrated = sh.posterior(reference, reference.reference_prevalence, scores[top], method="mle")
    assert abs(float(calibrated.mean()) - float(labels[top].mean())) < 0.1
    assert float(calibrated.max()) > 0.6


# ------------------------------------------------------------------------------------------
# PCC and the disagreement
# ------------------------------------------------------------------------------------------


def test_disagreement_under_label_shift_and_under_covariate_shift(
    calibrated_reference: sh.ReferenceModel,
) -> None:
    """Label shift: the estimate is right, PCC is pulled towards the reference rate, and the
    disagreement is far beyond sampling. Covariate shift (more cases at high scores,
    P(y | x) unchanged): PCC is right and the label-shift estimate is not; warned too."""
    rng = np.random.default_rng(5)
    u, y = _draw(rng, 20_000, 0.08)
    label = sh.estimate_prevalence(
        calibrated_reference, _true_posterior(u, REFERENCE_RATE), n_bootstrap=60
    )
    assert abs(label.prevalence - y.mean()) < abs(label.pcc - y.mean())
    assert label.disagreement > sh.DISAGREEMENT_Z
    assert any("PCC" in w for w in label.warnings)

    u = rng.normal(-2.5, 1.5, 20_000)  # the mix of cases moved up; P(y | x) did not
    truth = float(np.mean(_true_posterior(u, REFERENCE_RATE)))
    covariate = sh.estimate_prevalence(
        calibrated_reference, _true_posterior(u, REFERENCE_RATE), n_bootstrap=60
    )
    assert abs(covariate.pcc - truth) < 0.01 < abs(covariate.prevalence - truth)
    assert abs(covariate.disagreement) > sh.DISAGREEMENT_Z
    assert any("covariate shift" in w for w in covariate.warnings)


def test_no_shift_no_disagreement_warning(calibrated_reference: sh.ReferenceModel) -> None:
    u, _ = _draw(np.random.default_rng(6), 5000, REFERENCE_RATE)
    est = sh.estimate_prevalence(
        calibrated_reference, _true_posterior(u, REFERENCE_RATE), n_bootstrap=60
    )
    assert np.isfinite(est.disagreement) and abs(est.disagreement) < sh.DISAGREEMENT_Z
    assert est.pcc_difference_se > 0.0
    assert not any("PCC" in w for w in est.warnings)


# ------------------------------------------------------------------------------------------
# The workflow: static decisions, both engines, the report
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("honesty")
    rng = np.random.default_rng(7)
    u, y = _draw(rng, 20_000, REFERENCE_RATE)
    reference = folder / "reference.csv"
    pl.DataFrame({"score": _true_posterior(u, REFERENCE_RATE), "label": y.astype(int)}).write_csv(
        reference
    )
    parts = [_draw(rng, 4000, rate) for rate in (0.01, 0.06)]
    target = folder / "target.csv"
    pl.DataFrame(
        {
            "day": ["a"] * 4000 + ["b"] * 4000,
            "score": np.concatenate([_true_posterior(u, REFERENCE_RATE) for u, _ in parts]),
            "label": np.concatenate([y for _, y in parts]).astype(int),
        }
    ).write_csv(target)
    return reference, target


def test_engines_write_identical_rows_and_static_is_the_reference_map(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    reference, target = files
    outputs = {}
    for engine in ("memory", "streaming"):
        out = tmp_path / f"{engine}.csv"
        result = run_estimate_shift(
            EstimateShiftRequest(
                reference=str(reference),
                target=str(target),
                output=str(out),
                method="map",
                batch_col="day",
                n_bootstrap=10,
                costs="1:4",
                engine=engine,  # type: ignore[arg-type]
            )
        )
        outputs[engine] = (out.read_bytes(), estimate_shift_payload(result))
    assert outputs["memory"] == outputs["streaming"]

    rows = pl.read_csv(tmp_path / "memory.csv")
    model = sh.fit_reference(
        pl.read_csv(reference)["score"].to_numpy(), pl.read_csv(reference)["label"].to_numpy()
    )
    payload = outputs["memory"][1]
    for entry in payload["batches"]:  # type: ignore[union-attr]
        assert isinstance(entry, dict) and isinstance(entry["decision"], dict)
        mine = rows.filter(pl.col("day") == entry["batch"])
        static = sh.reference_posterior(model, mine["score"].to_numpy()) >= 0.2
        assert entry["decision"]["flagged_static"] == pytest.approx(static.mean(), abs=1e-12)
        assert entry["decision"]["flagged_shifted"] == pytest.approx(
            mine["decision"].mean(), abs=1e-12
        )
        for key in ("pcc", "pcc_difference", "pcc_difference_se", "disagreement"):
            assert isinstance(entry[key], float)
        # rows keep their order in the score: calibrated is non-decreasing in it
        ordered = mine.sort("score")["calibrated"].to_numpy()
        assert np.all(np.diff(ordered) >= 0.0)


def test_the_command_reports_pcc_and_warns(files: tuple[Path, Path], run_calib: RunCalib) -> None:
    reference, target = files
    done = run_calib(
        [
            "estimate-shift",
            "--reference",
            str(reference),
            "--target",
            str(target),
            "--batch-col",
            "day",
            "--bootstrap",
            "30",
            "--json",
        ]
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [b["method"] for b in report["batches"]] == ["mle", "mle"]
    assert all("disagreement" in b and "pcc" in b for b in report["batches"])
    warned = [line for line in done.stderr.decode().splitlines() if "PCC" in line]
    assert warned and all(line.startswith("warning: batch ") for line in warned)
