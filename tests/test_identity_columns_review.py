"""Identity columns, from a user review: the values that name groups (``--by``), batches
(``--batch-col``), strata (``--strata-col``) and keys (``--key-col``) keep their text, by one
rule in every engine (calib_cli/io/identity.py), and a key's hash depends on that key alone
(calib-hash64-v2, calib_cli/core/sampling.py).

What the review found (calib 0.1.0): a CSV column ``g`` of "1" and "1.0" made one group 1 in
memory and two groups both headed 1.0 when streamed (``--engine auto`` streams above 2M rows,
so a cron job's groups changed as its file grew); "007" and "7" were one group or batch; the
zip code "02134" was reported as 2134; and one text id among integer ids ("X1") made
``resample --key-col`` hash every key as text, re-drawing two thirds of a daily sample.

Every test runs the command line in-process (``invoke_calib``: the same arguments, environment
and file descriptors as the installed ``calib``, without its start-up), in both engines where
there are two.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest

from tests.conftest import SAMPLE_DATA, RunCalib

#: Group texts of the review: two texts are two groups; an integer's text is the number.
GROUP_TEXTS = ["1", "1.0", "007", "7", "02134", "10", "9"]
#: How a report shows them, in order: by value (ties by text), as calib_cli/io/identity.py.
GROUP_VALUES = [1, "1.0", "007", 7, 9, 10, "02134"]


def _scored_csv(path: Path, column: str, texts: list[str], n: int = 4200) -> Path:
    rng = np.random.default_rng(11)
    score = rng.uniform(0.02, 0.98, n)
    label = (rng.random(n) < score).astype(np.int64)
    rows = [
        f"{s:.6f},{y},{texts[i % len(texts)]}"
        for i, (s, y) in enumerate(zip(score, label, strict=True))
    ]
    path.write_text(f"score,label,{column}\n" + "\n".join(rows) + "\n")
    return path


def _json(done: Any) -> Any:
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def _reliability(invoke_calib: RunCalib, path: Path, *args: str) -> list[dict[str, Any]]:
    report: list[dict[str, Any]] = _json(
        invoke_calib(["reliability", str(path), "--by", "g", "--json", "-q", *args])
    )
    return report


# ----------------------------------------------------------------- groups: reliability --by


def test_csv_groups_keep_their_text_in_memory(invoke_calib: RunCalib, tmp_path: Path) -> None:
    """Groups "1" and "1.0" are two (were one, 1.0, of all their rows), "007" is not 7,
    "02134" keeps its zero; integers' texts are numbers, everything ordered by value."""
    path = _scored_csv(tmp_path / "g.csv", "g", GROUP_TEXTS)
    report = _reliability(invoke_calib, path, "--engine", "memory")
    assert [entry["group"] for entry in report] == [None, *GROUP_VALUES]
    assert [entry["n"] for entry in report[1:]] == [600] * len(GROUP_TEXTS)


@pytest.mark.parametrize("engine", ["streaming", "summary"])
def test_both_engines_and_summaries_report_the_same_groups(
    invoke_calib: RunCalib, tmp_path: Path, engine: str
) -> None:
    """The streaming engine (and --from-summary) report the groups, their rows and figures
    of the in-memory engine: ``--engine auto`` may switch engines as a file grows."""
    path = _scored_csv(tmp_path / "g.csv", "g", GROUP_TEXTS)
    memory = _reliability(invoke_calib, path, "--engine", "memory")
    if engine == "streaming":
        other = _reliability(invoke_calib, path, "--engine", "streaming")
    else:
        summary = tmp_path / "g.summary.parquet"
        done = invoke_calib(["summarize", str(path), "--by", "g", "-o", str(summary), "-q"])
        assert done.returncode == 0, done.stderr.decode()
        other = _json(
            invoke_calib(["reliability", "--from-summary", str(summary), "--by", "g", "--json"])
        )
    assert [e["group"] for e in other] == [e["group"] for e in memory]
    for mine, theirs in zip(memory, other, strict=True):
        assert (theirs["n"], theirs["positives"]) == (mine["n"], mine["positives"])
        for figure in ("base_rate", "mean_score", "log_loss", "brier", "ece"):
            assert theirs[figure] == pytest.approx(mine[figure], rel=1e-9), figure


# ---------------------------------------------------------- batches: estimate-shift --batch-col


