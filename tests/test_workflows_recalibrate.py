"""The recalibrate workflow in-process: the plan, the steps, the effects, the saved model."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy.special import expit, logit
from sklearn.metrics import log_loss

from calib_cli.artifacts import load_artifact, steps_of
from calib_cli.errors import ArtifactError, UsageError
from calib_cli.report.payloads import recalibrate_payload
from calib_cli.workflows.recalibrate import (
    RecalibrateRequest,
    plan_recalibration,
    run_recalibrate,
)


def _write(tmp_path: Path, name: str, n: int = 3000, seed: int = 0) -> Path:
    """Over-confident scores: the true log-odds are half the model's."""
    rng = np.random.default_rng(seed)
    true_logit = rng.normal(-2.0, 1.0, n)
    frame = pl.DataFrame(
        {
            "id": np.arange(n),
            "score": expit(2.0 * true_logit),
            "label": (rng.random(n) < expit(true_logit)).astype(np.int64),
        }
    )
    path = tmp_path / name
    frame.write_csv(path)
    return path


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "nothing to do"),
        ({"model": "m.json", "method": "platt"}, "--model already holds its method"),
        (
            {"fit": "f.csv", "cross_fit_folds": 3},
            "give one of --fit, --fit-summary, --model, --cross-fit",
        ),
        (
            {"method": "isotonic"},
            "--method isotonic needs --fit FILE, --fit-summary S or --cross-fit K",
        ),
        ({"fit": "f.csv", "method": "prior"}, "--method prior fits nothing"),
    ],
)
def test_the_plan_refuses_options_that_do_not_fit_together(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        plan_recalibration(RecalibrateRequest(file="x.csv", **options))  # type: ignore[arg-type]


def test_the_plan_names_the_method() -> None:
    assert plan_recalibration(RecalibrateRequest(file="x.csv", fit="f.csv")).method == "auto"
    plan = plan_recalibration(RecalibrateRequest(file="x.csv", cross_fit_folds=4))
    assert plan.cross_fit and plan.method == "auto"
    assert plan_recalibration(RecalibrateRequest(file="x.csv", model="m.json")).method == "model"
    prior = plan_recalibration(RecalibrateRequest(file="x.csv", negative_rate=0.5))
    assert (prior.method, prior.cross_fit) == ("prior", False)


def test_a_prior_correction_shifts_every_log_odds(tmp_path: Path) -> None:
    source, out = _write(tmp_path, "s.csv"), tmp_path / "out.csv"
    request = RecalibrateRequest(file=str(source), output=str(out), negative_rate=0.5)
    result = run_recalibrate(request)
    assert result.step_kinds == ("prior",) and result.output == str(out)
    frame = pl.read_csv(out)
    shift = logit(frame["calibrated"].to_numpy()) - logit(frame["score"].to_numpy())
    assert shift == pytest.approx(np.full(frame.height, np.log(0.5)))
    assert result.input is not None and result.input.has_labels
    assert result.input.effect.rows == frame.height
    payload = recalibrate_payload(result)
    assert list(payload) == ["method", "seed", "input", "steps"]


def test_fit_save_and_apply_a_model_give_the_same_scores(tmp_path: Path) -> None:
    fit, source = _write(tmp_path, "fit.csv", seed=1), _write(tmp_path, "s.csv", seed=2)
    model, first = tmp_path / "m.json", tmp_path / "first.csv"
    warnings: list[str] = []
    fitted = run_recalibrate(
        RecalibrateRequest(
            file=str(source),
            output=str(first),
            fit=str(fit),
            method="isotonic",
            save_model=str(model),
        ),
        warn=warnings.append,
    )
    assert fitted.step_kinds == ("isotonic",) and fitted.choice is None
    assert fitted.fit is not None and fitted.fit.file == str(fit)
    assert fitted.fit.effect.after is not None and fitted.fit.effect.before is not None
    assert fitted.fit.effect.after.log_loss < fitted.fit.effect.before.log_loss
    assert any("changed the AUC" in w for w in warnings)  # isotonic pools scores into steps
    assert [s.kind for s in steps_of(load_artifact(str(model)))] == ["isotonic"]
    again = tmp_path / "again.csv"
    applied = run_recalibrate(
        RecalibrateRequest(file=str(source), output=str(again), model=str(model))
    )
    assert applied.method == "model" and applied.fit is None
    assert pl.read_csv(again).equals(pl.read_csv(first))


def test_auto_cross_fit_reports_its_choice_and_the_folds(tmp_path: Path) -> None:
    source, out = _write(tmp_path, "s.csv", n=1500), tmp_path / "out.csv"
    result = run_recalibrate(
        RecalibrateRequest(file=str(source), output=str(out), cross_fit_folds=3, seed=4)
    )
    assert result.choice is not None and result.choice.n_folds == 5
    assert result.step_kinds == (result.choice.chosen,)
    assert result.cross_fit == 3
    payload = recalibrate_payload(result)
    assert list(payload) == ["method", "seed", "auto", "cross_fit", "input", "steps"]


# ------------------------------------------ checks of the numbers and refusals (moved here
# from test_cli_recalibrate.py, which keeps one end-to-end run per behaviour)


@pytest.fixture
def overconfident(tmp_path: Path) -> dict[str, Path]:
    """Over-confident scores (log-odds 2.5 times the true ones) with weights 1 or 2."""
    rng = np.random.default_rng(3)
    paths = {}
    for name, n in (("fit", 6000), ("apply", 4000)):
        z = rng.normal(-2.0, 1.5, n)
        y = (rng.random(n) < expit(z)).astype(np.int64)
        frame = pl.DataFrame(
            {
                "id": np.arange(n),
                "score": expit(2.5 * z),
                "label": y,
                "w": rng.choice([1.0, 2.0], n),
            }
        )
        paths[name] = tmp_path / f"{name}.csv"
        frame.write_csv(paths[name])
    return paths


@pytest.mark.parametrize("method", ["platt", "isotonic", "beta", "histogram"])
def test_save_load_apply_is_byte_identical_and_improves_log_loss(
    overconfident: dict[str, Path], tmp_path: Path, method: str
) -> None:
    model, direct, applied = tmp_path / "m.json", tmp_path / "direct.csv", tmp_path / "a.csv"
    run_recalibrate(
        RecalibrateRequest(
            file=str(overconfident["apply"]),
            fit=str(overconfident["fit"]),
            method=method,  # type: ignore[arg-type]
            weight_col="w",
            save_model=str(model),
            output=str(direct),
        )
    )
    run_recalibrate(
        RecalibrateRequest(file=str(overconfident["apply"]), model=str(model), output=str(applied))
    )
    assert applied.read_bytes() == direct.read_bytes()
    artifact = json.loads(model.read_text())
    assert artifact["kind"] == method
    assert artifact["schema_version"] == 1
    assert artifact["fitted_on"]["rows"] == 6000
    frame = pl.read_csv(applied)
    y, before, after = (frame[c].to_numpy() for c in ("label", "score", "calibrated"))
    assert log_loss(y, after) < log_loss(y, before)


@pytest.mark.parametrize(
    ("fit_data", "kinds"), [("population", ["prior", "platt"]), ("sampled", ["platt", "prior"])]
)
def test_prior_and_fitted_map_compose_in_one_chain(
    overconfident: dict[str, Path], tmp_path: Path, fit_data: str, kinds: list[str]
) -> None:
    model = tmp_path / "chain.json"
    result = run_recalibrate(
        RecalibrateRequest(
            fit=str(overconfident["fit"]),
            method="platt",
            negative_rate=0.5,
            fit_data=fit_data,  # type: ignore[arg-type]
            save_model=str(model),
        )
    )
    assert list(result.step_kinds) == kinds
    artifact = json.loads(model.read_text())
    assert artifact["kind"] == "chain"
    assert [s["kind"] for s in artifact["params"]["steps"]] == kinds


def test_train_and_target_priors_round_trip_in_process(tmp_path: Path) -> None:
    source = tmp_path / "s.csv"
    scores = [0.0, 1e-12, 0.2, 0.5, 0.9, 1.0]
    pl.DataFrame({"score": scores}).write_csv(source)
    there, back = tmp_path / "there.csv", tmp_path / "back.csv"
    run_recalibrate(
        RecalibrateRequest(file=str(source), train_prior=0.5, target_prior=0.02, output=str(there))
    )
    run_recalibrate(
        RecalibrateRequest(
            file=str(there),
            score_col="calibrated",
            output_col="back",
            train_prior=0.02,
            target_prior=0.5,
            output=str(back),
        )
    )
    np.testing.assert_allclose(pl.read_csv(back)["back"].to_numpy(), scores, rtol=1e-14, atol=0)


def test_separable_data_is_reported_and_saved_as_separable(tmp_path: Path) -> None:
    source = tmp_path / "sep.csv"  # 12 rows of each class (Platt needs 10)
    source.write_text("score,label\n" + "0.1,0\n0.2,0\n0.8,1\n0.9,1\n0.15,0\n0.85,1\n" * 4)
    model = tmp_path / "m.json"
    warnings: list[str] = []
    run_recalibrate(
        RecalibrateRequest(fit=str(source), method="platt", save_model=str(model)),
        warn=warnings.append,
    )
    assert warnings == [
        "the scores separate the classes perfectly: Platt's fit used target smoothing to "
        "stay finite (its slope is a lower bound)"
    ]
    assert json.loads(model.read_text())["params"]["separable"] is True


def test_too_many_cross_fit_folds_are_refused(tmp_path: Path) -> None:
    source = tmp_path / "sep.csv"
    source.write_text("score,label\n0.1,0\n0.2,0\n0.8,1\n0.9,1\n0.15,0\n0.85,1\n")
    with pytest.raises(UsageError) as error:
        run_recalibrate(RecalibrateRequest(file=str(source), cross_fit_folds=50, output="-"))
    assert str(error.value) == f"--cross-fit 50 asks for more folds than {source} has rows (6)"
    assert error.value.exit_code == 2


FIT_FILE = "<the fit file of the fixture>"
NOTHING_TO_DO = (
    "nothing to do: give --sampling-record, --negative-rate, --train-prior/--target-prior, "
    "--fit, --model or --cross-fit"
)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"method": "platt"}, "--method platt needs --fit FILE, --fit-summary S or --cross-fit K"),
        (
            {"fit": "x.csv", "model": "m.json"},
            "give one of --fit, --fit-summary, --model, --cross-fit (got --fit and --model)",
        ),
        ({"model": "m.json", "method": "platt"}, "--model already holds its method; drop --method"),
        (  # the copy recorded this call's file as the data it was fitted on
            {"model": "m.json", "save_model": "copy.json"},
            "--model applies a saved calibrator and fits nothing, so --save-model would save "
            "the same one as fitted on this call's file: drop --save-model (to copy the "
            "calibrator, copy its file)",
        ),
        ({"method": "prior"}, NOTHING_TO_DO),
        ({}, NOTHING_TO_DO),
        (
            {"fit": FIT_FILE, "method": "platt", "positive_rate": 0.5},
            "--positive-rate goes with --negative-rate (the rates of a sample)",
        ),
    ],
)
def test_usage_errors_name_the_options(
    overconfident: dict[str, Path], options: dict[str, object], message: str
) -> None:
    if options.get("fit") == FIT_FILE:  # checked after the paths: a real file
        options = {**options, "fit": str(overconfident["fit"])}
    request = RecalibrateRequest(file=str(overconfident["apply"]), output="-", **options)  # type: ignore[arg-type]
    with pytest.raises(UsageError) as error:
        run_recalibrate(request)
    assert str(error.value) == message
    assert error.value.exit_code == 2


