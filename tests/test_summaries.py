"""The mergeable score summary: grid, merge laws, file forms, and figures against in-memory."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, log_loss, roc_auc_score

from calib_cli.core.metrics import ece_bootstrap, reliability_summary
from calib_cli.errors import InputError
from calib_cli.summaries import (
    ScoreSummary,
    bin_index,
    cell_bounds,
    cell_index,
    cells_to_resolve,
    merge_summaries,
    reliability_from_summary,
    resolved_cells,
    summarize_arrays,
)
from calib_cli.summaries.figures import SummaryReliability

EDGE_SCORES = np.array(
    [
        0.0,
        -0.0,
        5e-324,
        1e-310,
        2.2250738585072014e-308,
        1e-300,
        1e-16,
        0.1,
        np.nextafter(0.5, 0.0),
        0.5,
        np.nextafter(0.5, 1.0),
        0.75,
        1.0 - 1e-16,
        np.nextafter(1.0, 0.0),
        1.0,
    ]
)


def _close(a: float, b: float, rel: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300) + 1e-300


def _equal(a: ScoreSummary, b: ScoreSummary, rel: float = 1e-12) -> None:
    assert a.groups == b.groups
    assert a.metadata() == b.metadata()
    for name, left in a.to_columns().items():
        right = b.to_columns()[name]
        if left.dtype.kind == "f":
            np.testing.assert_allclose(left, right, rtol=rel, atol=1e-300, equal_nan=True)
        else:
            assert left.tolist() == right.tolist(), name


# --------------------------------------------------------------------------------------- grid


@pytest.mark.parametrize("bits", [1, 4, 12, 20, 40, 52])
def test_cells_are_monotone_tight_and_hold_their_scores(bits: int) -> None:
    rng = np.random.default_rng(bits)
    p = np.concatenate(
        [rng.random(20_000), rng.random(2_000) ** 30, 1 - rng.random(2_000) ** 30, EDGE_SCORES]
    )
    cells = cell_index(p, mantissa_bits=bits)
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(cells[order]) >= 0)
    lo, hi = cell_bounds(cells, mantissa_bits=bits)
    assert np.all((lo <= p) & (p <= hi))
    assert np.array_equal(cell_index(lo, mantissa_bits=bits), cells)
    assert np.array_equal(cell_index(hi, mantissa_bits=bits), cells)
    inside = lo > 0.0
    assert np.all(cell_index(np.nextafter(lo[inside], -1.0), mantissa_bits=bits) < cells[inside])
    below_one = hi < 1.0
    above = cell_index(np.nextafter(hi[below_one], 2.0), mantissa_bits=bits)
    assert np.all(above > cells[below_one])


def test_cells_of_zero_and_one_are_their_own_and_width_is_relative() -> None:
    cells = cell_index(EDGE_SCORES, mantissa_bits=12)
    assert cells[0] == cells[1] == 0 and cells[2] > 0
    assert np.sum(cells == cells[-1]) == 1
    for p in [1e-9, 3e-4, 0.2, 0.9, 1 - 1e-7]:
        lo, hi = cell_bounds(cell_index([p], mantissa_bits=12), mantissa_bits=12)
        distance = min(p, 1.0 - p)
        assert (hi[0] - lo[0]) <= distance * 2.0**-11


def test_bin_index_matches_metrics_assignment() -> None:
    edges = np.linspace(0.0, 1.0, 11)
    p = np.concatenate([edges, np.nextafter(edges, 2.0), np.random.default_rng(0).random(100)])
    p = np.clip(p, 0.0, 1.0)
    assert np.array_equal(bin_index(p, edges), np.searchsorted(edges[1:-1], p, side="left"))


# ------------------------------------------------------------------------------------- merge


def _data(seed: int, n: int, *, groups: bool = True) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.beta(0.3, 4.0, n - 4), [0.0, 1.0, 0.5, 0.1]])
    y = (rng.random(n) < p).astype(int)
    w = rng.integers(0, 4, n).astype(float)
    g = rng.choice(["a", "b", "c"], n).astype(object)
    g[::7] = None
    return {"y": y, "p": p, "w": w, "g": g if groups else None}


def _summary(d: dict[str, Any], rows: slice = slice(None), **kw: Any) -> ScoreSummary:
    g = None if d["g"] is None else d["g"][rows]
    return summarize_arrays(
        d["y"][rows], d["p"][rows], sample_weight=d["w"][rows], groups=g, group_column="g", **kw
    )


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    cuts=st.lists(st.integers(0, 300), min_size=2, max_size=2),
)
def test_merge_is_associative_commutative_and_equals_concatenation(
    seed: int, cuts: list[int]
) -> None:
    d = _data(seed, 300)
    i, j = sorted(cuts)
    a, b, c = _summary(d, slice(0, i)), _summary(d, slice(i, j)), _summary(d, slice(j, None))
    whole = _summary(d)
    left = merge_summaries([merge_summaries([a, b]), c])
    right = a.merge(b.merge(c))
    _equal(left, right)
    _equal(c.merge(a).merge(b), left)
    _equal(left, whole)


def test_merge_refuses_different_grids_naming_the_field() -> None:
    d = _data(0, 50)
    a = _summary(d)
    with pytest.raises(InputError, match="different mantissa_bits: 12 and 10"):
        merge_summaries([a, _summary(d, mantissa_bits=10)])
    with pytest.raises(InputError, match="different bin_edges"):
        a.merge(_summary(d, bin_edges=[0.0, 0.5, 1.0]))
    with pytest.raises(InputError, match="different eps"):
        a.merge(_summary(d, eps=1e-7))
    other = summarize_arrays(d["y"], d["p"], score_column="other")
    with pytest.raises(InputError, match="different score_column: 'other'"):
        other.merge(a)


def test_weights_are_repetitions() -> None:
    d = _data(3, 400, groups=False)
    w = d["w"].astype(int)
    once = summarize_arrays(d["y"], d["p"], sample_weight=d["w"])
    repeated = summarize_arrays(np.repeat(d["y"], w), np.repeat(d["p"], w))
    r1 = reliability_from_summary(once).reliability
    r2 = reliability_from_summary(repeated).reliability
    for name in ("weight_total", "log_loss", "brier", "ece", "auc", "calibration_slope"):
        assert _close(getattr(r1, name), getattr(r2, name), 1e-9), name


def test_groups_select_and_pool() -> None:
    d = _data(1, 500)
    s = _summary(d)
    assert s.groups == (None, "a", "b", "c")
    pooled = s.pooled()
    assert pooled.groups == (None,) and pooled.group_column is None
    _equal(pooled, summarize_arrays(d["y"], d["p"], sample_weight=d["w"]))
    a = s.select_group("a")
    mask = d["g"] == "a"
    _equal(a, _summary(d, mask))
    with pytest.raises(InputError, match="no group 'z'"):
        s.select_group("z")
    with pytest.raises(InputError, match="holds 4 groups"):
        reliability_from_summary(s)


# -------------------------------------------------------------------------------- file forms


def test_json_round_trip_is_plain_and_exact() -> None:
    d = _data(2, 300)
    d["w"][:5] = 0.0
    s = _summary(d)
    text = s.to_json()
    payload = json.loads(text)
    assert "NaN" not in text and "Infinity" not in text
    assert payload["schema_version"] == 1 and payload["kind"] == "calib.score_summary"
    back = ScoreSummary.from_json(text)
    _equal(back, s, rel=0.0)
    assert back.to_json() == text


def test_columns_round_trip_and_repeated_keys_merge() -> None:
    d = _data(4, 300)
    a, b = _summary(d, slice(0, 100)), _summary(d, slice(100, None))
    cols_a, cols_b = a.to_columns(), b.to_columns()
    both = {k: np.concatenate([cols_a[k], cols_b[k]]) for k in cols_a}
    _equal(ScoreSummary.from_columns(both, a.metadata()), a.merge(b))
    _equal(ScoreSummary.from_columns(cols_a, a.metadata()), a, rel=0.0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m, c: m.update(schema_version=2), "schema_version 2 is not supported"),
        (lambda m, c: m.update(kind="x"), "kind must be"),
        (lambda m, c: m["grid"].update(mantissa_bits=99), "mantissa_bits must be"),
        (lambda m, c: m.update(bin_edges=[0.0, 0.7, 0.5, 1.0]), "bin_edges must increase"),
        (lambda m, c: c.update(label=c["label"] + 4), "'label' has"),
        (lambda m, c: c.update(label=c["label"] * 2), "whose label calib refuses"),
        (lambda m, c: c.update(label=c["label"] * 0 + 3), "rows without a label"),
        (lambda m, c: c.update(weight=-c["weight"] - 1.0), "'weight' has"),
        (lambda m, c: c.pop("logit_sum"), "lacks the column"),
        (lambda m, c: c.update(cell=c["cell"][:-1]), "'cell' has"),
    ],
)
def test_from_columns_validates_every_field(change: Any, message: str) -> None:
    s = _summary(_data(5, 100))
    meta, cols = json.loads(json.dumps(s.metadata())), s.to_columns()
    change(meta, cols)
    with pytest.raises(InputError, match=message):
        ScoreSummary.from_columns(cols, meta)


# ----------------------------------------------------------------------------------- figures

EXACT = (
    "n",
    "weight_total",
    "positives",
    "base_rate",
    "mean_score",
    "observed_expected_ratio",
    "log_loss",
    "brier",
    "brier_reliability",
    "brier_resolution",
    "brier_uncertainty",
    "ece",
    "mce",
    "ece_debiased",
    "spiegelhalter_z",
    "spiegelhalter_pvalue",
    "n_bins",
)


def _rows_of(summary: ScoreSummary, keys: tuple[np.ndarray, np.ndarray], d: dict[str, Any]) -> Any:
    cells = cell_index(d["p"], mantissa_bits=summary.mantissa_bits)
    bins = bin_index(d["p"], summary.bin_edges)
    chosen = set(zip(keys[0].tolist(), keys[1].tolist(), strict=True))
    sel = np.array([k in chosen for k in zip(bins.tolist(), cells.tolist(), strict=True)])
    w = None if d["w"] is None else d["w"][sel]
    return resolved_cells(bins[sel], cells[sel], d["p"][sel], d["y"][sel], sample_weight=w)


def _check_figures(
    d: dict[str, Any],
    *,
    n_bins: int = 10,
    strategy: str = "uniform",
    resolve: bool = False,
    bits: int = 12,
) -> SummaryReliability:
    s = summarize_arrays(d["y"], d["p"], sample_weight=d["w"], mantissa_bits=bits)
    resolved = None
    if resolve:
        keys = cells_to_resolve(s, n_bins=n_bins, strategy=strategy)  # type: ignore[arg-type]
        resolved = _rows_of(s, keys, d)
    got = reliability_from_summary(
        s,
        n_bins=n_bins,
        strategy=strategy,  # type: ignore[arg-type]
        resolved=resolved,
    )
    r, e = got.reliability, got.exactness
    want = reliability_summary(
        d["y"],
        d["p"],
        sample_weight=d["w"],
        n_bins=n_bins,
        strategy=strategy,  # type: ignore[arg-type]
    )
    exact = EXACT if e.bins_exact else EXACT[:8] + EXACT[-3:]
    for name in exact:
        assert _close(getattr(r, name), getattr(want, name), 1e-9), name
    assert (
        _close(r.calibration_in_the_large, want.calibration_in_the_large, 1e-9)
        or abs(r.calibration_in_the_large - want.calibration_in_the_large) < 1e-15
    )
    if e.bins_exact:
        assert len(r.bins) == len(want.bins)
        for a, b in zip(r.bins, want.bins, strict=True):
            assert a.n_rows == b.n_rows
            for f in ("lower", "upper", "count", "mean_score", "observed_rate", "observed_ci_low"):
                assert _close(getattr(a, f), getattr(b, f), 1e-9), f
    else:
        assert abs(r.ece - want.ece) <= e.ece_bound + 1e-12
    if e.hosmer_lemeshow_exact:
        assert _close(r.hosmer_lemeshow, want.hosmer_lemeshow, 1e-9)
    if math.isnan(want.auc):
        assert math.isnan(r.auc)
    else:
        assert abs(r.auc - want.auc) <= e.auc_bound + 1e-12
        assert abs(r.gini - want.gini) <= e.gini_bound + 1e-12
    if not math.isnan(want.average_precision):
        assert abs(r.average_precision - want.average_precision) <= (
            e.average_precision_bound + 1e-12
        )
    return got


def _adversarial(seed: int) -> dict[str, Any]:
    """Near-ties, rare positives at 1e-4, scores exactly 0 and 1, both tails, zero weights."""
    rng = np.random.default_rng(seed)
    n = 60_000
    base = rng.choice([1e-5, 3e-4, 0.02, 0.3, 0.5, 0.9, 1 - 1e-6], n)
    p = base * (1.0 + rng.normal(0.0, 1e-5, n))  # within a cell or two of each other
    p[rng.random(n) < 0.05] = 0.0
    p[rng.random(n) < 0.05] = 1.0
    p = np.clip(p, 0.0, 1.0)
    y = (rng.random(n) < np.clip(p, 1e-4, 1 - 1e-4)).astype(int)
    w = rng.integers(0, 3, n).astype(float)
    return {"y": y, "p": p, "w": w}


@pytest.mark.parametrize("seed", [0, 1])
def test_figures_match_in_memory_on_smooth_scores(seed: int) -> None:
    d = _data(seed, 50_000, groups=False)
    got = _check_figures(d)
    assert got.exactness.bins_exact and got.exactness.auc_bound > 0.0
    # The fits on mean logits: measured error far below their standard error.
    want = reliability_summary(d["y"], d["p"], sample_weight=d["w"])
    r = got.reliability
    assert abs(r.calibration_slope - want.calibration_slope) < 1e-7
    assert abs(r.calibration_intercept - want.calibration_intercept) < 1e-7
    assert r.calibration_converged


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("n_bins", [10, 7])
def test_resolution_makes_bins_and_hosmer_lemeshow_exact(n_bins: int, strategy: str) -> None:
    d = _data(7, 30_000, groups=False)
    got = _check_figures(d, n_bins=n_bins, strategy=strategy, resolve=True)
    e = got.exactness
    assert e.bins_exact and e.hosmer_lemeshow_exact and e.ece_bound == 0.0
    assert e.auc_bound <= 1e-6 and e.resolved_cells > 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auc_bound_is_certified_on_adversarial_scores(seed: int) -> None:
    d = _adversarial(seed)
    got = _check_figures(d, strategy="quantile")
    assert got.exactness.auc_bound > 0.0
    resolved = _check_figures(d, strategy="quantile", resolve=True)
    assert resolved.exactness.auc_bound <= 1e-6


def test_fully_resolved_summary_is_exact_and_matches_scikit_learn() -> None:
    d = _adversarial(5)
    s = summarize_arrays(d["y"], d["p"], sample_weight=d["w"])
    keys = cells_to_resolve(s, auc_tolerance=0.0, average_precision_tolerance=0.0)
    got = reliability_from_summary(s, resolved=_rows_of(s, keys, d))
    assert got.exactness.auc_bound == 0.0 and got.exactness.average_precision_bound == 0.0
    untied = s.score_min < s.score_max  # every cell of more than one score: all exact
    every = (np.concatenate([keys[0], s.bin[untied]]), np.concatenate([keys[1], s.cell[untied]]))
    got = reliability_from_summary(s, resolved=_rows_of(s, every, d))
    r, e = got.reliability, got.exactness
    assert e.calibration_fit_exact and e.unresolved_atoms == 0
    keep = d["w"] > 0
    y, p, w = d["y"][keep], d["p"][keep], d["w"][keep]
    assert r.auc == pytest.approx(roc_auc_score(y, p, sample_weight=w), abs=1e-12)
    assert r.average_precision == pytest.approx(
        average_precision_score(y, p, sample_weight=w), abs=1e-12
    )
    assert r.log_loss == pytest.approx(
        log_loss(y, np.clip(p, 1e-15, 1 - 1e-15), sample_weight=w), rel=1e-9
    )
    want = reliability_summary(d["y"], d["p"], sample_weight=d["w"])
    for name in ("calibration_slope", "calibration_intercept", "auc"):
        assert _close(getattr(r, name), getattr(want, name), 1e-9), name
    assert r.auc_ci == pytest.approx(want.auc_ci, abs=1e-12)


def test_one_class_and_tiny_inputs() -> None:
    s = summarize_arrays([0, 0, 0], [0.1, 0.2, 0.2])
    r = reliability_from_summary(s).reliability
    assert math.isnan(r.auc) and math.isnan(r.average_precision)
    assert math.isnan(r.calibration_slope) and not r.calibration_converged
    with pytest.raises(InputError, match="every weight is 0"):
        reliability_from_summary(summarize_arrays([0, 1], [0.1, 0.2], sample_weight=[0, 0]))
    empty = summarize_arrays([], [])
    assert empty.n_keys == 0
    with pytest.raises(InputError, match="no rows"):
        reliability_from_summary(empty)


def test_bootstrap_equals_metrics_normal_limit_bootstrap() -> None:
    d = _data(11, 20_000, groups=False)
    s = summarize_arrays(d["y"], d["p"], sample_weight=d["w"])
    got = reliability_from_summary(s, n_bootstrap=200, rng=np.random.default_rng(3))
    want = ece_bootstrap(
        d["y"],
        d["p"],
        sample_weight=d["w"],
        n_bootstrap=200,
        rng=np.random.default_rng(3),
        exact_limit=0.0,
    )
    assert got.reliability.ece_ci == pytest.approx(want.ece_ci, rel=1e-9)
    assert got.reliability.ece_debiased_ci == pytest.approx(want.ece_debiased_ci, rel=1e-9)


def test_resolved_rows_must_match_the_summary() -> None:
    d = _adversarial(12)
    s = summarize_arrays(d["y"], d["p"], sample_weight=d["w"])
    keys = cells_to_resolve(s, auc_tolerance=0.0)
    rows = _rows_of(s, keys, d)
    keep = np.arange(rows.score.size) != np.argmax(rows.weight)
    short = resolved_cells(
        rows.bin[keep],
        rows.cell[keep],
        rows.score[keep],
        rows.label[keep],
        sample_weight=rows.weight[keep],
    )
    with pytest.raises(InputError, match="do not add up"):
        reliability_from_summary(s, resolved=short)


@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        ("bin", -1, "outside [0, 9]"),
        ("label", 5, "not 0 or 1"),
        ("n_rows", -1, "negative"),
        ("weight", -1.0, "negative"),
        ("score_min", -0.5, "outside [0, 1]"),
        ("score_max", 5.0, "outside [0, 1]"),  # was blamed on score_min
        ("score_min", 0.99, "above score_max"),
    ],
)
def test_a_tampered_summary_names_the_column_at_fault(
    tmp_path: Path, column: str, value: float, problem: str
) -> None:
    from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability
    from calib_cli.workflows.summarize import SummarizeRequest, run_summarize

    rng = np.random.default_rng(2)
    scores = rng.uniform(0.1, 0.9, 300)
    rows = tmp_path / "rows.csv"
    pl.DataFrame({"score": scores, "label": (rng.random(300) < scores).astype(int)}).write_csv(rows)
    summary = tmp_path / "s.json"
    run_summarize(SummarizeRequest(files=(str(rows),), output=str(summary)))
    document = json.loads(summary.read_text())
    document["columns"][column][0] = value
    summary.write_text(json.dumps(document))
    with pytest.raises(InputError) as error:
        run_reliability(ReliabilityRequest(file=None, from_summaries=(str(summary),)))
    assert f"summary column '{column}' has 1 value(s) {problem} (first at row 1)" in str(
        error.value
    )


def test_a_nan_sum_in_an_engines_summary_names_nan_scores() -> None:
    """Spark summarises NaN scores (DuckDB fails on them); the refusal said only "a missing
    or infinite value", not what in the rows makes one, nor the filter that avoids it."""
    from calib_cli.summaries.summary import _checked_column

    with pytest.raises(InputError, match=r"a NaN score, weight or label .* BETWEEN 0 AND 1"):
        _checked_column("score_sum", [0.5, float("nan")], 2)
