"""``calib estimate-shift``: options -> :mod:`calib_cli.workflows.estimate_shift` -> report."""

from __future__ import annotations

from typing import Annotated, cast

import typer

from calib_cli.cli.options import (
    DEFAULT_SEED,
    CiMethodChoice,
    DebugOpt,
    DecimalCommaOpt,
    EngineOpt,
    InputFormatOpt,
    JsonOpt,
    LabelColOpt,
    NoColorOpt,
    OutputFormatOpt,
    PlotOpt,
    PositiveLabelOpt,
    QuietOpt,
    ReferenceWeightColOpt,
    ReportOpt,
    ScoreColOpt,
    ScoreKindOpt,
    SeedOpt,
    SeparatorOpt,
    ShiftMethodChoice,
    WeightKindOpt,
    chosen,
    chosen_or_none,
    csv_dialect,
    in_range,
    weight_kind,
)
from calib_cli.cli.session import command_session, emit_report, json_on_stdout
from calib_cli.cli.summary_options import ReferenceSummaryOpt, TargetSummaryOpt
from calib_cli.types import CiMethod, Engine, InputFormat, ScoreKind, ShiftMethod

EPILOG = (
    "Examples: calib estimate-shift --reference calibration.csv --target today.parquet  |  "
    "calib estimate-shift --reference ref.csv --target batch.csv --batch-col day "
    "--costs 1:20 -o decided.csv --report shift.json --plot shift.png  |  "
    "calib estimate-shift --reference-summary ref.parquet --target-summary days.parquet "
    "--batch-col day --json"
)

MAP_OPTIONS = {  # typer.Option of --map-nodes, --map-beta and --map-power
    name: typer.Option(f"--map-{name}", **in_range(help, low=low, high=high), show_default=default)
    for name, help, low, high, default in (
        ("nodes", "map: nodes of the piecewise-linear density.", 2, 100, "10"),
        ("beta", "map: strength of the prior tying the positive density to the reference's.",
         0, None, "1000"),
        ("power", "map: power p of the prior's penalty.", 1, None, "1"),
    )
}  # fmt: skip


