"""Sums per integer key, added in the rows' order: the same bytes however the rows are cut.

A multi-threaded group-by merges partial float sums in whatever order its threads finish, and
a batch's cut changes where a partial sum starts, so its sums differ in their last bits from
run to run. :class:`KeyedSums` adds each row's values to its key's running sums one row after
another (:func:`numpy.ufunc.at` adds in index order), so the sum of a key is
:math:`(\\dots((0 + v_1) + v_2) + \\dots) + v_n` over its rows in the order they came, whatever
the batches. Memory: the distinct keys (times ``n_sub`` slots), never the rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from calib_cli.errors import InputError
from calib_cli.types import FloatArray, IntArray

__all__ = ["KeyedSums"]

_G = TypeVar("_G", bound=np.generic)


class KeyedSums:
    """Running sums, counts and extremes per (key, sub-key), in the rows' order.

    Parameters
    ----------
    sums : sequence of str
        Names of the float values summed per slot.
    n_sub : int
        Sub-keys per key (e.g. 2 for the two classes): slot ``(key, sub)``, ``0 <= sub < n_sub``.
    extremes : sequence of str
        Names of the float values whose minimum and maximum are kept per slot.

    Examples
    --------
    >>> t = KeyedSums(["w"], n_sub=2)
    >>> t.add(np.array([7, 3, 7]), {"w": np.array([0.5, 1.0, 0.25])}, sub=np.array([1, 0, 1]))
    >>> t.add(np.array([3]), {"w": np.array([2.0])}, sub=np.array([1]))
    >>> t.keys.tolist(), t.sums["w"].tolist(), t.counts.tolist()
    ([3, 7], [1.0, 2.0, 0.0, 0.75], [1, 1, 0, 2])
    """

    def __init__(
        self, sums: Sequence[str], *, n_sub: int = 1, extremes: Sequence[str] = ()
    ) -> None:
        if n_sub < 1:
            raise InputError(f"n_sub must be positive, got {n_sub}")
        self.n_sub = n_sub
        #: the keys seen, ascending; slot ``i * n_sub + sub`` belongs to ``keys[i]``
        self.keys: IntArray = np.zeros(0, dtype=np.int64)
        self.sums: dict[str, FloatArray] = {name: np.zeros(0) for name in sums}
        self.counts: IntArray = np.zeros(0, dtype=np.int64)
        self.low: dict[str, FloatArray] = {name: np.zeros(0) for name in extremes}
        self.high: dict[str, FloatArray] = {name: np.zeros(0) for name in extremes}

    def _index(self, key: IntArray) -> IntArray:
        """Each row's position in :attr:`keys`, adding the keys seen for the first time.

        The batch's distinct keys come from one sort (a hash of every row, or a search of
        every row among all keys, costs several times more), and only they are searched."""
        if not key.size:
            return np.zeros(0, dtype=np.int64)
        order = np.argsort(key)
        ordered = key[order]
        first = np.empty(key.size, dtype=np.bool_)
        first[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
        distinct = ordered[first]
        at = np.searchsorted(self.keys, distinct)
        known = at < self.keys.size
        known[known] = self.keys[at[known]] == distinct[known]
        if not known.all():
            self._insert(distinct[~known])
            at = np.searchsorted(self.keys, distinct)
        index = np.empty(key.size, dtype=np.int64)
        index[order] = at[np.cumsum(first) - 1]
        return index

    def _insert(self, new: IntArray) -> None:
        keys = np.sort(np.concatenate((self.keys, new)))  # ``new`` holds no key seen
        moved = np.searchsorted(keys, self.keys) * self.n_sub
        slots = (moved[:, None] + np.arange(self.n_sub)).ravel()
        size = keys.size * self.n_sub

        def spread(old: npt.NDArray[_G], fill: float) -> npt.NDArray[_G]:
            out: npt.NDArray[_G] = np.full(size, fill, dtype=old.dtype)
            out[slots] = old
            return out

        self.sums = {k: spread(v, 0.0) for k, v in self.sums.items()}
        self.counts = spread(self.counts, 0)
        self.low = {k: spread(v, np.inf) for k, v in self.low.items()}
        self.high = {k: spread(v, -np.inf) for k, v in self.high.items()}
        self.keys = keys

    def add(
        self,
        key: npt.ArrayLike,
        values: Mapping[str, npt.ArrayLike],
        *,
        sub: npt.ArrayLike | None = None,
        extremes: Mapping[str, npt.ArrayLike] | None = None,
        extremes_where: npt.ArrayLike | None = None,
    ) -> None:
        """Add one batch of rows, in order: ``values[name]`` to the sums, one to the count
        and ``extremes[name]`` to the minimum and maximum of each row's slot (only the rows
        where ``extremes_where`` is true, if given)."""
        keys = np.asarray(key, dtype=np.int64)
        slot = self._index(keys) * self.n_sub
        if sub is not None:
            subs = np.asarray(sub, dtype=np.int64)
            if subs.size and (subs.min() < 0 or subs.max() >= self.n_sub):
                raise InputError(f"sub-keys must lie in [0, {self.n_sub})")
            slot += subs
        for name, total in self.sums.items():
            np.add.at(total, slot, np.asarray(values[name], dtype=np.float64))
        np.add.at(self.counts, slot, 1)
        if not extremes:
            return
        where = None if extremes_where is None else np.asarray(extremes_where, dtype=np.bool_)
        if where is not None:
            slot = slot[where]
        for name, value in extremes.items():
            v = np.asarray(value, dtype=np.float64)
            if where is not None:
                v = v[where]
            np.minimum.at(self.low[name], slot, v)
            np.maximum.at(self.high[name], slot, v)

    def used(self) -> IntArray:
        """The slots that received at least one row, ascending (key, then sub-key)."""
        return np.flatnonzero(self.counts > 0)

    def slot_keys(self, slots: IntArray) -> tuple[IntArray, IntArray]:
        """The (key, sub-key) of each slot."""
        return self.keys[slots // self.n_sub], slots % self.n_sub
