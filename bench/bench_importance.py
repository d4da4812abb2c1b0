"""Coverage of 95% intervals with importance weights: ``--weight-kind frequency`` against
``importance`` on samples drawn as ``calib resample`` draws them.

The population is a rare-event model (4.4% positive) whose scores are over-confident
(calibration slope 0.8, calibration intercept 0.31): a latent
:math:`z \\sim N(0, 1)`, true log-odds :math:`\\eta = -4 + 1.5 z`, label
:math:`y \\sim \\mathrm{Bernoulli}(\\mathrm{expit}\\,\\eta)` and score
:math:`\\mathrm{expit}((\\eta + 0.2) / 0.8)`. Its figures (AUC, calibration slope and intercept,
ECE on 10 uniform bins) are measured once on 4,000,000 rows: the values every interval should
cover. Each replicate draws a fresh population of ``--population`` rows, keeps every positive
and each negative with probability ``--negative-rate`` (independently, as the hash of
``calib resample`` does), weights the kept negatives ``1 / negative_rate``, and computes the
intervals of ``calib reliability`` (``reliability_summary`` with ``--bootstrap`` replicates)
once with each weight kind (both kinds use the same ECE intervals: the normal interval around
the bias-corrected ECE, and the debiased ECE's percentile interval moved by the replicates'
bias; ``metrics.ece_bootstrap``).
Coverage is the share of replicates whose interval holds the
population value (Monte Carlo standard error about ``sqrt(0.95 * 0.05 / reps)``, 1.5 points for
200 replicates).

``estimate-shift``: the labelled sample above is the reference (its weights are the reference's
``--weight-col``), and a batch of ``--batch`` unweighted rows is drawn from the same model at a
positive rate of 10% (exact label shift: each class's scores as in the population); the interval
should cover 10%. Its bootstrap resamples rows (each with its weight) in either kind, so both
columns are the same figures.

Run: ``python -m bench.bench_importance [--reps 200]`` (about a minute per 100 replicates).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from calib_cli.core.metrics import reliability_summary
from calib_cli.core.shift import estimate_prevalence, fit_reference
from calib_cli.types import FloatArray

BASE, SPREAD = -4.0, 1.5
SLOPE, SHIFT = 0.8, 0.2
TARGET_RATE = 0.10


def draw_population(n: int, rng: np.random.Generator) -> tuple[FloatArray, FloatArray]:
    """Scores and labels of ``n`` rows of the model of the module docstring."""
    eta = BASE + SPREAD * rng.standard_normal(n)
    y = (rng.random(n) < expit(eta)).astype(np.float64)
    return expit((eta + SHIFT) / SLOPE), y


def draw_sample(
    n: int, negative_rate: float, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """A population of ``n`` rows sampled as ``calib resample`` does: every positive, each
    negative with probability ``negative_rate``; weights ``1 / rate``."""
    scores, y = draw_population(n, rng)
    keep = (y == 1.0) | (rng.random(n) < negative_rate)
    weights = np.where(y[keep] == 1.0, 1.0, 1.0 / negative_rate)
    return scores[keep], y[keep], weights


def draw_class(n: int, label: float, rng: np.random.Generator) -> FloatArray:
    """``n`` scores of one class of the model (rejection from the population)."""
    out: list[FloatArray] = []
    have = 0
    while have < n:
        scores, y = draw_population(max(4 * n, 10_000) * (30 if label == 1.0 else 1), rng)
        picked = scores[y == label]
        out.append(picked)
        have += picked.size
    return np.concatenate(out)[:n]


@dataclass(frozen=True)
class Truth:
    """The population's figures."""

    auc: float
    slope: float
    intercept: float
    ece: float
    ece_debiased: float


def population_truth(n: int = 4_000_000, seed: int = 12345) -> Truth:
    """The figures of one very large population (their sampling error is below 1e-3)."""
    scores, y = draw_population(n, np.random.default_rng(seed))
    s = reliability_summary(y, scores)
    return Truth(s.auc, s.calibration_slope, s.calibration_intercept, s.ece, s.ece_debiased)


FIGURES = ("AUC", "calibration slope", "calibration intercept", "ECE", "debiased ECE")


def coverage(
    *, reps: int, population: int, negative_rate: float, bootstrap: int, seed: int
) -> dict[str, dict[str, float]]:
    """Share of replicates whose 95% interval covers the population value, per weight kind."""
    truth = population_truth()
    rng = np.random.default_rng(seed)
    hits = {kind: dict.fromkeys(FIGURES, 0) for kind in ("frequency", "importance")}
    for rep in range(reps):
        scores, y, w = draw_sample(population, negative_rate, rng)
        for kind in ("frequency", "importance"):
            s = reliability_summary(
                y,
                scores,
                sample_weight=w,
                n_bootstrap=bootstrap,
                rng=np.random.default_rng(seed + rep),
                weight_kind=kind,  # type: ignore[arg-type]
            )
            for name, (low, high), value in (
                ("AUC", s.auc_ci, truth.auc),
                ("calibration slope", s.calibration_slope_ci, truth.slope),
                ("calibration intercept", s.calibration_intercept_ci, truth.intercept),
                ("ECE", s.ece_ci or (np.nan, np.nan), truth.ece),
                ("debiased ECE", s.ece_debiased_ci or (np.nan, np.nan), truth.ece_debiased),
            ):
                hits[kind][name] += int(low <= value <= high)
    return {kind: {k: v / reps for k, v in h.items()} for kind, h in hits.items()}


