"""``calib export-sql``: a saved calibrator as one SQL expression, for a warehouse engine."""

from __future__ import annotations

from dataclasses import dataclass

from calib_cli import io
from calib_cli.artifacts import STEP_KINDS, load_artifact, steps_of
from calib_cli.errors import OptionError
from calib_cli.sql.calibrators import calibrated_sql
from calib_cli.types import ScoreKind, Warn
from calib_cli.workflows.common import check_paths, ignore


@dataclass(frozen=True)
class ExportSqlRequest:
    """The options of an ``export-sql`` run (``score_kind`` None: the Platt step's own kind,
    else probability)."""

    model: str
    dialect: str
    score_col: str | None = None
    score_expr: str | None = None
    score_kind: ScoreKind | None = None
    output: str = "-"


@dataclass(frozen=True)
class ExportSqlResult:
    """The emitted expression and what it was made from."""

    model: str
    kind: str
    n_steps: int
    dialect: str
    score_kind: ScoreKind
    sql: str


def run_export_sql(request: ExportSqlRequest, *, warn: Warn = ignore) -> ExportSqlResult:
    """Load and validate the calibrator, build its expression, write it (``-``: stdout)."""
    if request.score_col is not None and request.score_expr is not None:
        raise OptionError("--score-col and --score-expr are exclusive: give one")
    check_paths(inputs=[request.model], files=[request.output])
    artifact = load_artifact(request.model, kinds=("chain", *STEP_KINDS))
    steps = steps_of(artifact)
    kind: ScoreKind = request.score_kind or (
        steps[0].score_kind if steps[0].kind == "platt" else "probability"
    )
    sql = calibrated_sql(
        steps,
        dialect_name=request.dialect,
        score_col=request.score_col or "score",
        score_expr=request.score_expr,
        score_kind=kind,
    )
    io.write_text(request.output, sql + "\n")
    return ExportSqlResult(
        model=request.model,
        kind=artifact.kind,
        n_steps=len(steps),
        dialect=request.dialect,
        score_kind=kind,
        sql=sql,
    )
