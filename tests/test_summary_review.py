"""Fixes from a user review of summaries, each checked where the user saw the bug: the
``calib`` command line, run in-process (``invoke_calib``: the same arguments, environment and
file descriptors as the installed command), and DuckDB in-process for the engine's side, as
in test_sql_summary.py.

1. The positive-label rule is recorded in every summary (``calib summarize``, and the engine's
   ``--emit-sql`` query), summaries of different rules are refused together, and a refinement
   summary must read the labels by its summary's rule.
2. An empty file or engine partition: ``summarize`` writes a summary of no rows (a warning
   says so), and readers of several summaries leave out an engine's file of no rows.
3. ``summarize -o`` refuses, before any work, a name it cannot write a summary under.
4. Every summary-reading option takes a directory of part files or a quoted glob.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest

from calib_cli import io
from calib_cli.errors import InputError
from calib_cli.sql.summary import SummaryQuery, summary_metadata, summary_sql
from calib_cli.summaries import ScoreSummary, merge_summaries, summarize_arrays
from calib_cli.workflows.summarize import load_summaries
from tests.conftest import RunCalib
from tests.test_workflows_summarize import BAD_ROWS, EXACT, close, same_summary, summarize

#: How the default rule and ``--positive-label 0`` show in messages.
DEFAULT_RULE = "null (the default rule: label 1 or true is positive)"
ZERO_RULE = "'0' (label '0' is positive)"


def _rows(path: Path, *, seed: int = 3, n: int = 6000, text_labels: bool = False) -> Path:
    """Scored rows: a continuous score and a 0/1 label (``Y``/``N`` with ``text_labels``)."""
    rng = np.random.default_rng(seed)
    score = rng.beta(2.0, 5.0, n)
    label = (rng.random(n) < score).astype(np.int64)
    values: Any = np.where(label == 1, "Y", "N") if text_labels else label
    pl.DataFrame({"score": score, "label": values}).write_parquet(path)
    return path


def _in_duckdb(sql: str, rows: Path, out: Path, *, where: str = "TRUE") -> Path:
    """``sql`` run in DuckDB on the view ``t`` of ``rows`` (those matching ``where``), its
    result saved as Spark saves one: Parquet without key-value metadata."""
    con = duckdb.connect()
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{rows}') WHERE {where}")
    con.execute(f"COPY ({sql}) TO '{out}' (FORMAT parquet)")
    return out


def _ok(done: subprocess.CompletedProcess[bytes]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


def _knots(model: Path) -> tuple[list[float], list[float]]:
    params = json.loads(model.read_text())["params"]
    return params["x_knots"], params["y_knots"]


# ----------------------------------------------------------------- 1. the positive label


def test_summaries_record_their_positive_label_native_and_in_the_engine(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    rows = _rows(tmp_path / "rows.parquet")
    native = tmp_path / "zero.parquet"
    _ok(invoke_calib(["summarize", str(rows), "--positive-label", " 0 ", "-o", str(native), "-q"]))
    meta = json.loads(pl.read_parquet_metadata(native)["calib.summary"])
    assert meta["positive_label"] == "0"  # trimmed, as both engines compare it
    default = summarize(rows, output=tmp_path / "default.json")
    assert json.loads(default.read_text())["positive_label"] is None
    # the engine's query records it in its metadata column, and computes the same summary
    sql = tmp_path / "summary.sql"
    _ok(invoke_calib(["summarize", "--emit-sql", "--dialect", "duckdb", "--table", "t",
                      "--positive-label", "0", "-o", str(sql)]))  # fmt: skip
    engine = _in_duckdb(sql.read_text(), rows, tmp_path / "engine.parquet")
    (column,) = set(pl.read_parquet(engine)["calib_summary"].to_list())
    assert json.loads(column)["positive_label"] == "0"
    assert io.read_summary(str(engine)).metadata() == io.read_summary(str(native)).metadata()
    # a file written before the field existed reads as the default rule
    old = json.loads(default.read_text())
    del old["positive_label"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert io.read_summary(str(tmp_path / "old.json")).positive_label is None


def test_summaries_whose_labels_mean_different_things_are_not_merged(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """The reviewer's AUC of 0.501: a default summary and a ``--positive-label 0`` one merged.
    Refused (exit 65), naming both files and both rules; from the engine's query too."""
    rows = _rows(tmp_path / "rows.parquet")
    default = summarize(rows, output=tmp_path / "default.parquet")
    zero = summarize(rows, output=tmp_path / "zero.parquet", positive_label="0")
    done = invoke_calib(["reliability", "--from-summary", str(default), str(zero)])
    assert done.returncode == 65 and done.stdout == b""
    assert done.stderr.decode() == (
        f"error: {zero}: summary field 'positive_label' is {ZERO_RULE}, but {default} has "
        f"{DEFAULT_RULE}: summaries merge only when their labels mean the same (summarise "
        "them with the same --positive-label)\n"
    )
    query = SummaryQuery(table="t", positive_label="0")
    engine = _in_duckdb(summary_sql(query, dialect_name="duckdb"), rows, tmp_path / "e.parquet")
    done = invoke_calib(["reliability", "--from-summary", str(default), str(engine)])
    assert done.returncode == 65 and f"{engine}: summary field 'positive_label'" in str(done.stderr)
    _ok(invoke_calib(["reliability", "--from-summary", str(zero), str(engine), "--json"]))
    with pytest.raises(InputError, match="cannot merge a summary whose positive_label is null"):
        merge_summaries([io.read_summary(str(default)), io.read_summary(str(zero))])


