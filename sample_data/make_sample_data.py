"""Regenerate the files in sample_data/ (a maintainer script; not part of the calib package).

Everything is seeded, so a re-run on the same library versions rewrites byte-identical files:
floats are written with fixed formats (scores to 6 significant digits) and rows in a fixed
order. Run from the repository root with the development environment::

    pip download --no-deps ISLP==0.6.0 -d /tmp/islp           # the real data set's wheel
    .venv/bin/python sample_data/make_sample_data.py --islp-wheel /tmp/islp/islp-0.6.0-*.whl
    .venv/bin/python sample_data/make_sample_data.py           # synthetic files only
    .venv/bin/python sample_data/make_sample_data.py --check   # regenerate and compare

The real data set (ISLR's ``Default`` table, shipped in the ``ISLP`` wheel on PyPI) is read
from an installed ``ISLP`` package, from the downloaded wheel (``--islp-wheel``) or from the
CSV itself (``--default-csv``); without any of these the script keeps the committed
``credit_default_scores.csv``. See README.md beside this file for every file.

Needs NumPy and scikit-learn (development dependencies), and the calib package itself for the
sampling rule (``calib_cli.core.sampling``), so that ``calib resample`` reproduces the sample
the demo model was trained on.
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import importlib.resources
import io
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from scipy.special import expit
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from calib_cli.core.sampling import (  # noqa: E402 (after the path set-up)
    ClassRates,
    hash_uint64_keys,
    keep_mask,
    row_thresholds,
)

SEED = 20240501
"""Master seed: every file draws from its own child of this seed (numpy SeedSequence)."""

DEMO_SEED = 42
"""The --seed of the resample demo (``calib resample ... --seed 42``)."""

DEMO_NEGATIVE_RATE = 0.1
"""The --negative-rate of the resample demo."""

DEFAULT_CSV_SHA256 = "d113590204485565bdd692b2d8430e7c2fcc72ec323df92314a745c99a0eefe9"
"""SHA-256 of ISLP 0.6.0's ISLP/data/Default.csv, so a different input is noticed."""

Array = npt.NDArray[np.float64]
Writer = Callable[[Path], None]


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def child_rng(name: str) -> np.random.Generator:
    """An independent generator per file, so changing one file leaves the others unchanged."""
    key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    return np.random.default_rng(np.random.SeedSequence([SEED, key]))


def fmt_score(x: float) -> str:
    return f"{x:.6g}"


def write_csv(path: Path, header: Sequence[str], columns: Sequence[Sequence[str]]) -> None:
    """Write columns of already-formatted strings as CSV with Unix newlines."""
    n = len(columns[0])
    if any(len(c) != n for c in columns):
        raise ValueError(f"{path.name}: columns of different lengths")
    lines = [",".join(header)]
    lines.extend(",".join(col[i] for col in columns) for i in range(n))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", newline="\n")


def strings(values: npt.ArrayLike, spec: str) -> list[str]:
    return [format(v, spec) for v in np.asarray(values).tolist()]


def scores_col(values: npt.ArrayLike) -> list[str]:
    return [fmt_score(v) for v in np.asarray(values, dtype=np.float64).tolist()]


def logistic(X: Array, y: npt.NDArray[np.int64], C: float = 1e4) -> LogisticRegression:
    return LogisticRegression(C=C, max_iter=5000, tol=1e-10).fit(X, y)


def summary(name: str, y: npt.ArrayLike, score: npt.ArrayLike) -> str:
    y_arr = np.asarray(y, dtype=np.float64)
    s = np.asarray(score, dtype=np.float64)
    return (
        f"{name}: {y_arr.size} rows, {int(y_arr.sum())} positive "
        f"(base rate {y_arr.mean():.4f}), mean score {s.mean():.4f}"
    )


# --------------------------------------------------------------------------------------------
# Card transactions: the calibrated model, an over-confident one, and a shifted batch
# --------------------------------------------------------------------------------------------

SEGMENTS = ("retail", "online", "travel", "atm")
SEGMENT_SHARE = (0.45, 0.30, 0.15, 0.10)
SEGMENT_INTERCEPT = (-4.95, -3.7, -3.9, -4.5)


def simulate_transactions(rng: np.random.Generator, n: int) -> dict[str, npt.NDArray[np.generic]]:
    """Transactions with a logistic ground truth in log(amount), recent activity and segment."""
    segment = rng.choice(len(SEGMENTS), size=n, p=SEGMENT_SHARE)
    amount = np.round(np.exp(rng.normal(3.6, 1.0, size=n)), 2) + 0.5
    recent = rng.poisson(2.0, size=n)
    eta = (
        np.asarray(SEGMENT_INTERCEPT)[segment]
        + 0.95 * (np.log(amount) - 3.6)
        + 0.45 * (recent - 2.0)
    )
    label = (rng.random(n) < expit(eta)).astype(np.int64)
    return {"segment": segment, "amount": amount, "recent": recent, "label": label}