@pytest.mark.parametrize(
    ("method", "mutate", "message"),
    [
        (
            "isotonic",
            lambda d: d["params"]["y_knots"].__setitem__(1, None),
            "params.y_knots[1] must be a number",
        ),
        ("isotonic", lambda d: d["params"]["x_knots"].reverse(), "params.x_knots[1]"),
        ("isotonic", lambda d: d.__setitem__("schema_version", 9), "schema_version is 9"),
        ("isotonic", lambda d: d.__setitem__("kind", "magic"), 'record (kind "magic": a JSON'),
        ("isotonic", lambda d: d["params"].pop("eps"), "params.eps is missing"),
        (
            "isotonic",
            lambda d: d["params"]["y_knots"].__setitem__(1, float("nan")),
            "params.y_knots[1] is not a finite number",
        ),
        ("isotonic", lambda d: d.__setitem__("schema_version", True), "schema_version is true"),
        ("isotonic", lambda d: d["params"].__setitem__("extra", 1), "params.extra is not a field"),
        (
            "platt",
            lambda d: d["params"].__setitem__("n_iter", "abc"),
            "params.n_iter must be an integer",
        ),
        (
            "platt",
            lambda d: d["params"].__setitem__("converged", "no"),
            "params.converged must be true or false",
        ),
    ],
)
def test_bad_artifacts_are_refused_naming_the_field(
    overconfident: dict[str, Path],
    tmp_path: Path,
    method: str,
    mutate: Callable[[dict[str, Any]], object],
    message: str,
) -> None:
    model = tmp_path / "m.json"
    run_recalibrate(
        RecalibrateRequest(fit=str(overconfident["fit"]), method=method, save_model=str(model))  # type: ignore[arg-type]
    )
    document = json.loads(model.read_text())
    mutate(document)
    model.write_text(json.dumps(document))
    out = tmp_path / "o.csv"
    with pytest.raises(ArtifactError) as error:
        run_recalibrate(
            RecalibrateRequest(file=str(overconfident["apply"]), model=str(model), output=str(out))
        )
    assert str(error.value).startswith(f"{model}: ")
    assert message in str(error.value)
    assert error.value.exit_code == 65
    assert not out.exists()


