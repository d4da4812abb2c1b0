"""``auto`` on a summary grouped by fold (calib_cli.core.cells.choose_method_on_cells): the
rows' out-of-fold log loss lies within the reported bound of the value on the cells, and the
comparison is the in-memory one when every cell holds one score."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calib_cli.core.cells import CellSums, choose_method_on_cells, concat_cells, fit_on_cells
from calib_cli.core.metrics import log_loss
from calib_cli.core.selection import apply_calibrator
from calib_cli.errors import InputError
from calib_cli.summaries import summarize_arrays

METHODS = ("platt", "isotonic", "beta", "histogram")


def _rows(kind: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "skewed":
        scores = rng.beta(0.5, 5.0, n)
    elif kind == "rare":
        scores = rng.beta(0.3, 40.0, n)
    elif kind == "ties":
        scores = np.round(rng.random(n), 2)
    else:
        scores = rng.random(n)
    labels = (rng.random(n) < np.clip(1.3 * scores**1.2 + 0.02, 0.0, 1.0)).astype(np.int8)
    return scores, labels


def _fold_cells(
    scores: np.ndarray, labels: np.ndarray, weights: np.ndarray, fold: np.ndarray, k: int, bits: int
) -> list[CellSums]:
    """Each fold's (cell, class) sums, from the summary of its rows."""
    out = []
    for j in range(k):
        rows = fold == j
        summary = summarize_arrays(
            labels[rows], scores[rows], sample_weight=weights[rows], mantissa_bits=bits, eps=1e-12
        )
        out.append(summary.cells())
    return out


def _rows_log_loss(
    method: str,
    cells: list[CellSums],
    scores: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    fold: np.ndarray,
) -> float:
    """The out-of-fold log loss of the same fitted maps, evaluated on every row."""
    p = np.empty(scores.size)
    for j in range(len(cells)):
        if not np.any(fold == j):
            continue
        train = concat_cells([c for i, c in enumerate(cells) if i != j])
        params = fit_on_cells(method, train, check_support=False)  # type: ignore[arg-type]
        p[fold == j] = apply_calibrator(params, scores[fold == j])
    return log_loss(labels, p, sample_weight=weights)


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["skewed", "rare", "ties", "uniform"]),
    seed=st.integers(0, 2**31),
    n=st.integers(1500, 6000),
    k=st.integers(2, 5),
    bits=st.sampled_from([6, 12]),
    weighted=st.booleans(),
)
def test_the_rows_log_loss_is_within_the_bound(
    kind: str, seed: int, n: int, k: int, bits: int, weighted: bool
) -> None:
    scores, labels = _rows(kind, n, seed)
    rng = np.random.default_rng(seed + 1)
    weights = rng.uniform(0.5, 2.0, n) if weighted else np.ones(n)
    fold = rng.integers(0, k, n)
    cells = _fold_cells(scores, labels, weights, fold, k, bits)
    choice = choose_method_on_cells(cells, candidates=METHODS)
    assert choice.folds == "hashed" and choice.n_folds == k
    assert [c.method for c in choice.candidates] == list(METHODS)
    for row in choice.candidates:
        exact = _rows_log_loss(row.method, cells, scores, labels, weights, fold)
        slack = 1e-12 * exact  # the two sums' rounding
        assert abs(exact - row.cv_log_loss) <= row.cv_log_loss_bound + slack, row
    best = min(choice.candidates, key=lambda c: c.cv_log_loss)
    assert choice.chosen == best.method


def test_cells_of_one_score_are_the_rows_exactly() -> None:
    # ties on a hundredth: at 12 bits every cell holds one distinct score, so each class of a
    # cell is its rows exactly, and the bound is 0
    scores, labels = _rows("ties", 4000, 7)
    fold = np.arange(4000) % 3
    cells = _fold_cells(scores, labels, np.ones(4000), fold, 3, 12)
    choice = choose_method_on_cells(cells, candidates=METHODS)
    for row in choice.candidates:
        assert row.cv_log_loss_bound == 0.0
        exact = _rows_log_loss(row.method, cells, scores, labels, np.ones(4000), fold)
        assert row.cv_log_loss == pytest.approx(exact, rel=1e-12)


def test_a_coarser_grid_has_a_larger_bound() -> None:
    scores, labels = _rows("skewed", 5000, 3)
    fold = np.arange(5000) % 5
    bounds = {}
    for bits in (4, 8, 12):
        cells = _fold_cells(scores, labels, np.ones(5000), fold, 5, bits)
        choice = choose_method_on_cells(cells, candidates=("platt",))
        bounds[bits] = choice.candidates[0].cv_log_loss_bound
    assert bounds[4] > bounds[8] > bounds[12] > 0.0


def test_an_empty_fold_is_skipped_and_a_thin_training_part_refused() -> None:
    scores, labels = _rows("uniform", 3000, 5)
    fold = np.arange(3000) % 2
    cells = _fold_cells(scores, labels, np.ones(3000), fold, 2, 12)
    empty = CellSums(*(np.zeros(0) for _ in range(7)))  # type: ignore[arg-type]
    with_empty = choose_method_on_cells([*cells, empty], candidates=("platt",))
    assert with_empty.n_folds == 2  # the folds scored: the empty one is not
    # fold 2 is empty: folds 0 and 1 are each scored by a map fitted on the other and fold 2
    plain = choose_method_on_cells(cells, candidates=("platt",))
    assert with_empty.candidates[0].cv_log_loss == pytest.approx(
        plain.candidates[0].cv_log_loss, rel=1e-12
    )
    # a training part of one class cannot be fitted: refused with its fold, as in memory
    one_class = _fold_cells(
        scores, np.where(fold == 1, labels, 0).astype(np.int8), np.ones(3000), fold, 2, 12
    )
    with pytest.raises(InputError, match="fold 2 of 2: "):
        choose_method_on_cells(one_class, candidates=("platt",))
    with pytest.raises(InputError, match="at least 2 folds"):
        choose_method_on_cells(cells[:1], candidates=("platt",))
