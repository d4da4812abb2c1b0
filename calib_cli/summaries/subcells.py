"""Sub-cells: each key of a summary split into ``2**depth`` finer cells, weights only.

AUC and average precision depend on the scores only through their order, so their bound from
a summary is the weight of the pairs (positive, negative) that share an atom and whose order
is unknown: :math:`\\sum_a w^+_a w^-_a / (2 W^+ W^-)`. It falls by about half per bit of the
grid, but a summary's sums (score, squares, logs, ...) cost a dozen arrays per key. Sub-cells
keep only what the ranking figures need, the weight (and squared weight, and rows) per class,
on a grid ``depth`` bits finer, added in the same pass as the summary
(:class:`~calib_cli.summaries.accumulate.GridSums` with ``sub_bits``): the pass that would
otherwise read the rows again for the AUC (:func:`~calib_cli.summaries.scan.refine_dense_lazy`)
is needed only where the finer grid is still too coarse.

A sub-cell is a cell of the grid with ``mantissa_bits = summary bits + depth``
(:mod:`calib_cli.summaries.grid`), inside the key's cell, in the key's bin and class; its
parent on the summary's grid (:func:`~calib_cli.summaries.grid.parent_cell`) is the key's
cell, and the sub-cells of a key add up to the key's weight and rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from calib_cli.errors import InputError
from calib_cli.summaries.summary import GroupName
from calib_cli.types import FloatArray, IntArray

__all__ = ["SubCells"]


@dataclass(frozen=True, eq=False)
class SubCells:
    """Per (group, sub-cell, bin, class): weight, squared weight and rows.

    Rows are the occupied keys in the order (group, cell, bin, label), each once; ``group``
    indexes ``groups`` (the values, in any order; ``None`` the missing value).
    ``weight_sums`` and ``square_sums`` are None when every row weighs 1 (the weights are
    then the row counts, made when asked for: :attr:`weight`, :attr:`weight_sq`).
    """

    mantissa_bits: int
    base_bits: int
    groups: tuple[GroupName, ...]
    group: npt.NDArray[np.int32]
    cell: IntArray
    bin: npt.NDArray[np.int32]
    label: npt.NDArray[np.int8]
    n_rows: IntArray
    weight_sums: FloatArray | None = None
    square_sums: FloatArray | None = None

    @property
    def weight(self) -> FloatArray:
        """Each sub-cell's weight (its rows, when unweighted)."""
        if self.weight_sums is None:
            return self.n_rows.astype(np.float64)
        return self.weight_sums

    @property
    def weight_sq(self) -> FloatArray:
        """Each sub-cell's squared weight (its rows, when unweighted)."""
        if self.square_sums is None:
            return self.n_rows.astype(np.float64)
        return self.square_sums

    @property
    def depth(self) -> int:
        """Bits finer than the summary's grid."""
        return self.mantissa_bits - self.base_bits

    @property
    def n_keys(self) -> int:
        return int(self.cell.size)

    def select_group(self, name: GroupName) -> SubCells:
        """The sub-cells of one group (none when the group has no rows here)."""
        if name not in self.groups:
            raise InputError(f"the sub-cells have no group {name!r}")
        keep = self.group == self.groups.index(name)
        weights, squares = self.weight_sums, self.square_sums
        return replace(
            self,
            groups=(name,),
            group=np.zeros(int(np.sum(keep)), dtype=np.int32),
            cell=self.cell[keep],
            bin=self.bin[keep],
            label=self.label[keep],
            n_rows=self.n_rows[keep],
            weight_sums=None if weights is None else weights[keep],
            square_sums=None if squares is None else squares[keep],
        )

    def pooled(self) -> SubCells:
        """Every group as one: the keys of all groups merged (weights and rows added, in the
        groups' order). Merged a range of cells at a time (each group's rows are in cell
        order): memory is the result and one range's rows, not a sort of every row."""
        if len(self.groups) <= 1:
            return replace(self, groups=(None,))
        codes = np.arange(len(self.groups))
        first = np.searchsorted(self.group, codes, side="left")
        last = np.searchsorted(self.group, codes, side="right")
        step = max(1, self.n_keys // POOL_RANGES)
        cuts = np.append(np.unique(self.cell[::step])[1:], np.iinfo(np.int64).max)
        ends = [a + np.searchsorted(self.cell[a:b], cuts) for a, b in zip(first, last, strict=True)]
        begin = list(first)
        parts: list[dict[str, npt.NDArray[np.generic]]] = []
        for i in range(cuts.size):
            rows = np.concatenate(
                [np.arange(begin[g], ends[g][i]) for g in range(len(self.groups))]
            )
            begin = [int(e[i]) for e in ends]
            if not rows.size:
                continue
            order = rows[np.lexsort((self.label[rows], self.bin[rows], self.cell[rows]))]
            cell, b, label = self.cell[order], self.bin[order], self.label[order]
            change = np.ones(cell.size, dtype=bool)
            change[1:] = (cell[1:] != cell[:-1]) | (b[1:] != b[:-1]) | (label[1:] != label[:-1])
            starts = np.flatnonzero(change)
            part = {
                "cell": cell[starts],
                "bin": b[starts],
                "label": label[starts],
                "n_rows": np.add.reduceat(self.n_rows[order], starts),
            }
            for name in ("weight_sums", "square_sums"):
                values = getattr(self, name)
                if values is not None:
                    part[name] = np.add.reduceat(values[order], starts)
            parts.append(part)

        def joined(name: str, dtype: type[np.generic]) -> npt.NDArray[Any]:
            if not parts:
                return np.zeros(0, dtype=dtype)
            return np.concatenate([part[name] for part in parts]).astype(dtype, copy=False)

        cell_all = joined("cell", np.int64)
        return replace(
            self,
            groups=(None,),
            group=np.zeros(cell_all.size, dtype=np.int32),
            cell=cell_all,
            bin=joined("bin", np.int32),
            label=joined("label", np.int8),
            n_rows=joined("n_rows", np.int64),
            weight_sums=None if self.weight_sums is None else joined("weight_sums", np.float64),
            square_sums=None if self.square_sums is None else joined("square_sums", np.float64),
        )


#: Ranges of cells :meth:`SubCells.pooled` merges one at a time.
POOL_RANGES = 64
