"""`calib estimate-shift --backtest --label-delay K` and `--history FILE`: late labels.

In-process through the workflow: the label-shift estimates equal estimate-shift's own, the
baselines and errors are checked by hand, and the labels of batch t (and later) never move
any estimate of batch t. One run of the installed command checks the contract (tables on
stdout, --json keys, the warning on stderr), and the refusals are checked in-process.
``--history``: the blend of the new batches is core's on the past batches' figures, and the
new batches' labels are never read.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from rich.console import Console

from calib_cli.core.shift_history import history_blend, history_candidates, history_schedule
from calib_cli.errors import InputError, UsageError
from calib_cli.report.payloads import backtest_payload, dumps, history_payload
from calib_cli.report.tables import backtest_summary_table
from calib_cli.workflows.estimate_shift import (
    EstimateShiftRequest,
    run_backtest,
    run_estimate_shift,
)
from tests.conftest import RunCalib

N_BATCHES = 8
RATES = (0.1, 0.2, 0.3, 0.15, 0.35, 0.25, 0.4, 0.1)


def _scores(y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.where(y, rng.beta(4, 2, y.size), rng.beta(2, 4, y.size)).round(6)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A labelled reference (30% positive) and 8 labelled batches of 300 rows."""
    rng = np.random.default_rng(12)
    root = tmp_path_factory.mktemp("backtest")
    y = rng.random(1500) < 0.3
    reference = root / "reference.csv"
    pl.DataFrame({"score": _scores(y, rng), "label": y.astype(int)}).write_csv(reference)
    labels = np.concatenate([rng.random(300) < rate for rate in RATES])
    week = np.repeat(np.arange(N_BATCHES), 300)
    order = rng.permutation(week.size)  # batches interleaved in the file: order is by value
    target = root / "target.csv"
    pl.DataFrame(
        {"week": week[order], "score": _scores(labels, rng)[order], "label": labels[order]}
    ).with_columns(pl.col("label").cast(pl.Int64)).write_csv(target)
    return reference, target


def _request(reference: Path, target: Path, **options: object) -> EstimateShiftRequest:
    settings: dict[str, object] = {
        "reference": str(reference),
        "target": str(target),
        "batch_col": "week",
        "n_bootstrap": 10,
        "seed": 3,
        "backtest": True,
        "label_delay": 2,
    }
    settings.update(options)
    return EstimateShiftRequest(**settings)  # type: ignore[arg-type]


