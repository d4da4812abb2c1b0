"""Pipelines you can trust (issue 11): degenerate fit data refused alike by both engines, a
warning on constant scores and on sampled rows fitted as the population, impossible gates and
a clashing --output-col refused before any work, closed pipes ending with 141.

In-process through the workflows, except where the command line is the point (exit codes,
stderr, a real pipe whose reader goes away): five runs of the installed ``calib``.
"""

from __future__ import annotations

import contextlib
import gzip
import io as stdlib_io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib_cli import interrupts
from calib_cli.core.chain import fit_chain
from calib_cli.core.fit_support import (
    FitFacts,
    fit_facts,
    min_class_rows,
    require_fit_support,
    score_spread,
)
from calib_cli.core.prior import base_rate_looks_sampled
from calib_cli.errors import InputError, OptionError, UsageError
from calib_cli.io import sink as sink_module
from calib_cli.io.write import write_all, write_bytes
from calib_cli.types import Engine, FittedMethod
from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate
from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability
from calib_cli.workflows.resample import ResampleRequest, run_resample
from calib_cli.workflows.summarize import SummarizeRequest, run_summarize
from tests.conftest import CALIB, RunCalib, _environment

METHODS: tuple[FittedMethod, ...] = ("platt", "isotonic", "beta", "histogram")
ENGINES: tuple[Engine, ...] = ("memory", "streaming")


def _fit_file(tmp_path: Path, kind: str, n: int = 400, seed: int = 1) -> Path:
    """A labelled file that cannot support a fit (or, for "fine", one that can)."""
    rng = np.random.default_rng(seed)
    scores = rng.uniform(0.05, 0.95, n)
    labels = (rng.uniform(size=n) < scores).astype(np.int64)
    if kind == "constant":
        scores = np.full(n, 0.25)
    elif kind == "near":
        scores = 0.5 + rng.uniform(size=n) * 1e-8
    elif kind == "one class":
        labels = np.zeros(n, dtype=np.int64)
    elif kind == "few":
        labels = np.zeros(n, dtype=np.int64)
        labels[:5] = 1
    path = tmp_path / f"{kind.replace(' ', '_')}.csv"
    pl.DataFrame({"id": np.arange(n), "score": scores, "label": labels}).write_csv(path)
    return path


# ------------------------------------------------------------------ core: the criteria


@pytest.mark.parametrize(
    ("facts", "method", "message"),
    [
        (
            FitFacts(0.1, 0.9, 0.0, 50.0),
            "platt",
            "cannot fit platt: the labels have no positive rows (with positive weight)",
        ),
        (
            FitFacts(0.1, 0.9, 50.0, 0.0),
            "isotonic",
            "cannot fit isotonic: the labels have no negative rows (with positive weight)",
        ),
        (
            FitFacts(0.1, 0.9, 9.0, 500.0),
            "platt",
            "cannot fit platt: the labels have 9 positive rows; platt needs at least 10 rows "
            "of each class",
        ),
        (
            FitFacts(0.1, 0.9, 500.0, 1.0),
            "histogram",
            "cannot fit histogram: the labels have 1 negative row; histogram needs at least 10 "
            "rows of each class",
        ),
        (
            FitFacts(0.1, 0.9, 19.5, 500.0),
            "beta",
            "cannot fit beta: the labels have 19.5 positive rows; beta needs at least 20 rows "
            "of each class",
        ),
        (
            FitFacts(0.1, 0.9, 5.0, 500.0),
            "auto",
            "cannot fit any method: the labels have 5 positive rows; platt, the least "
            "demanding method, needs at least 10 rows of each class",
        ),
        (
            FitFacts(0.3, 0.3, 50.0, 50.0),
            "beta",
            "cannot fit beta: the scores do not vary (every score is 0.3)",
        ),
        (
            FitFacts(0.5, 0.5 + 2e-7, 50.0, 50.0),
            "isotonic",
            "cannot fit isotonic: the scores barely vary (from 0.5 to 0.5000002, a log-odds "
            "spread of 8e-07, below 1e-06)",
        ),
        (
            FitFacts(1000.0, 1000.0005, 50.0, 50.0, score_kind="raw"),
            "platt",
            "cannot fit platt: the scores barely vary (from 1000 to 1000.0005, a relative "
            "spread of 5e-07, below 1e-06)",
        ),
    ],
)
def test_degenerate_fit_data_are_refused_with_one_reason(
    facts: FitFacts, method: FittedMethod, message: str
) -> None:
    with pytest.raises(InputError) as error:
        require_fit_support(method, facts)
    assert str(error.value) == message
    assert error.value.exit_code == 65


