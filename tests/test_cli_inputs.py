"""Reading what users have (#11): CSV dialects on every reader, ``--max-invalid``, and options
that conflict refused before any work.

The reference for a European CSV (``;`` between fields, ``0,37`` for numbers) is the same rows
written as a plain CSV: every command must give the same figures and the same rows, in both
engines, from a file, a gzip file and standard input. In-process through the workflows, then a
few command lines, run in-process as well (``invoke_calib``: the same arguments, environment
and file descriptors as the installed ``calib``).
"""

from __future__ import annotations

import gzip
import json
import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import typer.main

from calib_cli.cli.app import app, hide_flag_metavars
from calib_cli.cli.options import parse_separator
from calib_cli.errors import InputError, UsageError
from calib_cli.report.payloads import dumps, reliability_payload
from calib_cli.types import CsvDialect
from calib_cli.workflows.estimate_shift import EstimateShiftRequest, run_estimate_shift
from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate
from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability
from calib_cli.workflows.rerank_strata import RerankStrataRequest, run_rerank_strata
from calib_cli.workflows.resample import ResampleRequest, run_resample
from calib_cli.workflows.summarize import SummarizeRequest, run_summarize
from tests.conftest import RunCalib

EURO = CsvDialect(separator=";", decimal_comma=True)
_NUMBER = re.compile(r"^(-?\d+),(\d+(?:e-?\d+)?)$")


def _rows(n: int = 300, seed: int = 3) -> list[dict[str, str]]:
    rng = np.random.default_rng(seed)
    score = rng.beta(2, 5, n)
    label = (rng.random(n) < score).astype(int)
    return [
        {
            "id": f"{i:05d}",
            "stratum": "AB"[i % 2],
            "day": f"d{i % 3}",
            "score": f"{score[i]:.6f}",
            "label": str(label[i]),
            "amount": f"{rng.uniform(1, 100):.2f}",
        }
        for i in range(n)
    ]


def _text(rows: list[dict[str, str]], separator: str, decimal_comma: bool) -> str:
    """The rows as CSV text, written here without calib (the independent reference)."""
    lines = [separator.join(rows[0])]
    for row in rows:
        values = [v.replace(".", ",") if decimal_comma else v for v in row.values()]
        lines.append(separator.join(values))
    return "\n".join(lines) + "\n"


def _to_plain(text: str, separator: str = ";") -> str:
    """A CSV written in the European dialect, back in the plain one (for comparisons)."""
    out = []
    for line in text.splitlines():
        out.append(",".join(_NUMBER.sub(r"\1.\2", v) for v in line.split(separator)))
    return "\n".join(out) + "\n"


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    """``plain/`` and ``euro/``, each with the same rows as data.csv, ref.csv and data.csv.gz."""
    rows, reference = _rows(), _rows(seed=4)
    made = {}
    for kind, separator, comma in (("plain", ",", False), ("euro", ";", True)):
        folder = tmp_path / kind
        folder.mkdir()
        (folder / "data.csv").write_text(_text(rows, separator, comma))
        (folder / "ref.csv").write_text(_text(reference, separator, comma))
        (folder / "data.csv.gz").write_bytes(gzip.compress(_text(rows, separator, comma).encode()))
        made[kind] = folder
    return made


@pytest.fixture
def in_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Run a function in a folder (names in messages and reports are then the same)."""

    def run(folder: Path, function: Any, *args: Any, **kwargs: Any) -> Any:
        monkeypatch.chdir(folder)
        return function(*args, **kwargs)

    yield run


def _close(a: Any, b: Any, path: str = "") -> None:
    """JSON values equal, numbers to 1e-12 relative (streaming sums may differ in the last
    bits between runs: the order Polars adds morsels in is not fixed)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            _close(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{index}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15), (path, a, b)
    else:
        assert a == b, (path, a, b)


# ------------------------------------------------------------------ every reader, both engines


