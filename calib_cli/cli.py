"""The ``calib`` command line: Typer wiring only.

Each command parses options, reads with :mod:`calib_cli.io`, computes with
:mod:`calib_cli.core`, saves with :mod:`calib_cli.artifacts`, renders with
:mod:`calib_cli.report` and writes with :mod:`calib_cli.io`. This is the one place where
errors become exit codes (:func:`command_session`). Core modules are imported inside the
commands so that ``calib --help`` never imports SciPy.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console, RenderableType

from calib_cli import __version__
from calib_cli.errors import CalibError, CheckFailed, ExitCode, UsageError
from calib_cli.types import (
    BinStrategy,
    InputFormat,
    OnInvalid,
    ScoreKind,
    choices,
)

if TYPE_CHECKING:
    import numpy as np

    from calib_cli.io import Table


def _choice_enum(name: str, alias: object) -> type[Enum]:
    """A str Enum for Typer built from a Literal alias in types.py (choices defined once)."""
    return Enum(name, {value: value for value in choices(alias)}, type=str)  # type: ignore[return-value]


InputFormatChoice: Any = _choice_enum("InputFormatChoice", InputFormat)
ScoreKindChoice: Any = _choice_enum("ScoreKindChoice", ScoreKind)
BinStrategyChoice: Any = _choice_enum("BinStrategyChoice", BinStrategy)
OnInvalidChoice: Any = _choice_enum("OnInvalidChoice", OnInvalid)

app = typer.Typer(
    name="calib",
    help=(
        "Make classifier scores trustworthy as probabilities: resample, recalibrate, "
        "estimate label shift, re-rank strata, and check reliability, from CSV, Parquet, "
        "Arrow or NDJSON files ('-' for stdin/stdout)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)

# ----------------------------------------------------------------------- shared options

INPUT_HELP = "Input file (CSV, TSV, Parquet, Arrow IPC, NDJSON; .gz for text), or '-' for stdin."
ScoreColOpt = Annotated[str, typer.Option("--score-col", help="Column of scores.")]
LabelColOpt = Annotated[str, typer.Option("--label-col", help="Column of 0/1 labels.")]
WeightColOpt = Annotated[
    str | None, typer.Option("--weight-col", help="Column of non-negative sample weights.")
]
PositiveLabelOpt = Annotated[
    str | None,
    typer.Option(
        "--positive-label",
        help="The label value that means positive, when labels are not 0/1 or true/false.",
    ),
]
InputFormatOpt = Annotated[
    InputFormatChoice | None,
    typer.Option("--input-format", help="Read inputs as this format (default: by extension; "
                 "sniffed on stdin)."),
]
OutputFormatOpt = Annotated[
    InputFormatChoice | None,
    typer.Option("--output-format", help="Write as this format (default: by extension; CSV "
                 "on stdout)."),
]
ScoreKindOpt = Annotated[
    ScoreKindChoice,
    typer.Option("--score-kind", help="probability in [0, 1], logit, or raw margin."),
]
OnInvalidOpt = Annotated[
    OnInvalidChoice,
    typer.Option("--on-invalid", help="error: refuse bad rows; drop: drop them and say how many."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")]
ReportOpt = Annotated[
    str | None, typer.Option("--report", help="Also write the JSON report to this file.")
]
QuietOpt = Annotated[bool, typer.Option("-q", "--quiet", help="Print nothing but errors.")]
NoColorOpt = Annotated[bool, typer.Option("--no-color", help="No colour (also NO_COLOR=1).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of all randomness (recorded).")]
DebugOpt = Annotated[
    bool, typer.Option("--debug", help="Show the traceback of an internal error.")
]
DEFAULT_SEED = 0


# ------------------------------------------------------------------------ the session


@dataclass
class Session:
    """The consoles and switches every command shares."""

    out: Console
    err: Console
    quiet: bool
    debug: bool

    def warn(self, message: str) -> None:
        """A warning line on standard error (silenced by --quiet)."""
        if not self.quiet:
            self.err.print(f"[yellow]warning:[/yellow] {message}", highlight=False)

    def info(self, renderable: RenderableType | str) -> None:
        """Diagnostics (tables, notes) on standard error (silenced by --quiet)."""
        if not self.quiet:
            self.err.print(renderable, highlight=False)

    def result(self, renderable: RenderableType | str) -> None:
        """A report's tables on standard output (silenced by --quiet)."""
        if not self.quiet:
            self.out.print(renderable, highlight=False)