def control_coverage(*, reps: int, rows: int, bootstrap: int, seed: int) -> dict[str, float]:
    """ECE coverage on unweighted samples of ``rows`` rows (no sampling, no weights): what
    the ECE intervals reach when weights play no part."""
    truth = population_truth()
    rng = np.random.default_rng(seed)
    hits = {"ECE": 0, "debiased ECE": 0}
    for rep in range(reps):
        scores, y = draw_population(rows, rng)
        s = reliability_summary(
            y, scores, n_bootstrap=bootstrap, rng=np.random.default_rng(seed + rep)
        )
        for name, (low, high), value in (
            ("ECE", s.ece_ci or (np.nan, np.nan), truth.ece),
            ("debiased ECE", s.ece_debiased_ci or (np.nan, np.nan), truth.ece_debiased),
        ):
            hits[name] += int(low <= value <= high)
    return {name: count / reps for name, count in hits.items()}


def shift_coverage(
    *,
    reps: int,
    population: int,
    negative_rate: float,
    batch: int,
    bootstrap: int,
    seed: int,
    kind: str = "importance",
) -> float:
    """Share of batches whose estimate-shift 95% interval covers the batch's positive rate,
    the reference's weights read as ``kind``."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        scores, y, w = draw_sample(population, negative_rate, rng)
        reference = fit_reference(scores, y, sample_weight=w, weight_kind=kind)  # type: ignore[arg-type]
        n_pos = int(rng.binomial(batch, TARGET_RATE))
        target = np.concatenate((draw_class(n_pos, 1.0, rng), draw_class(batch - n_pos, 0.0, rng)))
        estimate = estimate_prevalence(
            reference,
            target,
            n_bootstrap=bootstrap,
            rng=np.random.default_rng(int(rng.integers(1 << 31))),
        )
        hits += int(estimate.ci_low <= TARGET_RATE <= estimate.ci_high)
    return hits / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="Replicates (samples).")
    parser.add_argument("--population", type=int, default=100_000, help="Rows per population.")
    parser.add_argument("--negative-rate", type=float, default=0.05, help="Negatives kept.")
    parser.add_argument("--bootstrap", type=int, default=200, help="ECE bootstrap replicates.")
    parser.add_argument("--batch", type=int, default=5_000, help="estimate-shift batch rows.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    reps = max(args.reps, 2)
    start = time.perf_counter()
    table = coverage(
        reps=reps,
        population=args.population,
        negative_rate=args.negative_rate,
        bootstrap=args.bootstrap,
        seed=args.seed,
    )
    shift = {
        kind: shift_coverage(
            reps=reps,
            population=args.population,
            negative_rate=args.negative_rate,
            batch=args.batch,
            bootstrap=args.bootstrap,
            seed=args.seed + 1,
            kind=kind,
        )
        for kind in ("frequency", "importance")
    }
    control_rows = 20_000
    control = control_coverage(
        reps=reps, rows=control_rows, bootstrap=args.bootstrap, seed=args.seed + 2
    )
    elapsed = time.perf_counter() - start
    se = 100.0 * (0.95 * 0.05 / reps) ** 0.5
    print(
        f"Coverage of nominal 95% intervals, {reps} samples of a {args.population:,}-row "
        f"population (negatives kept at {args.negative_rate:g}, weight "
        f"{1 / args.negative_rate:g}; Monte Carlo s.e. about {se:.1f} points; {elapsed:.0f} s)"
    )
    print()
    print("| figure | --weight-kind frequency | --weight-kind importance |")
    print("|---|---|---|")
    for name in FIGURES:
        freq, imp = table["frequency"][name], table["importance"][name]
        print(f"| {name} | {100 * freq:.1f}% | {100 * imp:.1f}% |")
    print(
        f"| estimate-shift prevalence (reference weighted, batch of {args.batch:,}) | "
        f"{100 * shift['frequency']:.1f}% | {100 * shift['importance']:.1f}% |"
    )
    print()
    print(
        f"Control without weights ({control_rows:,} rows drawn from the population, no "
        f"sampling, the frequency kind): ECE "
        f"{100 * control['ECE']:.1f}%, debiased ECE {100 * control['debiased ECE']:.1f}%. "
        "Both kinds' ECE intervals correct the plug-in ECE's bias (a standard error or more "
        "with importance weights, which leave fewer rows for their weight)."
    )


if __name__ == "__main__":
    main()
