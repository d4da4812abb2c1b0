"""`calib resample` end to end through the installed command.

Each test spawns as few ``calib`` processes as the contract it checks needs (a process costs
about a second to start): which rows the hash rule keeps, for every kind of key and format,
byte-identical reruns and each refused input are checked in-process in
``test_workflows_resample.py``; here one run per behaviour shows that the command wires it.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib_cli.core.sampling import ClassRates, hash_row_numbers, keep_mask, row_thresholds
from calib_cli.workflows.resample import ResampleRequest, run_resample
from tests.conftest import RunCalib


@pytest.fixture
def train_files(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(5)
    n = 20_000
    frame = pl.DataFrame(
        {
            "user": [f"u{i:06d}" for i in rng.permutation(n)],
            "id": np.arange(100, 100 + n),
            "x": rng.normal(size=n).round(6),
            "label": (rng.random(n) < 0.03).astype(np.int64),
            "region": rng.choice(["north", "south"], n),
        }
    )
    paths = {"csv": tmp_path / "train.csv", "parquet": tmp_path / "train.parquet"}
    frame.write_csv(paths["csv"])
    frame.write_parquet(paths["parquet"])
    return paths


def test_keeps_every_positive_and_the_row_numbers_the_rule_keeps(
    run_calib: RunCalib, train_files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "s.csv"
    done = run_calib(
        [
            "resample",
            str(train_files["csv"]),
            "-o",
            str(out),
            "--negative-rate",
            "0.1",
            "--seed",
            "7",
        ]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""  # the rows go to -o, the table to stderr
    assert f"sampling record: {out}.sampling.json" in done.stderr.decode()
    source, sample = pl.read_csv(train_files["csv"]), pl.read_csv(out)
    assert sample.columns == source.columns
    positives = source.filter(pl.col("label") == 1)
    assert sample.filter(pl.col("label") == 1)["id"].to_list() == positives["id"].to_list()
    negatives = source.height - positives.height
    kept = sample.filter(pl.col("label") == 0).height
    assert abs(kept - 0.1 * negatives) < 4 * math.sqrt(negatives * 0.1 * 0.9)
    # without --key-col the row number is hashed (the documented rule), rows keep their order
    thresholds = row_thresholds(source["label"].to_numpy(), ClassRates(negative_rate=0.1))
    expected = source["id"].to_numpy()[
        keep_mask(hash_row_numbers(source.height, seed=7), thresholds)
    ]
    assert sample["id"].to_list() == expected.tolist()
    assert sample["id"].is_sorted()
    record = json.loads(out.with_name("s.csv.sampling.json").read_text())
    assert record["kind"] == "sampling"
    assert record["params"]["negative_rate"] == 0.1
    assert record["params"]["seed"] == 7
    assert record["params"]["key_type"] == "row"
    assert record["fitted_on"]["before"]["rows"] == source.height
    assert record["fitted_on"]["after"]["rows"] == sample.height
    assert record["fitted_on"]["after"]["positives"] == positives.height


def test_gzip_ndjson_output_has_the_bytes_of_the_in_process_sample(
    invoke_calib: RunCalib, train_files: dict[str, Path], tmp_path: Path
) -> None:
    # reruns, seeds, formats and keys compared in-process: test_workflows_resample.py
    out = tmp_path / "cli" / "s.ndjson.gz"
    out.parent.mkdir()
    done = invoke_calib(
        [
            "resample",
            str(train_files["parquet"]),
            "-o",
            str(out),
            "--negative-rate",
            "0.2",
            "--key-col",
            "user",
            "--seed",
            "1",
            "-q",
        ]
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == (b"", b"")
    assert pl.read_ndjson(gzip.decompress(out.read_bytes())).height > 0
    in_process = tmp_path / "s.ndjson.gz"
    result = run_resample(
        ResampleRequest(
            file=str(train_files["parquet"]),
            output=str(in_process),
            negative_rate=0.2,
            key_col="user",
            seed=1,
        )
    )
    assert out.read_bytes() == in_process.read_bytes()
    record = json.loads(Path(f"{out}.sampling.json").read_text())
    assert record["params"] == result.record.params
    assert record["params"]["key_type"] == "string"


def test_stdout_sample_at_a_target_rate_with_weights_and_a_record(
    invoke_calib: RunCalib, train_files: dict[str, Path], tmp_path: Path
) -> None:
    record_path = tmp_path / "r.json"
    done = invoke_calib(
        [
            "resample",
            str(train_files["csv"]),
            "-o",
            "-",
            "--target-positive-rate",
            "0.25",
            "--weight-col-out",
            "iw",
            "--record",
            str(record_path),
            "-q",
        ]
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""
    assert done.stdout.startswith(b"user,id,x,label,region,iw\n")
    record = json.loads(record_path.read_text())
    assert record["fitted_on"]["output"] == "stdout"
    sample = pl.read_csv(done.stdout)
    assert abs(sample["label"].mean() - 0.25) < 0.03  # type: ignore[operator]
    w = record["params"]["negative_rate"]
    assert sorted(set(sample["iw"].to_list())) == [1.0, 1.0 / w]
    # Horvitz-Thompson: weighted negatives estimate the input's negatives
    negatives = record["fitted_on"]["before"]["negatives"]
    estimate = sample.filter(pl.col("label") == 0)["iw"].sum()
    assert abs(estimate - negatives) < 4 * math.sqrt(negatives * (1 - w) / w)


def test_strata_sampled_at_the_rates_of_a_rates_file(
    invoke_calib: RunCalib, train_files: dict[str, Path], tmp_path: Path
) -> None:
    rates = tmp_path / "rates.csv"
    rates.write_text("stratum,negative_rate\nnorth,0.05\nsouth,0.5\n")
    out = tmp_path / "strat.csv"
    done = invoke_calib(
        [
            "resample",
            str(train_files["csv"]),
            "-o",
            str(out),
            "--strata-col",
            "region",
            "--rates-file",
            str(rates),
        ]
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(Path(f"{out}.sampling.json").read_text())
    assert record["params"]["strata"] == {
        "north": {"negative_rate": 0.05, "positive_rate": 1.0},
        "south": {"negative_rate": 0.5, "positive_rate": 1.0},
    }
    sample = pl.read_csv(out).filter(pl.col("label") == 0)
    counts = dict(sample.group_by("region").len().iter_rows())
    assert counts["south"] > 5 * counts["north"]


def test_bad_labels_exit_65_and_write_nothing(invoke_calib: RunCalib, tmp_path: Path) -> None:
    # the other refused inputs (targets, label values), in-process: test_workflows_resample.py
    source = tmp_path / "bad.csv"
    source.write_text("id,label\n1,0\n2,1\n3,maybe\n4,0\n")
    out = tmp_path / "out.csv"
    done = invoke_calib(["resample", str(source), "-o", str(out), "--negative-rate", "0.5"])
    assert done.returncode == 65
    assert done.stdout == b""
    assert done.stderr.decode() == (
        f"error: {source}: column 'label' has 1 value that is not 0/1 or true/false (first at "
        "row 3: 'maybe'); name the positive value with --positive-label\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


def test_a_pipe_needs_a_record_path_exit_2(
    run_calib: RunCalib, train_files: dict[str, Path], tmp_path: Path
) -> None:
    # '-o -' without --record, and the other usage errors: test_workflows_resample.py
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = run_calib(
        ["resample", str(train_files["csv"]), "-o", str(fifo), "--negative-rate", "0.3"]
    )
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.decode() == (
        "error: writing the sample to stdout or a pipe needs --record PATH for the record\n"
    )
    assert not list(tmp_path.glob("*.json"))
