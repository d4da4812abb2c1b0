"""One error hierarchy for calib, and the exit codes it maps to (DESIGN.md, "Exit codes").

Core functions raise these with messages that name the parameter, the bad value and the row;
``calib_cli.cli.session`` turns them into one ``error: ...`` line and an exit code in one place.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes shared by every command."""

    OK = 0
    CHECK_FAILED = 1
    USAGE = 2
    DATA_ERROR = 65
    NO_INPUT = 66
    INTERNAL = 70
    CANNOT_WRITE = 73
    INTERRUPTED = 130
    TERMINATED = 143


class CalibError(Exception):
    """Base class of every error calib reports to the user without a traceback."""

    exit_code: ExitCode = ExitCode.INTERNAL


class InputError(CalibError, ValueError):
    """Bad input data: a missing column, invalid values, unreadable contents (exit 65)."""

    exit_code = ExitCode.DATA_ERROR


class OptionError(InputError):
    """A bad option value, found where it is used (exit 2, a usage error): e.g. a rate outside
    (0, 1]. A subclass of InputError so that library callers can catch both alike."""

    exit_code = ExitCode.USAGE


class ArtifactError(InputError):
    """A saved calibrator or sampling record that fails validation (exit 65)."""


class ConvergenceError(CalibError, ArithmeticError):
    """An optimiser that could not reach a usable answer (exit 65: the data cannot support it)."""

    exit_code = ExitCode.DATA_ERROR


class MissingInputError(CalibError, FileNotFoundError):
    """An input file that does not exist or cannot be opened (exit 66)."""

    exit_code = ExitCode.NO_INPUT


class OutputError(CalibError, OSError):
    """An output that cannot be written (exit 73)."""

    exit_code = ExitCode.CANNOT_WRITE


class UsageError(CalibError):
    """Options that do not fit together (exit 2)."""

    exit_code = ExitCode.USAGE


class CheckFailedError(CalibError):
    """A quality gate the user asked for failed, e.g. ``--fail-above-ece`` (exit 1)."""

    exit_code = ExitCode.CHECK_FAILED