OFF_TERMINAL_WIDTH = 120


def _console(*, stderr: bool, no_color: bool) -> Console:
    color_off = no_color or "NO_COLOR" in os.environ
    force = os.environ.get("FORCE_COLOR") not in (None, "", "0") and not color_off
    stream = sys.stderr if stderr else sys.stdout
    # Off a terminal (logs, files, pipes) Rich would assume 80 columns; wide tables read
    # better at 120 unless COLUMNS says otherwise.
    width = None if stream.isatty() or "COLUMNS" in os.environ else OFF_TERMINAL_WIDTH
    return Console(
        width=width,
        stderr=stderr,
        no_color=color_off,
        color_system=None if color_off else "auto",
        force_terminal=True if force else None,
        highlight=False,
        soft_wrap=False,
    )


@contextlib.contextmanager
def command_session(*, quiet: bool, no_color: bool, debug: bool) -> Iterator[Session]:
    """Run a command body, turning every failure into one line on stderr and an exit code."""
    session = Session(
        out=_console(stderr=False, no_color=no_color),
        err=_console(stderr=True, no_color=no_color),
        quiet=quiet,
        debug=debug,
    )
    try:
        yield session
    except typer.Exit:
        raise
    except CalibError as error:
        _fail(session, str(error), error.exit_code, checked=isinstance(error, CheckFailed))
    except BrokenPipeError:
        _silence_stdout()
        raise typer.Exit(BROKEN_PIPE_EXIT) from None
    except KeyboardInterrupt:
        _fail(session, "interrupted", ExitCode.INTERRUPTED)
    except MemoryError:
        _fail(session, "out of memory", ExitCode.INTERNAL)
    except Exception as error:  # a bug: the only case that may print a traceback
        if debug:
            session.err.print(traceback.format_exc(), markup=False, highlight=False)
        _fail(
            session,
            f"internal error: {type(error).__name__}: {error} (run with --debug for the "
            "traceback, and please report it)",
            ExitCode.INTERNAL,
        )