def transaction_features(data: dict[str, npt.NDArray[np.generic]]) -> Array:
    segment = np.asarray(data["segment"])
    dummies = (segment[:, None] == np.arange(1, len(SEGMENTS))[None, :]).astype(np.float64)
    return np.column_stack(
        [np.log(np.asarray(data["amount"], dtype=np.float64)), data["recent"], dummies]
    )


def transaction_model() -> LogisticRegression:
    """The 'production' model: logistic regression on an independent sample (calibrated)."""
    rng = child_rng("transactions-model")
    data = simulate_transactions(rng, 120_000)
    return logistic(transaction_features(data), np.asarray(data["label"], dtype=np.int64))


def overconfident_model() -> tuple[LogisticRegression, int]:
    """An over-fitted model: unregularised, few rows, many irrelevant features."""
    rng = child_rng("overconfident-model")
    data = simulate_transactions(rng, 2_000)
    n_noise = 60
    X = np.column_stack([transaction_features(data), rng.normal(size=(2_000, n_noise))])
    return logistic(X, np.asarray(data["label"], dtype=np.int64), C=1e6), n_noise


def write_transactions(out: Path) -> None:
    model = transaction_model()
    rng = child_rng("transactions")
    n = 20_000
    data = simulate_transactions(rng, n)
    score = model.predict_proba(transaction_features(data))[:, 1]
    weight = np.where(rng.random(n) < 0.06, rng.integers(2, 6, size=n), 1)
    segment = np.asarray(SEGMENTS)[np.asarray(data["segment"])]
    write_csv(
        out / "transactions.csv",
        ["id", "amount", "recent_txns", "segment", "weight", "score", "label"],
        [
            [f"T{i:06d}" for i in range(1, n + 1)],
            strings(data["amount"], ".2f"),
            strings(data["recent"], "d"),
            list(segment.tolist()),
            strings(weight, "d"),
            scores_col(score),
            strings(data["label"], "d"),
        ],
    )
    print(summary("transactions.csv", data["label"], score))


def write_overconfident(out: Path) -> None:
    model, n_noise = overconfident_model()
    rng = child_rng("overconfident")
    n = 20_000
    data = simulate_transactions(rng, n)
    X = np.column_stack([transaction_features(data), rng.normal(size=(n, n_noise))])
    score = model.predict_proba(X)[:, 1]
    write_csv(
        out / "overconfident.csv",
        ["id", "score", "label"],
        [[f"O{i:06d}" for i in range(1, n + 1)], scores_col(score), strings(data["label"], "d")],
    )
    print(summary("overconfident.csv", data["label"], score))


SHIFT_DAYS = ("2024-05-01", "2024-05-02", "2024-05-03", "2024-05-04")
SHIFT_RATES = (0.025, 0.04, 0.06, 0.08)
ROWS_PER_DAY = 5_000


def write_shifted_batch(out: Path) -> None:
    """Label shift: rows drawn from the same class-conditional distributions, new class mix."""
    model = transaction_model()
    rng = child_rng("shifted-batch")
    pool = simulate_transactions(rng, 600_000)
    labels = np.asarray(pool["label"])
    positives = rng.permutation(np.flatnonzero(labels == 1))
    negatives = rng.permutation(np.flatnonzero(labels == 0))
    rows: list[npt.NDArray[np.int64]] = []
    days: list[str] = []
    used_pos = used_neg = 0
    for day, rate in zip(SHIFT_DAYS, SHIFT_RATES, strict=True):
        n_pos = round(rate * ROWS_PER_DAY)
        n_neg = ROWS_PER_DAY - n_pos
        picked = np.concatenate(
            [
                positives[used_pos : used_pos + n_pos],
                negatives[used_neg : used_neg + n_neg],
            ]
        )
        used_pos, used_neg = used_pos + n_pos, used_neg + n_neg
        rows.append(rng.permutation(picked))
        days.extend([day] * ROWS_PER_DAY)
    index = np.concatenate(rows)
    subset = {k: np.asarray(v)[index] for k, v in pool.items()}
    score = model.predict_proba(transaction_features(subset))[:, 1]
    n = index.size
    write_csv(
        out / "shifted_batch.csv",
        ["id", "day", "score", "label"],
        [
            [f"S{i:06d}" for i in range(1, n + 1)],
            days,
            scores_col(score),
            strings(subset["label"], "d"),
        ],
    )
    print(summary("shifted_batch.csv", subset["label"], score))
    for day in SHIFT_DAYS:
        mask = np.asarray(days) == day
        print("   ", summary(day, subset["label"][mask], score[mask]))


