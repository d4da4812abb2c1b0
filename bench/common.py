"""Shared helpers for the benchmarks: synthetic score data and a best-of-N timer."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.special import expit


def scores_and_labels(n: int, *, seed: int = 0, base_logit: float = -3.5) -> tuple[Any, Any, Any]:
    """A rare-event model's scores (about 4% positive), labels and integer weights."""
    rng = np.random.default_rng(seed)
    z = rng.normal(base_logit, 1.5, n)
    y = (rng.random(n) < expit(z)).astype(np.float64)
    scores = np.round(expit(1.3 * z + 0.2), 6)  # mildly over-confident, with ties
    weights = rng.integers(1, 4, n).astype(np.float64)
    return scores, y, weights


def best_of(function: Callable[[], object], repeats: int = 3) -> float:
    """The fastest of ``repeats`` runs, in seconds (the least disturbed by a noisy machine)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def report(rows: list[tuple[str, float, float | None, str]]) -> None:
    """Print (what, calib seconds, reference seconds, reference name) with ratios."""
    print(f"{'benchmark':<48} {'calib s':>9} {'ref s':>9} {'calib/ref':>9}  reference")
    for what, ours, theirs, name in rows:
        ratio = f"{ours / theirs:9.2f}" if theirs else f"{'':>9}"
        ref = f"{theirs:9.3f}" if theirs else f"{'':>9}"
        print(f"{what:<48} {ours:9.3f} {ref} {ratio}  {name}")
