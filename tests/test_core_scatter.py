"""numpy.add.at's sums without the GIL: the same bytes on the kernel's path and NumPy's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import calib_cli.core.scatter as scatter
from calib_cli.core.scatter import gil_free, scatter_add, scatter_columns, scatter_sums

AWKWARD = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1e308, -1e308, 0.1, 1.0 / 3.0])


def _add_at(out: np.ndarray, index: Any, values: Any) -> np.ndarray:
    want = out.copy()
    np.add.at(want, index, values)
    return want


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    """The same bytes, but for which NaN (sign, payload) a sum of two NaNs keeps."""
    nan = np.isnan(want)
    return bool(np.array_equal(np.isnan(got), nan)) and got[~nan].tobytes() == want[~nan].tobytes()


def test_the_kernel_is_found_here() -> None:
    """Every supported SciPy has it: without it the workers' scatters hold the GIL."""
    assert gil_free()


def test_the_kernel_does_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    kernel = scatter._kernel()
    assert kernel is not None

    def spy(*args: Any) -> Any:
        calls.append(args[0])
        return kernel(*args)

    monkeypatch.setattr(scatter, "_kernel", lambda: spy)
    out = np.zeros(4)
    scatter_add(out, np.array([3, 1, 3]), np.array([1.0, 2.0, 4.0]))
    assert calls == [3] and out.tolist() == [0.0, 2.0, 0.0, 5.0]


@pytest.mark.parametrize("kernel", [True, False])
def test_awkward_floats_add_as_numpy_adds_them(
    kernel: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not kernel:
        monkeypatch.setattr(scatter, "_kernel", lambda: None)
    rng = np.random.default_rng(3)
    with np.errstate(over="ignore", invalid="ignore"):
        values = rng.choice(AWKWARD, 5000) * rng.choice([1.0, -1.0, 1e-300, 1e300], 5000)
    index = rng.integers(0, 7, 5000)
    for start in (np.zeros(7), np.full(7, -0.0), rng.normal(size=7)):
        out = start.copy()
        with np.errstate(invalid="ignore"):  # inf - inf: NumPy warns, the kernel does not
            scatter_add(out, index, values)
            want = _add_at(start, index, values)
        assert _same(out, want)


@settings(max_examples=60, deadline=None)
@given(
    values=hnp.arrays(np.float64, st.integers(0, 300), elements=st.floats(allow_nan=True)),
    data=st.data(),
)
def test_any_floats_give_numpy_add_at_bytes(values: np.ndarray, data: st.DataObject) -> None:
    size = data.draw(st.integers(1, 20))
    index = np.asarray(
        data.draw(st.lists(st.integers(0, size - 1), min_size=values.size, max_size=values.size)),
        dtype=data.draw(st.sampled_from([np.int32, np.int64])),
    )
    out = np.zeros(size)
    with np.errstate(invalid="ignore", over="ignore"):
        scatter_add(out, index, values)
        want = _add_at(np.zeros(size), index, values)
    assert _same(out, want)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_counts(dtype: type) -> None:
    rng = np.random.default_rng(1)
    index = rng.integers(0, 50, 10_000)
    out = np.zeros(50, dtype=dtype)
    scatter_add(out, index, 1)
    scatter_add(out, index[:10], dtype(3))
    want = _add_at(np.zeros(50, dtype=dtype), index, 1)
    np.add.at(want, index[:10], 3)
    assert out.dtype == dtype and out.tobytes() == want.tobytes()


def test_what_the_kernel_cannot_take_is_added_by_numpy() -> None:
    """A strided result, other value types, negative indices, broadcast values: NumPy's
    add.at, with its results."""
    base = np.zeros((6, 2))
    strided = base[:, 0]
    scatter_add(strided, np.array([0, 5, 5]), np.array([1.0, 2.0, 3.0]))
    assert base[:, 0].tolist() == [1.0, 0.0, 0.0, 0.0, 0.0, 5.0]
    out = np.zeros(3)
    scatter_add(out, np.array([-1, 0]), np.array([1.0, 2.0]))  # NumPy wraps -1
    assert out.tolist() == [2.0, 0.0, 1.0]
    out32 = np.zeros(3, dtype=np.float32)
    scatter_add(out32, np.array([1, 1]), np.array([0.5, 0.25], dtype=np.float32))
    assert out32.tolist() == [0.0, 0.75, 0.0]
    out = np.zeros(2)
    scatter_add(out, np.array([1, 1, 0]), 2.5)
    assert out.tolist() == [2.5, 5.0]
    scatter_add(out, np.array([], dtype=np.int64), np.array([]))
    assert out.tolist() == [2.5, 5.0]


def test_an_index_out_of_range_is_refused_before_any_write() -> None:
    out = np.zeros(3)
    with pytest.raises(IndexError):
        scatter_add(out, np.array([0, 3]), np.array([1.0, 1.0]))
    with pytest.raises(IndexError):
        scatter_add(out, np.array([0, -4]), np.array([1.0, 1.0]))
    assert out.tolist() == [0.0, 0.0, 0.0]


def test_scatter_sums_cut_off_the_last_entry() -> None:
    got = scatter_sums(np.array([0, 2, 1, 2, 0]), np.array([1.0, 2.0, 3.0, 4.0, 5.0]), 2)
    assert got.tolist() == [6.0, 3.0]
    counts = scatter_sums(np.array([1, 1, 0, 2]), 1, 2)
    assert counts.dtype == np.int64 and counts.tolist() == [1, 2]


def test_columns_share_one_index_check() -> None:
    index = np.array([1, 0, 2, 1])
    got = scatter_columns(index, {"a": np.array([1.0, 2.0, 3.0, 4.0]), "b": np.ones(4)}, 2)
    assert {k: v.tolist() for k, v in got.items()} == {"a": [2.0, 5.0], "b": [1.0, 2.0]}
    with pytest.raises(IndexError):
        scatter_columns(np.array([0, 3]), {"a": np.ones(2)}, 2)
    with pytest.raises(IndexError):
        scatter_columns(np.array([-1, 0]), {"a": np.ones(2)}, 2)


def test_a_kernel_that_refuses_the_arrays_leaves_it_to_numpy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuses(*args: Any) -> None:
        raise ValueError("unsupported")

    monkeypatch.setattr(scatter, "_kernel", lambda: refuses)
    out = np.zeros(3)
    scatter_add(out, np.array([2, 2, 0]), np.array([1.0, 2.0, 4.0]))
    assert out.tolist() == [4.0, 0.0, 3.0]