@pytest.mark.parametrize(
    ("method", "reason"),
    [
        (
            "platt",
            "the map decreases, so it reverses the ranking: the scores rank the labels "
            "backwards (AUC below 0.5); are the labels flipped (--positive-label)?",
        ),
        (
            "beta",
            "the map is constant: the scores rank the labels backwards (AUC below 0.5), which "
            "a map that keeps the order cannot follow; are the labels flipped "
            "(--positive-label)?",
        ),
        (
            "isotonic",
            "the map is constant: the scores rank the labels backwards (AUC below 0.5), which "
            "a map that keeps the order cannot follow; are the labels flipped "
            "(--positive-label)?",
        ),
    ],
)
def test_scores_ranking_the_labels_backwards_are_named_as_such(
    tmp_path: Path, method: str, reason: str
) -> None:
    """Scores that rank the labels backwards (1 - score): Platt's negative slope turns the
    ranking round, and beta (non-negative coefficients) and isotonic go flat; the warning said
    every such map "pools scores into steps"."""
    rng = np.random.default_rng(3)
    score = rng.uniform(0.02, 0.98, 4000)
    backwards = tmp_path / "backwards.csv"
    pl.DataFrame(
        {"score": 1.0 - score, "label": (rng.random(4000) < score).astype(np.int64)}
    ).write_csv(backwards)
    warnings: list[str] = []
    run_recalibrate(
        RecalibrateRequest(fit=str(backwards), method=method, save_model=str(tmp_path / "m.json")),
        warn=warnings.append,
    )
    changed = [w for w in warnings if "calibration changed the AUC" in w]
    assert len(changed) == 1
    assert changed[0].endswith(f"): {reason}")


