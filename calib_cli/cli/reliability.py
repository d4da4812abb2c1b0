"""``calib reliability``: options -> :mod:`calib_cli.workflows.reliability` -> report."""

from __future__ import annotations

from typing import Annotated, cast

import typer

from calib_cli.cli.options import (
    DEFAULT_SEED,
    INPUT_HELP,
    BinStrategyChoice,
    DebugOpt,
    InputFormatOpt,
    JsonOpt,
    LabelColOpt,
    NoColorOpt,
    OnInvalidOpt,
    PositiveLabelOpt,
    QuietOpt,
    ReportOpt,
    SeedOpt,
    WeightColOpt,
    chosen,
    chosen_or_none,
)
from calib_cli.cli.session import command_session, emit_report
from calib_cli.errors import CheckFailedError
from calib_cli.types import BinStrategy, InputFormat, OnInvalid

EPILOG = (
    "Example: calib reliability scores.csv --score-col model_a --score-col model_b "
    "--by segment --bootstrap 200 --fail-above-ece 0.02"
)


def reliability(
    file: Annotated[str, typer.Argument(help=INPUT_HELP, show_default=False)],
    score_col: Annotated[
        list[str] | None,
        typer.Option(
            "--score-col",
            help="Column of probabilities; repeat to compare models side by side.",
            show_default="score",
        ),
    ] = None,
    label_col: LabelColOpt = "label",
    weight_col: WeightColOpt = None,
    positive_label: PositiveLabelOpt = None,
    by: Annotated[
        str | None, typer.Option("--by", help="Also report each value of this column.")
    ] = None,
    bins: Annotated[int, typer.Option("--bins", min=1, max=10_000, help="Number of bins.")] = 10,
    strategy: Annotated[
        BinStrategyChoice,
        typer.Option("--strategy", help="uniform: equal-width bins; quantile: equal-mass bins."),
    ] = "uniform",
    bootstrap: Annotated[
        int,
        typer.Option(
            "--bootstrap", min=0, help="Bootstrap replicates for ECE intervals (0: none)."
        ),
    ] = 0,
    fail_above_ece: Annotated[
        float | None, typer.Option("--fail-above-ece", help="Exit 1 when any ECE exceeds this.")
    ] = None,
    fail_below_auc: Annotated[
        float | None, typer.Option("--fail-below-auc", help="Exit 1 when any AUC is below this.")
    ] = None,
    input_format: InputFormatOpt = None,
    on_invalid: OnInvalidOpt = "error",
    as_json: JsonOpt = False,
    report: ReportOpt = None,
    seed: SeedOpt = DEFAULT_SEED,
    quiet: QuietOpt = False,
    no_color: NoColorOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Calibration and discrimination figures, bin table and chart for score columns."""
    with command_session(quiet=quiet, no_color=no_color, debug=debug) as session:
        from calib_cli.report.payloads import reliability_payload
        from calib_cli.report.tables import (
            reliability_detail,
            reliability_summary_table,
            stack,
        )
        from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability

        request = ReliabilityRequest(
            file=file,
            score_cols=tuple(score_col or ["score"]),
            label_col=label_col,
            weight_col=weight_col,
            positive_label=positive_label,
            by=by,
            n_bins=bins,
            strategy=cast(BinStrategy, chosen(strategy)),
            n_bootstrap=bootstrap,
            fail_above_ece=fail_above_ece,
            fail_below_auc=fail_below_auc,
            input_format=cast("InputFormat | None", chosen_or_none(input_format)),
            on_invalid=cast(OnInvalid, chosen(on_invalid)),
            report=report,
            seed=seed,
        )
        result = run_reliability(request, warn=session.warn)
        emit_report(session, reliability_payload(result), as_json=as_json, report_path=report)
        if not as_json:
            title = f"Reliability of {result.source} ({result.n_bins} {result.strategy} bins)"
            columns = [(entry.heading, entry.summary) for entry in result.entries]
            session.result(reliability_summary_table(columns, title=title))
            session.result(
                stack(
                    [
                        reliability_detail(entry.summary, title=f"Bins: {entry.heading}")
                        for entry in result.entries
                    ]
                )
            )
        if result.gate_failures:
            raise CheckFailedError("; ".join(result.gate_failures))