def _batches(invoke_calib: RunCalib, path: Path, column: str, *args: str) -> list[tuple[Any, int]]:
    report = _json(
        invoke_calib(
            ["estimate-shift", "--reference", str(path), "--target", str(path),
             "--batch-col", column, "--bootstrap", "0", "--json", "-q", *args]
        )
    )  # fmt: skip
    return [(batch["batch"], batch["n"]) for batch in report["batches"]]


WEEKS = [f"{w:02d}" for w in range(1, 13)]  # "01" ... "12": zero-padded weeks


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_batches_keep_their_text_and_order_by_value(
    invoke_calib: RunCalib, tmp_path: Path, engine: str
) -> None:
    """Batches "007" and "7" are two batches (were one, 7); weeks order by value: "9" before "10",
    "09" before 10, in both engines."""
    mixed = _scored_csv(tmp_path / "b.csv", "b", GROUP_TEXTS)
    assert _batches(invoke_calib, mixed, "b", "--engine", engine) == [
        (value, 600) for value in GROUP_VALUES
    ]
    weeks = _scored_csv(tmp_path / "w.csv", "week", WEEKS, n=2400)
    expected = [(w if w.startswith("0") else int(w), 200) for w in WEEKS]
    assert _batches(invoke_calib, weeks, "week", "--engine", engine) == expected


# -------------------------------------------------- strata and batches in a typed output


def test_resample_strata_keep_their_text_in_a_parquet_output(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """A Parquet output made a CSV strata column of "1", "1.0" and "2" floats: "1" and "1.0"
    became one stratum "1.0" and "2" became "2.0", unlike the same run with a CSV output."""
    path = _scored_csv(tmp_path / "s.csv", "g", ["1", "1.0", "2"], n=900)
    strata = []
    for out in ("o.csv", "o.parquet"):
        report = _json(
            invoke_calib(
                ["resample", str(path), "-o", str(tmp_path / out), "--strata-col", "g",
                 "--target-positive-rate", "0.6", "--report", "-", "-q"]
            )
        )  # fmt: skip
        strata.append({name: s["before"]["rows"] for name, s in report["strata"].items()})
    assert strata[0] == strata[1] == {"1": 300, "1.0": 300, "2": 300}


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_typed_outputs_keep_strata_and_batches(
    invoke_calib: RunCalib, tmp_path: Path, engine: str
) -> None:
    """rerank-strata and estimate-shift with a Parquet output report the strata and batches
    of a CSV output (before: "2.0" for "2", "1" and "1.0" merged or refused)."""
    path = _scored_csv(tmp_path / "s.csv", "g", ["1", "1.0", "2"], n=900)
    for suffix in ("csv", "parquet"):
        out = str(tmp_path / f"r.{suffix}")
        report = _json(
            invoke_calib(
                ["rerank-strata", "--reference", str(path), "--target", str(path), "-o", out,
                 "--strata-col", "g", "--engine", engine, "--report", "-", "-q"]
            )
        )  # fmt: skip
        assert [(s["stratum"], s["rows"]) for s in report["strata"]] == [
            ("1", 300), ("1.0", 300), ("2", 300),
        ]  # fmt: skip
        out = str(tmp_path / f"e.{suffix}")
        batches = _batches(invoke_calib, path, "g", "--engine", engine, "-o", out)
        assert batches == [(1, 300), ("1.0", 300), (2, 300)]


# ------------------------------------------------------------- keys: resample --key-col

MOD = 2**64


def _mix64(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) % MOD
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % MOD
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % MOD
    return z ^ (z >> 31)


def _key_value(key: str) -> int:
    """The spec's key value of a text key, written independently of calib's code: the integer
    when Python writes it back as the same text (and it fits 64 bits), else FNV-1a."""
    try:
        number = int(key)
    except ValueError:
        number = None
    if number is not None and str(number) == key and -(2**63) <= number < MOD:
        return number % MOD
    h = 0xCBF29CE484222325
    for byte in key.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) % MOD
    return h


def _expected_ids(ids: list[str], labels: list[int], rate: float, seed: int) -> list[str]:
    threshold = Fraction(rate) * MOD
    return [
        key
        for key, label in zip(ids, labels, strict=True)
        if label == 1 or _mix64(_key_value(key) ^ _mix64(seed)) < threshold
    ]


