"""``calib recalibrate``: options -> :mod:`calib_cli.workflows.recalibrate` -> report."""

from __future__ import annotations

from typing import Annotated, cast

import typer

from calib_cli.cli.options import (
    DEFAULT_SEED,
    INPUT_HELP,
    CalibrationMethodChoice,
    DebugOpt,
    DecimalCommaOpt,
    EngineOpt,
    FitDataChoice,
    InputFormatOpt,
    LabelColOpt,
    MaxInvalidOpt,
    NoColorOpt,
    OnInvalidOpt,
    OutputFormatOpt,
    PositiveLabelOpt,
    QuietOpt,
    ReportOpt,
    ScoreColOpt,
    ScoreKindOpt,
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
from calib_cli.cli.session import command_session, emit_report
from calib_cli.cli.summary_options import (
    FitSummaryOpt,
    RefineDialectOpt,
    RefineSqlOpt,
    RefineSummaryOpt,
    RefineTableOpt,
)
from calib_cli.types import CalibrationMethod, Engine, FitData, InputFormat, OnInvalid, ScoreKind

EPILOG = (
    "Examples: calib recalibrate scores.csv --method prior --sampling-record "
    "train_sample.csv.sampling.json -o out.csv  |  calib recalibrate --fit holdout.csv "
    "--method isotonic --save-model iso.json  |  calib recalibrate today.parquet --model "
    "iso.json -o today_calibrated.parquet  |  calib recalibrate --fit-summary day.summary.parquet "
    "--method platt --save-model platt.json"
)


def recalibrate(
    file: Annotated[
        str | None,
        typer.Argument(
            help=INPUT_HELP + " Optional with --fit and --save-model.", show_default=False
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            help="Output file with the added column ('-': stdout).",
            show_default="stdout when it is not a terminal",
        ),
    ] = None,
    method: Annotated[
        CalibrationMethodChoice | None,
        typer.Option(
            "--method",
            metavar="<method>",  # the choices are in the help
            help="prior, platt, isotonic, beta, histogram, or auto (cross-validated choice).",
            show_default="from the other options",
        ),
    ] = None,
    sampling_record: Annotated[
        str | None, typer.Option("--sampling-record", help="Record written by calib resample.")
    ] = None,
    negative_rate: Annotated[
        float | None, typer.Option("--negative-rate", help="Negatives were kept with rate W.")
    ] = None,
    positive_rate: Annotated[
        float | None,
        typer.Option(
            "--positive-rate", help="Positives were kept with this rate.", show_default="1"
        ),
    ] = None,
    train_prior: Annotated[
        float | None, typer.Option("--train-prior", help="Positive rate the model was trained at.")
    ] = None,
    target_prior: Annotated[
        float | None, typer.Option("--target-prior", help="Positive rate of the scored population.")
    ] = None,
    fit: Annotated[
        str | None, typer.Option("--fit", help="Labelled file to fit the calibrator on.")
    ] = None,
    fit_summary: FitSummaryOpt = None,
    refine_summary: RefineSummaryOpt = None,
    refine_sql: RefineSqlOpt = None,
    sql_dialect: RefineDialectOpt = None,
    table: RefineTableOpt = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Apply a saved calibrator (JSON artifact).")
    ] = None,
    cross_fit_folds: Annotated[
        int | None,
        typer.Option(
            "--cross-fit",
            **in_range("Out-of-fold calibrated scores of a labelled INPUT with K folds.", low=2),
        ),
    ] = None,
    save_model: Annotated[
        str | None, typer.Option("--save-model", help="Save the fitted calibrator (JSON).")
    ] = None,
    fit_data: Annotated[
        FitDataChoice,
        typer.Option(
            "--fit-data",
            help="With a prior correction and a fitted map: population "
            "(labels drawn from the scored population: prior first) or sampled "
            "(labels sampled like the training set: map first).",
        ),
    ] = "population",
    score_col: ScoreColOpt = "score",
    label_col: LabelColOpt = "label",
    weight_col: WeightColOpt = None,
    weight_kind_choice: WeightKindOpt = None,
    positive_label: PositiveLabelOpt = None,
    strata_col: Annotated[
        str | None,
        typer.Option(
            "--strata-col",
            help="Strata column of a stratified record.",
            show_default="the record's",
        ),
    ] = None,
    score_kind: ScoreKindOpt = "probability",
    output_col: Annotated[
        str, typer.Option("--output-col", help="Name of the added column.")
    ] = "calibrated",
    eps: Annotated[
        float | None,
        typer.Option(
            "--eps", help="Isotonic outputs are kept inside \\[eps, 1 - eps].", show_default="1e-6"
        ),
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Isotonic: strictly increasing map (keeps AUC).")
    ] = False,
    target_smoothing: Annotated[
        bool, typer.Option("--target-smoothing", help="Platt's smoothed targets.")
    ] = False,
    bins: Annotated[
        int | None,
        typer.Option("--bins", **in_range("Histogram: number of bins.", low=1), show_default="10"),
    ] = None,
    folds: Annotated[
        int | None,
        typer.Option(
            "--folds",
            **in_range("auto on rows (--fit FILE, --cross-fit): cross-validation folds.", low=2),
            show_default="5",
        ),
    ] = None,
    fold_col: Annotated[
        str | None,
        typer.Option(
            "--fold-col",
            help="--fit-summary with auto: the summaries' --by column whose groups are the "
            "cross-validation folds.",
        ),
    ] = None,
    input_format: InputFormatOpt = None,
    separator: SeparatorOpt = None,
    decimal_comma: DecimalCommaOpt = False,
    output_format: OutputFormatOpt = None,
    on_invalid: OnInvalidOpt = "error",
    max_invalid_rows: MaxInvalidOpt = None,
    report: ReportOpt = None,
    seed: SeedOpt = DEFAULT_SEED,
    engine: EngineOpt = "auto",
    quiet: QuietOpt = False,
    no_color: NoColorOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Turn scores into calibrated probabilities: prior correction after sampling, or a fitted
    map (Platt, isotonic, beta, histogram, auto), saved and applied anywhere."""
    with command_session(quiet=quiet, no_color=no_color, debug=debug) as session:
        from calib_cli.report.payloads import recalibrate_payload
        from calib_cli.report.tables import calibration_effect_table, method_choice_table
        from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate

        request = RecalibrateRequest(
            file=file,
            output=output,
            method=cast("CalibrationMethod | None", chosen_or_none(method)),
            sampling_record=sampling_record,
            negative_rate=negative_rate,
            positive_rate=positive_rate,
            train_prior=train_prior,
            target_prior=target_prior,
            fit=fit,
            model=model,
            cross_fit_folds=cross_fit_folds,
            save_model=save_model,
            fit_data=cast(FitData, chosen(fit_data)),
            score_col=score_col,
            label_col=label_col,
            weight_col=weight_col,
            weight_kind=weight_kind(weight_kind_choice, weight_col) or "frequency",
            positive_label=positive_label,
            strata_col=strata_col,
            score_kind=cast(ScoreKind, chosen(score_kind)),
            output_col=output_col,
            eps=eps,
            strict=strict,
            target_smoothing=target_smoothing,
            bins=bins,
            folds=folds,
            input_format=cast("InputFormat | None", chosen_or_none(input_format)),
            dialect=csv_dialect(separator, decimal_comma),
            output_format=cast("InputFormat | None", chosen_or_none(output_format)),
            on_invalid=cast(OnInvalid, chosen(on_invalid)),
            max_invalid=max_invalid(max_invalid_rows),
            report=report,
            seed=seed,
            engine=cast(Engine, chosen(engine)),
            fit_summaries=tuple(fit_summary or ()),
            refine_summaries=tuple(refine_summary or ()),
            refine_sql=refine_sql,
            refine_dialect=chosen_or_none(sql_dialect),
            refine_table=table,
            fold_col=fold_col,
        )
        with session.progress(f"recalibrate {file or fit}") as step:
            result = run_recalibrate(request, warn=session.warn, progress=step)
        if result.choice is not None:
            session.info(method_choice_table(result.choice))
        if result.fit is not None:
            title = f"On the fit data ({result.fit.file})"
            session.info(calibration_effect_table(result.fit, title=title))
        if result.input is not None:
            heading = "out-of-fold, " if result.cross_fit is not None else ""
            rows = result.input.effect.rows
            title = f"On {result.input.file} ({heading}{rows:,} rows)"
            session.info(calibration_effect_table(result.input, title=title))
        if result.saved_model is not None:
            steps = " -> ".join(result.step_kinds)
            session.info(f"saved calibrator ({steps}): {result.saved_model}")
        emit_report(session, recalibrate_payload(result), as_json=False, report_path=report)
