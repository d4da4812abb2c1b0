"""`calib resample` end to end through the installed command."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

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


def test_keeps_every_positive_and_about_w_of_negatives(
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
    source, sample = pl.read_csv(train_files["csv"]), pl.read_csv(out)
    assert sample.columns == source.columns
    positives = source.filter(pl.col("label") == 1)
    assert sample.filter(pl.col("label") == 1)["id"].to_list() == positives["id"].to_list()
    negatives = source.height - positives.height
    kept = sample.filter(pl.col("label") == 0).height
    assert abs(kept - 0.1 * negatives) < 4 * math.sqrt(negatives * 0.1 * 0.9)
    # rows keep their input order
    assert sample["id"].is_sorted()
    record = json.loads(out.with_name("s.csv.sampling.json").read_text())
    assert record["kind"] == "sampling"
    assert record["params"]["negative_rate"] == 0.1
    assert record["params"]["seed"] == 7
    assert record["params"]["key_type"] == "row"
    assert record["fitted_on"]["before"]["rows"] == source.height
    assert record["fitted_on"]["after"]["rows"] == sample.height
    assert record["fitted_on"]["after"]["positives"] == positives.height


def test_same_seed_same_bytes_other_seed_other_rows(
    run_calib: RunCalib, train_files: dict[str, Path], tmp_path: Path
) -> None:
    outputs = []
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        for suffix in ("csv", "parquet"):
            out = tmp_path / f"{name}.{suffix}"
            done = run_calib(
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
                    seed,
                ]
            )
            assert done.returncode == 0, done.stderr
            outputs.append(out.read_bytes())
    a_csv, a_pq, b_csv, b_pq, c_csv, _ = outputs
    assert (a_csv, a_pq) == (b_csv, b_pq)
    assert a_csv != c_csv


@pytest.mark.parametrize("key", ["id", "user"])
def test_csv_and_parquet_keep_the_same_keys(
    run_calib: RunCalib, train_files: dict[str, Path], tmp_path: Path, key: str
) -> None:
    kept = {}
    for kind, path in train_files.items():
        out = tmp_path / f"{kind}.parquet"
        done = run_calib(
            [
                "resample",
                str(path),
                "-o",
                str(out),
                "--negative-rate",
                "0.3",
                "--key-col",
                key,
                "--seed",
                "11",
            ]
        )
        assert done.returncode == 0, done.stderr
        kept[kind] = [str(v) for v in pl.read_parquet(out)["id"].to_list()]
    assert kept["csv"] == kept["parquet"]


def test_keys_follow_the_documented_hash(
    run_calib: RunCalib, train_files: dict[str, Path], tmp_path: Path
) -> None:
    from calib_cli.core.sampling import hash_uint64_keys, rate_threshold

    out = tmp_path / "s.csv"
    done = run_calib(
        [
            "resample",
            str(train_files["csv"]),
            "-o",
            str(out),
            "--negative-rate",
            "0.25",
            "--key-col",
            "id",
            "--seed",
            "3",
        ]
    )
    assert done.returncode == 0, done.stderr
    source = pl.read_csv(train_files["csv"])
    hashes = hash_uint64_keys(source["id"].to_numpy().astype(np.uint64), seed=3)
    expected = (source["label"].to_numpy() == 1) | (hashes < np.uint64(rate_threshold(0.25)))
    assert pl.read_csv(out)["id"].to_list() == source["id"].to_numpy()[expected].tolist()


def test_target_rate_weights_strata_and_rates_file(
    run_calib: RunCalib, train_files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "s.parquet"
    done = run_calib(
        [
            "resample",
            str(train_files["csv"]),
            "-o",
            str(out),
            "--target-positive-rate",
            "0.25",
            "--weight-col-out",
            "iw",
        ]
    )
    assert done.returncode == 0, done.stderr
    sample = pl.read_parquet(out)
    assert abs(sample["label"].mean() - 0.25) < 0.03  # type: ignore[operator]
    record = json.loads(Path(f"{out}.sampling.json").read_text())
    w = record["params"]["negative_rate"]
    assert sorted(set(sample["iw"].to_list())) == [1.0, 1.0 / w]
    # Horvitz-Thompson: weighted negatives estimate the input's negatives
    negatives = record["fitted_on"]["before"]["negatives"]
    estimate = sample.filter(pl.col("label") == 0)["iw"].sum()
    assert abs(estimate - negatives) < 4 * math.sqrt(negatives * (1 - w) / w)

    rates = tmp_path / "rates.csv"
    rates.write_text("stratum,negative_rate\nnorth,0.05\nsouth,0.5\n")
    out2 = tmp_path / "strat.csv"
    done = run_calib(
        [
            "resample",
            str(train_files["csv"]),
            "-o",
            str(out2),
            "--strata-col",
            "region",
            "--rates-file",
            str(rates),
        ]
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(Path(f"{out2}.sampling.json").read_text())
    assert record["params"]["strata"] == {
        "north": {"negative_rate": 0.05, "positive_rate": 1.0},
        "south": {"negative_rate": 0.5, "positive_rate": 1.0},
    }
    sample = pl.read_csv(out2).filter(pl.col("label") == 0)
    counts = dict(sample.group_by("region").len().iter_rows())
    assert counts["south"] > 5 * counts["north"]


def test_stdout_needs_a_record_path(
    run_calib: RunCalib, train_files: dict[str, Path], tmp_path: Path
) -> None:
    done = run_calib(["resample", str(train_files["csv"]), "-o", "-", "--negative-rate", "0.1"])
    assert done.returncode == 2
    assert b"--record" in done.stderr
    record = tmp_path / "r.json"
    done = run_calib(
        [
            "resample",
            str(train_files["csv"]),
            "-o",
            "-",
            "--negative-rate",
            "0.1",
            "--record",
            str(record),
            "-q",
        ]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"user,id,x,label,region\n")
    assert json.loads(record.read_text())["fitted_on"]["output"] == "stdout"


def test_bad_labels_write_nothing(run_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "bad.csv"
    source.write_text("id,label\n1,0\n2,1\n3,maybe\n4,0\n")
    out = tmp_path / "out.csv"
    done = run_calib(["resample", str(source), "-o", str(out), "--negative-rate", "0.5"])
    assert done.returncode == 65
    assert done.stderr.decode() == (
        f"error: {source}: column 'label' has 1 value that is not a valid label (first at "
        "row 3: 'maybe'); name the positive value with --positive-label\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


def test_impossible_target_is_refused(
    run_calib: RunCalib, train_files: dict[str, Path], tmp_path: Path
) -> None:
    done = run_calib(
        [
            "resample",
            str(train_files["csv"]),
            "-o",
            str(tmp_path / "x.csv"),
            "--target-positive-rate",
            "0.001",
        ]
    )
    assert done.returncode == 65
    assert b"--target-positive-rate 0.001 is below" in done.stderr
    both = run_calib(
        [
            "resample",
            str(train_files["csv"]),
            "-o",
            str(tmp_path / "x.csv"),
            "--target-positive-rate",
            "0.2",
            "--negative-rate",
            "0.1",
        ]
    )
    assert both.returncode == 2


def test_unsigned_keys_follow_the_specification(run_calib: RunCalib, tmp_path: Path) -> None:
    from calib_cli.core.sampling import hash_uint64_keys, rate_threshold

    keys = np.array([2**63 + 5, 3, 2**64 - 1, 7, 11, 2**40], dtype=np.uint64)
    source = tmp_path / "u.parquet"
    pl.DataFrame({"id": keys, "label": [0] * 6}).write_parquet(source)
    out = tmp_path / "o.parquet"
    done = run_calib(
        [
            "resample",
            str(source),
            "-o",
            str(out),
            "--negative-rate",
            "0.5",
            "--key-col",
            "id",
            "--seed",
            "9",
            "-q",
        ]
    )
    assert done.returncode == 0, done.stderr
    kept = hash_uint64_keys(keys, seed=9) < np.uint64(rate_threshold(0.5))
    assert pl.read_parquet(out)["id"].to_list() == keys[kept].tolist()


def test_string_keys_and_row_numbers_follow_the_specification(
    run_calib: RunCalib, train_files: dict[str, Path], tmp_path: Path
) -> None:
    from calib_cli.core.sampling import (
        ClassRates,
        hash_row_numbers,
        hash_string_keys,
        keep_mask,
        row_thresholds,
        string_buffers,
    )

    source = pl.read_csv(train_files["csv"])
    thresholds = row_thresholds(source["label"].to_numpy(), ClassRates(negative_rate=0.2))
    for key, hashes in (
        ("user", hash_string_keys(*string_buffers(source["user"].to_numpy()), seed=5)),
        (None, hash_row_numbers(source.height, seed=5)),
    ):
        out = tmp_path / f"{key}.csv"
        args = ["--key-col", key] if key else []
        done = run_calib(
            [
                "resample",
                str(train_files["csv"]),
                "-o",
                str(out),
                "--negative-rate",
                "0.2",
                "--seed",
                "5",
                "-q",
                *args,
            ]
        )
        assert done.returncode == 0, done.stderr
        expected = source["id"].to_numpy()[keep_mask(hashes, thresholds)]
        assert pl.read_csv(out)["id"].to_list() == expected.tolist()


def test_positive_label_with_three_values_is_refused(run_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "abc.csv"
    source.write_text("id,label\n1,a\n2,b\n3,c\n")
    done = run_calib(
        [
            "resample",
            str(source),
            "-o",
            str(tmp_path / "o.csv"),
            "--negative-rate",
            "0.5",
            "--positive-label",
            "b",
        ]
    )
    assert done.returncode == 65
    assert b"3 distinct values" in done.stderr


def test_gzip_ndjson_output_streams(
    run_calib: RunCalib, train_files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "s.ndjson.gz"
    done = run_calib(
        ["resample", str(train_files["parquet"]), "-o", str(out), "--negative-rate", "0.1", "-q"]
    )
    assert done.returncode == 0, done.stderr
    assert pl.read_ndjson(gzip.decompress(out.read_bytes())).height > 0


def test_ndjson_gzip_is_byte_identical_and_pipes_need_a_record(
    run_calib: RunCalib, train_files: dict[str, Path], tmp_path: Path
) -> None:
    outputs = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.ndjson.gz"
        assert (
            run_calib(
                [
                    "resample",
                    str(train_files["csv"]),
                    "-o",
                    str(out),
                    "--negative-rate",
                    "0.3",
                    "-q",
                ]
            ).returncode
            == 0
        )
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = run_calib(
        ["resample", str(train_files["csv"]), "-o", str(fifo), "--negative-rate", "0.3"]
    )
    assert done.returncode == 2
    assert b"--record" in done.stderr


def test_label_value_messages_match_the_in_memory_ones(run_calib: RunCalib, tmp_path: Path) -> None:
    many = tmp_path / "many.csv"
    many.write_text("id,label\n" + "".join(f"{i},v{i % 50}\n" for i in range(200)))
    done = run_calib(
        [
            "resample",
            str(many),
            "-o",
            str(tmp_path / "o.csv"),
            "--negative-rate",
            "0.5",
            "--positive-label",
            "v1",
        ]
    )
    assert done.returncode == 65
    assert b"has 50 distinct values" in done.stderr
    missing = tmp_path / "m.csv"
    missing.write_text("id,label\n1,no\n2,yes\n3,\n")
    done = run_calib(
        [
            "resample",
            str(missing),
            "-o",
            str(tmp_path / "o.csv"),
            "--negative-rate",
            "0.5",
            "--positive-label",
            "yes",
        ]
    )
    assert done.returncode == 65
    assert b"first at row 3: empty" in done.stderr


def test_uint64_text_keys_keep_the_same_rows_as_parquet(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    keys = np.array([2**63 + 7 * i for i in range(300)] + [5, 2**64 - 1], dtype=np.uint64)
    frame = pl.DataFrame({"id": keys, "label": np.zeros(keys.size, dtype=np.int64)})
    frame.write_parquet(tmp_path / "k.parquet")
    frame.write_csv(tmp_path / "k.csv")
    kept = []
    for name in ("k.parquet", "k.csv"):
        out = tmp_path / f"out_{name}.parquet"
        assert (
            run_calib(
                [
                    "resample",
                    str(tmp_path / name),
                    "-o",
                    str(out),
                    "--negative-rate",
                    "0.5",
                    "--key-col",
                    "id",
                    "-q",
                ]
            ).returncode
            == 0
        )
        kept.append([str(v) for v in pl.read_parquet(out)["id"].to_list()])
    assert kept[0] == kept[1]
