"""Fits count weights below 1 on average in units of their mean (README, *Weights*).

The pseudo-counts of the fits (Platt's target smoothing ``(N+ + 1)/(N+ + 2)`` and
``1/(N- + 2)``, used with ``target_smoothing`` and on separable data by Platt and beta; the
histogram's prior worth one row) count rows as the minimum-row checks do
(:func:`calib_cli.core.fit_support.check_weight_unit`, over ``metrics.count_unit``): weights
normalised to sum to 1, or scaled to any mean below 1, give the map of the same weights scaled
to a mean of 1; weights of 1 or more on average count as they are (a weight of 2 is two rows).
Before, the pseudo-counts used raw weighted sums: weights summing to 1 made a histogram's
prior outweigh the data and Platt's targets 2/3 and 1/3.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calib_cli.artifacts import step_from_params, steps_artifact, validate_document
from calib_cli.core.beta import BetaParams, fit_beta
from calib_cli.core.fit_support import check_weight_unit
from calib_cli.core.histogram import fit_histogram, fit_histogram_points
from calib_cli.core.logistic import fit_logistic
from calib_cli.core.metrics import count_unit
from calib_cli.core.platt import fit_platt
from calib_cli.core.selection import _stratified_folds, choose_method, cross_fit
from calib_cli.errors import InputError
from tests.conftest import RunCalib

Fit = Callable[[np.ndarray, np.ndarray, np.ndarray], Any]

#: The fits whose pseudo-counts depended on the weights' scale before the fix.
FITS: dict[str, tuple[Fit, bool]] = {
    "platt, target smoothing": (
        lambda s, y, w: fit_platt(s, y, sample_weight=w, target_smoothing=True),
        False,
    ),
    "platt, separable": (lambda s, y, w: fit_platt(s, y, sample_weight=w), True),
    "beta, separable": (lambda s, y, w: fit_beta(s, y, sample_weight=w), True),
    "histogram": (lambda s, y, w: fit_histogram(s, y, sample_weight=w, n_bins=8), False),
}


def _data(seed: int, n: int, *, separable: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores, labels and continuous weights of mean 1 (no exact ties of the cumulative
    weight at an equal-mass edge, which a rescaling could round to the other side)."""
    rng = np.random.default_rng(seed)
    scores = np.sort(rng.uniform(0.02, 0.98, n))
    if separable:
        labels = (np.arange(n) >= n // 3).astype(np.float64)
    else:
        labels = (rng.random(n) < scores).astype(np.float64)
        labels[:2], labels[-2:] = 0.0, 1.0
    weights = rng.uniform(0.2, 1.8, n)
    return scores, labels, weights / weights.mean()


def _numbers(params: Any) -> np.ndarray:
    """Every number of a fitted map, flat (its arrays, floats and flags)."""
    values = [getattr(params, f.name) for f in fields(params) if f.name != "n_iter"]
    numbers = [np.ravel(np.asarray(v, dtype=np.float64)) for v in values if not isinstance(v, str)]
    return np.concatenate(numbers)


def _assert_same_map(first: Any, second: Any) -> None:
    np.testing.assert_allclose(_numbers(first), _numbers(second), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", list(FITS))
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), mean=st.floats(1e-9, 0.999))
def test_every_fit_is_the_same_for_any_scale_of_weights_below_one(
    name: str, seed: int, mean: float
) -> None:
    """Weights scaled to a mean of 1, to ``mean`` (below 1) and to sum to 1: one map."""
    fit, separable = FITS[name]
    scores, labels, w = _data(seed, 120, separable=separable)
    reference = fit(scores, labels, w)
    _assert_same_map(fit(scores, labels, w * mean), reference)
    _assert_same_map(fit(scores, labels, w / w.sum()), reference)
    if separable:
        assert reference.separable


