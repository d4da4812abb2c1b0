"""KeyedSums: per-key sums in the rows' order, the same bits however the rows are cut."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calib_cli.core.keyed_sums import KeyedSums
from calib_cli.errors import InputError


def _in_row_order(keys: np.ndarray, subs: np.ndarray, values: np.ndarray) -> dict:
    """The reference: a plain Python loop adding each row to its slot, in order."""
    totals: dict[tuple[int, int], float] = {}
    counts: dict[tuple[int, int], int] = {}
    for k, s, v in zip(keys.tolist(), subs.tolist(), values.tolist(), strict=True):
        totals[(k, s)] = totals.get((k, s), 0.0) + v
        counts[(k, s)] = counts.get((k, s), 0) + 1
    return {"totals": totals, "counts": counts}


def _tally(keys: np.ndarray, subs: np.ndarray, values: np.ndarray, cuts: list[int]) -> KeyedSums:
    t = KeyedSums(["v"], n_sub=2, extremes=["v"])
    for start, stop in zip([0, *cuts], [*cuts, keys.size], strict=True):
        t.add(
            keys[start:stop],
            {"v": values[start:stop]},
            sub=subs[start:stop],
            extremes={"v": values[start:stop]},
        )
    return t


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 300),
    seed=st.integers(0, 2**32 - 1),
    cuts=st.lists(st.integers(0, 300), max_size=6),
)
def test_sums_are_the_row_order_loop_bit_for_bit_under_any_cut(
    n: int, seed: int, cuts: list[int]
) -> None:
    rng = np.random.default_rng(seed)
    keys = rng.integers(-(2**40), 2**40, 12)[rng.integers(0, 12, n)]
    subs = rng.integers(0, 2, n)
    values = rng.normal(size=n) * 10.0 ** rng.integers(-8, 8, n)
    t = _tally(keys, subs, values, sorted(min(c, n) for c in cuts))
    ref = _in_row_order(keys, subs, values)
    used = t.used()
    key, sub = t.slot_keys(used)
    assert list(zip(key.tolist(), sub.tolist(), strict=True)) == sorted(ref["totals"])
    assert t.sums["v"][used].tolist() == [ref["totals"][k] for k in sorted(ref["totals"])]
    assert t.counts[used].tolist() == [ref["counts"][k] for k in sorted(ref["counts"])]
    for (k, s), lo, hi in zip(
        sorted(ref["totals"]), t.low["v"][used], t.high["v"][used], strict=True
    ):
        rows = values[(keys == k) & (subs == s)]
        assert (lo, hi) == (rows.min(), rows.max())


def test_the_same_sums_as_one_group_by_within_rounding() -> None:
    """Against Polars' group-by of all rows: the same keys and counts, sums within 1e-12."""
    rng = np.random.default_rng(3)
    k = rng.integers(0, 50, 20_000)
    w = rng.uniform(0.0, 3.0, 20_000)
    t = KeyedSums(["w"])
    for start in range(0, k.size, 1000):
        t.add(k[start : start + 1000], {"w": w[start : start + 1000]})
    expected = (
        pl.DataFrame({"k": k, "w": w})
        .group_by("k")
        .agg(pl.len().alias("n"), pl.col("w").sum())
        .sort("k")
    )
    assert t.keys.tolist() == expected["k"].to_list()
    assert t.counts.tolist() == expected["n"].to_list()
    np.testing.assert_allclose(t.sums["w"], expected["w"].to_numpy(), rtol=1e-12)


def test_extremes_only_where_asked_and_sub_keys_checked() -> None:
    t = KeyedSums([], extremes=["s"])
    t.add([1, 1, 2], {}, extremes={"s": [0.5, 0.1, 0.9]}, extremes_where=[True, False, False])
    assert t.counts.tolist() == [2, 1]
    assert t.low["s"].tolist() == [0.5, np.inf] and t.high["s"].tolist() == [0.5, -np.inf]
    with pytest.raises(InputError, match=r"sub-keys must lie in \[0, 1\)"):
        t.add([1], {}, sub=[1])
    with pytest.raises(InputError, match="n_sub must be positive"):
        KeyedSums([], n_sub=0)
