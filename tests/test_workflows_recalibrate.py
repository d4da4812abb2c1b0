"""The recalibrate workflow in-process: the plan, the steps, the effects, the saved model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.special import expit, logit

from calib_cli.artifacts import load_artifact, steps_of
from calib_cli.errors import UsageError
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
        ({"fit": "f.csv", "cross_fit_folds": 3}, "give one of --fit, --model, --cross-fit"),
        ({"method": "isotonic"}, "--method isotonic needs --fit FILE or --cross-fit K"),
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