@pytest.mark.parametrize("method", ["isotonic", "histogram"])
def test_a_refinement_summary_of_another_label_rule_is_refused(
    invoke_calib: RunCalib, tmp_path: Path, method: str
) -> None:
    """Flipped labels leave every cell's weight as it was, so only the recorded rule can tell
    them: a refinement made with the default rule of a ``--positive-label 0`` summary is
    refused (before, the fit took it silently); one made with the summary's rule is used."""
    rows = _rows(tmp_path / "rows.parquet")
    coarse = summarize(rows, output=tmp_path / "s.parquet", positive_label="0")
    fine = SummaryQuery(table="t", mantissa_bits=30)  # every row, the default rule
    flipped = _in_duckdb(summary_sql(fine, dialect_name="duckdb"), rows, tmp_path / "r0.parquet")
    fit = ["recalibrate", "--fit-summary", str(coarse), "--method", method, "-q"]
    done = invoke_calib(
        [*fit, "--refine-summary", str(flipped), "--save-model", str(tmp_path / "m0.json")]
    )
    assert done.returncode == 65 and done.stdout == b""
    assert done.stderr.decode() == (
        f"error: {coarse}: refinement summary {flipped}: positive_label is {DEFAULT_RULE}, but "
        f"the summary's is {ZERO_RULE}: summarise the open cells' rows with the summary's rule "
        "(the query --refine-sql writes uses it)\n"
    )
    same = SummaryQuery.refining(io.read_summary(str(coarse)), table="t", mantissa_bits=30)
    refined = _in_duckdb(summary_sql(same, dialect_name="duckdb"), rows, tmp_path / "r.parquet")
    model = tmp_path / "m.json"
    _ok(invoke_calib([*fit, "--refine-summary", str(refined), "--save-model", str(model)]))
    assert json.loads(model.read_text())["fitted_on"]["engine"]["exact"] is True


