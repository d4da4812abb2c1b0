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
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast

import typer
from rich.console import Console, RenderableType

from calib_cli import __version__
from calib_cli.errors import CalibError, CheckFailedError, ExitCode, InputError, UsageError
from calib_cli.types import (
    BinStrategy,
    CalibrationMethod,
    CiMethod,
    FitData,
    FittedMethod,
    InputFormat,
    OnInvalid,
    ScoreKind,
    ShiftMethod,
    SlopeSmoothing,
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
    typer.Option(
        "--input-format",
        help="Read inputs as this format (default: by extension; sniffed on stdin).",
    ),
]
OutputFormatOpt = Annotated[
    InputFormatChoice | None,
    typer.Option(
        "--output-format", help="Write as this format (default: by extension; CSV on stdout)."
    ),
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
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show the traceback of an internal error.")]
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


class _PipeAwareConsole(Console):
    """A Rich console that ends like other Unix tools when the reader closes the pipe (Rich's
    own handler exits 1, which a cron job would read as a failed check)."""

    def on_broken_pipe(self) -> None:
        _silence_stdout()
        raise SystemExit(BROKEN_PIPE_EXIT)


def _console(*, stderr: bool, no_color: bool) -> Console:
    color_off = no_color or "NO_COLOR" in os.environ
    force = os.environ.get("FORCE_COLOR") not in (None, "", "0") and not color_off
    stream = sys.stderr if stderr else sys.stdout
    # Off a terminal (logs, files, pipes) Rich would assume 80 columns; wide tables read
    # better at 120 unless COLUMNS says otherwise.
    width = None if stream.isatty() or "COLUMNS" in os.environ else OFF_TERMINAL_WIDTH
    return _PipeAwareConsole(
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
        _fail(session, str(error), error.exit_code, checked=isinstance(error, CheckFailedError))
    except BrokenPipeError:
        _silence_stdout()
        raise typer.Exit(BROKEN_PIPE_EXIT) from None
    except KeyboardInterrupt:
        _fail(session, "interrupted", ExitCode.INTERRUPTED)
    except OSError as error:  # writing a report or table to a full or failing stream
        _fail(
            session,
            f"cannot write the output ({error.strerror or error})",
            ExitCode.CANNOT_WRITE,
        )
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


def check_paths(
    *,
    inputs: list[str | None],
    table_output: str | None = None,
    output_format: Any = None,
    files: list[str | None] | None = None,
) -> None:
    """Before any work: stdin read at most once, no output over an input, every output
    writable (and a known table format), so a long job never ends in a usage error."""
    from calib_cli import io

    outputs = [table_output, *(files or [])]
    io.require_distinct_outputs(outputs, inputs)
    io.check_destination(table_output, data_format=_enum_value(output_format), table=True)
    for path in files or []:
        io.check_destination(path)


def _finite_option(value: float | None, option: str) -> None:
    import math

    if value is not None and not math.isfinite(value):
        raise UsageError(f"{option} must be a finite number, got {value}")


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
        import numpy as np

        from calib_cli import io
        from calib_cli.core.metrics import reliability_summary
        from calib_cli.report import reliability_detail, reliability_summary_table, stack

        score_cols = score_col or ["score"]
        check_paths(inputs=[file], files=[report])
        _finite_option(fail_above_ece, "--fail-above-ece")
        _finite_option(fail_below_auc, "--fail-below-auc")
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

        entries: list[tuple[str, dict[str, Any], Any]] = []
        for column in score_cols:
            scores = table.scores(column)
            for group_name, rows in _groups(table, by, with_all_rows=True):
                where = table.name if group_name is None else f"{table.name} ({by}={group_name})"
                with io.naming(where):
                    # a fresh generator per entry: a column's interval does not depend on
                    # which other columns or groups are reported
                    summary = reliability_summary(
                        y_true[rows],
                        scores[rows],
                        sample_weight=weights[rows],
                        n_bins=bins,
                        strategy=_enum_value(strategy),
                        n_bootstrap=bootstrap,
                        rng=np.random.default_rng(seed),
                    )
                keys: dict[str, Any] = {"score_column": column, "seed": seed}
                heading = column
                if by is not None:
                    keys.update({"by": by, "group": group_name})
                    heading = f"{column}\n{by}={group_name if group_name is not None else 'all'}"
                    # (the table shows the group under the column; gate messages keep one line)
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
                    [
                        reliability_detail(summary, title=f"Bins: {heading}")
                        for heading, _, summary in entries
                    ]
                )
            )
        _check_gates(entries, fail_above_ece=fail_above_ece, fail_below_auc=fail_below_auc)


def _as_dict(summary: Any) -> dict[str, Any]:
    from calib_cli.report import to_jsonable

    converted: dict[str, Any] = to_jsonable(summary)
    return converted


MISSING_GROUP = "(missing)"


def _groups(
    table: Table, column: str | None, *, with_all_rows: bool = False
) -> Iterator[tuple[Any, Any]]:
    """(value, row selector) pairs for --by and --batch-col: all rows (value None) first when
    asked or when there is no column, then each value of the column in its natural order.
    Rows without a value form the group "(missing)"."""
    if column is None or with_all_rows:
        yield None, slice(None)
    if column is None:
        return
    option = "--by" if with_all_rows else "--batch-col"
    values, codes = table.groups(column, option=option)
    for index, value in enumerate(values):
        yield (MISSING_GROUP if value is None else value), codes == index