def estimate_shift(
    reference: Annotated[
        str | None,
        typer.Option(
            "--reference",
            help="Scores and labels from the population the model was calibrated on.",
            show_default=False,
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            help="Scores of the new batch (labels optional: then only used to report the error).",
            show_default=False,
        ),
    ] = None,
    reference_summary: ReferenceSummaryOpt = None,
    target_summary: TargetSummaryOpt = None,
    output: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            help="Target rows with the calibrated probability (and "
            "decision with --costs); '-' for stdout.",
        ),
    ] = None,
    method: Annotated[
        ShiftMethodChoice,
        typer.Option(
            "--method",
            metavar="<method>",
            help="Estimator: auto (mle, whatever the data; see README), mle, em, acc, pacc, map.",
        ),
    ] = "auto",
    batch_col: Annotated[
        str | None,
        typer.Option(
            "--batch-col",
            help="Estimate each value of this column (day, week, segment) separately, in one pass.",
        ),
    ] = None,
    bootstrap: Annotated[
        int,
        typer.Option(
            "--bootstrap",
            **in_range(None, low=0),
            help="Bootstrap replicates over target and reference rows, for the interval and "
            "the fit p-value.",
        ),
    ] = 200,
    ci_method: Annotated[
        CiMethodChoice,
        typer.Option(
            "--ci-method",
            help="bootstrap (any method) or profile (mle and auto only; not with --backtest).",
        ),
    ] = "bootstrap",
    costs: Annotated[
        str | None,
        typer.Option(
            "--costs",
            help="FP:FN costs: flag rows whose calibrated probability is at "
            "least FP/(FP+FN) and compare static and re-estimated decisions.",
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            help="acc: score threshold (default: the one maximising TPR - FPR on the reference).",
        ),
    ] = None,
    map_nodes: Annotated[int | None, MAP_OPTIONS["nodes"]] = None,
    map_beta: Annotated[float | None, MAP_OPTIONS["beta"]] = None,
    map_power: Annotated[float | None, MAP_OPTIONS["power"]] = None,
    backtest: Annotated[
        bool,
        typer.Option(
            "--backtest",
            help="The target is labelled: run every method on each --batch-col batch as a "
            "job whose labels arrive --label-delay batches late would have, and report "
            "each method's errors (MAE, interval coverage).",
        ),
    ] = False,
    label_delay: Annotated[
        int | None,
        typer.Option(
            "--label-delay",
            **in_range(None, low=1),
            help="--backtest and --history's past batches: labels arrive this many batches "
            "late (K, at least 1: batch t is estimated from the labels of batches up to t - K; "
            "default 1). A new batch uses every --history batch before it.",
        ),
    ] = None,
    history: Annotated[
        str | None,
        typer.Option(
            "--history",
            help="Labelled past batches (same --batch-col): blend the estimators by how they "
            "erred on them, with an interval from their past errors.",
        ),
    ] = None,
    score_col: ScoreColOpt = "score",
    label_col: LabelColOpt = "label",
    weight_col: ReferenceWeightColOpt = None,
    weight_kind_choice: WeightKindOpt = None,
    positive_label: PositiveLabelOpt = None,
    score_kind: ScoreKindOpt = "probability",
    output_col: Annotated[
        str, typer.Option("--output-col", help="Name of the column of calibrated probabilities.")
    ] = "calibrated",
    input_format: InputFormatOpt = None,
    separator: SeparatorOpt = None,
    decimal_comma: DecimalCommaOpt = False,
    output_format: OutputFormatOpt = None,
    as_json: JsonOpt = False,
    report: ReportOpt = None,
    plot: PlotOpt = None,
    seed: SeedOpt = DEFAULT_SEED,
    engine: EngineOpt = "auto",
    quiet: QuietOpt = False,
    no_color: NoColorOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Estimate the positive rate of an unlabeled batch from its scores (label shift),
    recalibrate the batch to it, and move the decision threshold."""
    with command_session(quiet=quiet, no_color=no_color, debug=debug) as session:
        from calib_cli.report.payloads import estimate_shift_payload
        from calib_cli.report.tables import decision_table, shift_table
        from calib_cli.workflows.estimate_shift import EstimateShiftRequest, run_estimate_shift

        request = EstimateShiftRequest(
            reference=reference,
            target=target,
            output=output,
            method=cast(ShiftMethod, chosen(method)),
            batch_col=batch_col,
            n_bootstrap=bootstrap,
            ci_method=cast(CiMethod, chosen(ci_method)),
            costs=costs,
            threshold=threshold,
            map_nodes=map_nodes,
            map_beta=map_beta,
            map_power=map_power,
            score_col=score_col,
            label_col=label_col,
            weight_col=weight_col,
            weight_kind=weight_kind(weight_kind_choice, weight_col) or "frequency",
            positive_label=positive_label,
            score_kind=cast(ScoreKind, chosen(score_kind)),
            output_col=output_col,
            input_format=cast("InputFormat | None", chosen_or_none(input_format)),
            dialect=csv_dialect(separator, decimal_comma),
            output_format=cast("InputFormat | None", chosen_or_none(output_format)),
            as_json=as_json,
            report=report,
            seed=seed,
            engine=cast(Engine, chosen(engine)),
            plot=plot,
            backtest=backtest,
            label_delay=label_delay,
            history=history,
            reference_summaries=tuple(reference_summary or ()),
            target_summaries=tuple(target_summary or ()),
        )
        if backtest:
            from calib_cli.report.payloads import backtest_payload
            from calib_cli.report.tables import backtest_batch_table, backtest_summary_table
            from calib_cli.workflows.estimate_shift import run_backtest

            with session.progress("estimate-shift --backtest") as step:
                tested = run_backtest(request, warn=session.warn, progress=step)
            emit_report(session, backtest_payload(tested), as_json=as_json, report_path=report)
            if not json_on_stdout(as_json, report):
                session.result(backtest_summary_table(tested))
                session.result(backtest_batch_table(tested))
            return
        with session.progress("estimate-shift") as step:
            result = run_estimate_shift(request, warn=session.warn, progress=step)
        if plot is not None:
            from calib_cli.report.plots import save_figure, shift_result_figure

            save_figure(shift_result_figure(result), plot)
        emit_report(session, estimate_shift_payload(result), as_json=as_json, report_path=report)
        show = session.result if output is None else session.info
        if not json_on_stdout(as_json, report):
            show(shift_table(result.batches, batch_col=result.batch_col, source=result.source))
            if result.history is not None:
                from calib_cli.report.tables import history_table

                show(history_table(result.history, result.batches, batch_col=result.batch_col))
            cut, batches = result.decision_threshold, result.batches
            if cut is not None:
                show(decision_table(batches, batch_col=result.batch_col, threshold=cut))