def test_the_refine_sql_reads_the_labels_by_the_summary_s_rule(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """``--positive-label Y`` on Y/N labels: the refine query failed in DuckDB ("Could not
    convert string 'N' to DOUBLE"; on 0/1 labels it flipped them). With the recorded rule its
    result refines the summary, and the fit is the fit on the rows."""
    rows = _rows(tmp_path / "rows.parquet", text_labels=True)
    coarse = tmp_path / "s.parquet"
    _ok(invoke_calib(["summarize", str(rows), "--positive-label", "Y", "-o", str(coarse), "-q"]))
    sql = tmp_path / "r.sql"
    fit = ["recalibrate", "--fit-summary", str(coarse), "--method", "isotonic", "-q"]
    first = ["--save-model", str(tmp_path / "first.json")]
    refine_sql = ["--refine-sql", str(sql), "--dialect", "duckdb", "--table", "t"]
    _ok(invoke_calib([*fit, *first, *refine_sql]))
    refined = _in_duckdb(sql.read_text(), rows, tmp_path / "r.parquet")
    assert io.read_summary(str(refined)).positive_label == "Y"
    on_summary, on_rows = tmp_path / "summary.json", tmp_path / "rows.json"
    _ok(invoke_calib([*fit, "--refine-summary", str(refined), "--save-model", str(on_summary)]))
    _ok(invoke_calib(["recalibrate", "--fit", str(rows), "--positive-label", "Y", "--method",
                      "isotonic", "--save-model", str(on_rows), "-q"]))  # fmt: skip
    (x, y), (x_rows, y_rows) = _knots(on_summary), _knots(on_rows)
    assert x == x_rows
    np.testing.assert_allclose(y, y_rows, rtol=1e-12, atol=1e-15)


# ----------------------------------------------------------------- 2. empty partitions


def test_summarize_writes_a_summary_of_no_rows_for_an_empty_file(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    rows = _rows(tmp_path / "part0.parquet")
    empty = tmp_path / "empty.parquet"
    pl.read_parquet(rows).head(0).write_parquet(empty)
    alone = tmp_path / "alone.parquet"
    done = invoke_calib(["summarize", str(empty), "-o", str(alone)])
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().splitlines() == [
        f"warning: {empty}: no data rows: the summary written holds no rows",
        f"{alone}: summary of 'score' over 0 rows, 0 keys, 0 group(s)",
    ]
    nothing = io.read_summary(str(alone))
    assert nothing.n_keys == 0 and nothing.label_column == "label"
    both = tmp_path / "both.parquet"
    done = invoke_calib(["summarize", str(rows), str(empty), "-o", str(both)])
    assert done.returncode == 0 and done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert lines[0] == f"warning: {empty}: no data rows: left out of the summary"
    assert lines[1].startswith(f"{both}: summary of 'score' over 6000 rows, ") and len(lines) == 2
    same_summary(io.read_summary(str(both)), io.read_summary(str(summarize(
        rows, output=tmp_path / "part0.summary.parquet"))))  # fmt: skip
    # a header without rows, read with a label rule (the path that checks the rows first)
    header = tmp_path / "header.csv"
    header.write_text("score,label\n")
    done = invoke_calib(["summarize", str(header), "--positive-label", "Y", "-o",
                         str(tmp_path / "h.json"), "-q"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert io.read_summary(str(tmp_path / "h.json")).positive_label == "Y"
    # an empty file still has its columns checked
    done = invoke_calib(["summarize", str(header), "--label-col", "y", "-o", str(both)])
    assert done.returncode == 65
    assert done.stderr.decode().startswith(f"error: {header}: no column 'y' (set --label-col)")


def test_readers_of_several_summaries_leave_out_an_engine_s_empty_partition(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """Spark writes a file of no rows for an empty partition: the summary's columns, no row,
    so no metadata. Left out (with a warning) when other files hold rows."""
    rows = _rows(tmp_path / "rows.parquet")
    full = summarize(rows, output=tmp_path / "full.parquet")
    sql = summary_sql(SummaryQuery(table="t"), dialect_name="duckdb")
    empty = _in_duckdb(sql, rows, tmp_path / "empty.parquet", where="FALSE")
    assert pl.read_parquet(empty).height == 0 and "calib.summary" not in (
        pl.read_parquet_metadata(empty)
    )
    done = invoke_calib(["reliability", "--from-summary", str(full), str(empty), "--json"])
    said = f"warning: {empty}: no rows, so no summary metadata (an empty table or partition)"
    assert said in done.stderr.decode()  # every reader passes its warnings on
    both = _ok(done)
    alone = _ok(invoke_calib(["reliability", "--from-summary", str(full), "--json"]))
    close(both, alone, (*EXACT, "auc"))
    warnings: list[str] = []
    merged = load_summaries([str(empty), str(full)], warn=warnings.append)
    assert merged["score"][1] == (str(full),)
    assert warnings == [
        f"{empty}: no rows, so no summary metadata (an empty table or partition): left out"
    ]
    # a file of no rows with the metadata (DuckDB's KV_METADATA) is a summary of no rows
    meta = json.dumps(summary_metadata(SummaryQuery(table="t"))).replace("'", "''")
    with_meta = tmp_path / "with_meta.parquet"
    con = duckdb.connect()
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{rows}') WHERE FALSE")
    con.execute(f"COPY ({sql}) TO '{with_meta}' (FORMAT parquet, "
                f"KV_METADATA {{'calib.summary': '{meta}'}})")  # fmt: skip
    assert load_summaries([str(with_meta), str(full)])["score"][0].n_keys > 0
    # every file without rows: refused as before, naming the file
    done = invoke_calib(["reliability", "--from-summary", str(empty)])
    assert done.returncode == 65
    assert done.stderr.decode() == (
        f"error: {empty}: holds no rows, so no summary metadata: the query that wrote it found "
        "no rows (an empty table, or a day without data?); leave the file out\n"
    )
    twice = _in_duckdb(sql, rows, tmp_path / "empty2.parquet", where="FALSE")
    done = invoke_calib(["reliability", "--from-summary", str(empty), str(twice)])
    assert done.returncode == 65 and "none of these 2 files holds a row" in done.stderr.decode()


# ----------------------------------------------------------------- 3. the output's name


def test_summarize_refuses_an_output_name_it_cannot_write_before_any_work(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """``-o out.csv`` wrote Parquet under that name (exit 0). The input's rows are bad, so a
    refusal made after reading them would be exit 65."""
    bad = tmp_path / "bad.csv"
    bad.write_text(BAD_ROWS)
    expected = "end the -o name in one of them ('-': Parquet on standard output)\n"
    listed = "a summary is written as Parquet (.parquet, .pq) or JSON (.json)"
    out = tmp_path / "out.csv"
    done = invoke_calib(["summarize", str(bad), "-o", str(out)])
    assert done.returncode == 2 and done.stdout == b"" and not out.exists()
    assert done.stderr.decode() == f"error: {out}: {listed}, not .csv: {expected}"
    for name, ending in (("s.json.gz", "not .gz"), ("s.ndjson", "not .ndjson"),
                         ("summary", "and the name has no extension")):  # fmt: skip
        path = tmp_path / name
        done = invoke_calib(["summarize", str(bad), "--score-col", "score", "-o", str(path)])
        assert done.returncode == 2 and not path.exists()
        assert done.stderr.decode() == f"error: {path}: {listed}, {ending}: {expected}"
    rows = _rows(tmp_path / "rows.parquet")
    for name, start in (("s.pq", b"PAR1"), ("s.JSON", b"{")):
        _ok(invoke_calib(["summarize", str(rows), "-o", str(tmp_path / name), "-q"]))
        assert (tmp_path / name).read_bytes().startswith(start)


# ----------------------------------------------------------------- 4. paths of summaries


def test_from_summary_takes_a_directory_of_part_files_and_a_quoted_glob(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """As ``--fit-summary`` and ``--reference-summary`` do (one function resolves them)."""
    parts = tmp_path / "parts"
    parts.mkdir()
    for seed in (1, 2):
        summarize(_rows(tmp_path / f"day{seed}.parquet", seed=seed),
                  output=parts / f"part-0000{seed}.parquet")  # fmt: skip
    (parts / "_SUCCESS").write_text("")
    (parts / ".part-00001.parquet.crc").write_bytes(b"crc")
    files = [str(parts / "part-00001.parquet"), str(parts / "part-00002.parquet")]
    expected = _ok(invoke_calib(["reliability", "--from-summary", *files, "--json"]))
    directory = _ok(invoke_calib(["reliability", "--from-summary", f"{parts}/", "--json"]))
    pattern = _ok(invoke_calib(["reliability", "--from-summary", f"{parts}/part-*", "--json"]))
    for got in (directory, pattern):
        assert got["n"] == 12000
        close(got, expected, (*EXACT, "auc"))
    missing = f"{parts}/day-*.parquet"
    done = invoke_calib(["reliability", "--from-summary", missing])
    assert done.returncode == 66
    assert done.stderr.decode() == f"error: {missing}: no file matches this pattern\n"
    # a directory of the .pq names summarize -o writes is read too (it was "without summary
    # files": the directory's list of extensions was not summarize's)
    pq = tmp_path / "pq"
    pq.mkdir()
    for seed in (1, 2):
        (parts / f"part-0000{seed}.parquet").rename(pq / f"part-0000{seed}.pq")
    named = _ok(invoke_calib(["reliability", "--from-summary", f"{pq}/", "--json"]))
    close(named, expected, (*EXACT, "auc"))


def test_the_summary_of_rows_in_memory_records_its_rule() -> None:
    summary = summarize_arrays([1, 0], [0.2, 0.7], positive_label=" Y ")
    assert summary.positive_label == "Y" and summary.pooled().positive_label == "Y"
    back = ScoreSummary.from_json(summary.to_json())
    assert back.positive_label == "Y" and back.metadata() == summary.metadata()
    with pytest.raises(InputError, match="positive_label must be a label's text or null"):
        ScoreSummary.from_json(
            summary.to_json().replace('"positive_label":"Y"', '"positive_label":1')
        )
