"""Options that cannot apply to a call are refused (exit 2) before any work, never silently
ignored: a method's own options with another method, row options on a call that writes or
reads no rows, the CSV dialect where nothing is CSV, ``--plot-scale`` without ``--plot``.
The same options where they apply are accepted. Last, an input whose nested columns the
text output cannot hold is refused before the work too, not after it. The workflows are
called directly; one test runs the installed ``calib``, the other command lines run
in-process (``invoke_calib``: the same arguments, environment and file descriptors)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from calib_cli.errors import CalibError, ExitCode
from calib_cli.types import CsvDialect
from calib_cli.workflows.estimate_shift import EstimateShiftRequest, run_estimate_shift
from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate
from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability
from calib_cli.workflows.rerank_strata import RerankStrataRequest, run_rerank_strata
from calib_cli.workflows.resample import ResampleRequest, run_resample
from calib_cli.workflows.show import ShowRequest, run_show
from calib_cli.workflows.summarize import SummarizeRequest, run_summarize
from tests.conftest import RunCalib

RUNS: dict[str, tuple[type, Callable[..., Any]]] = {
    "estimate-shift": (EstimateShiftRequest, run_estimate_shift),
    "recalibrate": (RecalibrateRequest, run_recalibrate),
    "reliability": (ReliabilityRequest, run_reliability),
    "rerank-strata": (RerankStrataRequest, run_rerank_strata),
    "resample": (ResampleRequest, run_resample),
    "show": (ShowRequest, run_show),
    "summarize": (SummarizeRequest, run_summarize),
}


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """ref.csv / ref.parquet (labelled), batch.parquet, strata.csv, a summary and a model."""
    rng = np.random.default_rng(4)
    n = 600
    score = rng.beta(2, 5, n)
    frame = pl.DataFrame(
        {
            "score": score,
            "label": (rng.random(n) < score).astype(np.int64),
            "stratum": rng.choice(["a", "b"], n),
            "w": rng.choice([1.0, 2.0], n),
        }
    )
    frame.write_csv(tmp_path / "ref.csv")
    frame.write_parquet(tmp_path / "ref.parquet")
    frame.drop("label").write_parquet(tmp_path / "batch.parquet")
    run_summarize(
        SummarizeRequest(files=(str(tmp_path / "ref.csv"),), output=f"{tmp_path}/s.parquet")
    )
    run_recalibrate(
        RecalibrateRequest(
            fit=str(tmp_path / "ref.csv"), method="platt", save_model=f"{tmp_path}/m.json"
        )
    )
    return tmp_path


SHIFT = {"reference": "{d}/ref.csv", "target": "{d}/batch.parquet", "n_bootstrap": 0}
SHIFT_OUT = {**SHIFT, "output": "{d}/o.csv"}
FIT = {"file": "{d}/ref.csv", "fit": "{d}/ref.csv", "output": "{d}/o.csv"}
RERANK = {
    "reference": "{d}/ref.csv",
    "target": "{d}/ref.csv",
    "strata_col": "stratum",
    "output": "{d}/o.csv",
}
DOING_MLE = "this call runs --method mle"
READS_ROWS = "says how to read rows, and --from-summary reads summaries, not rows"
BOTH_SUMMARIES = "--reference-summary and --target-summary are summaries, not rows"
FOLDS = "--folds applies to --method auto fitted on rows (--fit FILE, --cross-fit)"
WRITES_NONE = "of the rows a call writes, and this one writes none"

NAMES_NONE = "names the column written, and '' names none: give a name"

REFUSED = [
    # an empty or blank name for a column a command writes
    ("recalibrate", {**FIT, "output_col": ""}, f"--output-col {NAMES_NONE}"),
    ("estimate-shift", {**SHIFT_OUT, "output_col": " "}, f"--output-col {NAMES_NONE}"),
    ("rerank-strata", {**RERANK, "output_col": ""}, f"--output-col {NAMES_NONE}"),
    (
        "resample",
        {"file": "{d}/ref.csv", "output": "{d}/o.csv", "negative_rate": 0.5, "weight_col_out": ""},
        f"--weight-col-out {NAMES_NONE}",
    ),
    # recalibrate: a strata column where no step is per stratum
    (
        "recalibrate",
        {
            "file": "{d}/ref.csv",
            "model": "{d}/m.json",
            "strata_col": "stratum",
            "output": "{d}/o.csv",
        },
        "--strata-col names the strata of a per-stratum prior correction (a stratified "
        "--sampling-record or --model), and no step of this calibration is per stratum: "
        "drop --strata-col",
    ),
    # estimate-shift: a method's own options with another method
    (
        "estimate-shift",
        {**SHIFT, "method": "mle", "map_beta": 10.0},
        f"--map-beta applies to --method map; {DOING_MLE}: drop --map-beta or use --method map",
    ),
    (
        "estimate-shift",
        {**SHIFT, "map_nodes": 5},
        "--map-nodes applies to --method map; this call runs --method auto (mle): drop "
        "--map-nodes or use --method map",
    ),
    (
        "estimate-shift",
        {**SHIFT, "method": "em", "map_power": 2.0},
        "--map-power applies to --method map; this call runs --method em: drop --map-power "
        "or use --method map",
    ),
    (
        "estimate-shift",
        {**SHIFT, "method": "pacc", "threshold": 0.3},
        "--threshold applies to --method acc; this call runs --method pacc: drop --threshold "
        "or use --method acc",
    ),
    (
        "estimate-shift",
        {**SHIFT, "method": "mle", "threshold": 0.3},
        f"--threshold applies to --method acc; {DOING_MLE}: drop --threshold or use --method acc",
    ),
    # estimate-shift: row options without -o
    (
        "estimate-shift",
        {**SHIFT, "output_col": "p"},
        f"--output-col names a column {WRITES_NONE} (no -o PATH): drop --output-col",
    ),
    (
        "estimate-shift",
        {**SHIFT, "output_format": "csv"},
        f"--output-format is the format {WRITES_NONE} (no -o PATH): drop --output-format",
    ),
    # estimate-shift: reading options when both sides are summaries
    (
        "estimate-shift",
        {
            "reference_summaries": ("{d}/s.parquet",),
            "target_summaries": ("{d}/s.parquet",),
            "n_bootstrap": 0,
            "engine": "memory",
        },
        f"--engine says how to read rows, and {BOTH_SUMMARIES}: drop --engine",
    ),
    (
        "estimate-shift",
        {
            "reference_summaries": ("{d}/s.parquet",),
            "target_summaries": ("{d}/s.parquet",),
            "n_bootstrap": 0,
            "label_col": "y",
        },
        f"--label-col says how to read rows, and {BOTH_SUMMARIES}: drop --label-col",
    ),
    # the CSV dialect where nothing read or written is CSV
    (
        "estimate-shift",
        {**SHIFT, "reference": "{d}/ref.parquet", "dialect": CsvDialect(";")},
        "--separator is for CSV and TSV text, and this call reads and writes none "
        "({d}/ref.parquet, {d}/batch.parquet): drop --separator",
    ),
    (
        "reliability",
        {"file": "{d}/ref.parquet", "dialect": CsvDialect(decimal_comma=True)},
        "--decimal-comma is for CSV and TSV text, and this call reads and writes none "
        "({d}/ref.parquet): drop --decimal-comma",
    ),
    # recalibrate: --folds without auto's cross-validation on rows; row options without rows
    (
        "recalibrate",
        {**FIT, "method": "platt", "folds": 3},
        f"{FOLDS}; this call uses platt: drop --folds",
    ),
    (
        "recalibrate",
        {
            "file": "{d}/ref.csv",
            "fit_summaries": ("{d}/s.parquet",),
            "method": "platt",
            "folds": 3,
            "output": "{d}/o.csv",
        },
        f"{FOLDS}; this call uses platt: drop --folds",
    ),
    (
        "recalibrate",
        {"fit": "{d}/ref.csv", "method": "platt", "save_model": "{d}/m2.json", "output_col": "p"},
        f"--output-col names a column {WRITES_NONE} (no INPUT file): drop --output-col",
    ),
    # reliability from summaries: the options that read rows
    (
        "reliability",
        {"file": None, "from_summaries": ("{d}/s.parquet",), "engine": "streaming"},
        f"--engine {READS_ROWS}: drop --engine",
    ),
    (
        "reliability",
        {"file": None, "from_summaries": ("{d}/s.parquet",), "on_invalid": "drop"},
        f"--on-invalid {READS_ROWS}: drop --on-invalid",
    ),
    (
        "reliability",
        {"file": None, "from_summaries": ("{d}/s.parquet",), "positive_label": "1"},
        f"--positive-label {READS_ROWS}: drop --positive-label",
    ),
    (
        "reliability",
        {"file": None, "from_summaries": ("{d}/s.parquet",), "input_format": "csv"},
        f"--input-format {READS_ROWS}: drop --input-format",
    ),
    # --plot-scale without --plot
    (
        "reliability",
        {"file": "{d}/ref.csv", "plot_scale": "logit"},
        "--plot-scale sets the axes of --plot; give --plot PATH",
    ),
    (
        "rerank-strata",
        {**RERANK, "plot_scale": "logit"},
        "--plot-scale sets the axes of --plot; give --plot PATH",
    ),
    (
        "show",
        {"artifact": "{d}/m.json", "plot_scale": "logit"},
        "--plot-scale sets the axes of --plot; give --plot PATH",
    ),
    # found by review: a named method's --folds with --fit-summary; summaries only
    (
        "recalibrate",
        {
            "fit_summaries": ("{d}/s.parquet",),
            "method": "auto",
            "fold_col": "stratum",
            "folds": 3,
            "save_model": "{d}/m3.json",
        },
        f"{FOLDS}; --fit-summary takes its folds from --fold-col: drop --folds",
    ),
    (
        "recalibrate",
        {
            "fit_summaries": ("{d}/s.parquet",),
            "method": "platt",
            "engine": "streaming",
            "save_model": "{d}/m3.json",
        },
        "--engine says how to read rows, and this call reads only --fit-summary summaries (no "
        "INPUT file): drop --engine",
    ),
    (
        "estimate-shift",
        {
            "reference_summaries": ("{d}/s.parquet",),
            "target_summaries": ("{d}/s.parquet",),
            "n_bootstrap": 0,
            "output_col": "p",
        },
        f"--output-col names a column {WRITES_NONE} (a --target-summary holds no rows): "
        "drop --output-col",
    ),
    (
        "recalibrate",
        {**FIT, "method": "platt", "fit_data": "sampled"},
        "--fit-data orders a prior correction and a map fitted on labels, and this call has "
        "no prior correction: drop --fit-data",
    ),
    (
        "recalibrate",
        {"file": "{d}/ref.csv", "negative_rate": 0.5, "fit_data": "sampled", "output": "-"},
        "--fit-data orders a prior correction and a map fitted on labels, and this call fits "
        "no map: drop --fit-data",
    ),
    # JSON side files (a saved model) are not CSV text
    (
        "recalibrate",
        {
            "file": "{d}/ref.parquet",
            "model": "{d}/m.json",
            "output": "{d}/o.parquet",
            "dialect": CsvDialect(";"),
        },
        "--separator is for CSV and TSV text, and this call reads and writes none "
        "({d}/ref.parquet, {d}/m.json): drop --separator",
    ),
]

ACCEPTED = [
    ("estimate-shift", {**SHIFT, "method": "map", "map_beta": 10.0, "map_nodes": 5}),
    ("estimate-shift", {**SHIFT, "method": "acc", "threshold": 0.3}),
    ("estimate-shift", {**SHIFT_OUT, "output_col": "p", "output_format": "csv"}),
    # Parquet in, CSV out: the dialect shapes the output
    ("estimate-shift", {**SHIFT_OUT, "reference": "{d}/ref.parquet", "dialect": CsvDialect(";")}),
    (
        "estimate-shift",
        {
            "reference_summaries": ("{d}/s.parquet",),
            "target": "{d}/batch.parquet",
            "n_bootstrap": 0,
            "engine": "memory",
        },
    ),
    ("recalibrate", {**FIT, "method": "auto", "folds": 3}),
    ("recalibrate", {**FIT, "method": "platt", "negative_rate": 0.5, "fit_data": "sampled"}),
    ("reliability", {"file": "{d}/ref.csv", "dialect": CsvDialect(",")}),
    ("reliability", {"file": None, "from_summaries": ("{d}/s.parquet",), "n_bins": 5}),
    ("reliability", {"file": "{d}/ref.csv", "plot": "{d}/r.png", "plot_scale": "logit"}),
]


def _request(command: str, options: dict[str, Any], folder: Path) -> tuple[Any, Callable[..., Any]]:
    def fill(value: object) -> object:
        if isinstance(value, str):
            return value.format(d=folder)
        if isinstance(value, tuple):
            return tuple(fill(v) for v in value)
        return value

    request_type, run = RUNS[command]
    return request_type(**{key: fill(value) for key, value in options.items()}), run


@pytest.mark.parametrize(("command", "options", "message"), REFUSED)
def test_an_option_that_cannot_apply_is_refused_before_any_work(
    files: Path, command: str, options: dict[str, Any], message: str
) -> None:
    before = sorted(p.name for p in files.iterdir())
    request, run = _request(command, options, files)
    with pytest.raises(CalibError) as caught:
        run(request)
    assert caught.value.exit_code == ExitCode.USAGE
    assert str(caught.value) == message.format(d=files)
    assert sorted(p.name for p in files.iterdir()) == before


@pytest.mark.parametrize(("command", "options"), ACCEPTED)
def test_the_same_options_where_they_apply_are_accepted(
    files: Path, command: str, options: dict[str, Any]
) -> None:
    request, run = _request(command, options, files)
    run(request)


def test_the_installed_calib_refuses_an_unused_option_with_exit_2(
    run_calib: RunCalib, files: Path
) -> None:
    done = run_calib(
        [
            "estimate-shift",
            "--reference",
            str(files / "ref.csv"),
            "--target",
            str(files / "batch.parquet"),
            "--method",
            "mle",
            "--map-beta",
            "10",
        ]
    )
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.decode().strip() == (
        f"error: --map-beta applies to --method map; {DOING_MLE}: drop --map-beta or use "
        "--method map"
    )


@pytest.mark.parametrize("command", ["estimate-shift", "rerank-strata", "recalibrate", "resample"])
def test_nested_columns_for_a_text_output_are_refused_before_any_work(
    tmp_path: Path, command: str
) -> None:
    """The target's list column cannot go to CSV: refused naming the file, before the work,
    so before the reference (here without labels) is even read."""
    from calib_cli.workflows.resample import ResampleRequest, run_resample

    nested = tmp_path / "nested.parquet"
    frame = pl.DataFrame(
        {"score": [0.2, 0.7, 0.4], "label": [0, 1, 0], "stratum": ["a", "b", "a"]}
    ).with_columns(pl.concat_list(["score"]).alias("lst"))
    frame.write_parquet(nested)
    (tmp_path / "unlabelled.csv").write_text("score\n0.1\n0.5\n")
    out = str(tmp_path / "out.csv")
    request: Any
    run: Callable[..., Any]
    if command == "estimate-shift":
        unlabelled = str(tmp_path / "unlabelled.csv")
        request = EstimateShiftRequest(reference=unlabelled, target=str(nested), output=out)
        run = run_estimate_shift
    elif command == "rerank-strata":
        request = RerankStrataRequest(
            reference=str(tmp_path / "unlabelled.csv"),
            target=str(nested),
            strata_col="stratum",
            output=out,
        )
        run = run_rerank_strata
    elif command == "recalibrate":
        request = RecalibrateRequest(file=str(nested), negative_rate=0.5, output=out)
        run = run_recalibrate
    else:
        request = ResampleRequest(file=str(nested), negative_rate=0.5, output=out)
        run = run_resample
    with pytest.raises(CalibError) as caught:
        run(request)
    assert caught.value.exit_code == ExitCode.DATA_ERROR
    assert str(caught.value) == (
        f"{nested}: column(s) 'lst' hold nested values, which CSV cannot write; write "
        "Parquet, Arrow or NDJSON (-o out.parquet, or --output-format parquet), "
        "or drop the column(s) first"
    )
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize(
    ("command", "options", "message"),
    [
        # a --label-col given must exist even where labels only feed the report
        (
            "recalibrate",
            {"file": "{d}/ref.csv", "negative_rate": 0.5, "output": "{d}/o.csv", "label_col": "y"},
            "{d}/ref.csv: no column 'y' (set --label-col); columns are: score, label, stratum, w",
        ),
        # with summaries on both sides, --score-col can only name a summary's column
        (
            "estimate-shift",
            {
                "reference_summaries": ("{d}/s.parquet",),
                "target_summaries": ("{d}/s.parquet",),
                "n_bootstrap": 0,
                "score_col": "p",
            },
            "no summary of score column 'p' among the reference summaries (they summarise 'score')",
        ),
        # a reference summary's weights are fixed: --weight-col may only name them
        (
            "estimate-shift",
            {
                "reference_summaries": ("{d}/s.parquet",),
                "target": "{d}/batch.parquet",
                "n_bootstrap": 0,
                "weight_col": "w",
            },
            "{d}/s.parquet: summary field 'weight_column' is null, so it cannot weight rows "
            "by --weight-col 'w' (summarise with --weight-col w)",
        ),
    ],
)
def test_a_column_option_that_names_nothing_is_a_data_error(
    files: Path, command: str, options: dict[str, Any], message: str
) -> None:
    request, run = _request(command, options, files)
    with pytest.raises(CalibError) as caught:
        run(request)
    assert caught.value.exit_code == ExitCode.DATA_ERROR
    assert str(caught.value) == message.format(d=files)
    assert not (files / "o.csv").exists()


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["summarize", "--separator", ";"], "--separator"),
        (["summarize", "--on-invalid", "drop"], "--on-invalid"),
        (["summarize", "--input-format", "csv"], "--input-format"),
        (["resample", "--negative-rate", "0.1", "--output-format", "parquet"], "--output-format"),
        (["resample", "--negative-rate", "0.1", "--decimal-comma"], "--decimal-comma"),
    ],
)
def test_emit_sql_refuses_the_options_of_a_run_on_files(
    invoke_calib: RunCalib, args: list[str], option: str
) -> None:
    done = invoke_calib([*args, "--emit-sql", "--dialect", "duckdb", "--table", "t"])
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.decode() == (
        f"error: {option} does nothing with --emit-sql, which prints SQL for the engine to run "
        f"on --table: drop {option}\n"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["recalibrate", "{d}/ref.parquet", "--negative-rate", "0.5"],
        ["rerank-strata", "--reference", "{d}/ref.parquet", "--target", "{d}/ref.parquet"],
    ],
)
def test_a_dialect_shapes_the_csv_rows_written_to_standard_output(
    invoke_calib: RunCalib, files: Path, args: list[str]
) -> None:
    """Parquet in, rows to standard output, not a terminal (no -o): the rows are CSV, so
    --separator applies (a review found it refused)."""
    extra = ["--strata-col", "stratum"] if args[0] == "rerank-strata" else []
    done = invoke_calib([a.format(d=files) for a in args] + extra + ["--separator", ";", "-q"])
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines()[0].startswith("score;label;stratum;w;")


@pytest.mark.parametrize(
    "args",
    [
        ["estimate-shift", "--reference", "{d}/ref.csv", "--target", "-", "--bootstrap", "0",
         "--json"],
        ["reliability", "-", "--json"],
        ["recalibrate", "-", "--negative-rate", "0.5"],
        ["rerank-strata", "--reference", "{d}/ref.csv", "--target", "-", "--strata-col",
         "stratum"],
    ],
    ids=["estimate-shift", "reliability", "recalibrate", "rerank-strata"],
)  # fmt: skip
def test_standard_input_with_engine_streaming_says_it_is_read_into_memory(
    invoke_calib: RunCalib, files: Path, args: list[str]
) -> None:
    """Every command says so (only estimate-shift did). estimate-shift then runs in memory,
    with the same output; the others stream the rows read (their summaries' figures)."""
    batch = (files / "ref.csv").read_bytes()
    args = [a.format(d=files) for a in args]
    done = invoke_calib([*args, "--engine", "streaming"], stdin=batch)
    assert done.returncode == 0, done.stderr.decode()
    assert (
        "warning: standard input is read into memory first (it cannot be read twice): "
        "--engine streaming keeps memory bounded for files only"
    ) in done.stderr.decode()
    quiet = invoke_calib(args, stdin=batch)
    assert "standard input is read into memory" not in quiet.stderr.decode()
    if args[0] == "estimate-shift":
        assert quiet.stdout == done.stdout