@pytest.mark.parametrize("engine", ["memory", "streaming"])
@pytest.mark.parametrize("name", ["data.csv", "data.csv.gz"])
def test_reliability_reads_a_european_csv_as_the_plain_one(
    dirs: dict[str, Path], in_dir: Any, engine: str, name: str
) -> None:
    def report(kind: str, dialect: CsvDialect | None) -> Any:
        request = ReliabilityRequest(
            file=name,
            by="stratum",
            engine=engine,  # type: ignore[arg-type]
            dialect=dialect or CsvDialect(),
        )
        return json.loads(dumps(reliability_payload(in_dir(dirs[kind], run_reliability, request))))

    _close(report("euro", EURO), report("plain", None))
    with pytest.raises(InputError, match="add --separator ';'"):  # the dialect not given
        report("euro", None)


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_recalibrate_fits_applies_and_writes_in_the_input_dialect(
    dirs: dict[str, Path], in_dir: Any, engine: str
) -> None:
    for kind, dialect in (("plain", CsvDialect()), ("euro", EURO)):
        request = RecalibrateRequest(
            file="data.csv",
            fit="ref.csv",
            method="platt",
            output="out.csv",
            save_model="model.json",
            engine=engine,  # type: ignore[arg-type]
            dialect=dialect,
        )
        in_dir(dirs[kind], run_recalibrate, request)
    euro = (dirs["euro"] / "out.csv").read_text()
    assert euro.splitlines()[1].startswith("00000;A;d0;0,")  # ids kept, numbers with a comma
    assert _to_plain(euro) == (dirs["plain"] / "out.csv").read_text()
    params = [json.loads((dirs[k] / "model.json").read_text())["params"] for k in dirs]
    assert params[0] == params[1]


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_estimate_shift_and_rerank_strata_read_both_inputs_in_the_dialect(
    dirs: dict[str, Path], in_dir: Any, engine: str
) -> None:
    for kind, dialect in (("plain", CsvDialect()), ("euro", EURO)):
        shift = EstimateShiftRequest(
            reference="ref.csv",
            target="data.csv",
            output="shift.csv",
            batch_col="day",
            n_bootstrap=0,
            engine=engine,  # type: ignore[arg-type]
            dialect=dialect,
        )
        in_dir(dirs[kind], run_estimate_shift, shift)
        rerank = RerankStrataRequest(
            reference="ref.csv",
            target="data.csv",
            output="rerank.csv",
            strata_col="stratum",
            engine=engine,  # type: ignore[arg-type]
            dialect=dialect,
        )
        in_dir(dirs[kind], run_rerank_strata, rerank)
    for output in ("shift.csv", "rerank.csv"):
        euro = (dirs["euro"] / output).read_text()
        assert ";" in euro.splitlines()[0]
        assert _to_plain(euro) == (dirs["plain"] / output).read_text()


def test_resample_and_summarize_read_the_dialect(dirs: dict[str, Path], in_dir: Any) -> None:
    for kind, dialect in (("plain", CsvDialect()), ("euro", EURO)):
        request = ResampleRequest(
            file="data.csv",
            output="kept.csv",
            negative_rate=0.5,
            key_col="id",
            record="record.json",
            dialect=dialect,
        )
        in_dir(dirs[kind], run_resample, request)
        in_dir(
            dirs[kind],
            run_summarize,
            SummarizeRequest(files=("data.csv",), output="summary.parquet", dialect=dialect),
        )
    euro = (dirs["euro"] / "kept.csv").read_text()
    assert _to_plain(euro) == (dirs["plain"] / "kept.csv").read_text()
    records = [json.loads((dirs[k] / "record.json").read_text()) for k in dirs]
    assert records[0]["params"] == records[1]["params"]
    frames = [pl.read_parquet(dirs[k] / "summary.parquet") for k in dirs]
    assert frames[0].columns == frames[1].columns
    for column in frames[0].columns:
        a, b = frames[0][column], frames[1][column]
        if a.dtype.is_float():
            np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), rtol=1e-12, atol=1e-300)
        else:
            assert a.equals(b), column


# ------------------------------------------------------------------------- --max-invalid


