"""A target whose labels arrive late: `estimate-shift` and `rerank-strata` on the command line.

Chargebacks and defaults label a target's rows weeks late, so its label column often has the
latest rows empty (null, NaN, an empty CSV field), or every row. A target's labels serve only
the report (the true rate and error of a batch; the comparison of the rankings), so both
commands take such a target, in both engines, from Parquet, CSV and standard input:

* every label missing: the target is taken as unlabeled, with one warning;
* estimate-shift: a batch's true rate and error only when every row of it is labelled
  (``null`` otherwise: late labels are not a random sample of a batch), with one warning;
* rerank-strata: the rankings compared on the labelled rows, with one warning.

The estimates, rows and ranks never depend on the target's labels. The reference still
needs every label (``--history`` and ``--backtest`` leave out the batches not fully labelled:
tests/test_history_late_labels.py).

Each command line runs in-process (``invoke_calib``: the same arguments, standard input,
environment and file descriptors as the installed command, without its start-up): the process
is not the point here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from tests.conftest import RunCalib

FAST = ["--bootstrap", "20", "--seed", "3"]
ENGINES = ["memory", "streaming"]
#: one engine in `make test`, the other in `make test-slow` (the engines give the same JSON on
#: every case: test_shift_engines_and_standard_input_agree); alternated, so that each engine's
#: own code runs in the default suite
MEMORY_FIRST = ["memory", pytest.param("streaming", marks=pytest.mark.slow)]
STREAMING_FIRST = [pytest.param("memory", marks=pytest.mark.slow), "streaming"]
#: each format once and each engine once (the engines agree on every format: tested below)
PAIRS = [("parquet", "memory"), ("csv", "streaming")]
#: PAIRS, the second in `make test-slow` (estimate-shift's engines, CSV and standard input
#: give the same JSON: test_shift_engines_and_standard_input_agree, in `make test`)
SHIFT_PAIRS = [PAIRS[0], pytest.param(*PAIRS[1], marks=pytest.mark.slow)]
FORMATS = ["parquet", "csv"]
N_REF, N_TGT = 1200, 900


def _frame(rng: np.random.Generator, n: int, base_rate: float) -> pl.DataFrame:
    """Scores of two Gaussian classes (logit scale), three days, a weight."""
    label = (rng.random(n) < base_rate).astype(np.int64)
    logit = rng.normal(np.where(label == 1, 1.0, -1.0), 1.0) - 1.0
    return pl.DataFrame(
        {
            "score": 1.0 / (1.0 + np.exp(-logit)),
            "label": label,
            "day": rng.integers(0, 3, n),
            "w": rng.uniform(0.5, 2.0, n),
        }
    )


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reference and targets: fully labelled (``full``), no labels on day 2 (``late``),
    no labels on day 2 and the last 40 rows of day 1 (``within``), no label at all
    (``none``), no label column (``nolabel``), and the labelled rows of ``within`` only
    (``within_kept``); each as Parquet and CSV (missing: an empty field)."""
    folder = tmp_path_factory.mktemp("late_labels")
    rng = np.random.default_rng(11)
    ref = _frame(rng, N_REF, 0.3)
    tgt = _frame(rng, N_TGT, 0.45)
    day1 = np.flatnonzero(tgt["day"].to_numpy() == 1)
    within = (tgt["day"].to_numpy() == 2) | np.isin(np.arange(N_TGT), day1[-40:])
    label = pl.col("label")
    targets = {
        "full": tgt,
        "late": tgt.with_columns(
            pl.when(pl.col("day") == 2).then(None).otherwise(label).alias("label")
        ),
        "within": tgt.with_columns(
            pl.when(pl.Series(within)).then(None).otherwise(label).alias("label")
        ),
        "none": tgt.with_columns(pl.lit(None, pl.Int64).alias("label")),
        "nolabel": tgt.drop("label"),
        "within_kept": tgt.filter(~pl.Series(within)),
    }
    for fmt in FORMATS:
        write = "write_parquet" if fmt == "parquet" else "write_csv"
        getattr(ref, write)(folder / f"ref.{fmt}")
        for name, frame in targets.items():
            getattr(frame, write)(folder / f"{name}.{fmt}")
    return folder


def _json(done: Any) -> Any:
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def _warnings(done: Any) -> list[str]:
    return [line for line in done.stderr.decode().splitlines() if line.startswith("warning:")]


