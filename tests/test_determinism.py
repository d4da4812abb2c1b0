"""The same bytes on every run, however the streaming engine cuts the rows, and on every machine.

A streaming group-by merges partial float sums in whatever order its threads finish (and a
batch's cut changes where partial sums start), so sums taken by Polars differ in their last
bits from run to run. Every streaming command sums floats in the rows' order instead
(:class:`calib_cli.core.keyed_sums.KeyedSums`, :mod:`calib_cli.summaries.accumulate`). Here
each command runs in-process under several cuttings of the same rows (Polars' streaming chunk
size, the row-wise map's part size, the summaries' batch size), and its output file, saved
model and JSON report must be the same bytes each time.

Machines differ by their BLAS kernels and threads, and by the vector width NumPy picks for its
own ``exp``, ``log``, ``power`` and sort (AVX-512, AVX2 or SSE: their last bits, and the order
of tied scores, differ). The installed calib runs under each of :data:`MACHINE_SETTINGS`
(OpenBLAS's kernels and threads; ``NPY_DISABLE_CPU_FEATURES`` for a narrower vector width) and
must write the same bytes each time.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import calib_cli.io.strata_scan as strata_scan
import calib_cli.summaries.scan as summary_scan
from calib_cli.report.payloads import (
    dumps,
    estimate_shift_payload,
    recalibrate_payload,
    rerank_strata_payload,
)
from calib_cli.workflows.estimate_shift import EstimateShiftRequest, run_estimate_shift
from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate
from calib_cli.workflows.rerank_strata import RerankStrataRequest, run_rerank_strata
from tests.conftest import CALIB, NO_AVX2, NO_AVX512

#: (Polars streaming chunk size, rows per part of rerank-strata's map, rows per summary batch)
CUTS = [(None, None, None), (37, 501, 97), (1000, 1733, 4096)]


@contextmanager
def _cut(
    monkeypatch: pytest.MonkeyPatch, chunk: int | None, part: int | None, batch: int | None
) -> Iterator[None]:
    with monkeypatch.context() as patch, pl.Config() as config:
        if chunk is not None:
            config.set_streaming_chunk_size(chunk)
        if part is not None:
            patch.setattr(strata_scan, "_MAP_BATCH_ROWS", part)
        if batch is not None:
            patch.setattr(summary_scan, "BATCH_ROWS", batch)
        yield


def _same_under_every_cut(
    monkeypatch: pytest.MonkeyPatch, run: Callable[[], list[bytes]]
) -> list[bytes]:
    """``run()``'s products under every cut of :data:`CUTS`, checked equal; the first."""
    outputs = []
    for cut in CUTS:
        with _cut(monkeypatch, *cut):
            outputs.append(run())
    for cut, output in zip(CUTS[1:], outputs[1:], strict=True):
        for index, (first, other) in enumerate(zip(outputs[0], output, strict=True)):
            assert first == other, f"product {index} differs under the cut {cut}"
    return outputs[0]


def _rows(n: int, seed: int, *, weighted: bool = True) -> pl.DataFrame:
    """Scores of full precision (sums that round), weights that are not integers."""
    rng = np.random.default_rng(seed)
    day = rng.choice(["mon", "tue", "wed"], n)
    label = (rng.random(n) < np.where(day == "mon", 0.1, 0.3)).astype(np.int64)
    score = np.clip(rng.beta(2, 5, n) + 0.25 * label, 1e-6, 1 - 1e-6)
    frame = pl.DataFrame({"id": np.arange(n), "day": day, "score": score, "label": label})
    if weighted:
        frame = frame.with_columns(w=pl.Series(rng.uniform(0.1, 3.0, n)))
    return frame


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("determinism")
    paths = {"reference": folder / "ref.parquet", "target": folder / "target.parquet"}
    _rows(3000, 1).write_parquet(paths["reference"])
    _rows(4000, 2).write_parquet(paths["target"])
    return paths