def _check_gates(
    entries: list[tuple[str, dict[str, Any], Any]],
    *,
    fail_above_ece: float | None,
    fail_below_auc: float | None,
) -> None:
    failures: list[str] = []
    for title, _, summary in entries:
        heading = title.replace("\n", " (") + ")" if "\n" in title else title
        if fail_above_ece is not None and not summary.ece <= fail_above_ece:
            failures.append(f"ECE {summary.ece:.4g} > {fail_above_ece:g} for {heading}")
        if fail_below_auc is not None and summary.auc != summary.auc:  # NaN: one class
            failures.append(
                f"AUC is undefined for {heading} (one class only), so it cannot be shown to "
                f"reach {fail_below_auc:g}"
            )
        elif fail_below_auc is not None and not summary.auc >= fail_below_auc:
            failures.append(f"AUC {summary.auc:.4g} < {fail_below_auc:g} for {heading}")
    if failures:
        raise CheckFailedError("; ".join(failures))


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
    typed: bool = False,
) -> Table:
    """Read a table and, with ``--on-invalid drop``, drop rows whose score, label or weight is
    invalid (saying how many)."""
    from calib_cli import io

    table = io.read_table(path, input_format=input_format, typed=typed)
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
            session.warn(
                f"{table.name}: dropped {dropped} invalid {'row' if dropped == 1 else 'rows'} "
                f"of {dropped + table.n_rows}"
            )
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
        str,
        typer.Option("-o", "--output", help="Output file, or '-' for stdout.", show_default=False),
    ],
    negative_rate: Annotated[
        float | None, typer.Option("--negative-rate", help="Keep each negative with probability W.")
    ] = None,
    target_positive_rate: Annotated[
        float | None,
        typer.Option(
            "--target-positive-rate",
            help="Choose W so that the sample's expected positive rate is B'.",
        ),
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
        typer.Option(
            "--strata-col", help="Sample each stratum at its own rates (see --rates-file)."
        ),
    ] = None,
    rates_file: Annotated[
        str | None,
        typer.Option(
            "--rates-file",
            help="Per-stratum rates: columns stratum, negative_rate, optionally positive_rate.",
        ),
    ] = None,
    key_col: Annotated[
        str | None,
        typer.Option(
            "--key-col",
            help="Hash this id column (rows sharing a key are kept together); "
            "default: the row number.",
        ),
    ] = None,
    weight_col_out: Annotated[
        str | None,
        typer.Option("--weight-col-out", help="Add importance weights 1/rate under this name."),
    ] = None,
    record: Annotated[
        str | None,
        typer.Option(
            "--record", help="Where to write the sampling record (default: OUTPUT.sampling.json)."
        ),
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

        if record is None and (io.canonical_output(output) == io.STDIO or io.is_stream(output)):
            raise UsageError(
                "writing the sample to stdout or a pipe needs --record PATH for the record"
            )
        record_path = record or f"{output}.sampling.json"
        check_paths(
            inputs=[file, rates_file],
            table_output=output,
            output_format=output_format,
            files=[record_path, report],
        )
        if rates_file is not None and strata_col is None:
            raise UsageError("--rates-file needs --strata-col")

        lazy, fmt = io.scan_table(
            file,
            input_format=_enum_value(input_format),
            typed=io.typed_output(output, _enum_value(output_format)),
            text_columns=[key_col] if key_col is not None else [],
        )
        name = io.display_name(file)
        before = io.class_counts(
            lazy,
            name=name,
            label_col=label_col,
            positive_label=positive_label,
            strata_col=strata_col,
        )
        label_dtype = lazy.collect_schema()[label_col]
        if weight_col_out is not None and weight_col_out in lazy.collect_schema():
            raise UsageError(
                f"{name} already has a column '{weight_col_out}'; choose another name for "
                "--weight-col-out"
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
            kept,
            label_col=label_col,
            label_dtype=label_dtype,
            positive_label=positive_label,
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
            fitted_on={
                "file": name,
                "format": fmt,
                "output": "stdout" if output == io.STDIO else output,
                **summary,
            },
        )
        io.sink_table(kept, output, output_format_override=_enum_value(output_format))
        save_artifact(record_path, artifact)
        emit_report(
            session,
            {"record": record_path, **artifact.params, **summary},
            as_json=False,
            report_path=report,
        )
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


# -------------------------------------------------------------------------- recalibrate

CalibrationMethodChoice: Any = _choice_enum("CalibrationMethodChoice", CalibrationMethod)
FitDataChoice: Any = _choice_enum("FitDataChoice", FitData)
AUC_CHANGE_TOLERANCE = 1e-6


@app.command(
    epilog=(
        "Examples: calib recalibrate scores.csv --method prior --sampling-record "
        "train_sample.csv.sampling.json -o out.csv  |  calib recalibrate --fit holdout.csv "
        "--method isotonic --save-model iso.json  |  calib recalibrate today.parquet --model "
        "iso.json -o today_calibrated.parquet"
    )
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
    model: Annotated[
        str | None, typer.Option("--model", help="Apply a saved calibrator (JSON artifact).")
    ] = None,
    cross_fit_folds: Annotated[
        int | None,
        typer.Option(
            "--cross-fit",
            min=2,
            help="Out-of-fold calibrated scores of a labelled INPUT with K folds.",
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
        typer.Option("--bins", min=1, help="Histogram: number of bins.", show_default="10"),
    ] = None,
    folds: Annotated[int, typer.Option("--folds", min=2, help="auto: cross-validation folds.")] = 5,
    input_format: InputFormatOpt = None,
    output_format: OutputFormatOpt = None,
    on_invalid: OnInvalidOpt = "error",
    report: ReportOpt = None,
    seed: SeedOpt = DEFAULT_SEED,
    quiet: QuietOpt = False,
    no_color: NoColorOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Turn scores into calibrated probabilities: prior correction after sampling, or a fitted
    map (Platt, isotonic, beta, histogram, auto), saved and applied anywhere."""
    with command_session(quiet=quiet, no_color=no_color, debug=debug) as session:
        import numpy as np

        from calib_cli import io
        from calib_cli.artifacts import (
            load_artifact,
            prior_from_sampling,
            provenance,
            save_artifact,
            steps_artifact,
            steps_of,
        )
        from calib_cli.core.chain import ChainFit, apply_chain, cross_fit_chain, fit_chain
        from calib_cli.core.prior import prior_shift_log_odds
        from calib_cli.report import calibration_effect_table, method_choice_table

        kind = _enum_value(score_kind)
        chosen_method = _enum_value(method)
        order = _enum_value(fit_data)
        invalid = _enum_value(on_invalid)
        prior_given = any(
            v is not None for v in (sampling_record, negative_rate, train_prior, target_prior)
        )
        plan = _recalibration_plan(
            file=file,
            output=output,
            method=chosen_method,
            prior_given=prior_given,
            fit=fit,
            model=model,
            cross_fit_folds=cross_fit_folds,
            save_model=save_model,
        )
        check_paths(
            inputs=[file, fit, model, sampling_record],
            table_output=output if file is not None else None,
            output_format=output_format,
            files=[save_model, report],
        )
        if positive_rate is not None and negative_rate is None:
            raise UsageError("--positive-rate goes with --negative-rate (the rates of a sample)")
        _require_method_for_options(
            plan.method,
            {
                "--eps": eps is not None,
                "--strict": strict,
                "--target-smoothing": target_smoothing,
                "--bins": bins is not None,
            },
        )
        eps_value = ISOTONIC_EPS if eps is None else eps
        if not 0.0 <= eps_value < 0.5:
            raise UsageError(f"--eps must be in [0, 0.5), got {eps}")
        rng = np.random.default_rng(seed)
        options: dict[str, dict[str, Any]] = {
            "platt": {"target_smoothing": target_smoothing},
            "isotonic": {"strict": strict, "eps": eps_value},
            "histogram": {"n_bins": HISTOGRAM_BINS if bins is None else bins},
        }

        prior = None
        if sampling_record is not None:
            explicit = (negative_rate, positive_rate, train_prior, target_prior)
            if any(value is not None for value in explicit):
                raise UsageError("give --sampling-record or explicit rates/priors, not both")
            prior = prior_from_sampling(load_artifact(sampling_record, kinds=("sampling",)))
        elif prior_given:
            from calib_cli.core.chain import PriorParams

            prior = PriorParams(
                log_odds_shift=prior_shift_log_odds(
                    negative_rate=negative_rate,
                    positive_rate=1.0 if positive_rate is None else positive_rate,
                    train_prior=train_prior,
                    target_prior=target_prior,
                )
            )
        payload: dict[str, Any] = {"method": plan.method, "seed": seed}
        steps: tuple[Any, ...] = ()
        if model is not None:
            steps = steps_of(
                load_artifact(
                    model, kinds=("chain", "prior", "platt", "isotonic", "beta", "histogram")
                )
            )
        elif plan.method == "prior":
            if prior is None:
                raise UsageError(
                    "--method prior needs --sampling-record, --negative-rate, or "
                    "--train-prior with --target-prior"
                )
            steps = (prior,)

        def fit_and_report(
            source: Table, scores: Any, labels: Any, weights: Any, strata: Any
        ) -> ChainFit:
            """Fit the chain on one labelled table; report auto's comparison when it chose."""
            with source.context():
                fitted = fit_chain(
                    scores,
                    labels,
                    method=cast("FittedMethod", plan.method),
                    sample_weight=weights,
                    prior=prior,
                    fit_data=order,
                    score_kind=kind,
                    strata=strata,
                    rng=rng,
                    n_folds=folds,
                    options=options,
                )
            if fitted.choice is not None:
                payload["auto"] = fitted.choice
                session.info(method_choice_table(fitted.choice))
            return fitted

        # the strata column is read only when a step is per stratum (a stratified record)
        stratified = [
            step.strata_col for step in (*steps, prior) if getattr(step, "strata_col", None)
        ]
        strata_column = (strata_col or stratified[0]) if stratified else None
        if strata_col is not None and not stratified:
            session.warn("--strata-col has no effect: no step of this calibration is per stratum")

        fit_table = None
        if fit is not None:
            fit_table = read_scored_table(
                session,
                fit,
                input_format=_enum_value(input_format),
                score_cols=[score_col],
                label_col=label_col,
                weight_col=weight_col,
                positive_label=positive_label,
                on_invalid=invalid,
                score_kind=kind,
            )
            fit_scores = fit_table.scores(score_col, kind=kind)
            fit_labels = fit_table.labels(label_col, positive_label=positive_label)
            fit_weights = fit_table.weights(weight_col)
            fit_strata = _strata_of(fit_table, strata_column)
            steps = fit_and_report(fit_table, fit_scores, fit_labels, fit_weights, fit_strata).steps
            after = apply_chain(steps, fit_scores, score_kind=kind, strata=fit_strata)
            payload["fit"] = _effect(
                fit_table.name, fit_scores, after, fit_labels, fit_weights, kind
            )
            session.info(
                calibration_effect_table(
                    payload["fit"], title=f"On the fit data ({fit_table.name})"
                )
            )
            _warn_auc_change(session, payload["fit"], fit_table.name)

        table = None
        if file is not None:
            table = read_scored_table(
                session,
                file,
                input_format=_enum_value(input_format),
                score_cols=[score_col],
                label_col=label_col,
                weight_col=weight_col,
                positive_label=positive_label,
                on_invalid=invalid,
                score_kind=kind,
                typed=io.typed_output(output or "-", _enum_value(output_format)),
            )
            scores = table.scores(score_col, kind=kind)
            labels = _optional_labels(
                session, table, label_col, positive_label, required=plan.cross_fit
            )
            weights = table.weights(weight_col)
            strata = _strata_of(table, strata_column)
            if plan.cross_fit:
                _check_folds(session, cross_fit_folds or folds, labels, table.name)
                if labels is None:
                    raise InputError(
                        f"{table.name}: --cross-fit needs labels (no column "
                        f"'{label_col}'; set --label-col)"
                    )
                # the chain fitted on every row (chosen by cross-validation for auto) is what
                # --save-model keeps; the out-of-fold scores use the same method
                final = fit_and_report(table, scores, labels, weights, strata)
                steps = final.steps
                fitted_method = final.choice.chosen if final.choice else plan.method
                with table.context():
                    calibrated = cross_fit_chain(
                        scores,
                        labels,
                        method=cast("FittedMethod", fitted_method),
                        sample_weight=weights,
                        prior=prior,
                        fit_data=order,
                        score_kind=kind,
                        strata=strata,
                        rng=rng,
                        n_folds=cross_fit_folds or folds,
                        options=options,
                    )
                    payload["cross_fit"] = cross_fit_folds
            else:
                calibrated = apply_chain(steps, scores, score_kind=kind, strata=strata)
            payload["input"] = _effect(table.name, scores, calibrated, labels, weights, kind)
            heading = "out-of-fold, " if plan.cross_fit else ""
            session.info(
                calibration_effect_table(
                    payload["input"], title=f"On {table.name} ({heading}{table.n_rows:,} rows)"
                )
            )
            if labels is not None:
                _warn_auc_change(session, payload["input"], table.name, cross_fitted=plan.cross_fit)

        payload["steps"] = [step.kind for step in steps]
        _warn_about_fits(session, steps)
        if save_model is not None:
            source_table = fit_table if fit_table is not None else table
            fitted_on = provenance(
                file=source_table.name if source_table is not None else "",
                rows=source_table.n_rows if source_table is not None else 0,
                columns={
                    "score": score_col,
                    "label": label_col,
                    "weight": weight_col,
                    "strata": strata_column,
                },
                seed=seed,
                score_kind=kind,
                fit_data=order if prior is not None else None,
                sampling_record=sampling_record,
                **_label_facts(payload.get("fit") or payload.get("input") or {}),
            )
            save_artifact(save_model, steps_artifact(steps, fitted_on))
            session.info(f"saved calibrator ({' -> '.join(payload['steps'])}): {save_model}")
        if table is not None:
            destination = _data_destination(output)
            frame = table.with_columns({output_col: calibrated})
            io.write_table(frame, destination, output_format_override=_enum_value(output_format))
        emit_report(session, payload, as_json=False, report_path=report)


ISOTONIC_EPS = 1e-6
HISTOGRAM_BINS = 10
METHOD_OF_OPTION = {
    "--eps": "isotonic",
    "--strict": "isotonic",
    "--target-smoothing": "platt",
    "--bins": "histogram",
}


def _require_method_for_options(method: str, given: dict[str, bool]) -> None:
    """A method's own options are refused with another method (they would have no effect)."""
    for option, is_given in given.items():
        owner = METHOD_OF_OPTION[option]
        if is_given and method not in (owner, "auto"):
            raise UsageError(
                f"{option} applies to --method {owner} (or auto); this call "
                f"{'applies a saved model' if method == 'model' else 'uses ' + method}"
            )


@dataclass(frozen=True)
class RecalibrationPlan:
    """What a recalibrate call does, checked before any file is read."""

    method: str  # "prior", "model", a fitted method, or "auto"
    cross_fit: bool


def _recalibration_plan(
    *,
    file: str | None,
    output: str | None,
    method: str | None,
    prior_given: bool,
    fit: str | None,
    model: str | None,
    cross_fit_folds: int | None,
    save_model: str | None,
) -> RecalibrationPlan:
    """Refuse option combinations that do not fit together (exit 2), and name the method."""
    if file is None:
        if fit is None or save_model is None:
            raise UsageError("give an INPUT file to calibrate (or --fit with --save-model)")
        if output is not None:
            raise UsageError("-o needs an INPUT file to calibrate")
    sources = [
        name
        for name, given in (("--fit", fit), ("--model", model), ("--cross-fit", cross_fit_folds))
        if given is not None
    ]
    if len(sources) > 1:
        raise UsageError(f"give one of --fit, --model, --cross-fit (got {' and '.join(sources)})")
    if model is not None:
        if method is not None:
            raise UsageError("--model already holds its method; drop --method")
        if prior_given:
            raise UsageError(
                "--model cannot take a prior correction too: save both in one "
                "chain with --fit ... --sampling-record ... --save-model"
            )
        return RecalibrationPlan(method="model", cross_fit=False)
    if fit is not None or cross_fit_folds is not None:
        if method == "prior":
            raise UsageError(
                "--method prior fits nothing; drop --fit/--cross-fit, or choose "
                "platt, isotonic, beta, histogram or auto"
            )
        return RecalibrationPlan(method=method or "auto", cross_fit=cross_fit_folds is not None)
    if method not in (None, "prior"):
        raise UsageError(f"--method {method} needs --fit FILE or --cross-fit K")
    if not prior_given:
        raise UsageError(
            "nothing to do: give --sampling-record, --negative-rate, "
            "--train-prior/--target-prior, --fit, --model or --cross-fit"
        )
    return RecalibrationPlan(method="prior", cross_fit=False)


def _check_folds(session: Session, n_folds: int, labels: Any, name: str) -> None:
    """--cross-fit K needs K rows at least; fewer than K rows of a class leaves folds
    without that class (their maps are then fitted on the other folds only)."""
    if labels is None:
        return
    if n_folds > labels.shape[0]:
        raise UsageError(
            f"--cross-fit {n_folds} asks for more folds than {name} has rows ({labels.shape[0]})"
        )
    smaller = int(min((labels == 1).sum(), (labels == 0).sum()))
    if n_folds > smaller:
        session.warn(
            f"{name}: --cross-fit {n_folds} is more than the {smaller} rows of the "
            "smaller class: some folds hold none of it"
        )


def _warn_about_fits(session: Session, steps: Any) -> None:
    """Say when a fit is not the plain optimum: separable data, or no convergence."""
    for step in steps:
        if getattr(step, "separable", False):
            session.warn(
                "the scores separate the classes perfectly: Platt's fit used target "
                "smoothing to stay finite (its slope is a lower bound)"
            )
        if getattr(step, "converged", True) is False:
            session.warn(
                f"the {step.kind} fit did not converge; its map may be off the "
                "optimum (check the before/after figures)"
            )


def _optional_labels(
    session: Session,
    table: Table,
    label_col: str,
    positive_label: str | None,
    *,
    required: bool,
) -> Any:
    """Labels when the column is there. When they are only used for the report, invalid
    labels are a warning (the calibration itself does not need them), not an error."""
    from calib_cli.errors import InputError

    if not table.has_column(label_col):
        return None
    try:
        return table.labels(label_col, positive_label=positive_label)
    except InputError as error:
        if required:
            raise
        session.warn(f"labels not used for the report: {error}")
        return None


def _strata_of(table: Table, column: str | None) -> Any:
    return None if column is None else table.categories(column, option="--strata-col")


def _effect(
    name: str,
    before: np.ndarray[Any, Any],
    after: np.ndarray[Any, Any],
    labels: np.ndarray[Any, Any] | None,
    weights: np.ndarray[Any, Any],
    score_kind: str,
) -> dict[str, Any]:
    """The report block of one file: its name and the core's before/after comparison."""
    from calib_cli import io
    from calib_cli.core.metrics import calibration_effect

    if score_kind == "logit":  # the model's own probability is expit(logit)
        from scipy.special import expit

        before = expit(before)
    with io.naming(name):
        effect = calibration_effect(
            labels,
            before,
            after,
            sample_weight=weights,
            before_are_probabilities=score_kind != "raw",
        )
    block: dict[str, Any] = {"file": name, **_as_dict(effect)}
    if labels is None:
        for key in ("positives", "base_rate", "before", "after"):
            block.pop(key)
    return block


def _warn_auc_change(
    session: Session, effect: dict[str, Any], name: str, *, cross_fitted: bool = False
) -> None:
    before, after = effect.get("before"), effect.get("after")
    if not before or not after or before["auc"] is None or after["auc"] is None:
        return
    change = abs(after["auc"] - before["auc"])
    if change > AUC_CHANGE_TOLERANCE:
        reason = (
            "each fold has its own map, so rows of different folds can change order"
            if cross_fitted
            else "the map is not strictly increasing (it pools scores into steps); "
            "isotonic --strict, platt and beta keep the ranking"
        )
        session.warn(
            f"{name}: calibration changed the AUC by {change:.2g} ({before['auc']:.6f} -> "
            f"{after['auc']:.6f}): {reason}"
        )


def _label_facts(effect: dict[str, Any]) -> dict[str, Any]:
    return {key: effect[key] for key in ("positives", "base_rate") if key in effect}


def _data_destination(output: str | None) -> str:
    """-o, else standard output unless it is a terminal (where rows would flood the screen)."""
    if output is not None:
        return output
    if sys.stdout.isatty():
        raise UsageError("give -o PATH for the output (or -o - to print the rows here)")
    return "-"


# ------------------------------------------------------------------------ rerank-strata

SlopeSmoothingChoice: Any = _choice_enum("SlopeSmoothingChoice", SlopeSmoothing)


@app.command(
    "rerank-strata",
    epilog=(
        "Examples: calib rerank-strata --reference tune.csv --target test.csv --strata-col "
        "segment -o reranked.csv  |  calib rerank-strata --reference tune.parquet --target "
        "test.parquet --pca-features age,income,tenure --n-strata 3 -o reranked.parquet"
    ),
)
def rerank_strata(
    reference: Annotated[
        str,
        typer.Option(
            "--reference", help="Labelled tuning rows (scores, labels, strata).", show_default=False
        ),
    ],
    target: Annotated[
        str,
        typer.Option(
            "--target", help="Rows to re-rank (labels optional: then reported).", show_default=False
        ),
    ],
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
        str | None,
        typer.Option(
            "--pca-features",
            help="Comma-separated feature columns: strata from "
            "their first principal component (Algorithm 2) instead of --strata-col.",
        ),
    ] = None,
    n_strata: Annotated[
        int, typer.Option("--n-strata", min=1, help="With --pca-features: number of strata.")
    ] = 3,
    smoothing: Annotated[
        SlopeSmoothingChoice,
        typer.Option(
            "--smoothing",
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
    positive_label: PositiveLabelOpt = None,
    score_kind: ScoreKindOpt = "probability",
    output_col: Annotated[
        str, typer.Option("--output-col", help="Name of the calibrated-probability column.")
    ] = "calibrated",
    input_format: InputFormatOpt = None,
    output_format: OutputFormatOpt = None,
    report: ReportOpt = None,
    seed: SeedOpt = DEFAULT_SEED,
    quiet: QuietOpt = False,
    no_color: NoColorOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Re-rank scores of per-stratum models by stratum odds times the stratum's ROC slope
    (Zuo 2021), so one ranking is best across strata; adds the population posterior."""
    with command_session(quiet=quiet, no_color=no_color, debug=debug) as session:
        from calib_cli import io
        from calib_cli.core.strata import (
            compare_rankings,
            estimate_stratum_prevalence,
            fit_strata,
            odds_from_prevalence,
            rerank,
            rerank_rank,
            stratum_odds,
            summarise_strata,
        )
        from calib_cli.report import (
            ranking_comparison_table,
            strata_table,
            stratum_prevalence_table,
        )

        if (strata_col is None) == (pca_features is None):
            raise UsageError("give --strata-col COL or --pca-features C1,C2,... (one of them)")
        if prevalence_file is not None and estimate_target_prevalence:
            raise UsageError("give --prevalence-file or --estimate-target-prevalence, not both")
        check_paths(
            inputs=[reference, target, prevalence_file],
            table_output=output,
            output_format=output_format,
            files=[report],
        )
        kind = _enum_value(score_kind)
        fmt_in = _enum_value(input_format)
        ref = io.read_table(reference, input_format=fmt_in)
        tgt = io.read_table(
            target,
            input_format=fmt_in,
            typed=io.typed_output(output or "-", _enum_value(output_format)),
        )
        ref_scores = ref.scores(score_col, kind=kind)
        ref_labels = ref.labels(label_col, positive_label=positive_label)
        ref_weights = ref.weights(weight_col)
        tgt_scores = tgt.scores(score_col, kind=kind)
        payload: dict[str, Any] = {"seed": seed, "smoothing": _enum_value(smoothing)}
        added: dict[str, Any] = {}

        if pca_features is not None:
            ref_strata, tgt_strata, pca_payload = _pca_strata(
                ref, tgt, pca_features, n_strata, ref_labels, ref_weights
            )
            payload["pca"] = pca_payload
            session.info(_pca_note(pca_payload))
            added["pca_stratum"] = tgt_strata
        else:
            ref_strata = ref.text(str(strata_col), option="--strata-col")
            tgt_strata = tgt.text(str(strata_col), option="--strata-col")

        with ref.context():
            slopes = fit_strata(
                ref_scores,
                ref_labels,
                ref_strata,
                sample_weight=ref_weights,
                smoothing=_enum_value(smoothing),
            )
        if prevalence_file is not None:
            odds = odds_from_prevalence(_read_prevalence_file(prevalence_file))
            payload["odds_source"] = "prevalence file"
        elif estimate_target_prevalence:
            estimates = estimate_stratum_prevalence(
                ref_scores,
                ref_labels,
                ref_strata,
                tgt_scores,
                tgt_strata,
                reference_weight=ref_weights,
                score_kind=kind,
                seed=seed,
            )
            for stratum, estimate in estimates.items():
                for warning in estimate.warnings:
                    session.warn(f"stratum '{stratum}': {warning}")
            prevalences = {
                stratum: {
                    key: getattr(e, key)
                    for key in ("prevalence", "ci_low", "ci_high", "method", "reference_prevalence")
                }
                for stratum, e in estimates.items()
            }
            payload["target_prevalence"] = prevalences
            odds = odds_from_prevalence(_bounded_prevalences(session, prevalences))
            payload["odds_source"] = "estimated on the target"
            session.info(stratum_prevalence_table(prevalences))
        else:
            odds = stratum_odds(ref_labels, ref_strata, sample_weight=ref_weights)
            payload["odds_source"] = "reference"
        result = rerank(tgt_scores, tgt_strata, slopes, odds)
        summary = summarise_strata(slopes, odds, tgt_strata)
        payload["strata"] = summary
        session.info(strata_table(summary, source=payload["odds_source"]))
        if tgt.has_column(label_col):
            tgt_labels = tgt.labels(label_col, positive_label=positive_label)
            comparison = compare_rankings(
                tgt_labels, tgt_scores, result.rerank_score, sample_weight=tgt.weights(weight_col)
            )
            payload["comparison"] = comparison
            session.info(ranking_comparison_table(comparison))
        added.update(
            {
                "rerank_score": result.rerank_score,
                output_col: result.calibrated,
                "rerank_rank": rerank_rank(result.rerank_score, tgt_scores),
            }
        )
        frame = tgt.with_columns(added)
        io.write_table(
            frame, _data_destination(output), output_format_override=_enum_value(output_format)
        )
        emit_report(session, payload, as_json=False, report_path=report)


def _pca_strata(
    ref: Table, tgt: Table, features: str, n_strata: int, ref_labels: Any, ref_weights: Any
) -> tuple[Any, Any, dict[str, Any]]:
    """Algorithm 2 wiring: read the feature columns, let the core cut the strata."""
    import numpy as np

    from calib_cli.core.pca import pca_strata

    names = [name.strip() for name in features.split(",") if name.strip()]
    if not names:
        raise UsageError("--pca-features needs at least one column name")
    ref_x = np.column_stack([ref.numbers(name, option="--pca-features") for name in names])
    tgt_x = np.column_stack([tgt.numbers(name, option="--pca-features") for name in names])
    strata = pca_strata(
        ref_x,
        tgt_x,
        n_strata=n_strata,
        names=names,
        reference_labels=ref_labels,
        reference_weights=ref_weights,
    )
    payload = _as_dict(strata)
    for key in ("reference_strata", "target_strata"):
        payload.pop(key)
    return strata.reference_strata, strata.target_strata, payload


def _pca_note(payload: dict[str, Any]) -> str:
    rates = ", ".join(
        f"{k}: {v:.4f}" if v is not None else f"{k}: —"
        for k, v in payload["reference_label_rate"].items()
    )
    return (
        f"first principal component of {', '.join(payload['features'])}: explains "
        f"{payload['explained_variance_ratio']:.1%} of the variance; {payload['n_strata']} "
        f"strata (pca_stratum), reference label rates {rates}"
    )


PREVALENCE_FLOOR = 1e-6


def _bounded_prevalences(
    session: Session, prevalences: dict[str, dict[str, Any]]
) -> dict[str, float]:
    """Estimated rates as odds need 0 < rate < 1: a stratum estimated at exactly 0 (or 1) is
    kept at 1e-6 (1 - 1e-6), with a warning, so its rows rank last (first) but stay ranked."""
    bounded: dict[str, float] = {}
    for stratum, estimate in prevalences.items():
        rate = float(estimate["prevalence"])
        kept = min(max(rate, PREVALENCE_FLOOR), 1.0 - PREVALENCE_FLOOR)
        if kept != rate:
            session.warn(
                f"stratum '{stratum}': estimated positive rate {rate:g}; using {kept:g} "
                "for its odds"
            )
        bounded[stratum] = kept
    return bounded


def _read_prevalence_file(path: str) -> dict[str, float]:
    """``--prevalence-file``: stratum -> population positive rate."""
    from calib_cli import io

    table = io.read_table(path)
    names, codes = table.categories("stratum", option="--prevalence-file (column 'stratum')")
    column = "prevalence" if table.has_column("prevalence") else "rate"
    rates = table.numbers(column, option="--prevalence-file (column 'prevalence')")
    if len(names) != table.n_rows:
        raise UsageError(f"{table.name}: each stratum must appear once")
    return {names[code]: float(rates[row]) for row, code in enumerate(codes)}


# ------------------------------------------------------------------------ estimate-shift

ShiftMethodChoice: Any = _choice_enum("ShiftMethodChoice", ShiftMethod)
CiMethodChoice: Any = _choice_enum("CiMethodChoice", CiMethod)


@app.command(
    "estimate-shift",
    epilog=(
        "Examples: calib estimate-shift --reference calibration.csv --target today.parquet  |  "
        "calib estimate-shift --reference ref.csv --target batch.csv --batch-col day "
        "--costs 1:20 -o decided.csv --report shift.json"
    ),
)
def estimate_shift(
    reference: Annotated[
        str,
        typer.Option(
            "--reference",
            help="Scores and labels from the population the model was calibrated on.",
            show_default=False,
        ),
    ],
    target: Annotated[
        str,
        typer.Option(
            "--target",
            help="Scores of the new batch (labels optional: then only used to report the error).",
            show_default=False,
        ),
    ],
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
            help="Estimator. auto: mle, or map when the positive class drifted (see README).",
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
            min=0,
            help="Bootstrap replicates over target and "
            "reference rows, for the interval and the fit p-value.",
        ),
    ] = 200,
    ci_method: Annotated[
        CiMethodChoice,
        typer.Option(
            "--ci-method",
            help="bootstrap (any method) or profile (profile likelihood; mle only).",
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
            help="acc/pacc: score threshold (default: the "
            "one maximising TPR - FPR on the reference).",
        ),
    ] = None,
    map_nodes: Annotated[
        int,
        typer.Option(
            "--map-nodes", min=2, help="map: nodes of the piecewise-linear positive density."
        ),
    ] = 10,
    map_beta: Annotated[
        float,
        typer.Option(
            "--map-beta",
            min=0.0,
            help="map: strength of the prior tying the positive density to the reference's.",
        ),
    ] = 1000.0,
    map_power: Annotated[
        float,
        typer.Option("--map-power", min=1.0, help="map: power p >= 1 of the prior's penalty."),
    ] = 1.0,
    score_col: ScoreColOpt = "score",
    label_col: LabelColOpt = "label",
    weight_col: Annotated[
        str | None, typer.Option("--weight-col", help="Column of reference sample weights.")
    ] = None,
    positive_label: PositiveLabelOpt = None,
    score_kind: ScoreKindOpt = "probability",
    output_col: Annotated[
        str, typer.Option("--output-col", help="Name of the calibrated-probability column.")
    ] = "calibrated",
    input_format: InputFormatOpt = None,
    output_format: OutputFormatOpt = None,
    as_json: JsonOpt = False,
    report: ReportOpt = None,
    seed: SeedOpt = DEFAULT_SEED,
    quiet: QuietOpt = False,
    no_color: NoColorOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Estimate the positive rate of an unlabeled batch from its scores (label shift),
    recalibrate the batch to it, and move the decision threshold."""
    with command_session(quiet=quiet, no_color=no_color, debug=debug) as session:
        import numpy as np

        from calib_cli import io
        from calib_cli.core.shift import (
            bayes_threshold,
            decision_costs,
            estimate_prevalence,
            fit_reference,
            posterior,
        )
        from calib_cli.report import decision_table, shift_table

        check_paths(
            inputs=[reference, target],
            table_output=output,
            output_format=output_format,
            files=[report],
        )
        if _enum_value(ci_method) == "profile" and _enum_value(method) != "mle":
            raise UsageError(
                "--ci-method profile is the profile likelihood of --method mle; "
                "use it with --method mle (other methods: bootstrap)"
            )
        if as_json and output == "-":
            raise UsageError("--json and -o - would both write to stdout; give -o a file")
        cost_fp, cost_fn = _parse_costs(costs) if costs is not None else (None, None)
        kind = _enum_value(score_kind)
        fmt_in = _enum_value(input_format)
        ref = io.read_table(reference, input_format=fmt_in)
        tgt = io.read_table(
            target, input_format=fmt_in, typed=io.typed_output(output, _enum_value(output_format))
        )
        ref_scores = ref.scores(score_col, kind=kind)
        ref_labels = ref.labels(label_col, positive_label=positive_label)
        with ref.context():
            model = fit_reference(
                ref_scores, ref_labels, sample_weight=ref.weights(weight_col), score_kind=kind
            )
        scores = tgt.scores(score_col, kind=kind)
        labels = (
            tgt.labels(label_col, positive_label=positive_label)
            if tgt.has_column(label_col)
            else None
        )
        calibrated = np.empty(tgt.n_rows, dtype=np.float64)
        static = np.empty(tgt.n_rows, dtype=np.float64)
        batches: list[dict[str, Any]] = []
        for batch_name, rows in _groups(tgt, batch_col):
            # A fresh generator per batch: one call with --batch-col equals one call per batch.
            estimate = estimate_prevalence(
                model,
                scores[rows],
                method=_enum_value(method),
                n_bootstrap=bootstrap,
                ci_method=_enum_value(ci_method),
                rng=np.random.default_rng(seed),
                threshold=threshold,
                map_nodes=map_nodes,
                map_beta=map_beta,
                map_power=map_power,
            )
            calibrated[rows] = posterior(model, estimate, scores[rows])
            entry: dict[str, Any] = {} if batch_col is None else {"batch": batch_name}
            entry.update(_as_dict(estimate))
            if labels is not None:
                truth = float(np.mean(labels[rows]))
                entry.update(true_prevalence=truth, error=estimate.prevalence - truth)
            if cost_fp is not None and cost_fn is not None:
                static[rows] = posterior(
                    model, model.reference_prevalence, scores[rows], method="em"
                )
                entry["decision"] = _as_dict(
                    decision_costs(
                        static[rows],
                        calibrated[rows],
                        cost_fp=cost_fp,
                        cost_fn=cost_fn,
                        y_true=None if labels is None else labels[rows],
                    )
                )
            for warning in estimate.warnings:
                prefix = f"batch {batch_name}: " if batch_col is not None else ""
                session.warn(f"{prefix}{warning}")
            batches.append(entry)

        payload: dict[str, Any] = (
            batches[0] if batch_col is None else {"batch_col": batch_col, "batches": batches}
        )
        emit_report(session, payload, as_json=as_json, report_path=report)
        show = session.result if output is None else session.info
        if not as_json:
            show(shift_table(batches, batch_col=batch_col, source=tgt.name))
            if cost_fp is not None and cost_fn is not None:
                show(
                    decision_table(
                        batches, batch_col=batch_col, threshold=bayes_threshold(cost_fp, cost_fn)
                    )
                )
        if output is not None:
            added: dict[str, Any] = {output_col: calibrated}
            if cost_fp is not None and cost_fn is not None:
                cut = bayes_threshold(cost_fp, cost_fn)
                added["decision"] = (calibrated >= cut).astype(np.int64)
            io.write_table(
                tgt.with_columns(added), output, output_format_override=_enum_value(output_format)
            )


def _parse_costs(text: str) -> tuple[float, float]:
    """``--costs FP:FN`` as two positive, finite numbers."""
    import math

    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        cost_fp, cost_fn = float(parts[0]), float(parts[1])
    except ValueError:
        raise UsageError(f"--costs must look like FP:FN (e.g. 1:20), got {text!r}") from None
    if not (math.isfinite(cost_fp) and math.isfinite(cost_fn) and cost_fp > 0 and cost_fn > 0):
        raise UsageError(f"--costs needs two positive numbers, got {text!r}")
    return cost_fp, cost_fn
