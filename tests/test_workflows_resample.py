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
    hash_keys,
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


def test_a_stratum_without_rates_names_the_rates_file_and_its_rows(tmp_path: Path) -> None:
    """It said "the rates table has no rates for strata 'c'": neither which file nor how much
    data the stratum holds."""
    source = tmp_path / "rows.csv"
    strata = ["a", "b", "c", "c", "b", "c", "a"]
    source.write_text("stratum,label\n" + "".join(f"{s},{i % 2}\n" for i, s in enumerate(strata)))
    table = tmp_path / "rates.csv"
    table.write_text("stratum,negative_rate\na,0.5\nb,0.2\n")
    out = tmp_path / "o.csv"
    with pytest.raises(InputError) as error:
        run_resample(
            ResampleRequest(
                file=str(source), output=str(out), strata_col="stratum", rates_file=str(table)
            )
        )
    assert error.value.exit_code == 65
    assert str(error.value) == f"{table} has no rates for stratum 'c' (3 rows to sample)"
    assert not out.exists()


def test_missing_keys_are_refused_naming_the_first_row(tmp_path: Path) -> None:
    """Missing keys are counted and the first named by its row, as every bad value is (it
    said "column 'id' has 2 missing keys")."""
    out = tmp_path / "o.csv"
    for name, frame in (
        ("k.csv", "id,label\n10,0\n11,1\n12,0\n,1\n14,0\n,0\n"),
        ("k.parquet", None),
    ):
        source = tmp_path / name
        if frame is None:  # integer keys with nulls, the 4th and 6th rows
            pl.DataFrame(
                {"id": [10, 11, 12, None, 14, None], "label": [0, 1, 0, 1, 0, 0]}
            ).write_parquet(source)
        else:
            source.write_text(frame)
        with pytest.raises(InputError) as error:
            run_resample(
                ResampleRequest(file=str(source), output=str(out), negative_rate=0.5, key_col="id")
            )
        assert error.value.exit_code == 65
        assert str(error.value) == (
            f"{source}: column 'id' has 2 values missing (first at row 4: empty); --key-col "
            "needs a key on every row"
        )
    assert not out.exists()


# ------------------------- each key by its own text (calib-hash64-v2), strata by their text


def _ids_and_labels(tmp_path: Path, ids: list[str], name: str = "k.csv") -> Path:
    rng = np.random.default_rng(3)
    labels = (rng.random(len(ids)) < 0.2).astype(np.int64)
    path = tmp_path / name
    path.write_text("id,label\n" + "".join(f"{i},{y}\n" for i, y in zip(ids, labels, strict=True)))
    return path


def _kept_ids(source: Path, out: Path, **options: object) -> list[str]:
    run_resample(
        ResampleRequest(file=str(source), output=str(out), key_col="id", **options)  # type: ignore[arg-type]
    )
    return pl.read_csv(out, infer_schema=False)["id"].to_list()


def test_one_text_id_redraws_no_other_key(tmp_path: Path) -> None:
    """A daily job whose file gains one id "X1": every other row keeps its decision (under
    calib-hash64-v1 the text id made every key hash as text, and 2/3 of the sample changed),
    and the integer ids keep the hashes of the integers (the same rows as before the change)."""
    ids = [str(i) for i in range(1, 1001)]
    plain = _ids_and_labels(tmp_path, ids, "plain.csv")
    grown = _ids_and_labels(tmp_path, [*ids, "X1"], "grown.csv")  # the same labels, one row more
    options = {"negative_rate": 0.3, "seed": 0}
    before = _kept_ids(plain, tmp_path / "a.csv", **options)
    after = _kept_ids(grown, tmp_path / "b.csv", **options)
    assert [i for i in after if i != "X1"] == before
    frame = pl.read_csv(plain)
    hashes = hash_uint64_keys(frame["id"].to_numpy(), seed=0)
    expected = (frame["label"].to_numpy() == 1) | (hashes < np.uint64(rate_threshold(0.3)))
    assert before == [str(i) for i in frame["id"].to_numpy()[expected]]