def _fail(session: Session, message: str, code: ExitCode, *, checked: bool = False) -> NoReturn:
    prefix = "check failed" if checked else "error"
    session.err.print(f"[red]{prefix}:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(int(code))


BROKEN_PIPE_EXIT = 141  # 128 + SIGPIPE, as other Unix tools end when `| head` closes early


def _silence_stdout() -> None:
    """Downstream closed the pipe: point stdout at /dev/null so that Python's final flush
    does not print 'Exception ignored ... BrokenPipeError'."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def emit_report(session: Session, payload: Any, *, as_json: bool, report_path: str | None) -> None:
    """Write the JSON report to --report and, with --json, to standard output."""
    from calib_cli import io
    from calib_cli.report import dumps

    text = dumps(payload)
    if report_path is not None:
        io.write_text(report_path, text)
    if as_json:
        io.write_text(io.STDIO, text)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"calib {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """calib: classifier scores you can trust as probabilities."""


def _enum_value(choice: Any) -> Any:
    return None if choice is None else choice.value


# -------------------------------------------------------------------------- reliability


@app.command(
    epilog=(
        "Example: calib reliability scores.csv --score-col model_a --score-col model_b "
        "--by segment --bootstrap 200 --fail-above-ece 0.02"
    )
)
def reliability(
    file: Annotated[str, typer.Argument(help=INPUT_HELP, show_default=False)],
    score_col: Annotated[
        list[str] | None,
        typer.Option(
            "--score-col", help="Column of probabilities; repeat to compare models side by side.",
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
        typer.Option("--bootstrap", min=0, help="Bootstrap replicates for ECE intervals (0: none)."),
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
        import numpy as np

        from calib_cli import io
        from calib_cli.core.metrics import reliability_summary
        from calib_cli.report import reliability_detail, reliability_summary_table, stack

        score_cols = score_col or ["score"]
        table = read_scored_table(
            session,
            file,
            input_format=_enum_value(input_format),
            score_cols=score_cols,
            label_col=label_col,
            weight_col=weight_col,
            positive_label=positive_label,
            on_invalid=_enum_value(on_invalid),
        )
        y_true = table.labels(label_col, positive_label=positive_label)
        weights = table.weights(weight_col)
        groups = table.categories(by, option="--by") if by is not None else None
        rng = np.random.default_rng(seed)

        entries: list[tuple[str, dict[str, Any], Any]] = []
        for column in score_cols:
            scores = table.scores(column)
            for group_name, rows in _group_rows(groups, table.n_rows):
                summary = reliability_summary(
                    y_true[rows],
                    scores[rows],
                    sample_weight=weights[rows],
                    n_bins=bins,
                    strategy=_enum_value(strategy),
                    n_bootstrap=bootstrap,
                    rng=rng,
                )
                keys: dict[str, Any] = {"score_column": column}
                heading = column
                if by is not None:
                    keys.update({"by": by, "group": group_name})
                    heading = f"{column} · {by}={group_name if group_name is not None else 'all'}"
                entries.append((heading, keys, summary))

        payloads = [{**keys, **_as_dict(summary)} for _, keys, summary in entries]
        payload: Any = payloads[0] if len(payloads) == 1 else payloads
        emit_report(session, payload, as_json=as_json, report_path=report)
        if not as_json:
            title = f"Reliability of {table.name} ({bins} {_enum_value(strategy)} bins)"
            session.result(
                reliability_summary_table(
                    [(heading, summary) for heading, _, summary in entries], title=title
                )
            )
            session.result(
                stack(
                    [reliability_detail(summary, title=f"Bins: {heading}")
                     for heading, _, summary in entries]
                )
            )
        _check_gates(entries, fail_above_ece=fail_above_ece, fail_below_auc=fail_below_auc)


def _as_dict(summary: Any) -> dict[str, Any]:
    from calib_cli.report import to_jsonable

    converted: dict[str, Any] = to_jsonable(summary)
    return converted


def _group_rows(
    groups: tuple[list[str], np.ndarray[Any, Any]] | None, n_rows: int
) -> Iterator[tuple[str | None, Any]]:
    """(group name, row selector) pairs: all rows first, then each group when --by is set."""
    yield None, slice(None)
    if groups is None:
        return
    names, codes = groups
    for index, name in enumerate(names):
        yield name, codes == index


def _check_gates(
    entries: list[tuple[str, dict[str, Any], Any]],
    *,
    fail_above_ece: float | None,
    fail_below_auc: float | None,
) -> None:
    failures: list[str] = []
    for heading, _, summary in entries:
        if fail_above_ece is not None and not summary.ece <= fail_above_ece:
            failures.append(f"ECE {summary.ece:.4g} > {fail_above_ece:g} for {heading}")
        if fail_below_auc is not None and not summary.auc >= fail_below_auc:
            failures.append(f"AUC {summary.auc:.4g} < {fail_below_auc:g} for {heading}")
    if failures:
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        raise CheckFailed(failures[0] + more)


def read_scored_table(
    session: Session,
    path: str,
    *,
    input_format: InputFormat | None,
    score_cols: list[str],
    label_col: str | None,
    weight_col: str | None,
    positive_label: str | None,
    on_invalid: OnInvalid,
    score_kind: ScoreKind = "probability",
) -> Table:
    """Read a table and, with ``--on-invalid drop``, drop rows whose score, label or weight is
    invalid (saying how many)."""
    from calib_cli import io

    table = io.read_table(path, input_format=input_format)
    if on_invalid == "drop":
        table, dropped = io.drop_invalid_rows(
            table,
            score_cols=score_cols,
            score_kind=score_kind,
            label_col=label_col,
            positive_label=positive_label,
            weight_col=weight_col,
        )
        if dropped:
            session.warn(f"{table.name}: dropped {dropped} invalid rows of {dropped + table.n_rows}")
    return table


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except BrokenPipeError:
        _silence_stdout()
        raise SystemExit(BROKEN_PIPE_EXIT) from None
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(int(ExitCode.INTERRUPTED)) from None


__all__ = ["app", "main", "UsageError"]


# ----------------------------------------------------------------------------- resample

HASH_NAME = "calib-hash64-v1"


@app.command(
    epilog=(
        "Example: calib resample train.parquet -o train_sample.parquet --negative-rate 0.1 "
        "--key-col user_id --seed 42   (writes train_sample.parquet.sampling.json)"
    )
)
def resample(
    file: Annotated[str, typer.Argument(help=INPUT_HELP, show_default=False)],
    output: Annotated[
        str, typer.Option("-o", "--output", help="Output file, or '-' for stdout.",
                          show_default=False)
    ],
    negative_rate: Annotated[
        float | None, typer.Option("--negative-rate", help="Keep each negative with probability W.")
    ] = None,
    target_positive_rate: Annotated[
        float | None,
        typer.Option("--target-positive-rate",
                     help="Choose W so that the sample's expected positive rate is B'."),
    ] = None,
    target_ratio: Annotated[
        str | None,
        typer.Option("--target-ratio", help="Choose W for an expected POS:NEG ratio, e.g. 1:4."),
    ] = None,
    positive_rate: Annotated[
        float, typer.Option("--positive-rate", help="Keep each positive with this probability.")
    ] = 1.0,
    strata_col: Annotated[
        str | None,
        typer.Option("--strata-col", help="Sample each stratum at its own rates (see --rates-file)."),
    ] = None,
    rates_file: Annotated[
        str | None,
        typer.Option("--rates-file",
                     help="Table of per-stratum rates: columns stratum, negative_rate "
                          "[, positive_rate]."),
    ] = None,
    key_col: Annotated[
        str | None,
        typer.Option("--key-col",
                     help="Hash this id column (rows sharing a key are kept together); "
                          "default: the row number."),
    ] = None,
    weight_col_out: Annotated[
        str | None,
        typer.Option("--weight-col-out", help="Add importance weights 1/rate under this name."),
    ] = None,
    record: Annotated[
        str | None,
        typer.Option("--record", help="Where to write the sampling record "
                     "(default: OUTPUT.sampling.json)."),
    ] = None,
    label_col: LabelColOpt = "label",
    positive_label: PositiveLabelOpt = None,
    input_format: InputFormatOpt = None,
    output_format: OutputFormatOpt = None,
    report: ReportOpt = None,
    seed: SeedOpt = DEFAULT_SEED,
    quiet: QuietOpt = False,
    no_color: NoColorOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Downsample negatives (and optionally positives) by a deterministic, portable hash rule,
    streaming, and record the rates for `calib recalibrate --sampling-record`."""
    with command_session(quiet=quiet, no_color=no_color, debug=debug) as session:
        from calib_cli import io
        from calib_cli.artifacts import Artifact, save_artifact
        from calib_cli.core.sampling import (
            ClassRates,
            rate_threshold,
            resolve_stratum_rates,
        )
        from calib_cli.report import resample_table

        if output == io.STDIO and record is None:
            raise UsageError("writing the sample to stdout needs --record PATH for the record")
        record_path = record or f"{output}.sampling.json"
        io.require_distinct_outputs([output, record_path], [file])
        if rates_file is not None and strata_col is None:
            raise UsageError("--rates-file needs --strata-col")

        lazy, fmt = io.scan_table(file, input_format=_enum_value(input_format))
        name = io.display_name(file)
        label_dtype = lazy.collect_schema().get(label_col)
        before = io.class_counts(
            lazy, name=name, label_col=label_col, positive_label=positive_label,
            strata_col=strata_col,
        )
        key_type = io.key_kind(lazy, key_col, name=name)
        by_stratum = {c.stratum or "": (float(c.positives), float(c.negatives)) for c in before}
        explicit = _read_rates_file(rates_file) if rates_file is not None else None
        rates = resolve_stratum_rates(
            by_stratum,
            rates=explicit,
            negative_rate=negative_rate,
            target_positive_rate=target_positive_rate,
            target_ratio=target_ratio,
            positive_rate=positive_rate,
        )
        kept = io.sample_rows(
            lazy,
            label_col=label_col,
            label_dtype=label_dtype,
            positive_label=positive_label,
            strata_col=strata_col,
            key_col=key_col,
            key_hash_kind=key_type,
            seed=seed,
            thresholds={
                s: (rate_threshold(r.negative_rate), rate_threshold(r.positive_rate))
                for s, r in rates.items()
            },
            weights={s: (1.0 / r.negative_rate, 1.0 / r.positive_rate) for s, r in rates.items()},
            weight_col_out=weight_col_out,
        )
        after = io.counts_by_stratum(
            kept, label_col=label_col, label_dtype=label_dtype, positive_label=positive_label,
            strata_col=strata_col,
        )
        summary = _sampling_summary(before, after, rates)
        params: dict[str, Any] = {
            "hash": HASH_NAME,
            "seed": seed,
            "key_col": key_col,
            "key_type": key_type,
            "label_col": label_col,
            "positive_label": positive_label,
            "strata_col": strata_col,
        }
        if strata_col is None:
            only: ClassRates = rates[""]
            params.update(negative_rate=only.negative_rate, positive_rate=only.positive_rate)
        else:
            params["strata"] = {
                s: {"negative_rate": r.negative_rate, "positive_rate": r.positive_rate}
                for s, r in rates.items()
            }
        artifact = Artifact(
            kind="sampling",
            params=params,
            fitted_on={"file": name, "format": fmt, "output": io.display_name(output),
                       **summary},
        )
        io.sink_table(kept, output, output_format_override=_enum_value(output_format))
        save_artifact(record_path, artifact)
        emit_report(session, {"record": record_path, **artifact.params, **summary},
                    as_json=False, report_path=report)
        session.info(resample_table(summary, strata_col=strata_col))
        session.info(f"sampling record: {record_path}")


def _read_rates_file(path: str) -> dict[str, Any]:
    """``--rates-file``: stratum -> ClassRates from a small table."""
    from calib_cli import io
    from calib_cli.core.sampling import ClassRates

    table = io.read_table(path)
    names, codes = table.categories("stratum", option="--rates-file (column 'stratum')")
    negative = table.numbers("negative_rate")
    positive = table.numbers("positive_rate") if table.has_column("positive_rate") else None
    if len(names) != table.n_rows:
        raise UsageError(f"{table.name}: each stratum must appear once")
    return {
        names[code]: ClassRates(
            negative_rate=float(negative[row]),
            positive_rate=1.0 if positive is None else float(positive[row]),
        )
        for row, code in enumerate(codes)
    }


def _sampling_summary(before: list[Any], after: list[Any], rates: dict[str, Any]) -> dict[str, Any]:
    """Counts and base rates before and after, overall and per stratum."""
    after_by = {c.stratum: c for c in after}

    def block(rows: int, positives: int) -> dict[str, Any]:
        return {
            "rows": rows,
            "positives": positives,
            "negatives": rows - positives,
            "base_rate": positives / rows if rows else None,
        }

    strata: dict[str, Any] = {}
    for c in before:
        out = after_by.get(c.stratum)
        r = rates[c.stratum or ""]
        strata[c.stratum or ""] = {
            "negative_rate": r.negative_rate,
            "positive_rate": r.positive_rate,
            "before": block(c.rows, c.positives),
            "after": block(out.rows if out else 0, out.positives if out else 0),
        }
    total_before = block(sum(c.rows for c in before), sum(c.positives for c in before))
    total_after = block(sum(c.rows for c in after), sum(c.positives for c in after))
    summary: dict[str, Any] = {"before": total_before, "after": total_after}
    if any(c.stratum is not None for c in before):
        summary["strata"] = strata
    else:
        summary.update(negative_rate=rates[""].negative_rate, positive_rate=rates[""].positive_rate)
    return summary
