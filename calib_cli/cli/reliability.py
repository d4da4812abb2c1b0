"""``calib reliability``: options -> :mod:`calib_cli.workflows.reliability` -> report."""

from __future__ import annotations

from typing import Annotated, cast

import typer

from calib_cli.cli.options import (
    DEFAULT_SEED,
    INPUT_HELP,
    BinStrategyChoice,
    DebugOpt,
    DecimalCommaOpt,
    EngineOpt,
    InputFormatOpt,
    JsonOpt,
    LabelColOpt,
    MaxInvalidOpt,
    NoColorOpt,
    OnInvalidOpt,
    PlotOpt,
    PlotScaleOpt,
    PositiveLabelOpt,
    QuietOpt,
    ReportOpt,
    SeedOpt,
    SeparatorOpt,
    WeightColOpt,
    WeightKindOpt,
    chosen,
    chosen_or_none,
    csv_dialect,
    in_range,
    max_invalid,
    weight_kind,
)
from calib_cli.cli.session import command_session, emit_report, json_on_stdout
from calib_cli.errors import CheckFailedError, UsageError
from calib_cli.types import BinStrategy, Engine, InputFormat, OnInvalid, PlotScale, WeightKind

EPILOG = (
    "Example: calib reliability scores.csv --score-col model_a --score-col model_b "
    "--by segment --bootstrap 200 --fail-above-ece 0.02 --plot reliability.png; "
    "calib reliability --from-summary summaries/2026-11-*.parquet --by segment"
)


def reliability(
    files: Annotated[
        list[str] | None,
        typer.Argument(
            help=INPUT_HELP + " After --from-summary: more summary files (a shell glob).",
            show_default=False,
            metavar="FILE",
        ),
    ] = None,
    from_summary: Annotated[
        list[str] | None,
        typer.Option(
            "--from-summary",
            help="Report on summary files (calib summarize) instead of rows: files, "
            "directories of part files or quoted globs; repeat, or follow with more paths; "
            "they are merged.",
            show_default=False,
        ),
    ] = None,
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
    weight_kind_choice: WeightKindOpt = None,
    positive_label: PositiveLabelOpt = None,
    by: Annotated[
        str | None, typer.Option("--by", help="Also report each value of this column.")
    ] = None,
    bins: Annotated[
        int, typer.Option("--bins", **in_range("Number of bins.", low=1, high=10_000))
    ] = 10,
    strategy: Annotated[
        BinStrategyChoice,
        typer.Option("--strategy", help="uniform: equal-width bins; quantile: equal-mass bins."),
    ] = "uniform",
    bootstrap: Annotated[
        int,
        typer.Option(
            "--bootstrap",
            **in_range(None, low=0),
            help="Bootstrap replicates for ECE intervals (0: none).",
        ),
    ] = 0,
    fail_above_ece: Annotated[
        float | None, typer.Option("--fail-above-ece", help="Exit 1 when any ECE exceeds this.")
    ] = None,
    fail_below_auc: Annotated[
        float | None, typer.Option("--fail-below-auc", help="Exit 1 when any AUC is below this.")
    ] = None,
    input_format: InputFormatOpt = None,
    separator: SeparatorOpt = None,
    decimal_comma: DecimalCommaOpt = False,
    on_invalid: OnInvalidOpt = "error",
    max_invalid_rows: MaxInvalidOpt = None,
    as_json: JsonOpt = False,
    report: ReportOpt = None,
    plot: PlotOpt = None,
    plot_scale: PlotScaleOpt = None,
    seed: SeedOpt = DEFAULT_SEED,
    engine: EngineOpt = "auto",
    quiet: QuietOpt = False,
    no_color: NoColorOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Calibration and discrimination figures, bin table and chart for score columns."""
    with command_session(quiet=quiet, no_color=no_color, debug=debug) as session:
        from calib_cli.report.payloads import reliability_payload
        from calib_cli.report.tables import reliability_report
        from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability

        summaries = tuple(from_summary or [])
        rows = list(files or [])
        if summaries:  # `--from-summary day*.parquet`: the shell's other paths follow
            summaries, rows = (*summaries, *rows), []
        if len(rows) > 1:
            raise UsageError("give one FILE of rows (or several summaries with --from-summary)")
        # summaries carry their weight column and kind; --weight-kind overrides the kind
        kind = (
            cast("WeightKind | None", chosen_or_none(weight_kind_choice))
            if summaries
            else weight_kind(weight_kind_choice, weight_col)
        )
        request = ReliabilityRequest(
            file=rows[0] if rows else None,
            score_cols=tuple(score_col or ()),
            label_col=label_col,
            weight_col=weight_col,
            weight_kind=kind,
            positive_label=positive_label,
            by=by,
            n_bins=bins,
            strategy=cast(BinStrategy, chosen(strategy)),
            n_bootstrap=bootstrap,
            fail_above_ece=fail_above_ece,
            fail_below_auc=fail_below_auc,
            input_format=cast("InputFormat | None", chosen_or_none(input_format)),
            dialect=csv_dialect(separator, decimal_comma),
            on_invalid=cast(OnInvalid, chosen(on_invalid)),
            max_invalid=max_invalid(max_invalid_rows),
            report=report,
            seed=seed,
            engine=cast(Engine, chosen(engine)),
            from_summaries=summaries,
            plot=plot,
            plot_scale=cast("PlotScale | None", chosen_or_none(plot_scale)),
        )
        with session.progress(f"reliability of {rows[0] if rows else 'summaries'}") as step:
            result = run_reliability(request, warn=session.warn, progress=step)
        if plot is not None:
            from calib_cli.report.plots import reliability_result_figure, save_figure

            save_figure(
                reliability_result_figure(result, scale=request.plot_scale or "linear"), plot
            )
        if as_json or report is not None:
            emit_report(session, reliability_payload(result), as_json=as_json, report_path=report)
        if not json_on_stdout(as_json, report):
            session.result(reliability_report(result))
        if result.gate_failures:
            raise CheckFailedError("; ".join(result.gate_failures))