# --------------------------------------------------------------------------------------------
# Resample -> train -> score -> recalibrate
# --------------------------------------------------------------------------------------------

DEMO_FEATURES = ("x1", "x2", "x3", "x4")
DEMO_COEF = np.array([1.2, -0.8, 0.6, 0.0])
DEMO_INTERCEPT = -4.75


def simulate_demo(rng: np.random.Generator, n: int) -> tuple[Array, npt.NDArray[np.int64]]:
    cov = np.array(
        [
            [1.0, 0.3, 0.0, 0.2],
            [0.3, 1.0, 0.1, 0.0],
            [0.0, 0.1, 1.0, 0.4],
            [0.2, 0.0, 0.4, 1.0],
        ]
    )
    X = np.round(rng.multivariate_normal(np.zeros(4), cov, size=n, method="cholesky"), 4)
    label = (rng.random(n) < expit(DEMO_INTERCEPT + X @ DEMO_COEF)).astype(np.int64)
    return X, label


def write_resample_demo(out: Path) -> None:
    rng = child_rng("resample-demo")
    n_train, n_holdout = 30_000, 10_000
    X, y = simulate_demo(rng, n_train + n_holdout)
    ids = np.arange(1, n_train + n_holdout + 1, dtype=np.int64)
    train = slice(0, n_train)
    hold = slice(n_train, None)

    # The sample `calib resample train.csv --negative-rate 0.1 --key-col id --seed 42` keeps.
    keep = keep_mask(
        hash_uint64_keys(ids[train], seed=DEMO_SEED),
        row_thresholds(y[train], ClassRates(negative_rate=DEMO_NEGATIVE_RATE)),
    )
    model = logistic(X[train][keep], y[train][keep])
    score = model.predict_proba(X[hold])[:, 1]

    feature_cols = [strings(X[train][:, j], ".4f") for j in range(X.shape[1])]
    write_csv(
        out / "train.csv",
        ["id", *DEMO_FEATURES, "label"],
        [strings(ids[train], "d"), *feature_cols, strings(y[train], "d")],
    )
    hold_cols = [strings(X[hold][:, j], ".4f") for j in range(X.shape[1])]
    write_csv(
        out / "holdout_scored_sampled_model.csv",
        ["id", *DEMO_FEATURES, "score", "label"],
        [strings(ids[hold], "d"), *hold_cols, scores_col(score), strings(y[hold], "d")],
    )
    kept_pos = int((y[train][keep] == 1).sum())
    kept_neg = int((y[train][keep] == 0).sum())
    print(summary("train.csv", y[train], np.zeros(n_train)))
    print(
        f"    resample --negative-rate {DEMO_NEGATIVE_RATE} --key-col id --seed {DEMO_SEED} "
        f"keeps {kept_pos + kept_neg} rows ({kept_pos} positive, {kept_neg} negative)"
    )
    print(
        "    sampled model: intercept "
        f"{model.intercept_[0]:.4f}, coefficients {np.round(model.coef_[0], 4).tolist()}"
    )
    print(summary("holdout_scored_sampled_model.csv", y[hold], score))


# --------------------------------------------------------------------------------------------
# Stratified sampling: each stratum's model trained on its own undersample
# --------------------------------------------------------------------------------------------

STRATA = ("A", "B", "C")
STRATUM_SHARE = (0.5, 0.3, 0.2)
STRATUM_INTERCEPT = (-5.6, -3.9, -2.35)
STRATUM_SLOPE = (1.6, 1.1, 0.8)
STRATUM_NEGATIVE_RATE = (0.03, 0.25, 1.0)


def simulate_stratum(
    rng: np.random.Generator, stratum: int, n: int
) -> tuple[Array, npt.NDArray[np.int64]]:
    X = rng.normal(size=(n, 2))
    eta = STRATUM_INTERCEPT[stratum] + STRATUM_SLOPE[stratum] * X[:, 0] + 0.5 * X[:, 1]
    return X, (rng.random(n) < expit(eta)).astype(np.int64)


def stratum_models() -> list[LogisticRegression]:
    models = []
    for g in range(len(STRATA)):
        rng = child_rng(f"strata-model-{g}")
        X, y = simulate_stratum(rng, g, 60_000)
        keep = (y == 1) | (rng.random(y.size) < STRATUM_NEGATIVE_RATE[g])
        models.append(logistic(X[keep], y[keep]))
    return models


