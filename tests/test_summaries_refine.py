"""The bounded second pass: nested finer grids over chosen cells, against exact in-memory AUC."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from calib_cli.core.metrics import reliability_summary
from calib_cli.errors import InputError
from calib_cli.summaries import (
    cell_index,
    parent_cell,
    plan_refinement,
    refine_arrays,
    reliability_from_summary,
    summarize_arrays,
    summarize_refinement,
)


@pytest.mark.parametrize(("fine", "coarse"), [(12, 12), (13, 12), (20, 12), (52, 12), (52, 40)])
def test_finer_grids_nest_in_coarser_ones(fine: int, coarse: int) -> None:
    rng = np.random.default_rng(fine)
    edges = [0.0, 5e-324, 1e-300, 0.5, np.nextafter(0.5, 0), np.nextafter(0.5, 1), 1.0]
    p = np.concatenate([edges, rng.random(5000), rng.random(500) ** 30, 1 - rng.random(500) ** 30])
    got = parent_cell(cell_index(p, mantissa_bits=fine), from_bits=fine, to_bits=coarse)
    assert np.array_equal(got, cell_index(p, mantissa_bits=coarse))


def _adversarial(seed: int, n: int = 60_000) -> dict[str, Any]:
    """Near-ties, 1e-4 positive rate, scores exactly 0 and 1, heavy exact ties, zero weights."""
    rng = np.random.default_rng(seed)
    base = rng.choice([1e-5, 3e-4, 0.02, 0.3, 0.5, 0.9, 1 - 1e-6], n)
    p = base * (1.0 + rng.normal(0.0, 1e-5, n))
    p[rng.random(n) < 0.05] = 0.0
    p[rng.random(n) < 0.05] = 1.0
    tied = rng.random(n) < 0.2
    p[tied] = rng.choice([0.123, 0.1230000000000001, 0.77], int(tied.sum()))
    p = np.clip(p, 0.0, 1.0)
    y = (rng.random(n) < np.clip(p, 1e-4, 1 - 1e-4)).astype(int)
    w = rng.integers(0, 3, n).astype(float)
    return {"y": y, "p": p, "w": w}


def _rare(seed: int, n: int = 200_000) -> dict[str, Any]:
    """Continuous scores with a 1e-4 positive rate (20 positives)."""
    rng = np.random.default_rng(seed)
    p = rng.beta(0.5, 50.0, n)
    y = np.zeros(n, dtype=int)
    y[rng.choice(n, 20, replace=False)] = 1
    return {"y": y, "p": p, "w": None}


def _smooth(seed: int, n: int = 300_000) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    p = 1.0 / (1.0 + np.exp(-rng.normal(-3.0, 1.5, n)))
    return {"y": (rng.random(n) < p).astype(int), "p": p, "w": None}


CASES = {
    "adversarial0": lambda: _adversarial(0),
    "adversarial1": lambda: _adversarial(1),
    "rare": lambda: _rare(2),
    "smooth": lambda: _smooth(3),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refined_auc_is_within_its_certified_bound(case: str) -> None:
    d = CASES[case]()
    s = summarize_arrays(d["y"], d["p"], sample_weight=d["w"])
    levels = refine_arrays(s, d["y"], d["p"], sample_weight=d["w"])
    got = reliability_from_summary(s, refinement=levels)
    r, e = got.reliability, got.exactness
    keep = np.ones(d["p"].size, bool) if d["w"] is None else d["w"] > 0
    w = None if d["w"] is None else d["w"][keep]
    want_auc = roc_auc_score(d["y"][keep], d["p"][keep], sample_weight=w)
    want_ap = average_precision_score(d["y"][keep], d["p"][keep], sample_weight=w)
    assert e.auc_bound <= 1e-6
    assert abs(r.auc - want_auc) <= e.auc_bound + 1e-12
    assert abs(r.average_precision - want_ap) <= e.average_precision_bound + 1e-12
    assert e.refinement_levels == len(levels) and e.refinement_levels <= 6
    for level in levels:  # memory bounded by keys, never by rows
        assert level.summary.n_keys <= level.plan.max_keys
    want = reliability_summary(d["y"], d["p"], sample_weight=d["w"])
    for name in ("log_loss", "brier", "ece", "spiegelhalter_z"):
        assert getattr(r, name) == pytest.approx(getattr(want, name), rel=1e-9), name
    assert e.bins_exact


def test_exact_ties_are_recognised_as_exact() -> None:
    rng = np.random.default_rng(4)
    p = rng.choice([0.01, 0.25, 0.25000000000000006, 0.6, 1.0 - 1e-9], 50_000)
    y = (rng.random(p.size) < p).astype(int)
    s = summarize_arrays(y, p)
    r = reliability_from_summary(s)
    assert r.exactness.auc_bound > 0.0  # 0.25 and its neighbour share a cell
    levels = refine_arrays(s, y, p, auc_tolerance=0.0)
    got = reliability_from_summary(s, refinement=levels)
    assert got.exactness.auc_bound == 0.0 and got.exactness.unresolved_atoms == 0
    assert got.reliability.auc == pytest.approx(roc_auc_score(y, p), abs=1e-12)
    assert plan_refinement(s, levels, auc_tolerance=0.0) is None
    only_ties = summarize_arrays([0, 1, 0, 1], [0.2, 0.2, 0.7, 0.7])
    assert plan_refinement(only_ties, auc_tolerance=0.0) is None


def test_key_budget_bounds_each_pass_and_more_passes_follow() -> None:
    d = _smooth(5, 100_000)
    s = summarize_arrays(d["y"], d["p"])
    levels = refine_arrays(s, d["y"], d["p"], max_keys=4096, max_levels=10)
    assert len(levels) >= 2
    for level in levels:
        assert level.summary.n_keys <= level.plan.max_keys <= 4096 + 64
    e = reliability_from_summary(s, refinement=levels).exactness
    assert e.auc_bound < reliability_from_summary(s).exactness.auc_bound


def test_a_refinement_that_does_not_add_up_is_refused() -> None:
    d = _adversarial(6, 20_000)
    s = summarize_arrays(d["y"], d["p"], sample_weight=d["w"])
    plan = plan_refinement(s)
    assert plan is not None
    short = summarize_refinement(s, plan, d["y"][1:], d["p"][1:], sample_weight=d["w"][1:])
    level = summarize_refinement(s, plan, d["y"], d["p"], sample_weight=d["w"])
    if short.summary.n_keys != level.summary.n_keys or not np.array_equal(
        short.summary.n_rows, level.summary.n_rows
    ):
        with pytest.raises(InputError, match="do not add up"):
            reliability_from_summary(s, refinement=[short])
    with pytest.raises(InputError, match="either resolved rows or a refinement"):
        from calib_cli.summaries import resolved_cells

        empty = resolved_cells([], [], [], [])
        reliability_from_summary(s, refinement=[level], resolved=empty)
