"""``calib resample``: a streaming sample by the portable hash rule, and its record."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from calib_cli import io
from calib_cli.artifacts import Artifact, sampling_record, save_artifact
from calib_cli.core.resampling import ClassBalance, SamplingSummary, summarise_sampling
from calib_cli.core.sampling import (
    ClassRates,
    check_class_rates,
    check_rate_options,
    rate_threshold,
    resolve_stratum_rates,
)
from calib_cli.errors import UsageError
from calib_cli.types import DEFAULT_DIALECT, CsvDialect, InputFormat, Warn
from calib_cli.workflows.common import (
    Progress,
    check_paths,
    ignore,
    in_dialect,
    refuse_shared_columns,
    require_column_name,
    require_once_each,
)


@dataclass(frozen=True)
class ResampleRequest:
    """The options of a ``resample`` run."""

    file: str
    output: str
    negative_rate: float | None = None
    target_positive_rate: float | None = None
    target_ratio: str | None = None
    positive_rate: float = 1.0
    strata_col: str | None = None
    rates_file: str | None = None
    key_col: str | None = None
    weight_col_out: str | None = None
    record: str | None = None
    label_col: str = "label"
    positive_label: str | None = None
    input_format: InputFormat | None = None
    #: ``--separator`` and ``--decimal-comma`` of CSV inputs (and CSV outputs)
    dialect: CsvDialect = DEFAULT_DIALECT
    output_format: InputFormat | None = None
    report: str | None = None
    seed: int = 0


@dataclass(frozen=True)
class ResampleResult:
    """What the sample kept, and the record saved beside it."""

    source: str
    record_path: str
    strata_col: str | None
    summary: SamplingSummary
    record: Artifact


def record_path_of(request: ResampleRequest) -> str:
    """--record, else OUTPUT.sampling.json (refused when the sample goes to a pipe)."""
    output = request.output
    if request.record is None and (io.canonical_output(output) == io.STDIO or io.is_stream(output)):
        raise UsageError(
            "writing the sample to stdout or a pipe needs --record PATH for the record"
        )
    return request.record or f"{output}.sampling.json"


@in_dialect
def run_resample(
    request: ResampleRequest, *, warn: Warn = ignore, progress: Progress = ignore
) -> ResampleResult:
    """Count, choose the rates, stream the kept rows to the output, save the record
    (``progress``: each stage, for a progress display)."""
    record_path = record_path_of(request)
    refuse_shared_columns(request)
    check_paths(
        inputs=[request.file, request.rates_file],
        table_output=request.output,
        output_format=request.output_format,
        files=[record_path, request.report],
        input_format=request.input_format,
        dialect=request.dialect,
    )
    if request.rates_file is not None and request.strata_col is None:
        raise UsageError("--rates-file needs --strata-col")
    if request.weight_col_out is not None:
        require_column_name(request.weight_col_out, "--weight-col-out")
    if request.rates_file is None:  # impossible rates are refused before any row is read
        check_rate_options(
            negative_rate=request.negative_rate,
            target_positive_rate=request.target_positive_rate,
            target_ratio=request.target_ratio,
            positive_rate=request.positive_rate,
        )
    key_col, label_col, strata_col = request.key_col, request.label_col, request.strata_col
    lazy, fmt = io.scan_table(
        request.file,
        input_format=request.input_format,
        typed=io.typed_output(request.output, request.output_format),
        text_columns=[key_col] if key_col is not None else [],
    )
    name = io.display_name(request.file)
    # the columns the output cannot take, before the pass that counts the classes
    schema = lazy.collect_schema()
    if request.weight_col_out is not None and request.weight_col_out in schema:
        raise UsageError(
            f"{name} already has a column '{request.weight_col_out}'; choose another name for "
            "--weight-col-out"
        )
    io.check_passthrough_columns(
        schema, request.output, name=name, output_format=request.output_format
    )
    progress(f"counting the classes of {name}")
    before = io.class_counts(
        lazy,
        name=name,
        label_col=label_col,
        positive_label=request.positive_label,
        strata_col=strata_col,
    )
    label_dtype = schema[label_col]
    key_type = io.key_kind(lazy, key_col, name=name)
    rates_file = request.rates_file
    rates = resolve_stratum_rates(
        {c.stratum or "": (float(c.positives), float(c.negatives)) for c in before},
        rates=None if rates_file is None else read_rates_file(rates_file),
        negative_rate=request.negative_rate,
        target_positive_rate=request.target_positive_rate,
        target_ratio=request.target_ratio,
        positive_rate=request.positive_rate,
        rates_name="the rates table" if rates_file is None else io.display_name(rates_file),
    )
    kept = io.sample_rows(
        lazy,
        label_col=label_col,
        label_dtype=label_dtype,
        positive_label=request.positive_label,
        strata_col=strata_col,
        key_col=key_col,
        key_hash_kind=key_type,
        seed=request.seed,
        thresholds={
            s: (rate_threshold(r.negative_rate), rate_threshold(r.positive_rate))
            for s, r in rates.items()
        },
        weights={s: (1.0 / r.negative_rate, 1.0 / r.positive_rate) for s, r in rates.items()},
        weight_col_out=request.weight_col_out,
    )
    after = io.counts_by_stratum(
        kept,
        label_col=label_col,
        label_dtype=label_dtype,
        positive_label=request.positive_label,
        strata_col=strata_col,
    )
    _warn_emptied_classes(name, before, after, rates, warn)
    summary = summarise_sampling(
        [(c.stratum, ClassBalance(rows=c.rows, positives=c.positives)) for c in before],
        [(c.stratum, ClassBalance(rows=c.rows, positives=c.positives)) for c in after],
        rates,
    )
    record = sampling_record(
        summary,
        seed=request.seed,
        key_col=key_col,
        key_type=key_type,
        label_col=label_col,
        positive_label=request.positive_label,
        strata_col=strata_col,
        file=name,
        file_format=fmt,
        output="stdout" if request.output == io.STDIO else request.output,
    )
    progress(f"sampling {name} into {io.display_name(request.output)}")
    with io.naming(name):
        io.sink_table(kept, request.output, output_format_override=request.output_format)
    save_artifact(record_path, record)
    return ResampleResult(
        source=name,
        record_path=record_path,
        strata_col=strata_col,
        summary=summary,
        record=record,
    )


def _warn_emptied_classes(
    name: str,
    before: Sequence[io.ClassCounts],
    after: Sequence[io.ClassCounts],
    rates: Mapping[str, ClassRates],
    warn: Warn,
) -> None:
    """Say when a class had rows and the rates kept none of them (``--negative-rate 1e-30``):
    the sample then holds one class, which no prior correction can undo."""
    kept = {c.stratum: c for c in after}
    for counts in before:
        out = kept.get(counts.stratum)
        rate = rates[counts.stratum or ""]
        for cls, rows_in, rows_out, rate_used in (
            ("positive", counts.positives, out.positives if out else 0, rate.positive_rate),
            ("negative", counts.negatives, out.negatives if out else 0, rate.negative_rate),
        ):
            if rows_in > 0 and rows_out == 0:
                where = f"stratum {counts.stratum!r}: " if counts.stratum is not None else ""
                warn(
                    f"{name}: {where}none of its {rows_in:,} {cls} rows was kept (rate "
                    f"{rate_used:g}): the sample holds no {cls} row"
                )


def read_rates_file(path: str) -> dict[str, ClassRates]:
    """``--rates-file``: stratum -> ClassRates from a small table."""
    table = io.read_table(path)
    names, codes = table.categories("stratum", option="--rates-file (column 'stratum')")
    negative = table.numbers("negative_rate")
    positive = table.numbers("positive_rate") if table.has_column("positive_rate") else None
    require_once_each(table.name, names, codes)
    columns = ("column 'negative_rate'", "column 'positive_rate'")
    return {
        names[code]: check_class_rates(
            ClassRates(
                negative_rate=float(negative[row]),
                positive_rate=1.0 if positive is None else float(positive[row]),
            ),
            f"{table.name}: stratum {names[code]!r}: ",
            columns,
        )
        for row, code in enumerate(codes)
    }