def _bad_file(path: Path, n: int = 200, bad_scores: int = 10, bad_labels: int = 2) -> Path:
    rows = ["id,score,label"]
    for i in range(n):
        score = "n/a" if i < bad_scores else f"{(i % 97) / 100:.2f}"
        label = "2" if bad_scores <= i < bad_scores + bad_labels else str(i % 2)
        rows.append(f"{i},{score},{label}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_max_invalid_caps_what_drop_may_drop_and_reports_why(tmp_path: Path, engine: str) -> None:
    bad = str(_bad_file(tmp_path / "bad.csv"))  # 12 of 200 rows (6%): 10 scores, 2 labels
    message = (
        f"{bad}: 12 of 200 rows invalid (score not a number: 10, label not 0/1: 2); "
        "above --max-invalid {}, nothing written (raise it to drop them)"
    )
    for limit, shown in ((None, "1%"), (0.05, "5%"), (11.0, "11")):
        request = ReliabilityRequest(
            file=bad,
            on_invalid="drop",
            max_invalid=limit,
            engine=engine,  # type: ignore[arg-type]
        )
        with pytest.raises(InputError) as refused:
            run_reliability(request)
        assert str(refused.value) == message.format(shown)
    warnings: list[str] = []
    for limit in (0.06, 12.0):
        result = run_reliability(
            ReliabilityRequest(
                file=bad,
                on_invalid="drop",
                max_invalid=limit,
                engine=engine,  # type: ignore[arg-type]
            ),
            warn=warnings.append,
        )
        assert result.entries[0].summary.n == 188
        assert result.invalid_rows is not None
        assert dict(result.invalid_rows.by_reason) == {
            "score not a number": 10,
            "label not 0/1": 2,
        }
    assert (
        warnings[0]
        == f"{bad}: dropped 12 invalid rows of 200 (score not a number: 10, label not 0/1: 2)"
    )


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_above_max_invalid_recalibrate_and_summarize_write_nothing(
    tmp_path: Path, engine: str
) -> None:
    bad = str(_bad_file(tmp_path / "bad.csv"))
    outputs = [tmp_path / "out.csv", tmp_path / "model.json", tmp_path / "s.parquet"]
    recalibrate = RecalibrateRequest(
        file=bad,
        fit=bad,
        method="platt",
        output=str(outputs[0]),
        save_model=str(outputs[1]),
        on_invalid="drop",
        engine=engine,  # type: ignore[arg-type]
    )
    summarize = SummarizeRequest(files=(bad,), output=str(outputs[2]), on_invalid="drop")
    with pytest.raises(InputError, match="12 of 200 rows invalid"):
        run_recalibrate(recalibrate)
    with pytest.raises(InputError, match="12 of 200 rows invalid"):
        run_summarize(summarize)
    assert not any(path.exists() for path in outputs)
    result = run_recalibrate(replace_max(recalibrate, 0.1))
    assert [r.dropped for r in result.invalid_rows] == [12, 12]  # the fit file, the input
    assert len(outputs[0].read_text().splitlines()) == 1 + 188
    summary = run_summarize(replace_max(summarize, 12))
    assert (summary.rows, summary.dropped) == (188, 12)
    assert summary.dropped_by_reason == {"score not a number": 10, "label not 0/1": 2}


def replace_max(request: Any, value: float) -> Any:
    from dataclasses import replace

    return replace(request, max_invalid=value)


def test_max_invalid_values_are_checked_before_any_work(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.csv")  # never read: the options are refused first
    cases: list[tuple[dict[str, Any], str]] = [
        ({"max_invalid": 0.05}, "--max-invalid goes with --on-invalid drop"),
        ({"on_invalid": "drop", "max_invalid": 2.5}, "a whole count of rows, got 2.5"),
        ({"on_invalid": "drop", "max_invalid": -1.0}, "got -1"),
    ]
    for options, message in cases:
        with pytest.raises(UsageError, match=re.escape(message)):
            run_reliability(ReliabilityRequest(file=missing, **options))
        with pytest.raises(UsageError, match=re.escape(message)):
            run_summarize(SummarizeRequest(files=(missing,), output="x.parquet", **options))


# ----------------------------------------------------------- conflicting options, before work


def test_estimate_shift_and_rerank_strata_refuse_clashing_columns_before_work(
    dirs: dict[str, Path], in_dir: Any
) -> None:
    folder = dirs["plain"]
    shift = EstimateShiftRequest(reference="ref.csv", target="data.csv", output="o.csv")
    rerank = RerankStrataRequest(
        reference="ref.csv", target="data.csv", output="o.csv", strata_col="stratum"
    )
    clash = "data.csv already has a column '{}'; choose another output name"
    from dataclasses import replace

    cases = [
        (run_estimate_shift, replace(shift, output_col="amount"), clash.format("amount")),
        (
            run_estimate_shift,
            replace(shift, method="acc", threshold=1.5),
            "--threshold must be in [0, 1]",
        ),
        (run_rerank_strata, replace(rerank, output_col="day"), clash.format("day")),
        (
            run_rerank_strata,
            replace(rerank, output_col="rerank_rank"),
            "--output-col 'rerank_rank' is also a column calib adds",
        ),
    ]
    for run, request, message in cases:
        with pytest.raises(UsageError, match=re.escape(message)):
            in_dir(folder, run, request)
    assert not (folder / "o.csv").exists()
    # with logit scores a threshold is a logit: any finite number
    assert not math.isnan(
        in_dir(
            folder,
            run_estimate_shift,
            replace(
                shift, output=None, method="acc", threshold=1.5, score_kind="logit", n_bootstrap=0
            ),
        )
        .batches[0]
        .estimate.prevalence
    )


# ---------------------------------------------------------------- the command line, end to end


def test_european_csv_end_to_end(invoke_calib: RunCalib, dirs: dict[str, Path]) -> None:
    euro, plain = dirs["euro"], dirs["plain"]
    # one column whose header holds ';': the error names the separator to use, exit 65
    done = invoke_calib(["reliability", "data.csv"], cwd=euro)
    assert done.returncode == 65 and done.stdout == b""
    assert done.stderr.decode() == (
        "error: data.csv: read as one column 'id;stratum;day;score;label;amount'; "
        "the file looks separated by ';': add --separator ';'\n"
    )
    # standard input, --separator ';' --decimal-comma: the rows of the plain file, in the
    # European dialect on stdout (-o -), and the same JSON report as the plain file's
    args = ["recalibrate", "-", "--fit", "ref.csv", "--method", "platt", "-o", "-", "-q"]
    euro_done = invoke_calib(
        [*args, "--separator", ";", "--decimal-comma", "--report", "r.json"],
        stdin=(euro / "data.csv").read_bytes(),
        cwd=euro,
    )
    plain_done = invoke_calib(
        [*args, "--report", "r.json"], stdin=(plain / "data.csv").read_bytes(), cwd=plain
    )
    assert euro_done.returncode == plain_done.returncode == 0, euro_done.stderr
    assert euro_done.stderr == b""
    assert _to_plain(euro_done.stdout.decode()) == plain_done.stdout.decode()
    _close(json.loads((euro / "r.json").read_text()), json.loads((plain / "r.json").read_text()))
    # a bad separator: exit 2, before any work
    done = invoke_calib(["reliability", "data.csv", "--separator", ";;"], cwd=euro)
    assert (done.returncode, done.stderr) == (
        2,
        b"error: --separator must be one character or 'tab', got ';;'\n",
    )


def test_max_invalid_end_to_end(invoke_calib: RunCalib, tmp_path: Path) -> None:
    bad = _bad_file(tmp_path / "bad.csv")
    out = tmp_path / "out.csv"
    done = invoke_calib(
        [
            *("recalibrate", str(bad), "--cross-fit", "2"),
            *("-o", str(out), "--on-invalid", "drop"),
        ]
    )
    assert done.returncode == 65 and not out.exists()
    assert done.stderr.decode() == (
        f"error: {bad}: 12 of 200 rows invalid (score not a number: 10, label not 0/1: 2); "
        "above --max-invalid 1%, nothing written (raise it to drop them)\n"
    )
    done = invoke_calib(
        ["reliability", str(bad), "--on-invalid", "drop", "--max-invalid", "6%", "--json"]
    )
    assert done.returncode == 0 and json.loads(done.stdout)["n"] == 188
    assert done.stderr.decode() == (
        f"warning: {bad}: dropped 12 invalid rows of 200 "
        "(score not a number: 10, label not 0/1: 2)\n"
    )


def test_every_reader_has_the_dialect_options_and_drop_has_its_cap(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    command = typer.main.get_command(app)
    hide_flag_metavars(command)
    readers = ["reliability", "summarize", "resample", "recalibrate", "estimate-shift"]
    for name in [*readers, "rerank-strata"]:
        command.main([name, "--help"], prog_name="calib", standalone_mode=False)
        flat = " ".join(capsys.readouterr().out.replace("│", " ").split())
        assert "--separator" in flat and "--decimal-comma" in flat, name
        assert "CSV outputs are written with it too" in flat, name
        if "--on-invalid" in flat:
            assert "--max-invalid FRACTION|COUNT" in flat and "[default: 1%]" in flat, name
        if "--plot " in flat:
            assert "'calib-cli[plot]'" in flat, name  # not eaten as Rich markup


@pytest.mark.parametrize(("separator", "named"), [("\t", "tab"), ("|", "|"), (";", "\\t")])
def test_tab_and_pipe_separated_files(tmp_path: Path, separator: str, named: str) -> None:
    rows = _rows(40)
    path = tmp_path / "data.csv"
    path.write_text(_text(rows, separator, True))
    plain = tmp_path / "plain.csv"
    plain.write_text(_text(rows, ",", False))
    reference = run_reliability(ReliabilityRequest(file=str(plain)))
    if named == "\\t":  # '\t' names a tab, not a semicolon: the file is refused
        with pytest.raises(InputError, match="add --separator ';'"):
            run_reliability(
                ReliabilityRequest(file=str(path), dialect=CsvDialect(parse_separator(named)))
            )
        return
    dialect = CsvDialect(parse_separator(named), decimal_comma=True)
    result = run_reliability(ReliabilityRequest(file=str(path), dialect=dialect))
    figures = [json.loads(dumps(reliability_payload(r))) for r in (result, reference)]
    assert figures[0] == figures[1] and figures[0]["n"] == 40


def test_rows_for_a_terminal_are_refused_before_any_input_is_read(
    dirs: dict[str, Path], in_dir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    message = "give -o PATH for the output (or -o - to print the rows here)"
    missing = "missing.csv"  # would be exit 66 if anything were read before the check
    requests = [
        (run_recalibrate, RecalibrateRequest(file="data.csv", fit=missing, method="platt")),
        (
            run_rerank_strata,
            RerankStrataRequest(reference=missing, target="data.csv", strata_col="stratum"),
        ),
    ]
    for run, request in requests:
        with pytest.raises(UsageError, match=re.escape(message)):
            in_dir(dirs["plain"], run, request)


def test_side_files_are_read_in_the_dialect_too(dirs: dict[str, Path], in_dir: Any) -> None:
    """--rates-file (resample) and --prevalence-file (rerank-strata) are CSVs of the run."""
    for kind, dialect in (("plain", CsvDialect()), ("euro", EURO)):
        separator, point = (";", ",") if kind == "euro" else (",", ".")
        folder = dirs[kind]
        (folder / "rates.csv").write_text(
            f"stratum{separator}negative_rate\nA{separator}0{point}25\nB{separator}0{point}5\n"
        )
        (folder / "prevalence.csv").write_text(
            f"stratum{separator}prevalence\nA{separator}0{point}2\nB{separator}0{point}35\n"
        )
        resample = ResampleRequest(
            file="data.csv",
            output="kept.csv",
            strata_col="stratum",
            rates_file="rates.csv",
            record="record.json",
            dialect=dialect,
        )
        in_dir(folder, run_resample, resample)
        rerank = RerankStrataRequest(
            reference="ref.csv",
            target="data.csv",
            output="rerank.csv",
            strata_col="stratum",
            prevalence_file="prevalence.csv",
            dialect=dialect,
        )
        in_dir(folder, run_rerank_strata, rerank)
    for output in ("kept.csv", "rerank.csv"):
        plain = (dirs["plain"] / output).read_text()
        assert _to_plain((dirs["euro"] / output).read_text()) == plain
    kept = pl.read_csv(dirs["plain"] / "kept.csv")
    assert 0 < kept.height < 300  # the rates were read: some negatives were left out


def test_reasons_with_several_score_columns_agree_between_engines(tmp_path: Path) -> None:
    path = tmp_path / "two.csv"
    rows = ["a,b,label,w"]
    for i in range(100):
        a = "x" if i == 1 else ("1.5" if i in (2, 3) else "0.5")
        b = "-1" if i in (3, 4) else "" if i == 5 else "0.25"
        label = "7" if i in (5, 6) else str(i % 2)
        w = "-2" if i in (6, 7) else "1"
        rows.append(f"{a},{b},{label},{w}")
    path.write_text("\n".join(rows) + "\n")
    found = []
    for engine in ("memory", "streaming"):
        request = ReliabilityRequest(
            file=str(path),
            score_cols=("a", "b"),
            weight_col="w",
            on_invalid="drop",
            max_invalid=10,
            engine=engine,
        )
        invalid = run_reliability(request).invalid_rows
        assert invalid is not None
        found.append(dict(invalid.by_reason))
    # rows 1..7, each under its first problem in the order a, b, label, weight
    assert (
        found[0]
        == found[1]
        == {
            "a not a number": 1,
            "a outside [0, 1]": 2,
            "b outside [0, 1]": 1,
            "b missing": 1,
            "label not 0/1": 1,
            "w negative": 1,
        }
    )


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_scores_and_weights_are_numbers_in_a_typed_output(
    invoke_calib: RunCalib, tmp_path: Path, engine: str
) -> None:
    """A CSV score written 2.16301e-05 comes back from a float as 2.16301e-5, so the exact
    pass-through rule kept the column as text in Parquet, and the exported SQL then failed on
    calib's own output (VARCHAR against DOUBLE). The columns calib reads as numbers are
    numbers; other columns keep the rule (00123 stays text)."""
    rows = "".join(
        f"{i:05d},{'2.16301e-05' if i == 0 else f'{(i % 9 + 1) / 10:.2f}'},{i % 2},1.50\n"
        for i in range(40)
    )
    (tmp_path / "s.csv").write_text("id,score,label,w\n" + rows)
    done = invoke_calib(
        ["recalibrate", "s.csv", "--negative-rate", "0.5", "--weight-col", "w", "--engine",
         engine, "-o", "o.parquet", "-q"],
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    frame = pl.read_parquet(tmp_path / "o.parquet")
    assert frame.schema["score"] == pl.Float64 and frame.schema["w"] == pl.Float64
    assert frame.schema["id"] == pl.String and frame["id"][0] == "00000"
    assert frame["score"][0] == 2.16301e-05 and frame["score"][1] == 0.2


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_a_value_just_outside_the_range_is_shown_with_every_digit(
    tmp_path: Path, invoke_calib: RunCalib, engine: str
) -> None:
    """Ten digits showed 1.0000000000000002 "outside [0, 1]" as 1 (every reader)."""
    path = tmp_path / "s.csv"
    path.write_text("score,label\n0.5,1\n1.0000000000000002,0\n0.25,0\n")
    done = invoke_calib(["reliability", str(path), "--engine", engine])
    assert done.returncode == 65
    assert done.stderr.decode() == (
        f"error: {path}: column 'score' has 1 value outside [0, 1] (first at row 2: "
        "1.0000000000000002)\n"
    )


@pytest.mark.parametrize("engine", ["memory", "streaming"])
@pytest.mark.parametrize("column", ["score", "w"])
def test_numbers_with_a_decimal_comma_name_the_option_that_reads_them(
    invoke_calib: Any, tmp_path: Path, engine: str, column: str
) -> None:
    """A ';'-separated file of ``0,2`` scores (or weights) without --decimal-comma: the
    message named the value only; it names the option, which then reads the file."""
    path = tmp_path / "dc.csv"
    rows = ["score;label;w", "0,2;1;1,5", "0,5;0;1,5", "0,7;1;2,5", "0,1;0;1,5"]
    if column == "score":
        rows = [r.replace(";1,5", ";1").replace(";2,5", ";2") for r in rows]
    else:
        rows = [rows[0]] + [r.replace("0,", "0.", 1) for r in rows[1:]]
    path.write_text("\n".join(rows) + "\n")
    args = ["reliability", str(path), "--separator", ";", "--weight-col", "w", "--engine", engine]
    done = invoke_calib(args)
    assert done.returncode == 65
    assert f"column '{column}' has ".encode() in done.stderr
    assert done.stderr.rstrip().endswith(
        b"; if the file writes numbers with a decimal comma, add --decimal-comma"
    )
    assert invoke_calib([*args, "--decimal-comma"]).returncode == 0
    other = tmp_path / "bad.csv"
    other.write_text("score;label\nabc;1\n0.5;0\n")
    plain = invoke_calib(["reliability", str(other), "--separator", ";", "--engine", engine])
    assert plain.returncode == 65 and b"--decimal-comma" not in plain.stderr
