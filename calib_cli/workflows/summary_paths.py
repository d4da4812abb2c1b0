"""The summary files an option names: files, a directory of them, or a quoted glob.

A SQL engine writes a query's result as a directory of part files (Spark:
``day=2026-11-01/part-00000-....parquet`` beside ``_SUCCESS``), and a month of daily summaries
is many files, so every option that reads summaries (``reliability --from-summary``,
``recalibrate --fit-summary`` and ``--refine-summary``, ``estimate-shift --reference-summary``
and ``--target-summary``) takes, resolved here alone (:func:`expand_summary_paths`, which
:func:`calib_cli.workflows.summarize.load_summaries` calls on whatever it is given):

* a file, as it is (``-``: standard input);
* a directory: every ``*.parquet`` and ``*.json`` file directly in it, by name, leaving out
  names that start with ``_`` or ``.`` (Spark's and Hadoop's markers and checksums);
* a pattern with ``*``, ``?`` or ``[`` that names no file itself (quoted, so that the shell
  leaves it to calib): the files it matches, by name (``**`` crosses directories).

A directory or pattern that yields no file is refused (exit 66), naming it, and so is a file
named twice (exit 2; :func:`refuse_repeated_summaries`).
"""

from __future__ import annotations

import glob
from collections.abc import Sequence
from pathlib import Path

from calib_cli.errors import MissingInputError, UsageError
from calib_cli.io.summary_file import SUMMARY_EXTENSIONS

__all__ = ["expand_summary_paths", "refuse_repeated_summaries"]

_SUFFIXES = tuple(sorted(SUMMARY_EXTENSIONS))  # the names summarize -o writes


def _listed(directory: Path) -> list[str]:
    return sorted(
        str(entry)
        for entry in directory.iterdir()
        if entry.is_file()
        and entry.suffix.lower() in _SUFFIXES
        and not entry.name.startswith(("_", "."))
    )


def expand_summary_paths(paths: Sequence[str]) -> tuple[str, ...]:
    """Every summary file ``paths`` name, in order (module docstring).

    >>> expand_summary_paths(["-"])
    ('-',)
    """
    out: list[str] = []
    for path in paths:
        target = Path(path)
        if path != "-" and target.is_dir():
            found = _listed(target)
            if not found:
                patterns = ", ".join(f"*{suffix}" for suffix in _SUFFIXES)
                raise MissingInputError(f"{path}: a directory without summary files ({patterns})")
            out.extend(found)
        elif path != "-" and not target.exists() and any(c in path for c in "*?["):
            found = sorted(p for p in glob.glob(path, recursive=True) if Path(p).is_file())
            if not found:
                raise MissingInputError(f"{path}: no file matches this pattern")
            out.extend(found)
        else:
            out.append(path)
    refuse_repeated_summaries(out)
    return tuple(out)


def refuse_repeated_summaries(paths: Sequence[str]) -> None:
    """Refuse (exit 2) a summary file named twice, by two overlapping globs, a file and its
    directory, or two spellings of one path: merged summaries add up, so its rows would count
    twice, with nothing in the figures to show it.

    >>> refuse_repeated_summaries(["s.parquet", "./s.parquet"])
    Traceback (most recent call last):
    ...
    calib_cli.errors.UsageError: ./s.parquet: this summary is given twice, and merged \
summaries add up (its rows would count twice): give it once
    """
    seen: set[Path] = set()
    for path in paths:
        if path == "-":
            continue  # read once, which the paths' check says
        resolved = Path(path).resolve()
        if resolved in seen:
            raise UsageError(
                f"{path}: this summary is given twice, and merged summaries add up (its rows "
                "would count twice): give it once"
            )
        seen.add(resolved)
