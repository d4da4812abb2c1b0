"""Core speed at scale: calib's figures and fits against scikit-learn on the same data.

Ratios below 1 mean calib is faster. The reliability summary computes far more than the
scikit-learn calls it is compared with (DeLong interval, Murphy decomposition, calibration
slope, Hosmer-Lemeshow, Spiegelhalter, bins), so its ratio is an upper bound.
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.calibration import calibration_curve
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, brier_score_loss, log_loss, roc_auc_score

from bench.common import best_of, report, scores_and_labels
from calib_cli.core.isotonic import fit_isotonic
from calib_cli.core.metrics import average_precision, brier_score, reliability_summary, roc_auc
from calib_cli.core.metrics import log_loss as calib_log_loss
from calib_cli.core.platt import fit_platt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n, repeats = args.rows, args.repeats
    p, y, w = scores_and_labels(n)
    rows = []

    def sklearn_figures() -> None:
        roc_auc_score(y, p)
        average_precision_score(y, p)
        brier_score_loss(y, p)
        log_loss(y, p)
        calibration_curve(y, p, n_bins=10)

    rows.append(
        (
            f"reliability_summary, {n:,} rows",
            best_of(lambda: reliability_summary(y, p), repeats),
            best_of(sklearn_figures, repeats),
            "sklearn AUC+AP+Brier+log loss+curve",
        )
    )
    rows.append(
        (
            f"roc_auc, {n:,} rows",
            best_of(lambda: roc_auc(y, p), repeats),
            best_of(lambda: roc_auc_score(y, p), repeats),
            "sklearn roc_auc_score",
        )
    )
    rows.append(
        (
            f"roc_auc weighted, {n:,} rows",
            best_of(lambda: roc_auc(y, p, sample_weight=w), repeats),
            best_of(lambda: roc_auc_score(y, p, sample_weight=w), repeats),
            "sklearn roc_auc_score",
        )
    )
    rows.append(
        (
            f"average_precision, {n:,} rows",
            best_of(lambda: average_precision(y, p), repeats),
            best_of(lambda: average_precision_score(y, p), repeats),
            "sklearn average_precision_score",
        )
    )
    rows.append(
        (
            f"brier + log loss, {n:,} rows",
            best_of(lambda: (brier_score(y, p), calib_log_loss(y, p)), repeats),
            best_of(lambda: (brier_score_loss(y, p), log_loss(y, p)), repeats),
            "sklearn brier_score_loss + log_loss",
        )
    )
    rows.append(
        (
            f"fit_isotonic weighted, {n:,} rows",
            best_of(lambda: fit_isotonic(p, y, sample_weight=w), 1),
            best_of(lambda: IsotonicRegression(out_of_bounds="clip").fit(p, y, sample_weight=w), 1),
            "sklearn IsotonicRegression",
        )
    )
    logits = np.log(np.clip(p, 1e-12, 1 - 1e-12) / np.clip(1 - p, 1e-12, 1)).reshape(-1, 1)
    rows.append(
        (
            f"fit_platt, {n:,} rows",
            best_of(lambda: fit_platt(p, y), 1),
            best_of(lambda: LogisticRegression(C=np.inf, tol=1e-10).fit(logits, y), 1),
            "sklearn LogisticRegression(C=inf) on logits",
        )
    )
    report(rows)


if __name__ == "__main__":
    main()