def test_the_class_minimums_and_what_passes() -> None:
    assert [min_class_rows(m) for m in METHODS] == [10, 10, 20, 10]
    assert min_class_rows("histogram", n_bins=40) == 40
    assert min_class_rows("histogram", n_bins=3) == 10
    # exactly the minimum passes; so do a rare-event model's tiny but wide-in-odds scores
    require_fit_support("beta", FitFacts(0.1, 0.9, 20.0, 20.0))
    require_fit_support("platt", FitFacts(1e-7, 1e-5, 10.0, 1e6))
    # raw margins have no scale: a spread of 2e-9 around 0 is as good as any
    require_fit_support("platt", FitFacts(-1e-9, 1e-9, 10.0, 10.0, score_kind="raw"))
    # logits are log-odds already
    assert score_spread(FitFacts(-1.0, 2.0, 1.0, 1.0, score_kind="logit")) == 3.0


def test_weights_count_as_rows_and_zero_weight_rows_do_not_count() -> None:
    scores = np.array([0.5] * 3 + list(np.linspace(0.1, 0.9, 20)))
    labels = np.array([1, 1, 1] + [1, 0] * 10)
    weights = np.array([0.0] * 3 + [1.0] * 20)
    facts = fit_facts(scores, labels, weights)
    assert (facts.positives, facts.negatives) == (10.0, 10.0)
    assert (facts.lowest, facts.highest) == (0.1, 0.9)
    # 5 positives of weight 2 are 10 positives: accepted, like the 10 rows they stand for
    rng = np.random.default_rng(0)
    x = rng.uniform(0.1, 0.9, 40)
    y = np.array([1] * 5 + [0] * 35)
    w = np.array([2.0] * 5 + [1.0] * 35)
    fit_chain(x, y, method="platt", sample_weight=w, rng=rng)
    with pytest.raises(InputError, match="have 5 positive rows"):
        fit_chain(x, y, method="platt", rng=rng)


# ---------------------------------------------------- recalibrate: both engines alike


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_fractional_weights_a_rounding_short_of_the_minimum_count_as_the_minimum(
    tmp_path: Path, engine: Engine
) -> None:
    # 100 positives of weight 0.1 sum to 9.999999999999998 in one order, 10 in another: the
    # engines add them in different orders, and each said "10 positive rows; needs at least
    # 10" or fitted. A count within 1e-9 of a whole number now is that number in both.
    rng = np.random.default_rng(2)
    n = 2000
    labels = np.zeros(n, dtype=np.int64)
    labels[:100] = 1
    frame = pl.DataFrame(  # a mean weight above 1: weights are the counts themselves
        {"score": rng.random(n), "label": labels, "w": np.where(labels == 1, 0.1, 2.0)}
    )
    source = tmp_path / "w.parquet"
    frame.write_parquet(source)
    assert sum([0.1] * 100) < 10.0  # the rounding the rule settles

    def fit(method: FittedMethod) -> None:
        run_recalibrate(
            RecalibrateRequest(
                fit=str(source),
                method=method,
                weight_col="w",
                engine=engine,
                save_model=str(tmp_path / f"{method}.json"),
            )
        )

    fit("platt")  # needs 10 of each class: the 100 rows of 0.1 are 10
    with pytest.raises(
        InputError, match="the labels have 10 positive rows; beta needs at least 20"
    ):
        fit("beta")