def test_a_model_of_raw_margins_applied_as_probabilities_says_which_kind(tmp_path: Path) -> None:
    """Margins read as probabilities failed as "values outside [0, 1]", without a word on
    the model's score kind, which it records."""
    rng = np.random.default_rng(5)
    margin = rng.normal(0.0, 3.0, 2000)
    fit = tmp_path / "margins.csv"
    pl.DataFrame(
        {"score": margin, "label": (rng.random(2000) < expit(margin / 2)).astype(np.int64)}
    ).write_csv(fit)
    model = tmp_path / "raw.json"
    run_recalibrate(
        RecalibrateRequest(fit=str(fit), method="platt", score_kind="raw", save_model=str(model))
    )
    out = tmp_path / "out.csv"
    with pytest.raises(UsageError) as error:
        run_recalibrate(RecalibrateRequest(file=str(fit), model=str(model), output=str(out)))
    assert str(error.value) == (
        f"{model} was fitted on raw scores, and this call reads probability scores: "
        "add --score-kind raw"
    )
    assert not out.exists()
    run_recalibrate(
        RecalibrateRequest(file=str(fit), model=str(model), output=str(out), score_kind="raw")
    )
    assert pl.read_csv(out)["calibrated"].is_between(0.0, 1.0).all()


@pytest.mark.parametrize("method", ["isotonic", "beta", "histogram"])
@pytest.mark.parametrize("kind", ["raw", "logit"])
def test_a_probability_map_on_raw_or_logit_scores_is_an_option_clash(
    tmp_path: Path, method: str, kind: str
) -> None:
    """Refused before any file is read (exit 2), naming both options and the method that
    takes such scores; it was exit 65 once the whole fit file had been read. The file does
    not exist: nothing is read before the refusal."""
    request = RecalibrateRequest(
        fit=str(tmp_path / "not-read.csv"),
        method=method,
        score_kind=kind,
        save_model=str(tmp_path / "m.json"),
    )
    with pytest.raises(UsageError) as error:
        run_recalibrate(request)
    assert str(error.value).startswith(
        f"--method {method} maps probabilities, and --score-kind {kind} scores are not: "
        "use --method platt"
    )
    assert error.value.exit_code == 2


