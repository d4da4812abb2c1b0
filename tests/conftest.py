"""Shared test fixtures: a runner for the installed ``calib`` command in a real subprocess."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from bench.spark import local_session

# Hypothesis draws the same examples on every run and every machine (derandomize), so CI is a
# function of the commit. `HYPOTHESIS_PROFILE=explore make test` searches with fresh random
# examples, to find new counterexamples; add any it finds as explicit tests.
settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

CALIB = str(Path(sys.executable).with_name("calib"))


def _dispatched(names: str) -> str:
    """Those of ``names`` this NumPy dispatches to (2.0-2.3: single features; 2.4: groups;
    any other name makes NumPy warn at import)."""
    from numpy._core import _multiarray_umath

    known = set(getattr(_multiarray_umath, "__cpu_dispatch__", ()))
    return " ".join(name for name in names.split() if name in known)


_AVX512 = "AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL"
#: ``NPY_DISABLE_CPU_FEATURES`` values that make NumPy pick narrower kernels: no AVX-512;
#: neither AVX-512 nor AVX2.
NO_AVX512 = _dispatched(f"{_AVX512} AVX512_SPR X86_V4")
NO_AVX2 = _dispatched(f"{_AVX512} AVX512_SPR X86_V4 AVX2 FMA3 X86_V3")
SAMPLE_DATA = Path(__file__).resolve().parent.parent / "sample_data"

CALL_LOG = os.environ.get("CALIB_TEST_CALL_LOG")

RunCalib = Callable[..., subprocess.CompletedProcess[bytes]]


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")}
    env.update({"NO_COLOR": "1", "COLUMNS": "160", "TERM": "dumb"})
    return env


@pytest.fixture
def scored_dir(tmp_path: Path) -> Path:
    """A directory holding ``a.csv``: 400 calibrated scores with labels, a weight ``w``, a
    ``batch`` of four values and a ``stratum`` of two, for tests of options and outputs."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(7)
    n = 400
    score = rng.uniform(0.01, 0.99, n)
    pl.DataFrame(
        {
            "score": score,
            "label": (rng.random(n) < score).astype(np.int64),
            "w": rng.uniform(0.5, 2.0, n),
            "batch": rng.integers(0, 4, n),
            "stratum": rng.choice(["a", "b"], n),
        }
    ).write_csv(tmp_path / "a.csv")
    return tmp_path


@pytest.fixture
def run_calib() -> RunCalib:
    """Run the installed ``calib`` with arguments, optional stdin bytes and working directory."""

    def run(
        args: Sequence[str], *, stdin: bytes | None = None, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        started = time.perf_counter()
        done = subprocess.run(
            [CALIB, *args],
            input=stdin,
            capture_output=True,
            cwd=cwd,
            env=_environment(),
            timeout=300,
            check=False,
        )
        if CALL_LOG:  # CALIB_TEST_CALL_LOG=FILE: one line per call (seconds, test, arguments)
            with open(CALL_LOG, "a", encoding="utf-8") as log:
                test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
                log.write(f"{time.perf_counter() - started:.2f}\t{test}\t{' '.join(args)}\n")
        return done

    return run


def _in_process(
    args: Sequence[str], stdin: bytes | None, cwd: Path | None, files: list[Any]
) -> int:
    """``calib ARGS`` in this process with fds 0, 1, 2 on ``files``; its exit code."""
    from calib_cli.cli.app import _run
    from calib_cli.cli.session import _pipe_aware

    saved_fds = {fd: os.dup(fd) for fd in (0, 1, 2)}
    saved_streams = (sys.stdin, sys.stdout, sys.stderr, sys.argv)
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    try:
        files[0].write(stdin or b"")
        files[0].seek(0)
        for fd, file in enumerate(files):
            os.dup2(file.fileno(), fd)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout, sys.stderr = (
            io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8") for fd in (1, 2)
        )
        sys.argv = [CALIB, *args]
        os.environ.clear()
        os.environ.update(_environment())
        if cwd is not None:
            os.chdir(cwd)
        try:
            code = _pipe_aware(_run)
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(ValueError, OSError):
                stream.flush()
        return code
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.stdin, sys.stdout, sys.stderr, sys.argv = saved_streams
        for fd, copy in saved_fds.items():
            os.dup2(copy, fd)
            os.close(copy)


@pytest.fixture
def invoke_calib() -> RunCalib:
    """Run ``calib`` in this process, as :func:`run_calib` runs the installed command: the same
    arguments, standard input bytes, working directory and environment, file descriptors 0, 1
    and 2 redirected to temporary files (so every byte the command writes is caught, however it
    writes it), and a ``CompletedProcess`` with the exit code and both outputs. It skips the
    process: start-up and imports (most of a small command's second), and the signal watcher
    (tests of signals, closed pipes and what a fresh process imports use :func:`run_calib`).
    Most checks of options, exit codes and messages run this way; each command keeps
    end-to-end tests of the installed command."""

    def run(
        args: Sequence[str], *, stdin: bytes | None = None, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        with contextlib.ExitStack() as stack:
            files = [stack.enter_context(tempfile.TemporaryFile()) for _ in range(3)]
            code = _in_process(args, stdin, cwd, files)
            outputs = []
            for file in files[1:]:
                file.seek(0)
                outputs.append(file.read())
        return subprocess.CompletedProcess([CALIB, *args], code, outputs[0], outputs[1])

    return run


# ------------------------------------------------------------------ Spark (pytest -m spark)
# Tests marked `spark` run emitted SQL in Spark local mode. Spark takes half a minute to start,
# so they run only when the -m expression names them (`make test-engines`: pytest -m spark);
# any other run deselects them. They share one session per run, and fail (never skip) with the
# reason when Spark cannot start, so CI cannot pass them silently.


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "spark" in (config.getoption("markexpr", "") or ""):
        return
    deselected = [item for item in items if item.get_closest_marker("spark")]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if not item.get_closest_marker("spark")]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession (Spark's defaults kept: ANSI mode on in Spark 4)."""
    try:
        session = local_session("calib-tests")
    except Exception as error:  # any failure to start is the test's failure, with its reason
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        pytest.fail(f"Spark cannot start (pyspark and Java 17 are needed): {first}", pytrace=False)
    yield session
    session.stop()