def test_backtest_figures_by_hand_and_equal_to_estimate_shift(files: tuple[Path, Path]) -> None:
    reference, target = files
    warnings: list[str] = []
    result = run_backtest(_request(reference, target), warn=warnings.append)
    methods = {m.name: m for m in result.methods}
    assert list(methods) == [
        "mle", "em", "pacc", "map", "pcc", "no_shift", "rolling", "history_blend"
    ]  # fmt: skip
    assert result.batches == tuple(range(N_BATCHES))
    truth = pl.read_csv(target).group_by("week").agg(pl.col("label").mean()).sort("week")
    assert result.true_prevalence.tolist() == pytest.approx(truth["label"].to_list(), abs=1e-15)
    # the label-shift estimates are estimate-shift's, batch by batch
    for method in ("mle", "pacc"):
        plain = run_estimate_shift(
            EstimateShiftRequest(
                reference=str(reference),
                target=str(target),
                batch_col="week",
                method=method,  # type: ignore[arg-type]
                n_bootstrap=10,
                seed=3,
            )
        )
        assert methods[method].prevalence.tolist() == [b.estimate.prevalence for b in plain.batches]
        assert methods[method].ci_low is not None
        assert methods[method].ci_low.tolist() == [b.estimate.ci_low for b in plain.batches]
        if method == "mle":
            assert methods["pcc"].prevalence.tolist() == [b.estimate.pcc for b in plain.batches]
    # baselines and errors by hand
    y = result.true_prevalence
    ref_rate = pl.read_csv(reference)["label"].mean()
    assert methods["no_shift"].prevalence.tolist() == pytest.approx([ref_rate] * N_BATCHES)
    rolling = [ref_rate, ref_rate] + [np.mean(y[max(0, t - 5) : t - 1]) for t in range(2, 8)]
    assert methods["rolling"].prevalence.tolist() == pytest.approx(rolling, abs=1e-15)
    mle = methods["mle"]
    assert mle.mae == pytest.approx(np.mean(np.abs(mle.prevalence - y)), abs=1e-15)
    assert mle.max_abs_error == pytest.approx(np.max(np.abs(mle.prevalence - y)), abs=1e-15)
    assert mle.ci_low is not None and mle.ci_high is not None
    informative = (mle.ci_low > 0.0) | (mle.ci_high < 1.0)
    assert mle.coverage_batches == int(informative.sum())
    assert mle.coverage == np.mean(((mle.ci_low <= y) & (y <= mle.ci_high))[informative])
    assert methods["pcc"].coverage is None and not mle.uses_labels
    assert methods["rolling"].uses_labels and methods["history_blend"].uses_labels
    # 8 batches give the blend at most 6 past errors: its intervals are [0, 1], and it says so;
    # [0, 1] holds any rate, so its coverage counts no batch (it was 100%)
    blend = methods["history_blend"]
    assert blend.coverage is None and blend.coverage_batches == 0
    assert blend.ci_low is not None and (blend.ci_low == 0).all()
    assert warnings[:2] == [
        "history_blend: the interval of the first 8 batches is [0, 1] "
        "(a 95% conformal width needs 19 labelled batches before it)",
        "history_blend: every one of its 8 intervals is [0, 1], which holds any rate: no "
        "coverage to report",
    ]
    assert result.n_history.tolist() == [0, 0, 1, 2, 3, 4, 5, 6]
    payload = json.loads(dumps(backtest_payload(result)))
    assert payload["best_method"] == min(methods.values(), key=lambda m: m.mae).name
    counted = {m["method"]: m["coverage_batches"] for m in payload["methods"]}
    assert counted == {m.name: m.coverage_batches for m in result.methods}
    assert counted["history_blend"] == 0 and counted["mle"] == int(informative.sum())
    shown = Console(file=io.StringIO(), width=200, color_system=None)
    shown.print(backtest_summary_table(result))
    assert f"% (of {counted['mle']})" in shown.file.getvalue()  # type: ignore[attr-defined]
    assert payload["batches"][3]["estimates"]["mle"]["error"] == pytest.approx(
        mle.prevalence[3] - y[3], abs=1e-15
    )


def test_labels_of_a_batch_and_later_ones_never_move_its_estimates(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    """Poison (flip) every label of batches 4..7: with labels 2 batches late, batches 0..5
    must be estimated exactly as before by every method; batches 6 and 7 (which see batches 4
    and 5) must move, or the test would prove nothing."""
    reference, target = files
    frame = pl.read_csv(target)
    poisoned = tmp_path / "poisoned.csv"
    frame.with_columns(
        pl.when(pl.col("week") >= 4)
        .then(1 - pl.col("label"))
        .otherwise(pl.col("label"))
        .alias("label")
    ).write_csv(poisoned)
    # (4 replicates: the intervals exist, and only their being equal matters here)
    before = run_backtest(_request(reference, target, n_bootstrap=4))
    after = run_backtest(_request(reference, poisoned, n_bootstrap=4))
    for old, new in zip(before.methods, after.methods, strict=True):
        assert old.prevalence[:6].tolist() == new.prevalence[:6].tolist(), old.name
        if old.ci_low is not None and new.ci_low is not None:
            assert old.ci_low[:6].tolist() == new.ci_low[:6].tolist(), old.name
    assert before.blend_weights[:6].tolist() == after.blend_weights[:6].tolist()
    moved = {
        m.name
        for m, n in zip(before.methods, after.methods, strict=True)
        if m.prevalence[6] != n.prevalence[6]
    }
    assert moved == {"rolling", "history_blend"}


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"batch_col": None}, UsageError, "--backtest needs --batch-col"),
        ({"output": "out.csv"}, UsageError, "--backtest reports errors only; drop -o"),
        (
            {"method": "mle"},
            UsageError,
            "--backtest runs mle, em, pacc, map and compares them; drop --method",
        ),
        ({"label_delay": 0}, UsageError, "--label-delay must be at least 1"),
    ],
)
def test_backtest_refusals(
    files: tuple[Path, Path], options: dict[str, object], error: type, message: str
) -> None:
    reference, target = files
    with pytest.raises(error, match=message):
        run_backtest(_request(reference, target, **options))