@pytest.mark.parametrize("engine", ["memory", "streaming"])
@pytest.mark.parametrize("weight_kind", ["frequency", "importance"])
def test_weights_normalised_to_sum_to_one_count_in_rows_of_their_mean(
    tmp_path: Path, engine: Engine, weight_kind: str
) -> None:
    """Weights below 1 on average count in units of their mean (``metrics.count_unit``):
    2,000 rows weighted to sum to 1, about 600 positive, are not "0.3 positive rows"; the
    fit is refused only where the same rows unweighted would be."""
    rng = np.random.default_rng(8)
    n = 2000
    score = rng.beta(2, 4, n)
    label = (rng.random(n) < score).astype(np.int64)
    w = rng.choice([1.0, 3.0], n)
    frame = pl.DataFrame({"score": score, "label": label, "w": w / w.sum()})
    source = tmp_path / "normalised.csv"
    frame.write_csv(source)
    for method in ("isotonic", "beta", "histogram"):
        run_recalibrate(
            RecalibrateRequest(
                fit=str(source),
                method=method,  # type: ignore[arg-type]
                weight_col="w",
                weight_kind=weight_kind,  # type: ignore[arg-type]
                engine=engine,
                save_model=str(tmp_path / f"{method}.json"),
            )
        )
        assert (tmp_path / f"{method}.json").exists()
    facts = fit_facts(frame["score"], frame["label"], frame["w"])
    positive_weight = float(np.sum(frame["w"].to_numpy()[label == 1]))
    assert facts.positives == pytest.approx(positive_weight * n / float(frame["w"].sum()))
    assert facts.positives + facts.negatives == pytest.approx(n)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("constant", "the scores do not vary (every score is 0.25)"),
        (
            "near",
            "the scores barely vary (from {lo} to {hi}, a log-odds spread of {spread}, "
            "below 1e-06)",
        ),
        ("one class", "the labels have no positive rows (with positive weight)"),
        ("few", "the labels have 5 positive rows; {method} needs at least {needed} rows of "),
    ],
)
def test_recalibrate_refuses_degenerate_fit_data_in_both_engines(
    tmp_path: Path, engine: Engine, method: FittedMethod, kind: str, reason: str
) -> None:
    source = _fit_file(tmp_path, kind)
    model = tmp_path / "model.json"
    request = RecalibrateRequest(
        fit=str(source), method=method, save_model=str(model), engine=engine
    )
    with pytest.raises(InputError) as error:
        run_recalibrate(request)
    if kind == "near":
        scores = pl.read_csv(source)["score"]
        lo, hi = float(scores.min()), float(scores.max())  # type: ignore[arg-type]
        spread = np.log(hi / (1 - hi)) - np.log(lo / (1 - lo))
        reason = reason.format(lo=f"{lo:.10g}", hi=f"{hi:.10g}", spread=f"{spread:.2g}")
    if kind == "few":
        reason = reason.format(method=method, needed=min_class_rows(method)) + "each class"
    assert str(error.value) == f"{source}: cannot fit {method}: {reason}"
    assert error.value.exit_code == 65
    assert not model.exists()


