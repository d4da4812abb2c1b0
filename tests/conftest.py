"""Shared test fixtures: a runner for the installed ``calib`` command in a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Hypothesis draws the same examples on every run and every machine (derandomize), so CI is a
# function of the commit. `HYPOTHESIS_PROFILE=explore make test` searches with fresh random
# examples, to find new counterexamples; add any it finds as explicit tests.
settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

CALIB = str(Path(sys.executable).with_name("calib"))
SAMPLE_DATA = Path(__file__).resolve().parent.parent / "sample_data"

CALL_LOG = os.environ.get("CALIB_TEST_CALL_LOG")

RunCalib = Callable[..., subprocess.CompletedProcess[bytes]]


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")}
    env.update({"NO_COLOR": "1", "COLUMNS": "160", "TERM": "dumb"})
    return env


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
        from pyspark.sql import SparkSession

        session = (
            SparkSession.builder.master("local[2]")
            .appName("calib-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
    except Exception as error:  # any failure to start is the test's failure, with its reason
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        pytest.fail(f"Spark cannot start (pyspark and Java 17 are needed): {first}", pytrace=False)
    yield session
    session.stop()