def test_rerank_strata_streaming_output_and_report(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out.parquet"

    def run() -> list[bytes]:
        result = run_rerank_strata(
            RerankStrataRequest(
                reference=str(files["reference"]),
                target=str(files["target"]),
                strata_col="day",
                weight_col="w",
                output=str(out),
                engine="streaming",
            )
        )
        return [out.read_bytes(), dumps(rerank_strata_payload(result)).encode()]

    output, report = _same_under_every_cut(monkeypatch, run)
    frame = pl.read_parquet(output)
    assert frame.height == 4000 and frame.columns[-3:] == [
        "rerank_score",
        "calibrated",
        "rerank_rank",
    ]
    assert b'"comparison"' in report


@pytest.mark.parametrize("weighted", [False, True])
def test_recalibrate_streaming_output_and_report(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weighted: bool
) -> None:
    """A fit (Platt, from a summary of the fit file) applied to a labelled file: the output,
    the model and the report's figures before and after."""
    out, model = tmp_path / "out.parquet", tmp_path / "model.json"

    def run() -> list[bytes]:
        result = run_recalibrate(
            RecalibrateRequest(
                file=str(files["target"]),
                fit=str(files["reference"]),
                method="platt",
                weight_col="w" if weighted else None,
                output=str(out),
                save_model=str(model),
                engine="streaming",
            )
        )
        return [out.read_bytes(), model.read_bytes(), dumps(recalibrate_payload(result)).encode()]

    output, _, report = _same_under_every_cut(monkeypatch, run)
    assert pl.read_parquet(output).height == 4000
    assert b'"after"' in report


def test_streaming_isotonic_model(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The isotonic fit's summary and refinement passes (weighted): the saved knots."""
    model = tmp_path / "model.json"

    def run() -> list[bytes]:
        run_recalibrate(
            RecalibrateRequest(
                fit=str(files["reference"]),
                method="isotonic",
                weight_col="w",
                save_model=str(model),
                engine="streaming",
            )
        )
        return [model.read_bytes()]

    (saved,) = _same_under_every_cut(monkeypatch, run)
    assert b'"isotonic"' in saved


def test_estimate_shift_streaming_output_and_report(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out.parquet"

    def run() -> list[bytes]:
        result = run_estimate_shift(
            EstimateShiftRequest(
                reference=str(files["reference"]),
                target=str(files["target"]),
                output=str(out),
                method="em",
                weight_col="w",
                batch_col="day",
                n_bootstrap=5,
                engine="streaming",
            )
        )
        return [out.read_bytes(), dumps(estimate_shift_payload(result)).encode()]

    output, report = _same_under_every_cut(monkeypatch, run)
    assert pl.read_parquet(output).height == 4000
    assert b'"batches"' in report


#: What machines differ by: OpenBLAS's kernels for two processors and one thread; NumPy's
#: vector width (no AVX-512; neither AVX-512 nor AVX2: features a machine lacks are ignored).
MACHINE_SETTINGS = [
    {},
    {"OPENBLAS_CORETYPE": "Prescott"},
    {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_NUM_THREADS": "1"},
    {"NPY_DISABLE_CPU_FEATURES": NO_AVX512},
    {"NPY_DISABLE_CPU_FEATURES": NO_AVX2},
]
#: NumPy's vector widths alone (for the tests that cover what BLAS never touches).
SIMD_SETTINGS = [{"NPY_DISABLE_CPU_FEATURES": ""}, *MACHINE_SETTINGS[3:]]
#: glibc's mathematical functions take other code on a processor without FMA (before 2013):
#: what SciPy's expit and logit, Python's math and Polars' exp and log call.
NO_FMA = {"NPY_DISABLE_CPU_FEATURES": NO_AVX2, "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA"}


def _under_every_machine(args: list[str]) -> list[bytes]:
    """The installed calib's standard output with ``args`` under each of
    :data:`MACHINE_SETTINGS`."""
    return [
        subprocess.run(
            [CALIB, *args], env={**os.environ, **setting}, capture_output=True, check=True
        ).stdout
        for setting in MACHINE_SETTINGS
    ]


@functools.cache
def _kernels_switch() -> bool:
    """Whether the vector-width settings change NumPy's own ``log`` on this machine (they
    do not without AVX-512): else the tests of those settings alone would test nothing."""
    script = "import numpy as np; print(np.log(np.linspace(0.001, 9.0, 9999)).tobytes().hex())"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, **setting},
            capture_output=True,
            check=True,
        ).stdout
        for setting in SIMD_SETTINGS
    }
    return len(outputs) > 1


def _all_equal(outputs: list[Any]) -> bool:
    return all(output == outputs[0] for output in outputs[1:])


# Each runs the installed calib 5 times (one per machine setting), 5-10 s: in `make
# test-slow` (28 s of the 3-minute budget, which the suite outgrew on 2026-11-28), which CI
# runs, as it runs `make test-kernels`, the numeric tests under each kernel. The in-process
# tests above (every cut of the rows) stay in `make test`.
@pytest.mark.slow
@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_reliability_is_the_same_bytes_under_every_machine(tmp_path: Path, engine: str) -> None:
    """The figures' dot products and small solves add in NumPy's order, not a BLAS kernel's
    (:mod:`calib_cli.core.dots`): the installed calib writes the same JSON whatever the
    kernel and threads (before, the AUC and calibration slope differed in their last bits)."""
    path = tmp_path / "rows.parquet"
    _rows(200_000, 5).write_parquet(path)
    args = ["reliability", str(path), "--json", "--engine", engine, "--by", "day"]
    # with the bootstrap: its intervals add bins in a fixed order (metrics._add_bins)
    outputs = _under_every_machine([*args, "--weight-col", "w", "--bootstrap", "50"])
    assert b'"auc"' in outputs[0] and b'"ece_ci": [' in outputs[0]
    assert _all_equal(outputs)


@pytest.mark.slow
def test_estimate_shift_is_the_same_bytes_under_every_machine(tmp_path: Path) -> None:
    """estimate-shift's batch report (label-shift estimate, PCC, their disagreement, decision
    costs) likewise: the same JSON under every BLAS setting."""
    reference, target = tmp_path / "ref.parquet", tmp_path / "target.parquet"
    _rows(100_000, 6).write_parquet(reference)
    _rows(150_000, 7).write_parquet(target)
    args = ["estimate-shift", "--reference", str(reference), "--target", str(target)]
    outputs = _under_every_machine([*args, "--batch-col", "day", "--json"])
    assert b'"pcc"' in outputs[0]
    assert _all_equal(outputs)


@pytest.mark.slow
def test_estimate_shift_map_is_the_same_bytes_under_every_machine(tmp_path: Path) -> None:
    """``--method map``: its fits' products are added by rows' bands and its Newton steps
    solved in Python floats, so every iterate, hence the estimate, interval and fitted heights,
    is the same under every BLAS setting (before, heights along flat directions of the
    posterior differed from their second digit under Prescott, the estimates in their last)."""
    reference, target = tmp_path / "ref.parquet", tmp_path / "target.parquet"
    _rows(30_000, 6).write_parquet(reference)
    _rows(40_000, 7).write_parquet(target)
    args = ["estimate-shift", "--reference", str(reference), "--target", str(target)]
    args += ["--method", "map", "--bootstrap", "40"]
    outputs = _under_every_machine([*args, "--batch-col", "day", "--json"])
    assert b'"heights"' in outputs[0]
    assert _all_equal(outputs)


# the pooled rows: SVD, then covariance
@pytest.mark.slow
@pytest.mark.parametrize("rows", [40_000, 220_000])
def test_rerank_strata_pca_is_the_same_bytes_under_every_machine(tmp_path: Path, rows: int) -> None:
    """The first principal component (loadings, explained variance, cut points) through
    fixed-order products and Jacobi rotations, not LAPACK: the same report and rows under
    every BLAS setting (before, the loadings differed in their last bits under Prescott)."""
    rng = np.random.default_rng(rows)
    mix = rng.normal(size=(4, 4))
    frames = []
    for n in (rows // 2, rows - rows // 2):
        features = rng.normal(size=(n, 4)) @ mix
        score = 1.0 / (1.0 + np.exp(-(0.7 * features[:, 0] - 2.0 + rng.normal(size=n))))
        frames.append(
            pl.DataFrame(
                {**{f"f{j}": features[:, j] for j in range(4)}, "score": score}
            ).with_columns(label=pl.Series((rng.random(n) < score).astype(np.int64)))
        )
    reference, target = tmp_path / "ref.parquet", tmp_path / "target.parquet"
    frames[0].write_parquet(reference)
    frames[1].drop("label").write_parquet(target)
    reports = []
    for i, setting in enumerate(MACHINE_SETTINGS):
        report, out = tmp_path / f"report{i}.json", tmp_path / f"out{i}.csv"
        args = ["rerank-strata", "--reference", str(reference), "--target", str(target)]
        args += ["--pca-features", "f0,f1,f2,f3", "--n-strata", "3"]
        subprocess.run(
            [CALIB, *args, "--report", str(report), "-o", str(out)],
            env={**os.environ, **setting},
            capture_output=True,
            check=True,
        )
        reports.append((report.read_bytes(), out.read_bytes()))
    assert b'"loadings"' in reports[0][0]
    assert _all_equal(reports)


# 40 runs of the installed calib (10 commands under 4 settings), 20 s: in `make test-slow`,
# with the other long checks, so that `make test` stays under 3 minutes (its other tests run
# each command under every machine setting, and `make test-kernels` runs the numeric tests
# under each kernel)
@pytest.mark.slow
def test_fits_figures_and_outputs_are_the_same_bytes_under_every_vector_width(
    tmp_path: Path,
) -> None:
    """The commands whose numbers go through ``exp``, ``log``, a power or a sort of tied
    scores: logistic and beta fits, a summary's log-loss sums, a fit from that summary,
    ``em``'s density ratios, ``map``'s penalty to a power of 2.5, rerank-strata's slopes,
    weighted quantile bins with importance weights.
    Their exp and log are :mod:`calib_cli.core.elementary`'s and their sorts stable, so each
    writes the same bytes under every vector width of NumPy (before, 7 of these 8 did not),
    and with glibc's code for a processor without FMA (SciPy's expit and logit gave the
    calibrated rows other last bits there)."""
    if not _kernels_switch():
        pytest.skip("NumPy's log is the same under every vector width here: nothing to switch")
    rng = np.random.default_rng(11)
    frames = []
    for n in (20_000, 15_000):
        frame = _rows(n, int(rng.integers(1 << 30)))
        tied = pl.Series(rng.random(n) < 0.3)  # a third of the scores tie on 3 decimals
        frames.append(
            frame.with_columns(
                score=pl.when(tied).then(pl.col("score").round(3)).otherwise(pl.col("score"))
            )
        )
    fit, data = tmp_path / "fit.parquet", tmp_path / "data.parquet"
    frames[0].write_parquet(fit)
    frames[1].write_parquet(data)
    shift = ["estimate-shift", "--reference", str(fit), "--target", str(data)]
    commands = [
        ["summarize", str(fit), "--weight-col", "w", "--by", "day", "-o", "s.parquet"],
        [
            "recalibrate",
            str(data),
            "--fit",
            str(fit),
            "--method",
            "beta",
            "--weight-col",
            "w",
            "--engine",
            "memory",
            "--save-model",
            "beta.json",
            "-o",
            "beta.parquet",
        ],
        [
            "recalibrate",
            str(data),
            "--fit",
            str(fit),
            "--method",
            "isotonic",
            "--engine",
            "memory",
            "--save-model",
            "iso.json",
        ],
        [
            "recalibrate",
            str(data),
            "--fit-summary",
            "s.parquet",
            "--method",
            "platt",
            "--save-model",
            "platt.json",
            "-o",
            "platt.parquet",
        ],
        [
            *shift,
            "--method",
            "em",
            "--batch-col",
            "day",
            "--bootstrap",
            "20",
            "--report",
            "em.json",
        ],
        [
            *shift,
            "--method",
            "map",
            "--map-power",
            "2.5",
            "--bootstrap",
            "10",
            "--report",
            "map.json",
        ],
        [
            "rerank-strata",
            "--reference",
            str(fit),
            "--target",
            str(data),
            "--strata-col",
            "day",
            "-o",
            "rerank.parquet",
        ],
        [
            "reliability",
            str(data),
            "--weight-col",
            "w",
            "--weight-kind",
            "importance",
            "--strategy",
            "quantile",
            "--engine",
            "memory",
            "--report",
            "rel.json",
        ],
    ]
    products = []
    for i, setting in enumerate([*SIMD_SETTINGS, NO_FMA]):
        out = tmp_path / f"run{i}"
        out.mkdir()
        for command in commands:
            subprocess.run(  # in the run's folder: a model records its summary's path
                [CALIB, *command, "-q"],
                cwd=out,
                env={**os.environ, **setting},
                capture_output=True,
                check=True,
            )
        products.append({path.name: path.read_bytes() for path in sorted(out.iterdir())})
    assert len(products[0]) == 10
    for setting, product in zip([*SIMD_SETTINGS[1:], NO_FMA], products[1:], strict=True):
        differ = [name for name in product if product[name] != products[0][name]]
        assert not differ, f"{differ} differ under {setting}"
