"""The resample workflow in-process: the sample, its typed summary and its record."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib_cli import io
from calib_cli.artifacts import load_artifact
from calib_cli.core.sampling import (
    ClassRates,
    hash_row_numbers,
    hash_string_keys,
    hash_uint64_keys,
    keep_mask,
    rate_threshold,
    row_thresholds,
    string_buffers,
)
from calib_cli.errors import InputError, UsageError
from calib_cli.report.payloads import resample_payload
from calib_cli.workflows.resample import ResampleRequest, run_resample


def _write(tmp_path: Path, n: int = 2000, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    frame = pl.DataFrame(
        {
            "id": rng.permutation(n) * 7 + 11,
            "group": rng.choice(["a", "b"], n),
            "label": (rng.random(n) < 0.1).astype(np.int64),
        }
    )
    path = tmp_path / "train.csv"
    frame.write_csv(path)
    return path


def test_the_sample_keeps_the_rows_the_core_rule_keeps(tmp_path: Path) -> None:
    source, out = _write(tmp_path), tmp_path / "out.csv"
    request = ResampleRequest(
        file=str(source), output=str(out), negative_rate=0.25, key_col="id", seed=9
    )
    result = run_resample(request)
    frame, kept = pl.read_csv(source), pl.read_csv(out)
    keys = frame["id"].to_numpy().astype(np.uint64)
    expected = (frame["label"].to_numpy() == 1) | (
        hash_uint64_keys(keys, seed=9) < np.uint64(rate_threshold(0.25))
    )
    assert kept["id"].to_list() == frame["id"].to_numpy()[expected].tolist()
    summary = result.summary
    assert not summary.stratified
    assert (summary.before.rows, summary.after.rows) == (frame.height, kept.height)
    assert summary.after.positives == summary.before.positives  # positives all kept
    assert summary.rates.negative_rate == 0.25


def test_the_record_is_saved_beside_the_output_and_matches_the_result(tmp_path: Path) -> None:
    source, out = _write(tmp_path), tmp_path / "out.parquet"
    result = run_resample(
        ResampleRequest(
            file=str(source),
            output=str(out),
            target_positive_rate=0.3,
            strata_col="group",
            key_col="id",
            weight_col_out="w",
        )
    )
    assert result.record_path == f"{out}.sampling.json"
    record = load_artifact(result.record_path, kinds=("sampling",))
    assert record.params == result.record.params
    assert set(record.params["strata"]) == {"a", "b"}
    assert [s.stratum for s in result.summary.strata] == ["a", "b"]
    for stratum in result.summary.strata:
        assert stratum.after.base_rate == pytest.approx(0.3, abs=0.1)
    payload = resample_payload(result)
    assert list(payload)[:2] == ["record", "hash"]
    assert payload["strata"]["a"]["after"]["rows"] == result.summary.strata[0].after.rows  # type: ignore[index,call-overload]
    assert "w" in pl.read_parquet(out).columns


def test_a_sample_on_stdout_needs_a_record_path(tmp_path: Path) -> None:
    source = _write(tmp_path)
    with pytest.raises(UsageError, match="needs --record PATH"):
        run_resample(ResampleRequest(file=str(source), output="-", negative_rate=0.5))
    assert not list(tmp_path.glob("*.json"))


# ------------------------------------------ which rows are kept, reruns and refusals (moved
# here from test_cli_resample.py, which keeps one end-to-end run per behaviour)


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


def test_same_seed_same_bytes_other_seed_other_rows(
    train_files: dict[str, Path], tmp_path: Path
) -> None:
    outputs = {}
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        for suffix in ("csv", "parquet", "ndjson.gz"):
            out = tmp_path / f"{name}.{suffix}"
            run_resample(
                ResampleRequest(
                    file=str(train_files["parquet"]),
                    output=str(out),
                    negative_rate=0.2,
                    key_col="user",
                    seed=seed,
                )
            )
            outputs[name, suffix] = out.read_bytes()
    for suffix in ("csv", "parquet", "ndjson.gz"):
        assert outputs["a", suffix] == outputs["b", suffix]
    assert outputs["a", "csv"] != outputs["c", "csv"]


@pytest.mark.parametrize("key", ["id", "user"])
def test_csv_and_parquet_keep_the_same_keys(
    train_files: dict[str, Path], tmp_path: Path, key: str
) -> None:
    kept = {}
    for kind, path in train_files.items():
        out = tmp_path / f"{kind}.parquet"
        run_resample(
            ResampleRequest(
                file=str(path), output=str(out), negative_rate=0.3, key_col=key, seed=11
            )
        )
        kept[kind] = [str(v) for v in pl.read_parquet(out)["id"].to_list()]
    assert kept["csv"] == kept["parquet"]


def test_keys_follow_the_documented_hash(train_files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "s.csv"
    run_resample(
        ResampleRequest(
            file=str(train_files["csv"]), output=str(out), negative_rate=0.25, key_col="id", seed=3
        )
    )
    source = pl.read_csv(train_files["csv"])
    hashes = hash_uint64_keys(source["id"].to_numpy().astype(np.uint64), seed=3)
    expected = (source["label"].to_numpy() == 1) | (hashes < np.uint64(rate_threshold(0.25)))
    assert pl.read_csv(out)["id"].to_list() == source["id"].to_numpy()[expected].tolist()


@pytest.mark.parametrize("key", ["user", None])
def test_string_keys_and_row_numbers_follow_the_specification(
    train_files: dict[str, Path], tmp_path: Path, key: str | None
) -> None:
    source = pl.read_csv(train_files["csv"])
    thresholds = row_thresholds(source["label"].to_numpy(), ClassRates(negative_rate=0.2))
    if key is None:
        hashes = hash_row_numbers(source.height, seed=5)
    else:
        hashes = hash_string_keys(*string_buffers(source[key].to_numpy()), seed=5)
    out = tmp_path / f"{key}.csv"
    run_resample(
        ResampleRequest(
            file=str(train_files["csv"]), output=str(out), negative_rate=0.2, key_col=key, seed=5
        )
    )
    expected = source["id"].to_numpy()[keep_mask(hashes, thresholds)]
    assert pl.read_csv(out)["id"].to_list() == expected.tolist()


def test_unsigned_keys_follow_the_specification(tmp_path: Path) -> None:
    keys = np.array([2**63 + 5, 3, 2**64 - 1, 7, 11, 2**40], dtype=np.uint64)
    source = tmp_path / "u.parquet"
    pl.DataFrame({"id": keys, "label": [0] * 6}).write_parquet(source)
    out = tmp_path / "o.parquet"
    run_resample(
        ResampleRequest(file=str(source), output=str(out), negative_rate=0.5, key_col="id", seed=9)
    )
    kept = hash_uint64_keys(keys, seed=9) < np.uint64(rate_threshold(0.5))
    assert pl.read_parquet(out)["id"].to_list() == keys[kept].tolist()


def test_uint64_text_keys_keep_the_same_rows_as_parquet(tmp_path: Path) -> None:
    keys = np.array([2**63 + 7 * i for i in range(300)] + [5, 2**64 - 1], dtype=np.uint64)
    frame = pl.DataFrame({"id": keys, "label": np.zeros(keys.size, dtype=np.int64)})
    frame.write_parquet(tmp_path / "k.parquet")
    frame.write_csv(tmp_path / "k.csv")
    kept = []
    for name in ("k.parquet", "k.csv"):
        out = tmp_path / f"out_{name}.parquet"
        run_resample(
            ResampleRequest(
                file=str(tmp_path / name), output=str(out), negative_rate=0.5, key_col="id"
            )
        )
        kept.append([str(v) for v in pl.read_parquet(out)["id"].to_list()])
    assert kept[0] == kept[1]


def test_impossible_target_is_refused_before_any_output(
    train_files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "x.csv"
    source = str(train_files["csv"])
    with pytest.raises(InputError) as error:
        run_resample(ResampleRequest(file=source, output=str(out), target_positive_rate=0.001))
    assert error.value.exit_code == 65
    assert str(error.value) == (
        "--target-positive-rate 0.001 is below what keeping every negative gives (0.03285; "
        "the input's positive rate is 0.03285); sampling negatives can only raise it (lower "
        "--positive-rate to reach it)"
    )
    with pytest.raises(UsageError) as usage:
        run_resample(
            ResampleRequest(
                file=source, output=str(out), target_positive_rate=0.2, negative_rate=0.1
            )
        )
    assert usage.value.exit_code == 2
    assert str(usage.value) == (
        "give exactly one of --negative-rate, --target-positive-rate, --target-ratio "
        "(got --negative-rate and --target-positive-rate)"
    )
    assert not out.exists() and not Path(f"{out}.sampling.json").exists()


@pytest.mark.parametrize(
    ("rows", "positive_label", "message", "in_memory_too"),
    [
        (
            "1,a\n2,b\n3,c\n",
            "b",
            "column 'label' has 3 distinct values ('a', 'b', 'c'); labels must take two values",
            "3 distinct values",
        ),
        (
            "".join(f"{i},v{i % 50}\n" for i in range(200)),
            "v1",
            "column 'label' has 50 distinct values ('v0', 'v1', 'v10', 'v11', 'v12', ...); "
            "labels must take two values",
            "has 50 distinct values",
        ),
        (  # a typo or the wrong case made every row a negative, and sampled the positives
            "1,fraud\n2,ok\n3,ok\n",
            "Fraud",
            "column 'label' never equals --positive-label 'Fraud'",
            "never equals --positive-label 'Fraud'",
        ),
        (
            "1,no\n2,yes\n3,\n",
            "yes",
            "column 'label' has 1 value missing (first at row 3: empty)",
            "1 value missing",
        ),
    ],
)
def test_label_values_are_refused_as_in_memory_before_any_output(
    tmp_path: Path, rows: str, positive_label: str, message: str, in_memory_too: str
) -> None:
    source = tmp_path / "labels.csv"
    source.write_text("id,label\n" + rows)
    out = tmp_path / "o.csv"
    with pytest.raises(InputError) as error:
        run_resample(
            ResampleRequest(
                file=str(source), output=str(out), negative_rate=0.5, positive_label=positive_label
            )
        )
    assert error.value.exit_code == 65
    assert str(error.value) == f"{source}: {message}"
    assert not out.exists()
    # the in-memory check of a label column (recalibrate, reliability) names the same fault
    with pytest.raises(InputError, match=re.escape(in_memory_too)):
        io.read_table(str(source)).labels("label", positive_label=positive_label)


def test_a_missing_label_is_not_told_to_name_a_positive_value(tmp_path: Path) -> None:
    """--positive-label names one of two values present; it cannot fill an empty cell."""
    source = tmp_path / "labels.csv"
    source.write_text("id,label\n1,0\n2,1\n3,\n4,\n")
    out = tmp_path / "o.csv"
    with pytest.raises(InputError) as error:
        run_resample(ResampleRequest(file=str(source), output=str(out), negative_rate=0.5))
    assert str(error.value) == (
        f"{source}: column 'label' has 2 values missing (first at row 3: empty)"
    )
    source.write_text("id,label\n1,0\n2,1\n3,maybe\n")
    with pytest.raises(InputError) as error:
        run_resample(ResampleRequest(file=str(source), output=str(out), negative_rate=0.5))
    assert str(error.value).endswith(
        "(first at row 3: 'maybe'); name the positive value with --positive-label"
    )


@pytest.mark.parametrize(
    ("rates", "message"),
    [
        (
            "stratum,negative_rate\na,0.5\nb,0.2\nb,0.3\n",
            "stratum 'b' has 2 rows; give each stratum one row",
        ),
        (
            "stratum,negative_rate\na,0.5\nb,1.5\n",
            "stratum 'b': column 'negative_rate' must be a rate in (0, 1], got 1.5",
        ),
        (
            "stratum,negative_rate,positive_rate\na,0.5,0\nb,0.5,1\n",
            "stratum 'a': column 'positive_rate' must be a rate in (0, 1], got 0.0",
        ),
    ],
)
def test_a_rates_file_is_bad_input_naming_its_row_and_column(
    tmp_path: Path, rates: str, message: str
) -> None:
    """A stratum twice was a usage error (exit 2) with no stratum named, and a rate above 1
    was blamed on --negative-rate, an option not given."""
    source = tmp_path / "rows.csv"
    source.write_text(
        "stratum,label\n" + "".join(f"{'ab'[i % 2]},{i % 3 == 0:d}\n" for i in range(30))
    )
    table = tmp_path / "rates.csv"
    table.write_text(rates)
    with pytest.raises(InputError) as error:
        run_resample(
            ResampleRequest(
                file=str(source),
                output=str(tmp_path / "o.csv"),
                strata_col="stratum",
                rates_file=str(table),
            )
        )
    assert error.value.exit_code == 65
    assert str(error.value) == f"{table}: {message}"
