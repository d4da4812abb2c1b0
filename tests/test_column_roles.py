"""One input column, one role: a column named by two of a command's column options (a label
read as weights, scores as batches) is refused (exit 2) before any work, in every command and
in the SQL it emits. Before, such calls gave figures of nothing, thousands of one-row batches,
or a crash (``summarize --weight-col score``: exit 70)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from calib_cli.errors import ExitCode, UsageError
from calib_cli.workflows.estimate_shift import (
    EstimateShiftRequest,
    run_backtest,
    run_estimate_shift,
)
from calib_cli.workflows.export_sql import (
    ResampleSqlRequest,
    SummarizeSqlRequest,
    run_resample_sql,
    run_summarize_sql,
)
from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate
from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability
from calib_cli.workflows.rerank_strata import RerankStrataRequest, run_rerank_strata
from calib_cli.workflows.resample import ResampleRequest, run_resample
from calib_cli.workflows.summarize import SummarizeRequest, run_summarize
from tests.conftest import RunCalib

ONE_ROLE = "and a column has one role: name another column for one of them"


@pytest.fixture
def data(scored_dir: Path) -> Path:
    return scored_dir


def _shift(**fields: Any) -> EstimateShiftRequest:
    return EstimateShiftRequest(reference="{d}/a.csv", target="{d}/a.csv", n_bootstrap=0, **fields)


CASES: list[tuple[Callable[..., Any], Callable[[], Any], str, str]] = [
    (
        run_reliability,
        lambda: ReliabilityRequest(file="{d}/a.csv", weight_col="label"),
        "--label-col (by default)",
        "--weight-col",
    ),
    (
        run_reliability,
        lambda: ReliabilityRequest(file="{d}/a.csv", score_cols=("score", "w"), weight_col="w"),
        "--score-col",
        "--weight-col",
    ),
    (  # no "(by default)" for an option without a default
        run_reliability,
        lambda: ReliabilityRequest(file="{d}/a.csv", weight_col="w", by="w"),
        "--weight-col",
        "--by",
    ),
    (
        run_reliability,
        lambda: ReliabilityRequest(file="{d}/a.csv", by="label"),
        "--label-col (by default)",
        "--by",
    ),
    (
        run_summarize,
        lambda: SummarizeRequest(files=("{d}/a.csv",), output="{d}/s.parquet", weight_col="score"),
        "--score-col (by default)",
        "--weight-col",
    ),
    (
        run_recalibrate,
        lambda: RecalibrateRequest(
            file="{d}/a.csv", fit="{d}/a.csv", method="platt", output="{d}/o.csv", score_col="label"
        ),
        "--score-col",
        "--label-col (by default)",
    ),
    (
        run_recalibrate,
        lambda: RecalibrateRequest(
            fit="{d}/a.csv",
            method="auto",
            save_model="{d}/m.json",
            fold_col="batch",
            weight_col="batch",
        ),
        "--weight-col",
        "--fold-col",
    ),
    (
        run_estimate_shift,
        lambda: _shift(batch_col="score"),
        "--score-col (by default)",
        "--batch-col",
    ),
    (
        run_estimate_shift,
        lambda: _shift(weight_col="label"),
        "--label-col (by default)",
        "--weight-col",
    ),
    (
        run_backtest,
        lambda: _shift(batch_col="label", backtest=True, label_delay=1),
        "--label-col (by default)",
        "--batch-col",
    ),
    (
        run_rerank_strata,
        lambda: RerankStrataRequest(
            reference="{d}/a.csv", target="{d}/a.csv", strata_col="score", output="{d}/o.csv"
        ),
        "--score-col (by default)",
        "--strata-col",
    ),
    (
        run_resample,
        lambda: ResampleRequest(
            file="{d}/a.csv", output="{d}/o.csv", negative_rate=0.5, strata_col="label"
        ),
        "--label-col (by default)",
        "--strata-col",
    ),
    (
        run_resample_sql,
        lambda: ResampleSqlRequest(dialect="duckdb", table="t", negative_rate=0.5, key_col="label"),
        "--label-col (by default)",
        "--key-col",
    ),
    (
        run_summarize_sql,
        lambda: SummarizeSqlRequest(dialect="duckdb", table="t", by="score"),
        "--score-col (by default)",
        "--by",
    ),
]


def _in(request: Any, directory: Path) -> Any:
    """``request`` with ``{d}`` in its path fields replaced by ``directory``."""
    changes: dict[str, Any] = {}
    for name, value in vars(request).items():
        if isinstance(value, str) and "{d}" in value:
            changes[name] = value.format(d=directory)
        elif isinstance(value, tuple) and any("{d}" in str(part) for part in value):
            changes[name] = tuple(str(part).format(d=directory) for part in value)
    return type(request)(**{**vars(request), **changes})


@pytest.mark.parametrize(
    ("run", "make", "first", "second"),
    CASES,
    ids=[f"{case[0].__name__}-{case[3]}" for case in CASES],
)
def test_two_roles_for_one_column_are_refused_before_any_work(
    data: Path, run: Callable[..., Any], make: Callable[[], Any], first: str, second: str
) -> None:
    before = sorted(path.name for path in data.iterdir())
    with pytest.raises(UsageError) as refused:
        run(_in(make(), data))
    message = str(refused.value)
    assert message.startswith(f"{first} and {second} both name the column '")
    assert message.endswith(ONE_ROLE)
    assert refused.value.exit_code == ExitCode.USAGE
    assert sorted(path.name for path in data.iterdir()) == before  # nothing written


def test_distinct_columns_and_one_role_named_explicitly_are_accepted(data: Path) -> None:
    result = run_reliability(
        ReliabilityRequest(
            file=str(data / "a.csv"), score_cols=("score",), weight_col="w", by="batch"
        )
    )
    assert result.by == "batch"
    explicit = run_reliability(
        ReliabilityRequest(file=str(data / "a.csv"), label_col="label", weight_col="w")
    )
    assert explicit.entries


def test_the_command_exits_2_where_it_crashed(data: Path, invoke_calib: RunCalib) -> None:
    done = invoke_calib(
        ["summarize", str(data / "a.csv"), "--weight-col", "score", "-o", "s.parquet"], cwd=data
    )
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert done.stderr.decode().startswith(
        "error: --score-col (by default) and --weight-col both name the column 'score'"
    )
    assert not (data / "s.parquet").exists()


def test_reliability_counts_its_default_score_column(data: Path, invoke_calib: RunCalib) -> None:
    """The command passes no --score-col when none is given: the default 'score' was not
    counted, so --weight-col score weighed rows by their own scores (exit 0), and --by score
    made a group per score, where every other command refused both."""
    for option in ("--weight-col", "--by"):
        done = invoke_calib(["reliability", str(data / "a.csv"), option, "score", "--json"])
        assert done.returncode == ExitCode.USAGE and done.stdout == b"", option
        assert done.stderr.decode() == (
            f"error: --score-col (by default) and {option} both name the column 'score', "
            f"{ONE_ROLE}\n"
        )
    twice = invoke_calib(["reliability", str(data / "a.csv"), "--score-col", "score",
                       "--score-col", "score", "-q"])  # fmt: skip
    assert twice.returncode == ExitCode.USAGE
    assert twice.stderr == b"error: --score-col names the column 'score' twice: give it once\n"