def test_auto_folds_are_bounded_as_cross_fit_folds_are(tmp_path: Path) -> None:
    """--method auto --folds 600 on 512 rows ran silently (most folds empty), where
    --cross-fit 600 was refused."""
    rng = np.random.default_rng(6)
    score = rng.uniform(size=512)
    fit = tmp_path / "f.csv"
    pl.DataFrame({"score": score, "label": (rng.random(512) < score).astype(np.int64)}).write_csv(
        fit
    )
    with pytest.raises(UsageError) as error:
        run_recalibrate(
            RecalibrateRequest(
                fit=str(fit), method="auto", folds=600, save_model=str(tmp_path / "m.json")
            )
        )
    assert str(error.value) == f"--folds 600 asks for more folds than {fit} has rows (512)"
    assert not (tmp_path / "m.json").exists()


def test_fitting_and_calibrating_one_file_says_the_figures_are_in_sample(tmp_path: Path) -> None:
    source = _write(tmp_path, "one.csv")
    warnings: list[str] = []
    run_recalibrate(
        RecalibrateRequest(
            file=str(source),
            fit=str(tmp_path / "." / "one.csv"),
            method="platt",
            output=str(tmp_path / "o.csv"),
        ),
        warn=warnings.append,
    )
    assert warnings == [
        f"{source} is both --fit and the INPUT: its rows are calibrated by a map fitted on "
        "them, so the 'after' figures flatter it; --cross-fit K gives out-of-fold "
        "probabilities of one labelled file"
    ]


def test_a_per_stratum_prior_that_reorders_strata_says_why(tmp_path: Path) -> None:
    """A stratified sampling record's prior changed the AUC across strata, and the warning
    blamed steps ("pools scores into steps; isotonic --strict, platt and beta keep the
    ranking"), advice that does not apply: each stratum's shift is its own."""
    from calib_cli.workflows.resample import ResampleRequest, run_resample

    rng = np.random.default_rng(1)
    n = 4000
    scores = rng.random(n)
    rows = tmp_path / "st.csv"
    pl.DataFrame({"score": scores, "label": (rng.random(n) < scores).astype(np.int64),
                  "r": np.where(rng.random(n) < 0.5, "a", "b")}).write_csv(rows)  # fmt: skip
    rates = tmp_path / "rates.csv"
    pl.DataFrame({"stratum": ["a", "b"], "negative_rate": [0.05, 0.8]}).write_csv(rates)
    sample = tmp_path / "sample.csv"
    run_resample(ResampleRequest(file=str(rows), output=str(sample), strata_col="r",
                                 rates_file=str(rates)))  # fmt: skip
    warnings: list[str] = []
    run_recalibrate(
        RecalibrateRequest(file=str(rows), sampling_record=f"{sample}.sampling.json",
                           output=str(tmp_path / "out.csv")),
        warn=warnings.append,
    )  # fmt: skip
    (said,) = [w for w in warnings if "changed the AUC" in w]
    assert said.endswith(
        "each stratum has its own prior shift, so rows of different strata can change order "
        "(each stratum keeps its own)"
    )