@pytest.mark.parametrize("name", list(FITS))
def test_the_reported_case_normalised_weights_give_the_rows_fit(name: str) -> None:
    """The audit's case: integer weights 1..3 normalised to sum to 1, or scaled to a mean of
    0.5, give the map of the weights scaled to a mean of 1 (before: histogram rates squeezed
    towards the base rate, 0.34..0.41 for 0.09..0.77; a separable Platt slope of 0.17 for
    10). Integer weights also test the equal-mass edges: their running sums hit the levels
    exactly, and rescaled ones land a rounding to either side
    (:data:`calib_cli.core.histogram.LEVEL_RTOL`)."""
    fit, separable = FITS[name]
    rng = np.random.default_rng(0)
    n = 400 if separable else 5000
    scores = np.sort(rng.beta(2, 4, n)) if separable else rng.beta(2, 4, n)
    positive = (np.arange(n) >= n // 2) if separable else (rng.random(n) < scores)
    labels = positive.astype(np.float64)
    w = rng.integers(1, 4, n).astype(np.float64)
    at_one = fit(scores, labels, w / w.mean())
    for scaled in (w / w.sum(), w / w.mean() * 0.5):
        _assert_same_map(fit(scores, labels, scaled), at_one)
    if name == "histogram":
        assert at_one.rates[0] < 0.12 and at_one.rates[-1] > 0.65
    if name == "platt, separable":
        assert at_one.slope > 5.0


@pytest.mark.parametrize("name", list(FITS))
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_integer_weights_are_repeated_rows(name: str, seed: int) -> None:
    """Frequency weights of 1 or more on average count as they are: weight k (0 included) is
    k copies of the row, in the pseudo-counts as in the likelihood."""
    fit, separable = FITS[name]
    scores, labels, _ = _data(seed, 60, separable=separable)
    counts = np.random.default_rng(seed).integers(0, 4, scores.size)
    counts[[0, -1]] = 1  # both classes keep a row
    if separable:
        counts[[scores.size // 3 - 1, scores.size // 3]] = 1
    weighted = fit(scores, labels, counts.astype(np.float64))
    repeated = fit(np.repeat(scores, counts), np.repeat(labels, counts), np.ones(counts.sum()))
    _assert_same_map(weighted, repeated)


def test_weights_of_one_or_more_on_average_keep_the_raw_pseudo_counts() -> None:
    """Weights averaging 1.5 (some of them below 1) are not rescaled: Platt's targets are
    (W+ + 1)/(W+ + 2) and 1/(W- + 2) of the weighted sums, as before the fix."""
    scores, labels, _ = _data(3, 80, separable=False)
    w = np.random.default_rng(3).uniform(0.4, 2.6, scores.size)
    assert count_unit(w) == 1.0 and (w < 1.0).any()
    x = np.log(scores / (1.0 - scores))
    n_pos, n_neg = w[labels == 1.0].sum(), w[labels == 0.0].sum()
    targets = np.where(labels == 1.0, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    expected = fit_logistic(x[:, None], targets, w, tol=1e-10, max_iter=100)
    params = fit_platt(scores, labels, sample_weight=w, target_smoothing=True)
    np.testing.assert_allclose(
        [params.slope, params.intercept], [expected.coef[0], expected.intercept], rtol=1e-12
    )


def test_the_cross_validated_choice_is_the_same_for_any_scale_of_weights_below_one() -> None:
    """``auto``'s table: every candidate's out-of-fold log loss, for weights at a mean of 1,
    summing to 1, and at a mean of 1e-6 (the histogram's differed before)."""
    scores, labels, w = _data(11, 600, separable=False)
    options: dict[str, dict[str, Any]] = {
        "platt": {"target_smoothing": True},
        "histogram": {"n_bins": 12},
    }
    tables = [
        choose_method(
            scores,
            labels,
            sample_weight=scaled,
            n_folds=4,
            rng=np.random.default_rng(5),
            method_options=options,
        )
        for scaled in (w, w / w.sum(), w * 1e-6)
    ]
    first = [c.cv_log_loss for c in tables[0].candidates]
    for table in tables[1:]:
        assert table.chosen == tables[0].chosen
        np.testing.assert_allclose([c.cv_log_loss for c in table.candidates], first, rtol=1e-9)


@pytest.mark.parametrize("scale", [1.0, 1e-3])
def test_each_fold_counts_rows_in_the_unit_of_all_the_rows(scale: float) -> None:
    """Cross-fitting gives every fold's fit the unit of the whole data: weights averaging just
    above 1 keep unit 1 in a fold whose training rows average below 1, and weights below 1
    count in the mean of all the rows, not the fold's."""
    scores, labels, _ = _data(4, 200, separable=False)
    w = np.where(np.arange(200) % 2 == 0, 0.3, 1.75) * scale  # mean 1.025 * scale
    folds_rng, n_folds = np.random.default_rng(9), 5
    out = cross_fit(
        "histogram", scores, labels, sample_weight=w, n_folds=n_folds, rng=folds_rng, n_bins=6
    )
    folds = _stratified_folds(labels, n_folds, np.random.default_rng(9))
    unit = count_unit(w)
    assert unit == (1.0 if scale == 1.0 else pytest.approx(1.025 * scale))
    fold_means = [w[folds != k].mean() / scale for k in range(n_folds)]
    assert min(fold_means) < 1.0 < max(fold_means)  # the case that matters
    for k in range(n_folds):
        train, test = folds != k, folds == k
        params = fit_histogram(
            scores[train], labels[train], sample_weight=w[train], n_bins=6, weight_unit=unit
        )
        np.testing.assert_array_equal(
            out[test], params.rates[np.searchsorted(params.edges[1:-1], scores[test], "right")]
        )


def test_points_of_a_summary_take_the_unit_of_their_rows() -> None:
    """``fit_histogram_points`` (the streaming fit's core) cannot tell the rows' unit from
    aggregated points: given it, the fit is the fit on the rows."""
    scores, labels, w = _data(6, 300, separable=False)
    w = w / w.sum()
    rows = fit_histogram(scores, labels, sample_weight=w, n_bins=5)
    points = fit_histogram_points(
        scores, labels, w, np.ones(scores.size, bool), n_bins=5, weight_unit=count_unit(w)
    )
    assert not isinstance(points, np.ndarray)
    _assert_same_map(points, rows)


def test_a_weight_unit_must_be_a_positive_number() -> None:
    for bad in (0.0, -1.0, float("nan"), float("inf"), True):
        with pytest.raises(InputError, match="weight_unit must be a positive number"):
            check_weight_unit(bad, np.ones(3))
    with pytest.raises(InputError, match="weight_unit must be a positive number"):
        fit_platt([0.2, 0.4, 0.6, 0.8], [0, 1, 0, 1], weight_unit=0.0)


# ------------------------------------------------ beta on separable data: reported as Platt


def test_a_beta_artifact_records_separable_and_old_ones_still_load() -> None:
    fitted = fit_beta([0.1, 0.2, 0.3, 0.7, 0.8, 0.9], [0, 0, 0, 1, 1, 1])
    assert fitted.separable
    artifact = steps_artifact((fitted,), {"file": "fit.csv", "rows": 6})
    assert artifact.params["separable"] is True
    loaded = validate_document(json.loads(artifact.to_json()), name="m.json")
    assert step_from_params("beta", loaded.params) == fitted
    old = {"a": 1.0, "b": 1.0, "c": 0.0, "converged": True, "n_iter": 3}
    document = {"schema_version": 1, "kind": "beta", "params": old}
    assert step_from_params("beta", validate_document(document, name="old.json").params) == (
        BetaParams(a=1.0, b=1.0, c=0.0, converged=True, n_iter=3, separable=False)
    )
    bad = {**document, "params": {**old, "separable": "yes"}}
    with pytest.raises(InputError, match=r'params\.separable must be true or false, not "yes"'):
        validate_document(bad, name="bad.json")


BETA_WARNING = (
    "warning: the scores separate the classes perfectly: beta's fit used Platt's target "
    "smoothing to stay finite (its plain maximum-likelihood coefficients are infinite)"
)


def test_separable_beta_warns_and_saves_separable_end_to_end(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """The command line (in-process): beta on separable data warns as Platt does (worded for
    beta) and records ``separable: true``; weights normalised to sum to 1 give the map of the
    weights scaled to a mean of 1; a beta artifact saved before the field existed still
    applies."""
    rng = np.random.default_rng(1)
    n = 200
    w = rng.integers(1, 4, n).astype(np.float64)
    source = tmp_path / "sep.csv"
    pl.DataFrame(
        {
            "score": np.sort(rng.uniform(0.01, 0.99, n)),
            "label": (np.arange(n) >= 80).astype(np.int64),
            "wm": w / w.mean(),
            "wn": w / w.sum(),
        }
    ).write_csv(source)
    params = {}
    for column in ("wm", "wn"):
        model = tmp_path / f"{column}.json"
        done = invoke_calib(
            ["recalibrate", "--fit", str(source), "--method", "beta", "--weight-col", column,
             "--save-model", str(model), ]
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        lines = done.stderr.decode().splitlines()
        assert BETA_WARNING in lines and not any("Platt's fit" in line for line in lines)
        params[column] = json.loads(model.read_text())["params"]
        assert params[column]["separable"] is True
    np.testing.assert_allclose(
        [params["wn"][k] for k in "abc"], [params["wm"][k] for k in "abc"], rtol=1e-8, atol=1e-10
    )
    old = json.loads((tmp_path / "wm.json").read_text())
    del old["params"]["separable"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    done = invoke_calib(
        ["recalibrate", str(source), "--model", str(tmp_path / "old.json"),
         "-o", str(tmp_path / "out.csv"), ]
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert b"separate" not in done.stderr


def test_beta_on_data_that_do_not_separate_says_nothing(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    rng = np.random.default_rng(2)
    scores = rng.uniform(0.01, 0.99, 300)
    source = tmp_path / "fit.csv"
    pl.DataFrame({"score": scores, "label": (rng.random(300) < scores).astype(int)}).write_csv(
        source
    )
    model = tmp_path / "m.json"
    done = invoke_calib(
        ["recalibrate", "--fit", str(source), "--method", "beta", "--save-model", str(model)]
    )
    assert done.returncode == 0, done.stderr
    assert b"separate" not in done.stderr
    assert json.loads(model.read_text())["params"]["separable"] is False


def _row_cells(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> Any:
    """Each row its own cell of a summary (one row counted in ``rows``)."""
    from calib_cli.core.cells import CellSums

    logits = np.log(scores / (1.0 - scores))
    return CellSums(np.arange(scores.size), labels.astype(np.int8), weights, weights * scores,
                    weights * logits, scores, scores, rows=np.ones(scores.size))  # fmt: skip


@pytest.mark.parametrize("method", ["platt", "beta", "histogram"])
@pytest.mark.parametrize("scale", [1.0 / 400, 0.5])
def test_a_summary_fit_counts_rows_in_the_rows_unit(method: str, scale: float) -> None:
    """The streaming and summary fits passed cell sums without the rows' unit, so a cell's
    weight (many rows') set it: separable Platt on normalised weights gave slope 7.795 where
    the rows give 7.840, and the streaming histogram's prior still outweighed the data."""
    from calib_cli.core.cells import choose_method_on_cells, fit_on_cells

    scores, labels, weights = _data(3, 400, separable=method != "histogram")
    options = {"n_bins": 8} if method == "histogram" else {}
    fit: Any = fit_on_cells
    on_rows = fit(method, _row_cells(scores, labels, weights), options=options)
    _assert_same_map(
        on_rows, fit(method, _row_cells(scores, labels, weights * scale), options=options)
    )

    # cells of two rows each: the unit is the rows', not the cells' mean weight
    def pairs(weight: np.ndarray) -> Any:
        cells = _row_cells(scores, labels, weight)
        return dataclasses.replace(cells, rows=np.full(scores.size, 2.0))

    _assert_same_map(fit(method, pairs(weights * scale), options=options),
                     fit(method, pairs(weights * 2.0), options=options))  # fmt: skip
    folds = [_row_cells(scores[k::2], labels[k::2], weights[k::2] * scale) for k in range(2)]
    unscaled = [_row_cells(scores[k::2], labels[k::2], weights[k::2]) for k in range(2)]
    first = choose_method_on_cells(folds, candidates=("platt", "beta", "histogram"))
    second = choose_method_on_cells(unscaled, candidates=("platt", "beta", "histogram"))
    assert [c.cv_log_loss for c in first.candidates] == pytest.approx(
        [c.cv_log_loss for c in second.candidates], rel=1e-9
    )


def test_the_streaming_histogram_counts_rows_in_the_rows_unit(tmp_path: Path) -> None:
    """The streaming histogram (exact: the fit on the rows, by refinement passes) passed the
    points' weights without the rows' unit: normalised weights gave rates 0.32..0.38 there,
    0.08..0.70 in memory."""
    from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate

    scores, labels, weights = _data(5, 3000, separable=False)
    rows = tmp_path / "rows.parquet"
    pl.DataFrame({"score": scores, "label": labels.astype(np.int64), "w": weights / weights.sum()}
                 ).write_parquet(rows)  # fmt: skip
    fitted = {}
    for engine in ("memory", "streaming"):
        model = tmp_path / f"{engine}.json"
        run_recalibrate(RecalibrateRequest(fit=str(rows), method="histogram", weight_col="w",
                                           engine=engine, save_model=str(model)))  # fmt: skip
        fitted[engine] = json.loads(model.read_text())["params"]
    assert fitted["streaming"]["edges"] == fitted["memory"]["edges"]
    # the bins' sums add up in another order: the rates agree to rounding
    np.testing.assert_allclose(fitted["streaming"]["rates"], fitted["memory"]["rates"], rtol=1e-12)
    assert min(fitted["memory"]["rates"]) < 0.2  # the data's, not the prior's base rate