def test_auto_and_cross_fit_refuse_too_and_auto_says_what_it_left_out(tmp_path: Path) -> None:
    source = _fit_file(tmp_path, "constant")
    out = tmp_path / "out.csv"
    for request in (
        RecalibrateRequest(fit=str(source), save_model=str(tmp_path / "m.json")),
        RecalibrateRequest(file=str(source), cross_fit_folds=5, output=str(out)),
    ):
        with pytest.raises(InputError) as error:
            run_recalibrate(request)
        assert str(error.value) == (
            f"{source}: cannot fit any method: the scores do not vary (every score is 0.25)"
        )
    assert not out.exists()
    rng = np.random.default_rng(3)
    fifteen = tmp_path / "fifteen.csv"
    labels = np.zeros(300, dtype=np.int64)
    labels[:15] = 1
    pl.DataFrame({"score": rng.uniform(size=300), "label": labels}).write_csv(fifteen)
    warnings: list[str] = []
    result = run_recalibrate(
        RecalibrateRequest(fit=str(fifteen), save_model=str(tmp_path / "m.json")),
        warn=warnings.append,
    )
    assert result.choice is not None
    assert [c.method for c in result.choice.candidates] == ["platt", "isotonic", "histogram"]
    assert warnings[0] == (
        f"{fifteen}: --method auto compared platt, isotonic, histogram only: the smaller "
        "class has 15 rows, and beta needs 20"
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_a_fit_after_the_prior_names_the_prior_corrected_scores(
    tmp_path: Path, engine: Engine
) -> None:
    source = _fit_file(tmp_path, "constant")
    with pytest.raises(InputError) as error:
        run_recalibrate(
            RecalibrateRequest(
                fit=str(source),
                method="platt",
                negative_rate=0.1,
                save_model=str(tmp_path / "m.json"),
                engine=engine,
            )
        )
    assert str(error.value) == (
        f"{source}: cannot fit platt: the prior-corrected scores do not vary "
        "(every score is 0.03225806452)"
    )


# -------------------------------------------------------- --fit-data population warning


def test_the_sampled_rate_test() -> None:
    # the sample itself: at the sampled rate
    assert base_rate_looks_sampled(553, 3002, population_rate=0.0184, sampled_rate=0.156)
    # the population: no
    assert not base_rate_looks_sampled(553, 29447, population_rate=0.0184, sampled_rate=0.156)
    # in between on the log-odds scale (t = 0.61): not "far better"
    assert not base_rate_looks_sampled(7000, 93000, population_rate=0.0184, sampled_rate=0.156)
    # the sampled rate, but too few rows to tell
    assert not base_rate_looks_sampled(3, 17, population_rate=0.0184, sampled_rate=0.156)
    assert not base_rate_looks_sampled(0, 17, population_rate=0.0184, sampled_rate=0.156)
    assert not base_rate_looks_sampled(5, 17, population_rate=0.1, sampled_rate=0.1)


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A population (base rate about 0.05), a sample of it (negatives kept at 0.1), and the
    sampling record."""
    folder = tmp_path_factory.mktemp("sampled")
    rng = np.random.default_rng(7)
    n = 20_000
    labels = (rng.uniform(size=n) < 0.05).astype(np.int64)
    scores = 1.0 / (1.0 + np.exp(-(rng.normal(size=n) + 2.0 * labels - 3.0)))
    population = folder / "population.csv"
    pl.DataFrame({"score": scores, "label": labels}).write_csv(population)
    sample = folder / "sample.csv"
    run_resample(ResampleRequest(file=str(population), output=str(sample), negative_rate=0.1))
    return population, sample, Path(f"{sample}.sampling.json")


@pytest.mark.parametrize("engine", ENGINES)
def test_sampled_rows_fitted_as_the_population_are_warned_about(
    tmp_path: Path, sampled: tuple[Path, Path, Path], engine: Engine
) -> None:
    population, sample, record = sampled
    rate = float(np.mean(pl.read_csv(sample)["label"].to_numpy()))

    def warnings_of(fit: Path, fit_data: str) -> list[str]:
        found: list[str] = []
        run_recalibrate(
            RecalibrateRequest(
                fit=str(fit),
                method="platt",
                sampling_record=str(record),
                fit_data=fit_data,  # type: ignore[arg-type]
                save_model=str(tmp_path / "m.json"),
                engine=engine,
            ),
            warn=found.append,
        )
        return [w for w in found if "base rate" in w]

    fitted_on = json.loads(record.read_text())["fitted_on"]
    before, after = fitted_on["before"]["base_rate"], fitted_on["after"]["base_rate"]
    assert warnings_of(sample, "population") == [
        f"{sample}: the fit data's base rate ({rate:.4g}) matches the sampling record's "
        f"sampled rate ({after:.4g}), not its population rate ({before:.4g}): if these rows "
        "were sampled like the training set, use --fit-data sampled"
    ]
    assert warnings_of(sample, "sampled") == []
    assert warnings_of(population, "population") == []


def test_the_warning_with_train_and_target_priors(
    tmp_path: Path, sampled: tuple[Path, Path, Path]
) -> None:
    _, sample, _ = sampled
    rate = float(np.mean(pl.read_csv(sample)["label"].to_numpy()))
    found: list[str] = []
    run_recalibrate(
        RecalibrateRequest(
            fit=str(sample),
            method="isotonic",
            train_prior=0.35,
            target_prior=0.05,
            save_model=str(tmp_path / "m.json"),
        ),
        warn=found.append,
    )
    assert [w for w in found if "base rate" in w] == [
        f"{sample}: the fit data's base rate ({rate:.4g}) matches --train-prior (0.35), not "
        "--target-prior (0.05): if these rows were sampled like the training set, use "
        "--fit-data sampled"
    ]


# ------------------------------------------------------------ reliability: constant scores


def test_reliability_warns_on_a_constant_score_column_in_every_engine(tmp_path: Path) -> None:
    source = _fit_file(tmp_path, "constant")
    summary = tmp_path / "s.parquet"
    run_summarize(SummarizeRequest(files=(str(source),), output=str(summary)))
    line = (
        "{}: the scores of column 'score' do not vary (every score is 0.25): the AUC and its "
        "interval cannot measure ranking"
    )
    for request, name in (
        (ReliabilityRequest(file=str(source), engine="memory"), str(source)),
        (ReliabilityRequest(file=str(source), engine="streaming"), str(source)),
        (ReliabilityRequest(file=None, from_summaries=(str(summary),)), str(summary)),
    ):
        found: list[str] = []
        result = run_reliability(request, warn=found.append)
        assert found == [line.format(name)]
        assert result.entries[0].summary.auc == 0.5  # the figures are still reported
    found = []
    run_reliability(ReliabilityRequest(file=str(_fit_file(tmp_path, "fine"))), warn=found.append)
    assert found == []


# ---------------------------------------------------- impossible values, before any work


@pytest.mark.parametrize(
    ("gate", "value", "message"),
    [
        ("fail_above_ece", -0.1, "--fail-above-ece must be in [0, 1], got -0.1"),
        ("fail_above_ece", 1.5, "--fail-above-ece must be in [0, 1], got 1.5"),
        ("fail_below_auc", float("nan"), "--fail-below-auc must be a finite number, got nan"),
        ("fail_below_auc", 2.0, "--fail-below-auc must be in [0, 1], got 2"),
    ],
)
def test_impossible_gates_are_refused_before_any_work(
    tmp_path: Path, gate: str, value: float, message: str
) -> None:
    request = ReliabilityRequest(file=str(tmp_path / "not-read.csv"), **{gate: value})  # type: ignore[arg-type]
    with pytest.raises(UsageError) as error:
        run_reliability(request)
    assert (str(error.value), error.value.exit_code) == (message, 2)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bins": 0, "method": "histogram"}, "--bins must be at least 1, got 0"),
        ({"folds": 1}, "--folds must be at least 2, got 1"),
    ],
)
def test_impossible_counts_are_refused_by_the_recalibrate_workflow(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    fit = _fit_file(tmp_path, "constant")  # never fitted: the options are checked first
    request = RecalibrateRequest(fit=str(fit), save_model=str(tmp_path / "m.json"), **options)  # type: ignore[arg-type]
    with pytest.raises(UsageError) as error:
        run_recalibrate(request)
    assert (str(error.value), error.value.exit_code) == (message, 2)


@pytest.mark.parametrize("engine", ENGINES)
def test_an_output_col_that_names_an_input_column_is_refused_before_any_work(
    tmp_path: Path, engine: Engine
) -> None:
    source = _fit_file(tmp_path, "fine")
    out, model = tmp_path / "out.csv", tmp_path / "m.json"
    fit = _fit_file(tmp_path, "constant")  # the fit would be refused, but is never made
    request = RecalibrateRequest(
        file=str(source),
        fit=str(fit),
        method="platt",
        output=str(out),
        save_model=str(model),
        output_col="label",
        engine=engine,
    )
    with pytest.raises(UsageError) as error:
        run_recalibrate(request)
    assert str(error.value) == (
        f"{source} already has a column 'label'; choose another output name"
    )
    assert error.value.exit_code == 2
    # a gzip file's columns are known once it is read: refused then, before any output
    packed = tmp_path / "in.csv.gz"
    packed.write_bytes(gzip.compress(source.read_bytes()))
    with pytest.raises(UsageError) as error:
        run_recalibrate(
            RecalibrateRequest(
                file=str(packed),
                negative_rate=0.5,
                output=str(out),
                output_col="id",
                engine=engine,
            )
        )
    assert str(error.value) == f"{packed} already has a column 'id'; choose another output name"
    assert not out.exists() and not model.exists()


# ------------------------------------------------------------------- writes, in-process


class _Trickle(stdlib_io.RawIOBase):
    """A stream that takes at most 7 bytes a call, as a pipe can when its reader goes."""

    def __init__(self) -> None:
        self.taken = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        chunk = bytes(memoryview(data))[:7]  # type: ignore[arg-type]
        self.taken += chunk
        return len(chunk)


def test_write_all_keeps_writing_after_short_writes() -> None:
    stream = _Trickle()
    write_all(stream, b"0123456789" * 10)  # type: ignore[arg-type]
    assert bytes(stream.taken) == b"0123456789" * 10


@pytest.mark.parametrize("via", ["write_bytes", "sink_table"])
def test_a_reader_that_closes_mid_write_is_a_broken_pipe(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, via: str
) -> None:
    read_end, write_end = os.pipe()

    def reader() -> None:
        os.read(read_end, 100)
        os.close(read_end)

    thread = threading.Thread(target=reader)
    thread.start()
    stdout = open(write_end, "w", encoding="utf-8", closefd=True)  # noqa: SIM115
    monkeypatch.setattr(sys, "stdout", stdout)
    data = b"x" * (8 << 20)  # far more than a pipe holds
    try:
        with pytest.raises(BrokenPipeError):
            if via == "write_bytes":
                write_bytes("-", data)
            else:
                frame = pl.DataFrame({"x": np.arange(1_000_000)})
                sink_module.sink_table(frame.lazy(), "-", output_format_override="csv")
    finally:
        thread.join()
        with contextlib.suppress(OSError):
            stdout.close()


def test_the_ndjson_gzip_scratch_directory_is_registered_and_removed(tmp_path: Path) -> None:
    with sink_module._scratch(tmp_path) as scratch:
        assert scratch.is_dir() and scratch.parent == tmp_path
        assert scratch in interrupts._temporaries
    assert not scratch.exists() and scratch not in interrupts._temporaries
    out = tmp_path / "out.ndjson.gz"
    sink_module.sink_table(
        pl.DataFrame({"x": [1, 2]}).lazy(), str(out), output_format_override=None
    )
    assert gzip.decompress(out.read_bytes()) == b'{"x":1}\n{"x":2}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.ndjson.gz"]


# ------------------------------------------------------------------- the command line


def test_cli_a_constant_fit_file_exits_65_with_one_line_and_saves_nothing(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    source = _fit_file(tmp_path, "constant")
    model = tmp_path / "m.json"
    done = run_calib(["recalibrate", "--fit", str(source), "--method", "beta",
                      "--save-model", str(model), "--engine", "streaming"])  # fmt: skip
    assert done.returncode == 65
    assert done.stderr.decode() == (
        f"error: {source}: cannot fit beta: the scores do not vary (every score is 0.25)\n"
    )
    assert done.stdout == b"" and not model.exists()


def test_cli_an_impossible_gate_is_one_usage_line(run_calib: RunCalib, tmp_path: Path) -> None:
    source = _fit_file(tmp_path, "fine")
    done = run_calib(["reliability", str(source), "--fail-above-ece", "-0.1"])
    assert done.returncode == 2
    assert done.stderr.decode() == "error: --fail-above-ece must be in [0, 1], got -0.1\n"
    assert done.stdout == b""


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 2 MB of scored rows: more than a pipe holds (64 KiB, at most 1 MiB)."""
    rng = np.random.default_rng(0)
    n = 60_000
    scores = rng.uniform(0.01, 0.99, n)
    labels = (rng.uniform(size=n) < scores).astype(np.int64)
    path = tmp_path_factory.mktemp("big") / "big.csv"
    pl.DataFrame({"id": np.arange(n), "score": scores, "label": labels}).write_csv(path)
    return path


def _closed_early(args: list[str], *, read: int) -> tuple[int, bytes]:
    """Run calib with its stdout on a real pipe whose reader takes ``read`` bytes (0: none)
    and closes it; the exit code and standard error."""
    process = subprocess.Popen(
        [CALIB, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_environment()
    )
    assert process.stdout is not None and process.stderr is not None
    if read:
        assert len(process.stdout.read(read)) == read
    process.stdout.close()
    with process.stderr:
        stderr = process.stderr.read()
    return process.wait(timeout=120), stderr


# the memory engine writes the finished bytes, the streaming one copies a sunk file out: both
# paths, and both kinds of output (text, binary)
@pytest.mark.parametrize(("engine", "fmt"), [("memory", "csv"), ("streaming", "parquet")])
def test_cli_recalibrate_into_a_pipe_closed_early_ends_with_141(
    big_csv: Path, engine: str, fmt: str
) -> None:
    args = ["recalibrate", str(big_csv), "--negative-rate", "0.1", "-o", "-"]
    code, stderr = _closed_early([*args, "--engine", engine, "--output-format", fmt], read=100)
    assert (code, stderr) == (141, b"")


def test_cli_help_into_a_closed_pipe_ends_with_141() -> None:
    assert _closed_early(["recalibrate", "--help"], read=0) == (141, b"")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"negative_rate": 1.5}, "--negative-rate must be a rate in (0, 1], got 1.5"),
        (
            {"target_positive_rate": 0.0},
            "--target-positive-rate must be strictly between 0 and 1, got 0.0",
        ),
        ({"target_ratio": "0:4"}, "--target-ratio needs two positive numbers, got '0:4'"),
        (
            {"negative_rate": 0.1, "positive_rate": 0.0},
            "--positive-rate must be a rate in (0, 1], got 0.0",
        ),
    ],
)
def test_resample_refuses_impossible_rates_before_reading_a_row(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    unreadable = tmp_path / "in.parquet"  # not Parquet at all: reading it would fail
    unreadable.write_bytes(b"not a table")
    request = ResampleRequest(file=str(unreadable), output=str(tmp_path / "o.csv"), **options)  # type: ignore[arg-type]
    with pytest.raises(OptionError) as error:  # an InputError whose exit code is 2
        run_resample(request)
    assert (str(error.value), error.value.exit_code) == (message, 2)


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_fit_data_whose_every_weight_is_zero_are_refused_alike(
    tmp_path: Path, engine: Engine
) -> None:
    """No row of positive weight: the same one-line refusal in both engines (streaming said
    "internal error: zero-size array to reduction operation minimum", exit 70)."""
    rng = np.random.default_rng(4)
    source = tmp_path / "zero.csv"
    pl.DataFrame(
        {"score": rng.random(50), "label": rng.integers(0, 2, 50), "w": np.zeros(50)}
    ).write_csv(source)
    request = RecalibrateRequest(
        fit=str(source),
        method="isotonic",
        weight_col="w",
        engine=engine,
        save_model=str(tmp_path / "m.json"),
    )
    with pytest.raises(InputError) as error:
        run_recalibrate(request)
    assert str(error.value) == (
        f"{source}: cannot fit isotonic: the labels have no positive rows (with positive weight)"
    )
