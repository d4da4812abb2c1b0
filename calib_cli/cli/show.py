"""``calib show``: options -> :mod:`calib_cli.workflows.show` -> table, JSON or picture."""

from __future__ import annotations

from typing import Annotated, cast

import typer

from calib_cli.cli.options import (
    DebugOpt,
    JsonOpt,
    NoColorOpt,
    PlotOpt,
    PlotScaleOpt,
    QuietOpt,
    chosen_or_none,
)
from calib_cli.cli.session import command_session, emit_report

EPILOG = "Example: calib show model.json --plot model.png --plot-scale logit"


def show(
    artifact: Annotated[
        str,
        typer.Argument(
            help="A saved calibrator (--save-model) or sampling record (--record).",
            show_default=False,
        ),
    ],
    as_json: JsonOpt = False,
    plot: PlotOpt = None,
    plot_scale: PlotScaleOpt = None,
    quiet: QuietOpt = False,
    no_color: NoColorOpt = False,
    debug: DebugOpt = False,
) -> None:
    """What a saved calibrator or sampling record is: kind, steps, fitted numbers, provenance."""
    with command_session(quiet=quiet, no_color=no_color, debug=debug) as session:
        from calib_cli.report.payloads import show_payload
        from calib_cli.report.tables import show_table
        from calib_cli.workflows.show import ShowRequest, run_show

        request = ShowRequest(artifact=artifact, plot=plot, plot_scale=chosen_or_none(plot_scale))
        result = run_show(request, warn=session.warn)
        if plot is not None:
            from calib_cli.report.plots import PlotScale, calibrator_figure, save_figure

            scale = cast(PlotScale, request.plot_scale or "linear")
            save_figure(calibrator_figure(result.artifact, scale=scale), plot)
        emit_report(session, show_payload(result), as_json=as_json, report_path=None)
        if not as_json:
            session.result(show_table(result))