def test_backtest_needs_the_target_s_labels(files: tuple[Path, Path], tmp_path: Path) -> None:
    reference, target = files
    unlabelled = tmp_path / "unlabelled.csv"
    pl.read_csv(target).drop("label").write_csv(unlabelled)
    with pytest.raises(InputError, match=r"unlabelled.csv: --backtest needs each batch's labels"):
        run_backtest(_request(reference, unlabelled))


def test_backtest_end_to_end(run_calib: RunCalib, files: tuple[Path, Path], tmp_path: Path) -> None:
    """One run of the installed command: both tables on stdout, the [0, 1] warning on
    stderr, and --report holding the workflow's payload."""
    reference, target = files
    report = tmp_path / "backtest.json"
    done = run_calib(
        [
            "estimate-shift",
            "--reference",
            str(reference),
            "--target",
            str(target),
            "--batch-col",
            "week",
            "--backtest",
            "--label-delay",
            "2",
            "--bootstrap",
            "10",
            "--seed",
            "3",
            "--report",
            str(report),
        ]
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    best = json.loads(report.read_text())["best_method"]
    assert (
        f"Backtest of {target}: 8 batches by week, labels 2 batches late\nlowest MAE: {best}\n"
        in text
    )
    assert "Estimates per batch" in text
    assert "history_blend: the interval of the first 8 batches is [0, 1]" in done.stderr.decode()
    payload = json.loads(report.read_text())
    expected = json.loads(dumps(backtest_payload(run_backtest(_request(reference, target)))))
    assert payload == expected
    assert list(payload) == [
        "batch_col", "label_delay", "reference_prevalence", "ci_level", "best_method",
        "methods", "batches",
    ]  # fmt: skip


# ------------------------------------------------------------------------------ --history


@pytest.fixture(scope="module")
def history_files(
    files: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """The first 6 batches as labelled history, the last 2 as the new (target) batches."""
    _, target = files
    root = tmp_path_factory.mktemp("history")
    frame = pl.read_csv(target)
    history, new = root / "history.csv", root / "new.csv"
    frame.filter(pl.col("week") < 6).write_csv(history)
    frame.filter(pl.col("week") >= 6).write_csv(new)
    return history, new


def test_history_blend_learnt_on_the_past_batches_only(
    files: tuple[Path, Path], history_files: tuple[Path, Path], tmp_path: Path
) -> None:
    """The blend of the 2 new batches is core's history_blend over the 6 past batches'
    estimate-shift figures (as they would have been estimated, labels 2 batches late) and
    the new batches' own; the new batches' labels are never read."""
    reference, _ = files
    history, new = history_files
    options = {"reference": str(reference), "batch_col": "week", "n_bootstrap": 10, "seed": 3}
    warnings: list[str] = []
    result = run_estimate_shift(
        EstimateShiftRequest(target=str(new), history=str(history), label_delay=2, **options),  # type: ignore[arg-type]
        warn=warnings.append,
    )
    assert result.history is not None
    past = run_estimate_shift(EstimateShiftRequest(target=str(history), **options))  # type: ignore[arg-type]
    truth = [b.true_prevalence for b in past.batches]
    shift = [b.estimate.prevalence for b in past.batches + result.batches]
    pcc = [b.estimate.pcc for b in past.batches + result.batches]
    schedule = history_schedule(6, 2, label_delay=2)
    rates = np.array([*truth, 0.0, 0.0])
    candidates = history_candidates(
        shift, pcc, rates, reference_rate=past.model.reference_prevalence, last=schedule
    )
    blend = history_blend(candidates, rates, last=schedule)
    assert result.history.prevalence.tolist() == blend.prevalence[6:].tolist()
    assert result.history.n_history.tolist() == [6, 6]
    assert result.history.history_batches == tuple(range(6))
    assert result.history.candidate_mae.tolist() == pytest.approx(
        np.mean(np.abs(candidates[:6] - rates[:6, None]), axis=0).tolist(), abs=1e-15
    )
    assert warnings[-1] == (
        "--history: 2 of the 2 target batches (the first: 6) have 6 usable past batches, too "
        "few for a 95% conformal interval (it needs 19); their blend's interval is [0, 1]"
    )
    payload = json.loads(dumps(history_payload(result.history, result.batches)))
    assert list(payload) == [
        "file", "label_delay", "past_batches", "past_rows", "ci_level", "candidates",
        "blend_mae", "batches",
    ]  # fmt: skip
    assert payload["batches"][1]["change"] == pytest.approx(
        blend.prevalence[7] - result.batches[1].estimate.prevalence, abs=1e-15
    )
    # flipping the new batches' labels changes nothing the blend reports
    flipped = tmp_path / "flipped.csv"
    pl.read_csv(new).with_columns(1 - pl.col("label")).write_csv(flipped)
    again = run_estimate_shift(
        EstimateShiftRequest(target=str(flipped), history=str(history), label_delay=2, **options)  # type: ignore[arg-type]
    )
    assert again.history is not None
    assert again.history.prevalence.tolist() == result.history.prevalence.tolist()
    assert again.history.ci_low.tolist() == result.history.ci_low.tolist()


def test_history_refusals(
    files: tuple[Path, Path], history_files: tuple[Path, Path], tmp_path: Path
) -> None:
    reference, _ = files
    history, new = history_files
    base = {"reference": str(reference), "target": str(new), "history": str(history)}
    with pytest.raises(UsageError, match="--history needs --batch-col"):
        run_estimate_shift(EstimateShiftRequest(**base))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="drop --history"):
        run_backtest(EstimateShiftRequest(**base, batch_col="week", backtest=True))  # type: ignore[arg-type]
    unlabelled = tmp_path / "past.csv"
    pl.read_csv(history).drop("label").write_csv(unlabelled)
    with pytest.raises(InputError, match=r"past.csv: --history needs the past batches' labels"):
        run_estimate_shift(
            EstimateShiftRequest(**{**base, "history": str(unlabelled)}, batch_col="week")  # type: ignore[arg-type]
        )
    with pytest.raises(UsageError, match="give one of them, or drop --label-delay"):
        run_estimate_shift(
            EstimateShiftRequest(reference=str(reference), target=str(new), label_delay=2)
        )


@pytest.mark.slow  # 4 s: in `make test-slow` (the 3-minute budget)
def test_backtest_streams_with_the_same_bytes_as_in_memory(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    """--engine streaming reads the reference and the labelled target in chunks (bounded
    memory: a 1e7-row target took 1.6 GB in memory) and gives the same report, bit for bit;
    it refuses a target without labels or with rows outside every batch as in memory. Both
    leave out the batches not fully labelled (the last two, and one in the middle of which
    some labels are missing) with the same warning, and then equal the backtest of the file
    without them."""
    reference, target = files
    reports = [
        dumps(backtest_payload(run_backtest(_request(reference, target, engine=engine))))
        for engine in ("memory", "streaming")
    ]
    assert reports[0] == reports[1]
    frame = pl.read_csv(target)
    week, row = pl.col("week"), pl.int_range(pl.len())
    unknown = (week >= 6) | ((week == 3) & (row < 400))
    for folder, table in (
        ("late", frame.with_columns(pl.when(unknown).then(None).otherwise("label").alias("label"))),
        ("kept", frame.filter((week < 6) & (week != 3))),
    ):
        (tmp_path / folder).mkdir()
        table.write_csv(tmp_path / folder / "target.csv")  # one name: the reports compare
    runs = {}
    for folder in ("late", "kept"):
        for engine in ("memory", "streaming"):
            warnings: list[str] = []
            result = run_backtest(
                _request(reference, tmp_path / folder / "target.csv", engine=engine),
                warn=warnings.append,
            )
            runs[folder, engine] = (dumps(backtest_payload(result)), warnings)
    assert len({report for report, _ in runs.values()}) == 1
    left_out = (
        f"{tmp_path / 'late' / 'target.csv'}: 3 of 8 batches are not fully labelled yet "
        "(900 rows): left out of the backtest (3, 6, 7)"
    )
    for engine in ("memory", "streaming"):
        assert runs["late", engine][1] == [left_out, *runs["kept", engine][1]]
    assert runs["kept", "memory"][1] == runs["kept", "streaming"][1]
    unlabelled = tmp_path / "unlabelled.csv"
    pl.read_csv(target).drop("label").write_csv(unlabelled)
    gap = tmp_path / "gap.csv"
    frame = pl.read_csv(target)
    frame.with_columns(
        pl.when(pl.int_range(frame.height) < 5).then(None).otherwise(pl.col("week")).alias("week")
    ).write_csv(gap)
    for bad, message in ((unlabelled, "no column 'label'"), (gap, "5 rows without a value")):
        errors = []
        for engine in ("memory", "streaming"):
            with pytest.raises(InputError, match=message) as caught:
                run_backtest(_request(reference, bad, engine=engine))
            errors.append(str(caught.value))
        assert errors[0] == errors[1]


def test_history_holding_the_target_batches_never_lends_a_batch_its_own_labels(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    """A history that holds the target's batches (here all 8, labelled) lends each target
    batch only the batches before it, with a warning: flipping the labels of batches 3 and
    later in the history leaves the blends of batches 0-3 as they were."""
    reference, target = files
    options = {"reference": str(reference), "batch_col": "week", "n_bootstrap": 0, "seed": 3}
    warnings: list[str] = []
    result = run_estimate_shift(
        EstimateShiftRequest(target=str(target), history=str(target), **options),  # type: ignore[arg-type]
        warn=warnings.append,
    )
    assert result.history is not None
    assert result.history.n_history.tolist() == list(range(N_BATCHES))
    assert (
        "--history: 8 of its 8 batches are not before the target's batch 0; each target batch "
        "learns only from the history's batches before it"
    ) in warnings
    flipped = tmp_path / "flipped.csv"
    pl.read_csv(target).with_columns(
        pl.when(pl.col("week") >= 3)
        .then(1 - pl.col("label"))
        .otherwise(pl.col("label"))
        .alias("label")
    ).write_csv(flipped)
    again = run_estimate_shift(
        EstimateShiftRequest(target=str(target), history=str(flipped), **options)  # type: ignore[arg-type]
    )
    assert again.history is not None
    assert again.history.prevalence[:4].tolist() == result.history.prevalence[:4].tolist()
    assert again.history.prevalence[4:].tolist() != result.history.prevalence[4:].tolist()


def test_coverage_counts_only_the_batches_with_an_interval(files: tuple[Path, Path]) -> None:
    """Without intervals (``--bootstrap 0``) a method's coverage is None, not 0%; the methods
    whose intervals need no bootstrap keep theirs."""
    reference, target = files
    result = run_backtest(_request(reference, target, n_bootstrap=0))
    coverage = {m.name: m.coverage for m in result.methods}
    for name in ("mle", "em", "pacc", "map"):
        assert coverage[name] is None, name
    with_intervals = run_backtest(_request(reference, target))
    for method in with_intervals.methods:
        if method.ci_low is None or method.ci_high is None:
            continue
        held = np.isfinite(method.ci_low) & ((method.ci_low > 0.0) | (method.ci_high < 1.0))
        assert method.coverage_batches == int(held.sum())
        if held.any():
            truth = with_intervals.true_prevalence[held]
            inside = (method.ci_low[held] <= truth) & (truth <= method.ci_high[held])
            assert method.coverage == pytest.approx(float(np.mean(inside)))


def test_a_history_whose_batch_values_are_of_another_type_is_refused_before_any_output(
    files: tuple[Path, Path], history_files: tuple[Path, Path], tmp_path: Path
) -> None:
    """Weeks named as text in the history ("w3") and as numbers in the target (21) do not
    compare as times: refused, naming both. Weeks written as text ("3", a Parquet string
    column) are the numbers they write (calib_cli/io/identity.py), placed by value."""
    reference, _ = files
    history, new = history_files
    as_text = tmp_path / "past.parquet"
    weeks = pl.read_csv(history)
    weeks.with_columns(("w" + pl.col("week").cast(pl.String)).alias("week")).write_parquet(as_text)
    output = tmp_path / "out.csv"
    request = EstimateShiftRequest(
        reference=str(reference),
        target=str(new),
        history=str(as_text),
        batch_col="week",
        output=str(output),
        n_bootstrap=0,
    )
    with pytest.raises(InputError) as error:
        run_estimate_shift(request)
    first_new = int(pl.read_csv(new)["week"].min())  # type: ignore[arg-type]
    assert str(error.value) == (
        f"{as_text}: column 'week' holds text ('w0', ...) and the target's holds numbers "
        f"({first_new}, ...): the batches' places in time cannot be compared; give both files "
        "the same type of batch values"
    )
    assert not output.exists()
    numbers_as_text = tmp_path / "past_text.parquet"
    weeks.with_columns(pl.col("week").cast(pl.String)).write_parquet(numbers_as_text)
    as_numbers = tmp_path / "past.csv"
    weeks.write_csv(as_numbers)
    results = [
        run_estimate_shift(replace(request, history=str(path), output=None))
        for path in (numbers_as_text, as_numbers)
    ]
    assert results[0].history is not None and results[1].history is not None
    assert results[0].history.history_batches == results[1].history.history_batches
    assert results[0].history.prevalence.tolist() == results[1].history.prevalence.tolist()


def test_batches_placed_in_time_by_text_order_are_warned(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    reference, target = files
    named = tmp_path / "named.csv"
    frame = pl.read_csv(target)
    frame.with_columns(("w" + pl.col("week").cast(pl.String)).alias("week")).write_csv(named)
    said: list[str] = []
    run_backtest(_request(reference, named, n_bootstrap=0), warn=said.append)
    assert any(
        "--backtest places the batches of 'week' in time in text order (w0, w1, w2, w3, ...)"
        in line
        for line in said
    )
    iso = tmp_path / "iso.csv"
    frame.with_columns(
        pl.format("2024-05-{}", pl.col("week").cast(pl.String).str.zfill(2)).alias("week")
    ).write_csv(iso)
    said.clear()
    run_backtest(_request(reference, iso, n_bootstrap=0), warn=said.append)
    assert not any("text order" in line for line in said)


def test_a_label_delay_past_the_last_batch_is_warned(files: tuple[Path, Path]) -> None:
    reference, target = files
    said: list[str] = []
    result = run_backtest(
        _request(reference, target, n_bootstrap=0, label_delay=N_BATCHES), warn=said.append
    )
    assert any(
        f"--label-delay {N_BATCHES} leaves no batch of the {N_BATCHES} a labelled one before it"
        in line
        for line in said
    )
    by_name = {m.name: m for m in result.methods}
    np.testing.assert_array_equal(by_name["rolling"].prevalence, by_name["no_shift"].prevalence)
    said.clear()
    run_backtest(_request(reference, target, n_bootstrap=0), warn=said.append)
    assert not any("leaves no batch" in line for line in said)
