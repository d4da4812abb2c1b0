"""``calib rerank-strata``: options -> :mod:`calib_cli.workflows.rerank_strata` -> report."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, cast

import typer

from calib_cli.cli.options import (
    DEFAULT_SEED,
    DebugOpt,
    DecimalCommaOpt,
    EngineOpt,
    InputFormatOpt,
    LabelColOpt,
    NoColorOpt,
    OutputFormatOpt,
    PlotOpt,
    PlotScaleOpt,
    PositiveLabelOpt,
    QuietOpt,
    ReportOpt,
    ScoreColOpt,
    ScoreKindOpt,
    SeedOpt,
    SeparatorOpt,
    SlopeSmoothingChoice,
    WeightColOpt,
    WeightKindOpt,
    chosen,
    chosen_or_none,
    csv_dialect,
    in_range,
    weight_kind,
)
from calib_cli.cli.session import command_session, emit_report
from calib_cli.core.pca import PCACut, PCAScaling
from calib_cli.errors import UsageError
from calib_cli.types import Engine, InputFormat, PlotScale, ScoreKind, SlopeSmoothing, choices


def _choice_enum(name: str, alias: object) -> type[Enum]:
    """A str Enum for Typer from a Literal alias of the core (defined once, beside PCASolver)."""
    return Enum(name, {value: value for value in choices(alias)}, type=str)  # type: ignore[return-value]


PcaScalingChoice: Any = _choice_enum("PcaScalingChoice", PCAScaling)
PcaCutChoice: Any = _choice_enum("PcaCutChoice", PCACut)

EPILOG = (
    "Examples: calib rerank-strata --reference tune.csv --target test.csv --strata-col "
    "segment -o reranked.csv --plot rerank.png  |  calib rerank-strata --reference "
    "tune.parquet --target test.parquet --pca-features age,income,tenure --n-strata 3 "
    "-o reranked.parquet  |  as Zuo's paper, on features of one scale: --pca-features "
    "v1,v2,v3,v4 --pca-scaling center --pca-cut sign"
)


def rerank_strata(
    # required, but checked here: Typer's column of required marks cut the longest option
    # name at 80 columns
    reference: Annotated[
        str | None,
        typer.Option(
            "--reference",
            help="Required: labelled tuning rows (scores, labels, strata).",
            show_default=False,
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            help="Required: rows to re-rank (labels optional: then reported).",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            help="Target rows with rerank_score, calibrated and rerank_rank ('-': stdout).",
            show_default="stdout when not a terminal",
        ),
    ] = None,
    strata_col: Annotated[
        str | None, typer.Option("--strata-col", help="Column naming each row's stratum.")
    ] = None,
    pca_features: Annotated[
        list[str] | None,
        typer.Option(
            "--pca-features",
            help="Comma-separated feature columns (or the option repeated): strata from "
            "their first principal component (Algorithm 2) instead of --strata-col.",
        ),
    ] = None,
    pca_scaling: Annotated[
        PcaScalingChoice | None,
        typer.Option(
            "--pca-scaling",
            metavar="<scaling>",  # the choices are in the help; "<standardize|center>" crowds
            help="With --pca-features: standardize (centre, unit variance: unit-free, for "
            "columns in different units) or center (centre only, as the paper: for features "
            "on one scale, e.g. outputs of an earlier PCA, where standardizing makes the "
            "component noise).",
            show_default="standardize",
        ),
    ] = None,
    pca_cut: Annotated[
        PcaCutChoice | None,
        typer.Option(
            "--pca-cut",
            metavar="<cut>",
            help="With --pca-features: cut the component at quantiles into --n-strata "
            "strata, or at its sign into 2 (component <= 0: pc1, > 0: pc2; as the paper).",
            show_default="quantiles",
        ),
    ] = None,
    n_strata: Annotated[
        int | None,
        typer.Option(
            "--n-strata",
            **in_range("With --pca-features --pca-cut quantiles: number of strata.", low=1),
            show_default="3",
        ),
    ] = None,
    smoothing: Annotated[
        SlopeSmoothingChoice,
        typer.Option(
            "--smoothing",
            metavar="<method>",
            help="ROC slope: hull (concave hull, PAV) or loess (local quadratic, as in the paper).",
        ),
    ] = "hull",
    prevalence_file: Annotated[
        str | None,
        typer.Option(
            "--prevalence-file",
            help="Table of stratum, prevalence: the population's "
            "positive rate per stratum (default: from the weighted reference).",
        ),
    ] = None,
    estimate_target_prevalence: Annotated[
        bool,
        typer.Option(
            "--estimate-target-prevalence",
            help="Estimate each stratum's positive "
            "rate on the target from its scores (label shift, as estimate-shift).",
        ),
    ] = False,
    score_col: ScoreColOpt = "score",
    label_col: LabelColOpt = "label",
    weight_col: WeightColOpt = None,
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
    report: ReportOpt = None,
    plot: PlotOpt = None,
    plot_scale: PlotScaleOpt = None,
    seed: SeedOpt = DEFAULT_SEED,
    engine: EngineOpt = "auto",
    quiet: QuietOpt = False,
    no_color: NoColorOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Re-rank scores of per-stratum models by stratum odds times the stratum's ROC slope
    (Zuo 2021), so one ranking is best across strata; adds the population posterior."""
    with command_session(quiet=quiet, no_color=no_color, debug=debug) as session:
        for option, value in (("--reference", reference), ("--target", target)):
            if value is None:
                raise UsageError(f"missing option '{option}': give both --reference and --target")
        assert reference is not None and target is not None
        from calib_cli.report.payloads import rerank_strata_payload
        from calib_cli.report.tables import (
            pca_note,
            ranking_comparison_table,
            strata_table,
            stratum_prevalence_table,
            weight_kind_note,
        )
        from calib_cli.workflows.rerank_strata import RerankStrataRequest, run_rerank_strata

        request = RerankStrataRequest(
            reference=reference,
            target=target,
            output=output,
            strata_col=strata_col,
            pca_features=None if pca_features is None else ",".join(pca_features),
            n_strata=n_strata,
            pca_scaling=cast("PCAScaling | None", chosen_or_none(pca_scaling)),
            pca_cut=cast("PCACut | None", chosen_or_none(pca_cut)),
            smoothing=cast(SlopeSmoothing, chosen(smoothing)),
            prevalence_file=prevalence_file,
            estimate_target_prevalence=estimate_target_prevalence,
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
            report=report,
            seed=seed,
            engine=cast(Engine, chosen(engine)),
            plot=plot,
            plot_scale=cast("PlotScale | None", chosen_or_none(plot_scale)),
        )
        with session.progress("rerank-strata") as step:
            result = run_rerank_strata(request, warn=session.warn, progress=step)
        if plot is not None:
            from calib_cli.report.plots import rerank_result_figure, save_figure

            save_figure(rerank_result_figure(result, scale=request.plot_scale or "linear"), plot)
        if result.pca is not None:
            session.info(pca_note(result.pca))
        if result.target_prevalence is not None:
            session.info(stratum_prevalence_table(result.target_prevalence))
        session.info(strata_table(result.strata, source=result.odds_source))
        weights_note = weight_kind_note(request.weight_col, result.weight_kind or "frequency")
        if weights_note is not None:
            session.info(weights_note)
        if result.comparison is not None:
            session.info(ranking_comparison_table(result.comparison, result.comparison_rows))
        if result.streaming is not None:
            note = result.streaming
            session.info(
                f"streaming engine: reference ROC at {note.reference_cells:,} score cells "
                f"({note.exact_cells:,} of one distinct score), as in memory: the same rows and "
                "ranks; the AUCs within the report's bounds (see its 'streaming')"
            )
        emit_report(session, rerank_strata_payload(result), as_json=False, report_path=report)
