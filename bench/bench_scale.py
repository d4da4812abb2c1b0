"""Scale: each command's numeric core on many rows, as a multiple of one ``np.sort`` of the
same scores (a floor that every ranking method pays at least once), so the figures compare
across machines. Issue targets: 10 million rows in seconds."""

from __future__ import annotations

import argparse

import numpy as np

from bench.common import best_of, scores_and_labels
from calib_cli.core.metrics import reliability_summary
from calib_cli.core.shift import estimate_prevalence, fit_reference
from calib_cli.core.strata import fit_strata, rerank


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    args = parser.parse_args()
    n = args.rows
    p, y, _ = scores_and_labels(n, seed=1)
    target, _, _ = scores_and_labels(n, seed=2, base_logit=-3.0)
    strata = np.random.default_rng(3).integers(0, 3, n).astype(str)
    floor = best_of(lambda: np.sort(p), 3)
    reference = fit_reference(p, y)
    slopes = fit_strata(p, y, strata)
    odds = {name: 0.05 for name in slopes}
    rows = [
        ("reliability_summary", best_of(lambda: reliability_summary(y, p), 1)),
        (
            "reliability_summary, bootstrap 200",
            best_of(
                lambda: reliability_summary(y, p, n_bootstrap=200, rng=np.random.default_rng(0)), 1
            ),
        ),
        ("estimate-shift: fit_reference", best_of(lambda: fit_reference(p, y), 1)),
        (
            "estimate-shift: em, bootstrap 200",
            best_of(
                lambda: estimate_prevalence(
                    reference, target, method="em", rng=np.random.default_rng(0)
                ),
                1,
            ),
        ),
        (
            "estimate-shift: map, bootstrap 50",
            best_of(
                lambda: estimate_prevalence(
                    reference, target, method="map", n_bootstrap=50, rng=np.random.default_rng(0)
                ),
                1,
            ),
        ),
        ("rerank-strata: fit_strata (3 strata)", best_of(lambda: fit_strata(p, y, strata), 1)),
        ("rerank-strata: rerank", best_of(lambda: rerank(target, strata, slopes, odds), 1)),
    ]
    print(f"{n:,} rows; one np.sort of the scores: {floor:.3f} s")
    print(f"{'step':<42} {'seconds':>8} {'x sort':>8}")
    for name, seconds in rows:
        print(f"{name:<42} {seconds:8.2f} {seconds / floor:8.1f}")


if __name__ == "__main__":
    main()
