"""Positive weights outside [1e-15, 1e15] are bad input in every reader: their squares and
sums leave the floats (1e-300 squares to 0, 1e160 to inf) and a bootstrap cannot draw rows of
them, which ended in exit 70 or in silently wrong figures. Refused with one line naming the
column and the first such row, or dropped with ``--on-invalid drop``, alike in both engines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib_cli.core.checks import WEIGHT_RANGE, check_weights
from calib_cli.errors import InputError
from calib_cli.workflows.estimate_shift import EstimateShiftRequest, run_estimate_shift
from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate
from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability
from calib_cli.workflows.rerank_strata import RerankStrataRequest, run_rerank_strata


def _file(tmp_path: Path, weight: float, at: int = 5) -> Path:
    rng = np.random.default_rng(3)
    n = 300
    score = rng.beta(2, 5, n)
    w = np.ones(n)
    w[at] = weight
    path = tmp_path / "rows.csv"
    pl.DataFrame({"score": score, "label": (rng.random(n) < score).astype(int), "w": w}).write_csv(
        path
    )
    return path


def test_the_range_and_its_ends() -> None:
    low, high = WEIGHT_RANGE
    check_weights(np.array([0.0, low, 1.0, high]), 4)  # zero and both ends are fine
    for bad in (low / 2, high * 2, 1e-300, 1e300):
        with pytest.raises(InputError) as error:
            check_weights(np.array([1.0, bad]), 2, name="w")
        assert str(error.value) == (
            f"column 'w' has 1 value positive but outside [1e-15, 1e15] (first at row 2: {bad:g})"
        )


@pytest.mark.parametrize("engine", ["memory", "streaming"])
@pytest.mark.parametrize("weight", [1e-300, 1e160, 1e19])
def test_reliability_refuses_or_drops_them_in_both_engines(
    tmp_path: Path, engine: str, weight: float
) -> None:
    path = _file(tmp_path, weight)
    request = ReliabilityRequest(
        file=str(path),
        weight_col="w",
        engine=engine,
        n_bootstrap=20,  # type: ignore[arg-type]
    )
    with pytest.raises(InputError) as error:
        run_reliability(request)
    assert str(error.value) == (
        f"{path}: column 'w' has 1 value positive but outside [1e-15, 1e15] "
        f"(first at row 6: {weight:g})"
    )
    said: list[str] = []
    dropped = run_reliability(
        ReliabilityRequest(
            file=str(path),
            weight_col="w",
            engine=engine,  # type: ignore[arg-type]
            on_invalid="drop",
        ),
        warn=said.append,
    )
    assert dropped.entries[0].summary.n == 299
    assert said == [f"{path}: dropped 1 invalid row of 300 (w outside [1e-15, 1e15]: 1)"]


def test_estimate_shift_refuses_a_reference_weighted_past_the_range(tmp_path: Path) -> None:
    path = _file(tmp_path, 5e-300)
    request = EstimateShiftRequest(
        reference=str(path), target=str(path), weight_col="w", n_bootstrap=0
    )
    with pytest.raises(InputError, match=r"positive but outside \[1e-15, 1e15\]"):
        run_estimate_shift(request)


def _strata_file(tmp_path: Path, weight: float) -> Path:
    path = _file(tmp_path, weight)
    frame = pl.read_csv(path)
    out = tmp_path / "strata.csv"
    frame.with_columns(pl.Series("stratum", ["a", "b"] * (frame.height // 2))).write_csv(out)
    return out


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_recalibrate_and_rerank_strata_readers_refuse_them_too(tmp_path: Path, engine: str) -> None:
    """The fit reader of recalibrate and the two of rerank-strata apply the same rule."""
    path = _strata_file(tmp_path, 1e160)
    message = r"column 'w' has 1 value positive but outside \[1e-15, 1e15\] \(first at row 6"
    fit = RecalibrateRequest(
        fit=str(path),
        method="platt",
        weight_col="w",
        engine=engine,  # type: ignore[arg-type]
        save_model=str(tmp_path / "m.json"),
    )
    with pytest.raises(InputError, match=message):
        run_recalibrate(fit)
    rerank = RerankStrataRequest(
        reference=str(path),
        target=str(path),
        strata_col="stratum",
        weight_col="w",
        engine=engine,  # type: ignore[arg-type]
        output=str(tmp_path / "o.csv"),
    )
    with pytest.raises(InputError, match=message):
        run_rerank_strata(rerank)
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "o.csv").exists()


def test_a_fold_without_rows_keeps_the_row_counts_of_the_others() -> None:
    """Joined with an empty fold, the summary's cells keep their rows: the fit checks count
    normalised weights in units of their mean (they counted the raw weights otherwise)."""
    from calib_cli.core.cells import cell_facts, concat_cells
    from calib_cli.summaries.summary import summarize_arrays
    from calib_cli.workflows.recalibrate import _no_cells

    rng = np.random.default_rng(2)
    p = rng.random(400)
    y = (rng.random(400) < p).astype(int)
    cells = summarize_arrays(y, p, sample_weight=np.full(400, 1 / 400)).cells()
    joined = concat_cells([cells, _no_cells()])
    assert joined.rows is not None
    facts = cell_facts(joined)
    assert facts.positives + facts.negatives == pytest.approx(400.0)
