"""The resample workflow in-process: the sample, its typed summary and its record."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib_cli.artifacts import load_artifact
from calib_cli.core.sampling import hash_uint64_keys, rate_threshold
from calib_cli.errors import UsageError
from calib_cli.report.payloads import resample_payload
from calib_cli.workflows.resample import ResampleRequest, run_resample


def _write(tmp_path: Path, n: int = 2000, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    frame = pl.DataFrame(
        {
            "id": rng.permutation(n) * 7 + 11,
            "group": rng.choice(["a", "b"], n),
            "label": (rng.random(n) < 0.1).astype(np.int64),
        }
    )
    path = tmp_path / "train.csv"
    frame.write_csv(path)
    return path


def test_the_sample_keeps_the_rows_the_core_rule_keeps(tmp_path: Path) -> None:
    source, out = _write(tmp_path), tmp_path / "out.csv"
    request = ResampleRequest(
        file=str(source), output=str(out), negative_rate=0.25, key_col="id", seed=9
    )
    result = run_resample(request)
    frame, kept = pl.read_csv(source), pl.read_csv(out)
    keys = frame["id"].to_numpy().astype(np.uint64)
    expected = (frame["label"].to_numpy() == 1) | (
        hash_uint64_keys(keys, seed=9) < np.uint64(rate_threshold(0.25))
    )
    assert kept["id"].to_list() == frame["id"].to_numpy()[expected].tolist()
    summary = result.summary
    assert not summary.stratified
    assert (summary.before.rows, summary.after.rows) == (frame.height, kept.height)
    assert summary.after.positives == summary.before.positives  # positives all kept
    assert summary.rates.negative_rate == 0.25


def test_the_record_is_saved_beside_the_output_and_matches_the_result(tmp_path: Path) -> None:
    source, out = _write(tmp_path), tmp_path / "out.parquet"
    result = run_resample(
        ResampleRequest(
            file=str(source),
            output=str(out),
            target_positive_rate=0.3,
            strata_col="group",
            key_col="id",
            weight_col_out="w",
        )
    )
    assert result.record_path == f"{out}.sampling.json"
    record = load_artifact(result.record_path, kinds=("sampling",))
    assert record.params == result.record.params
    assert set(record.params["strata"]) == {"a", "b"}
    assert [s.stratum for s in result.summary.strata] == ["a", "b"]
    for stratum in result.summary.strata:
        assert stratum.after.base_rate == pytest.approx(0.3, abs=0.1)
    payload = resample_payload(result)
    assert list(payload)[:2] == ["record", "hash"]
    assert payload["strata"]["a"]["after"]["rows"] == result.summary.strata[0].after.rows  # type: ignore[index,call-overload]
    assert "w" in pl.read_parquet(out).columns


def test_a_sample_on_stdout_needs_a_record_path(tmp_path: Path) -> None:
    source = _write(tmp_path)
    with pytest.raises(UsageError, match="needs --record PATH"):
        run_resample(ResampleRequest(file=str(source), output="-", negative_rate=0.5))
    assert not list(tmp_path.glob("*.json"))