def _shift(calib: RunCalib, lab: Path, target: str, *extra: str, engine: str = "memory") -> Any:
    return calib(
        [
            "estimate-shift",
            "--reference",
            str(lab / f"ref.{Path(target).suffix[1:] or 'parquet'}"),
            "--target",
            target,
            "--engine",
            engine,
            "--json",
            *FAST,
            *extra,
        ],
        cwd=lab,
    )


def _without_truth(payload: Any) -> Any:
    """The batches' figures, without the keys that come from the target's labels."""
    batches = payload.get("batches", [payload])
    return [{k: v for k, v in b.items() if k not in ("true_prevalence", "error")} for b in batches]


# ------------------------------------------------------------------------- estimate-shift


@pytest.mark.parametrize(("fmt", "engine"), SHIFT_PAIRS)
@pytest.mark.parametrize("case", ["late", "within"])
def test_shift_true_rates_of_fully_labelled_batches_only(
    invoke_calib: RunCalib, lab: Path, engine: str, fmt: str, case: str
) -> None:
    """Batches with every label get their labelled rate (computed here by hand) and error;
    the others ``null``; one warning counts them; the estimates are those of the target
    without its label column."""
    done = _shift(invoke_calib, lab, f"{case}.{fmt}", "--batch-col", "day", engine=engine)
    payload = _json(done)
    frame = pl.read_parquet(lab / f"{case}.parquet")
    day = frame["day"].to_numpy()
    label = frame["label"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    for batch in payload["batches"]:
        mine = label[day == batch["batch"]]
        if np.isnan(mine).any():
            assert batch["true_prevalence"] is None and batch["error"] is None
        else:
            assert batch["true_prevalence"] == np.sum(mine) / mine.size
            assert batch["error"] == batch["prevalence"] - batch["true_prevalence"]
    assert [b["true_prevalence"] is None for b in payload["batches"]] == [
        False,
        case == "within",
        True,
    ]
    missing = int(np.isnan(label).sum())
    partly = 2 if case == "within" else 1
    assert (
        _warnings(done).count(
            f"warning: {case}.{fmt}: {partly} of 3 batches have missing labels ({missing:,} rows "
            "without one): no true rate or error reported for them"
        )
        == 1
    )
    unlabelled = _shift(invoke_calib, lab, f"nolabel.{fmt}", "--batch-col", "day", engine=engine)
    assert _without_truth(payload) == _without_truth(_json(unlabelled))


@pytest.mark.parametrize(("fmt", "engine"), SHIFT_PAIRS)
def test_shift_every_label_missing_is_an_unlabelled_target(
    invoke_calib: RunCalib, lab: Path, engine: str, fmt: str
) -> None:
    """A label column without any label: the report of the target without the column, and
    one warning more."""
    done = _shift(invoke_calib, lab, f"none.{fmt}", "--batch-col", "day", engine=engine)
    unlabelled = _shift(invoke_calib, lab, f"nolabel.{fmt}", "--batch-col", "day", engine=engine)
    assert _json(done) == _json(unlabelled)
    # the keys are stable (DESIGN): there, and null, when the target has no labels
    assert all(b["true_prevalence"] is None and b["error"] is None for b in _json(done)["batches"])
    warning = (
        f"warning: none.{fmt}: column 'label' has no labels (all {N_TGT:,} missing): "
        "the target is taken as unlabeled"
    )
    assert _warnings(done) == [warning, *_warnings(unlabelled)]


@pytest.mark.parametrize("engine", MEMORY_FIRST)
def test_shift_one_batch_partly_labelled_has_no_true_rate(
    invoke_calib: RunCalib, lab: Path, engine: str
) -> None:
    """Without --batch-col the target is one batch: some labels missing, no true rate."""
    done = _shift(invoke_calib, lab, "late.parquet", engine=engine)
    payload = _json(done)
    assert payload["true_prevalence"] is None and payload["error"] is None
    missing = int(pl.read_parquet(lab / "late.parquet")["label"].null_count())
    assert (
        f"warning: late.parquet: {missing:,} of {N_TGT:,} rows have no label: no true rate or "
        "error reported"
    ) in _warnings(done)
    full = _json(_shift(invoke_calib, lab, "full.parquet", engine=engine))
    assert full["true_prevalence"] == pl.read_parquet(lab / "full.parquet")["label"].mean()
    assert _without_truth(payload) == _without_truth(full)


def test_shift_engines_and_standard_input_agree(invoke_calib: RunCalib, lab: Path) -> None:
    """The same report and warnings in memory, streaming, and from standard input (CSV)."""
    args = ["--batch-col", "day", "--costs", "1:5"]
    memory = _shift(invoke_calib, lab, "within.csv", *args, engine="memory")
    streaming = _shift(invoke_calib, lab, "within.csv", *args, engine="streaming")
    piped = invoke_calib(
        ["estimate-shift", "--reference", "ref.csv", "--target", "-", "--json", *FAST, *args],
        stdin=(lab / "within.csv").read_bytes(),
        cwd=lab,
    )
    assert _json(memory) == _json(streaming)
    assert _json(piped) == _json(memory)
    assert _warnings(memory) == _warnings(streaming)
    assert _warnings(piped) == [w.replace("within.csv", "stdin") for w in _warnings(memory)]
    # the realised costs, like the true rate, only for the batches with every label
    realised = [b["decision"]["realised_cost_static"] for b in _json(memory)["batches"]]
    assert [r is None for r in realised] == [False, True, True]


@pytest.mark.parametrize(("fmt", "engine"), SHIFT_PAIRS)
def test_shift_nan_labels_are_missing(
    invoke_calib: RunCalib, lab: Path, tmp_path: Path, engine: str, fmt: str
) -> None:
    """NaN in a float label column (``NaN`` in a CSV file) is a missing label, as null is."""
    frame = pl.read_parquet(lab / "late.parquet")
    nan = frame.with_columns(pl.col("label").cast(pl.Float64).fill_null(np.nan))
    if fmt == "csv":
        nan.write_csv(tmp_path / "late.csv")
        assert ",NaN," in (tmp_path / "late.csv").read_text()
    else:
        nan.write_parquet(tmp_path / "late.parquet")
    done = invoke_calib(
        [
            "estimate-shift",
            *("--reference", str(lab / f"ref.{fmt}"), "--target", f"late.{fmt}"),
            *("--batch-col", "day", "--engine", engine, "--json", *FAST),
        ],
        cwd=tmp_path,
    )
    expected = _shift(invoke_calib, lab, f"late.{fmt}", "--batch-col", "day", engine=engine)
    assert _json(done) == _json(expected)
    assert _warnings(done) == _warnings(expected)


@pytest.mark.parametrize("engine", STREAMING_FIRST)
def test_shift_positive_label_leaves_missing_labels_missing(
    invoke_calib: RunCalib, lab: Path, tmp_path: Path, engine: str
) -> None:
    """With --positive-label a missing label (an empty field) is missing, not a negative:
    the batch holding one has no true rate; the others have their rate of the positive."""
    for name in ("ref", "within"):
        frame = pl.read_parquet(lab / f"{name}.parquet")
        frame.with_columns(
            pl.col("label").replace_strict({1: "fraud", 0: "ok"}, return_dtype=pl.String)
        ).write_csv(tmp_path / f"{name}.csv")
    done = invoke_calib(
        [
            "estimate-shift",
            "--reference",
            "ref.csv",
            "--target",
            "within.csv",
            "--batch-col",
            "day",
            "--positive-label",
            "fraud",
            "--engine",
            engine,
            "--json",
            *FAST,
        ],
        cwd=tmp_path,
    )
    expected = _json(_shift(invoke_calib, lab, "within.csv", "--batch-col", "day", engine=engine))
    assert _json(done) == expected


@pytest.mark.parametrize("engine", MEMORY_FIRST)
def test_shift_output_keeps_the_label_column_as_read(
    invoke_calib: RunCalib, lab: Path, tmp_path: Path, engine: str
) -> None:
    """-o writes the target's columns as read: its missing labels stay missing."""
    out = tmp_path / "out.parquet"
    done = invoke_calib(
        [
            "estimate-shift",
            "--reference",
            str(lab / "ref.parquet"),
            "--target",
            str(lab / "within.parquet"),
            "--batch-col",
            "day",
            "--engine",
            engine,
            "-o",
            str(out),
            *FAST,
        ]
    )
    assert done.returncode == 0, done.stderr.decode()
    written = pl.read_parquet(out)
    assert written["label"].equals(pl.read_parquet(lab / "within.parquet")["label"])


@pytest.mark.parametrize("engine", STREAMING_FIRST)
def test_shift_invalid_target_labels_and_incomplete_reference_still_refused(
    invoke_calib: RunCalib, lab: Path, tmp_path: Path, engine: str
) -> None:
    """A label present but not a label is refused as before (missing ones beside it are
    not counted); a reference needs every label (--history and --backtest leave out the
    batches not fully labelled: tests/test_history_late_labels.py)."""
    frame = pl.read_parquet(lab / "late.parquet")
    frame.with_columns(
        pl.when(pl.int_range(pl.len()) == 4).then(2).otherwise(pl.col("label")).alias("label")
    ).write_parquet(tmp_path / "bad.parquet")
    bad = invoke_calib(
        [
            "estimate-shift",
            *("--reference", str(lab / "ref.parquet"), "--target", "bad.parquet"),
            *("--engine", engine, *FAST),
        ],
        cwd=tmp_path,
    )
    assert bad.returncode == 65
    assert bad.stderr.decode() == (
        "error: bad.parquet: column 'label' has 1 value that is not 0 or 1 (first at row 5: "
        "2); name the positive value with --positive-label\n"
    )
    missing = int(frame["label"].null_count())
    first = int(np.flatnonzero(frame["label"].is_null().to_numpy())[0]) + 1
    refused = f"column 'label' has {missing} values missing (first at row {first}: nan)\n"
    args = ["--reference", "late.parquet", "--target", "full.parquet"]
    done = invoke_calib(["estimate-shift", *args, "--engine", engine, *FAST], cwd=lab)
    assert done.returncode == 65, done.stderr.decode()
    assert done.stderr.decode() == f"error: late.parquet: {refused}"


# -------------------------------------------------------------------------- rerank-strata


def _rerank(
    calib: RunCalib, lab: Path, target: str, out: Path, *extra: str, engine: str
) -> tuple[Any, Any, pl.DataFrame]:
    """The run, its report and its rows."""
    report = out.with_suffix(".json")
    fmt = Path(target).suffix[1:]
    done = calib(
        [
            "rerank-strata",
            "--reference",
            str(lab / f"ref.{fmt}"),
            "--target",
            target,
            "--strata-col",
            "day",
            "--engine",
            engine,
            "-o",
            str(out),
            "--report",
            str(report),
            *extra,
        ],
        cwd=lab,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done, json.loads(report.read_text()), pl.read_parquet(out)


@pytest.mark.parametrize(("fmt", "engine"), PAIRS)
def test_rerank_compares_on_the_labelled_rows(
    invoke_calib: RunCalib, lab: Path, tmp_path: Path, engine: str, fmt: str
) -> None:
    """Rows without a label are left out of the (weighted) comparison: exactly the comparison
    of a target of the labelled rows only, with one warning; the rows and ranks are those of
    the target without its label column, and the label column is written as read."""
    weights = ("--weight-col", "w")
    done, report, rows = _rerank(
        invoke_calib, lab, f"within.{fmt}", tmp_path / "a.parquet", *weights, engine=engine
    )
    _, kept, _ = _rerank(
        invoke_calib, lab, f"within_kept.{fmt}", tmp_path / "b.parquet", *weights, engine=engine
    )
    _, unlabelled, plain = _rerank(
        invoke_calib, lab, f"nolabel.{fmt}", tmp_path / "c.parquet", *weights, engine=engine
    )
    assert report["comparison"] == kept["comparison"]
    if engine == "streaming":
        assert report["streaming"] == kept["streaming"]
    # a stable key (DESIGN): null without labels to compare on
    assert report["comparison"] is not None and unlabelled["comparison"] is None
    assert report["strata"] == unlabelled["strata"]
    added = ["rerank_score", "calibrated", "rerank_rank"]
    assert rows.select(added).equals(plain.select(added))
    assert rows["label"].equals(pl.read_parquet(lab / "within.parquet")["label"])
    n_missing = int(rows["label"].null_count())
    assert _warnings(done) == [
        f"warning: within.{fmt}: {n_missing:,} of {N_TGT:,} rows have no label: rankings "
        f"compared on the {N_TGT - n_missing:,} labelled rows"
    ]
    assert report["comparison"]["rows"] == N_TGT - n_missing  # the rows compared, in JSON
    assert f"Ranking on the labelled target ({N_TGT - n_missing:,} rows)" in done.stderr.decode()
    if fmt == "csv" and engine == "memory":  # standard input: the same report and warning
        piped = invoke_calib(
            [
                "rerank-strata",
                *("--reference", "ref.csv", "--target", "-", "--strata-col", "day", *weights),
                *("-o", str(tmp_path / "d.parquet"), "--report", str(tmp_path / "d.json")),
            ],
            stdin=(lab / "within.csv").read_bytes(),
            cwd=lab,
        )
        assert piped.returncode == 0, piped.stderr.decode()
        assert json.loads((tmp_path / "d.json").read_text()) == report
        assert _warnings(piped) == [w.replace("within.csv", "stdin") for w in _warnings(done)]


@pytest.mark.parametrize("engine", MEMORY_FIRST)
def test_rerank_every_label_missing_is_an_unlabelled_target(
    invoke_calib: RunCalib, lab: Path, tmp_path: Path, engine: str
) -> None:
    """No label at all: the report of a target without labels, one warning, and no warning
    that the target lacks the weight column (its weights serve the comparison only)."""
    args = ["--weight-col", "w"]
    frame = pl.read_parquet(lab / "none.parquet").drop("w")
    frame.write_parquet(tmp_path / "none.parquet")
    frame.drop("label").write_parquet(tmp_path / "nolabel.parquet")
    (tmp_path / "ref.parquet").write_bytes((lab / "ref.parquet").read_bytes())
    done, report, _ = _rerank(
        invoke_calib, tmp_path, "none.parquet", tmp_path / "a.parquet", *args, engine=engine
    )
    plain, unlabelled, _ = _rerank(
        invoke_calib, tmp_path, "nolabel.parquet", tmp_path / "b.parquet", *args, engine=engine
    )
    assert report == unlabelled
    assert _warnings(plain) == []
    assert _warnings(done) == [
        f"warning: none.parquet: column 'label' has no labels (all {N_TGT:,} missing): the "
        "target is taken as unlabeled"
    ]
    # some labels: the weights weigh in the comparison, and the missing column is said
    late = pl.read_parquet(lab / "late.parquet").drop("w")
    late.write_parquet(tmp_path / "late.parquet")
    partial, _, _ = _rerank(
        invoke_calib, tmp_path, "late.parquet", tmp_path / "c.parquet", *args, engine=engine
    )
    missing = int(late["label"].null_count())
    assert _warnings(partial) == [
        f"warning: late.parquet: {missing:,} of {N_TGT:,} rows have no label: rankings "
        f"compared on the {N_TGT - missing:,} labelled rows",
        "warning: late.parquet has no column 'w' (--weight-col): its rows weigh 1 in the "
        "strata and the comparison",
    ]


@pytest.mark.parametrize("engine", STREAMING_FIRST)
def test_rerank_labelled_rows_of_one_class_and_the_roc_picture(
    invoke_calib: RunCalib, lab: Path, tmp_path: Path, engine: str
) -> None:
    """Labelled rows of one class: the usual warning, no comparison; with --plot, the ROC
    picture of the labelled rows (drawn from the comparison of those rows)."""
    frame = pl.read_parquet(lab / "late.parquet")
    frame.with_columns(
        pl.when(pl.col("label") == 1).then(None).otherwise(pl.col("label")).alias("label")
    ).write_parquet(tmp_path / "negatives.parquet")
    (tmp_path / "ref.parquet").write_bytes((lab / "ref.parquet").read_bytes())
    done, report, _ = _rerank(
        invoke_calib, tmp_path, "negatives.parquet", tmp_path / "a.parquet", engine=engine
    )
    assert report.get("comparison") is None
    assert _warnings(done)[-1] == (
        "warning: negatives.parquet: the target's labels hold no positive row (with positive "
        "weight): no comparison of the rankings (its AUC and TPRs need both classes)"
    )
    plot = tmp_path / "roc.svg"
    _, report, _ = _rerank(
        invoke_calib,
        lab,
        "late.parquet",
        tmp_path / "b.parquet",
        "--plot",
        str(plot),
        engine=engine,
    )
    assert report["comparison"] is not None and plot.stat().st_size > 0


@pytest.mark.parametrize("engine", MEMORY_FIRST)
def test_rerank_reference_with_missing_labels_is_refused(
    invoke_calib: RunCalib, lab: Path, engine: str
) -> None:
    """The reference's labels fit the slopes: every one is needed (exit 65)."""
    done = invoke_calib(
        [
            "rerank-strata",
            *("--reference", "late.parquet", "--target", "full.parquet"),
            *("--strata-col", "day", "--engine", engine, "-o", "-"),
        ],
        cwd=lab,
    )
    assert done.returncode == 65
    frame = pl.read_parquet(lab / "late.parquet")
    first = int(np.flatnonzero(frame["label"].is_null().to_numpy())[0]) + 1
    shown = "nan" if engine == "memory" else "empty"  # as before: each engine shows a null so
    assert done.stderr.decode() == (
        f"error: late.parquet: column 'label' has {frame['label'].null_count()} values missing "
        f"(first at row {first}: {shown})\n"
    )