def write_strata(out: Path) -> None:
    models = stratum_models()
    for name, n in [("strata_reference", 20_000), ("strata_target", 20_000)]:
        rng = child_rng(name)
        stratum = np.sort(rng.choice(len(STRATA), size=n, p=STRATUM_SHARE))
        score = np.empty(n)
        label = np.empty(n, dtype=np.int64)
        for g in range(len(STRATA)):
            rows = np.flatnonzero(stratum == g)
            X, y = simulate_stratum(rng, g, rows.size)
            score[rows] = models[g].predict_proba(X)[:, 1]
            label[rows] = y
        order = rng.permutation(n)  # interleave the strata
        prefix = "R" if name == "strata_reference" else "G"
        write_csv(
            out / f"{name}.csv",
            ["id", "stratum", "score", "label"],
            [
                [f"{prefix}{i:06d}" for i in range(1, n + 1)],
                list(np.asarray(STRATA)[stratum[order]].tolist()),
                scores_col(score[order]),
                strings(label[order], "d"),
            ],
        )
        print(summary(f"{name}.csv", label, score))
        for g, s in enumerate(STRATA):
            mask = stratum == g
            print("   ", summary(f"stratum {s}", label[mask], score[mask]))


# --------------------------------------------------------------------------------------------
# A real data set: ISLR's Default table (ISLP package)
# --------------------------------------------------------------------------------------------


def read_default_csv(wheel: Path | None, csv_path: Path | None) -> bytes | None:
    if csv_path is not None:
        return csv_path.read_bytes()
    if wheel is not None:
        with zipfile.ZipFile(wheel) as archive:
            return archive.read("ISLP/data/Default.csv")
    try:
        resource = importlib.resources.files("ISLP").joinpath("data/Default.csv")
        return resource.read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        return None


def write_credit_default(out: Path, raw: bytes) -> None:
    digest = hashlib.sha256(raw).hexdigest()
    if digest != DEFAULT_CSV_SHA256:
        raise SystemExit(f"Default.csv has SHA-256 {digest}, expected {DEFAULT_CSV_SHA256}")
    text = io.StringIO(raw.decode("utf-8"))
    header = text.readline().strip().split(",")
    if header != ["default", "student", "balance", "income"]:
        raise SystemExit(f"unexpected Default.csv header: {header}")
    rows = [line.strip().split(",") for line in text if line.strip()]
    default = np.array([r[0] == "Yes" for r in rows], dtype=np.int64)
    student = np.array([r[1] for r in rows])
    balance = np.array([float(r[2]) for r in rows])
    income = np.array([float(r[3]) for r in rows])
    X = np.column_stack([balance / 1000.0, income / 10_000.0, (student == "Yes").astype(float)])

    # Cross-fitted (out-of-fold) logistic regression: each row scored by a model not fit on it.
    score = np.empty(default.size)
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    for fit_rows, score_rows in folds.split(X, default):
        model = logistic(X[fit_rows], default[fit_rows])
        score[score_rows] = model.predict_proba(X[score_rows])[:, 1]
    write_csv(
        out / "credit_default_scores.csv",
        ["id", "student", "balance", "income", "score", "label"],
        [
            strings(np.arange(1, default.size + 1), "d"),
            list(student.tolist()),
            strings(balance, ".2f"),
            strings(income, ".2f"),
            scores_col(score),
            strings(default, "d"),
        ],
    )
    print(f"credit_default_scores.csv from Default.csv (sha256 {digest})")
    print("   ", summary("credit_default_scores.csv", default, score))


# --------------------------------------------------------------------------------------------


def generate(out: Path, default_raw: bytes | None) -> list[str]:
    write_transactions(out)
    write_overconfident(out)
    write_shifted_batch(out)
    write_resample_demo(out)
    write_strata(out)
    names = [
        "transactions.csv",
        "overconfident.csv",
        "shifted_batch.csv",
        "train.csv",
        "holdout_scored_sampled_model.csv",
        "strata_reference.csv",
        "strata_target.csv",
    ]
    if default_raw is not None:
        write_credit_default(out, default_raw)
        names.append("credit_default_scores.csv")
    else:
        print(
            "credit_default_scores.csv: kept as is (no ISLP package, --islp-wheel or "
            "--default-csv given)"
        )
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: here)")
    parser.add_argument("--islp-wheel", type=Path, help="path to an ISLP 0.6.0 wheel")
    parser.add_argument("--default-csv", type=Path, help="path to ISLP's Default.csv")
    parser.add_argument(
        "--check",
        action="store_true",
        help="regenerate into a temporary folder and compare with --out (exit 1 on a difference)",
    )
    args = parser.parse_args(argv)
    default_raw = read_default_csv(args.islp_wheel, args.default_csv)
    if not args.check:
        args.out.mkdir(parents=True, exist_ok=True)
        generate(args.out, default_raw)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        names = generate(Path(tmp), default_raw)
        differ = [n for n in names if not filecmp.cmp(Path(tmp) / n, args.out / n, shallow=False)]
    if differ:
        print(f"differ from the committed files: {', '.join(differ)}", file=sys.stderr)
        return 1
    print(f"all {len(names)} regenerated files are byte-identical")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