def _resample(invoke_calib: RunCalib, source: Path, out: Path, *args: str) -> list[str]:
    done = invoke_calib(
        ["resample", str(source), "-o", str(out), "--key-col", "id", "--negative-rate", "0.3",
         "-q", *args]
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return pl.read_csv(out, infer_schema=False)["id"].to_list()


def test_one_text_id_redraws_no_other_row(invoke_calib: RunCalib, tmp_path: Path) -> None:
    """The review's case: the first 1,000 rows of sample_data/train.csv, then the same rows
    and one id "X1": the sample of the 1,000 is the same (it kept 113 of ~322 rows), and it is
    the rows the integer ids drew before (integers keep their hashes)."""
    lines = (SAMPLE_DATA / "train.csv").read_text().splitlines()
    header, rows = lines[0], lines[1:1001]
    assert header.split(",")[0] == "id" and header.split(",")[-1] == "label"
    plain, grown = tmp_path / "day1.csv", tmp_path / "day2.csv"
    plain.write_text("\n".join([header, *rows]) + "\n")
    extra = ",".join(["X1", *rows[0].split(",")[1:]])
    grown.write_text("\n".join([header, *rows, extra]) + "\n")
    before = _resample(invoke_calib, plain, tmp_path / "s1.csv")
    after = _resample(invoke_calib, grown, tmp_path / "s2.csv")
    assert [key for key in after if key != "X1"] == before
    ids = [row.split(",")[0] for row in rows]
    labels = [int(row.split(",")[-1]) for row in rows]
    assert before == _expected_ids(ids, labels, 0.3, seed=0)
    record = json.loads(Path(f"{tmp_path / 's2.csv'}.sampling.json").read_text())
    assert record["params"]["key_type"] == "string"  # a CSV key column is text, every day


def test_each_key_hashes_by_its_own_text_in_calib_and_in_duckdb(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """Key "7" in CSV and 7 in Parquet are one key; "007", " 7" and "+7" are keys of their own;
    the rows kept follow the specification key by key, and the SQL of --emit-sql keeps the
    same rows in DuckDB from the same text."""
    rng = np.random.default_rng(2)
    numbers = [str(i) for i in range(-300, 900)]
    others = ["007", " 7", "+7", "-0", "X1", "1.0", "02134", "9223372036854775808"]
    ids = [*numbers, *others]
    labels = [int(x) for x in (rng.random(len(ids)) < 0.2)]
    source = tmp_path / "k.csv"
    source.write_text(
        "n,id,label\n"
        + "".join(f'{n},"{i}",{y}\n' for n, (i, y) in enumerate(zip(ids, labels, strict=True)))
    )
    kept = _resample(invoke_calib, source, tmp_path / "o.csv", "--seed", "5")
    assert kept == _expected_ids(ids, labels, 0.3, seed=5)
    # integer ids from Parquet keep the rows their text keeps from CSV
    typed = tmp_path / "k.parquet"
    pl.DataFrame({"id": [int(i) for i in numbers], "label": labels[: len(numbers)]}).write_parquet(
        typed
    )
    done = invoke_calib(
        ["resample", str(typed), "-o", str(tmp_path / "p.csv"), "--key-col", "id",
         "--negative-rate", "0.3", "--seed", "5", "-q"]
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    from_parquet = pl.read_csv(tmp_path / "p.csv", infer_schema=False)["id"].to_list()
    assert from_parquet == [key for key in kept if key in set(numbers)]
    # the emitted SQL, run in DuckDB on the CSV read as text
    sql = invoke_calib(
        ["resample", "--emit-sql", "--dialect", "duckdb", "--table", "t", "--key-col", "id",
         "--negative-rate", "0.3", "--seed", "5"]
    )  # fmt: skip
    assert sql.returncode == 0, sql.stderr.decode()
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT * FROM read_csv('{source}', all_varchar = true)")
    query = f"SELECT id FROM ({sql.stdout.decode()}) AS s ORDER BY CAST(n AS INTEGER)"
    got = con.execute(query).fetchall()
    assert [row[0] for row in got] == kept


def test_the_record_names_the_new_rule(invoke_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "k.csv"
    source.write_text("id,label\n" + "".join(f"{i},{i % 2}\n" for i in range(50)))
    _resample(invoke_calib, source, tmp_path / "o.csv")
    record = json.loads(Path(f"{tmp_path / 'o.csv'}.sampling.json").read_text())
    assert record["params"]["hash"] == "calib-hash64-v2"