def test_zero_padded_ids_are_keys_of_their_own(tmp_path: Path) -> None:
    """Keys "007" and "7" are two keys (v1 stripped and parsed "007" as 7): each row follows
    hash_keys of its own text, and a column of "007"-style ids draws another sample."""
    padded = [f"{i:03d}" for i in range(400)]
    plain = [str(i) for i in range(400)]
    both = _ids_and_labels(tmp_path, [*padded, *plain])
    out = tmp_path / "o.csv"
    kept = _kept_ids(both, out, negative_rate=0.5, seed=4)
    frame = pl.read_csv(both, infer_schema=False)
    labels = frame["label"].cast(pl.Int64).to_numpy()
    hashes = hash_keys(frame["id"].to_list(), seed=4)
    expected = (labels == 1) | (hashes < np.uint64(rate_threshold(0.5)))
    assert kept == [i for i, keep in zip(frame["id"].to_list(), expected, strict=True) if keep]
    keep_padded = [i.lstrip("0") or "0" for i in kept if len(i) == 3 and i.startswith("0")]
    keep_plain = [i for i in kept if not (len(i) == 3 and i.startswith("0"))]
    assert keep_padded != [i for i in keep_plain if int(i) < 100]


def test_csv_text_parquet_integers_and_sql_text_are_one_key(tmp_path: Path) -> None:
    """7 in Parquet and "7" in CSV keep the same rows; key_type is the column's type."""
    ids = np.arange(-500, 1500) * 7919
    labels = (np.random.default_rng(1).random(ids.size) < 0.1).astype(np.int64)
    frame = pl.DataFrame({"id": ids, "label": labels})
    frame.write_parquet(tmp_path / "k.parquet")
    frame.write_csv(tmp_path / "k.csv")
    kept, types = [], []
    for name in ("k.parquet", "k.csv"):
        out = tmp_path / f"o_{name}.csv"
        result = run_resample(
            ResampleRequest(file=str(tmp_path / name), output=str(out), negative_rate=0.3,
                            key_col="id", seed=2)
        )  # fmt: skip
        kept.append(pl.read_csv(out)["id"].to_list())
        types.append(result.record.params["key_type"])
    assert kept[0] == kept[1]
    assert types == ["integer", "string"]


def test_strata_keep_their_text_in_a_typed_output(tmp_path: Path) -> None:
    """Strata "1", "1.0" and "2" are three strata in every output format: a Parquet output
    made the column Float64, so "1" and "1.0" became one stratum named "1.0", and "2" "2.0"."""
    source = tmp_path / "s.csv"
    source.write_text(
        "g,label\n" + "".join(f"{('1', '1.0', '2')[i % 3]},{int(i % 5 == 0)}\n" for i in range(300))
    )
    strata = []
    for suffix in ("csv", "parquet"):
        out = tmp_path / f"o.{suffix}"
        result = run_resample(
            ResampleRequest(file=str(source), output=str(out), target_positive_rate=0.4,
                            strata_col="g", seed=1)
        )  # fmt: skip
        strata.append({s.stratum: s.before.rows for s in result.summary.strata})
    assert strata[0] == strata[1] == {"1": 100, "1.0": 100, "2": 100}
    assert pl.read_parquet(tmp_path / "o.parquet")["g"].dtype == pl.String
    # strata that are all integers' texts are integers in a typed output, named as in CSV
    source.write_text("g,label\n" + "".join(f"{i % 3},{int(i % 5 == 0)}\n" for i in range(300)))
    out = tmp_path / "i.parquet"
    result = run_resample(
        ResampleRequest(file=str(source), output=str(out), target_positive_rate=0.4,
                        strata_col="g", seed=1)
    )  # fmt: skip
    assert [s.stratum for s in result.summary.strata] == ["0", "1", "2"]
    assert pl.read_parquet(out)["g"].dtype == pl.Int64
