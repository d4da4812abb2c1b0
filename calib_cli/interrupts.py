"""What an interrupt must clean up and hold back: the registry of temporary files and the
commit lock (no Polars here, so that the entry point can install them before any import).

Every temporary file an atomic write holds is registered, so that an interrupted run (SIGINT,
SIGTERM: see :func:`calib_cli.cli.session.run_interruptibly`) removes them all before it
ends; every commit (a rename over the destination, a write to standard output) passes through
:func:`committing`, which an interrupt closes for good: a run that was interrupted never
commits an output, even when its input ended because the upstream process died of the same
Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

_registry_lock = threading.Lock()
_temporaries: set[Path] = set()
_commit_lock = threading.Lock()
_interrupt_probe: Callable[[], bool] = lambda: False  # noqa: E731 (replaced by the session)

#: How long a commit waits for a pending interrupt to end the process before going on.
INTERRUPT_GRACE_SECONDS = 5.0


def register_temporary(path: Path) -> None:
    """Remember a temporary file or directory to remove if the run is interrupted."""
    with _registry_lock:
        _temporaries.add(path)


def unregister_temporary(path: Path) -> None:
    """Forget a temporary that was renamed into place or removed."""
    with _registry_lock:
        _temporaries.discard(path)


def remove_temporaries() -> None:
    """Remove every registered temporary (called when the run is interrupted)."""
    with _registry_lock:
        paths = list(_temporaries)
        _temporaries.clear()
    for path in paths:
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def set_interrupt_probe(probe: Callable[[], bool]) -> None:
    """Install the test of whether an interrupt has arrived but not yet ended the process."""
    global _interrupt_probe
    _interrupt_probe = probe


def wait_if_interrupted() -> None:
    """If an interrupt is pending, wait for it to end the process (it wins over whatever was
    about to happen: committing an output, parsing an input cut short by the same Ctrl-C).
    After a grace period, raise KeyboardInterrupt instead (a run without the session)."""
    if not _interrupt_probe():
        return
    deadline = time.monotonic() + INTERRUPT_GRACE_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.01)
    raise KeyboardInterrupt


@contextlib.contextmanager
def committing() -> Iterator[None]:
    """Hold the commit lock around a rename or a write to standard output. An interrupt takes
    the lock for good (:func:`stop_commits`), so an output is either committed in full before
    the interrupt or not at all."""
    with _commit_lock:
        wait_if_interrupted()
        yield


def new_temporary_file(directory: Path, *, prefix: str, suffix: str) -> Path:
    """An empty temporary file in ``directory``, created and registered at once (an
    interrupt sees both or neither)."""
    with _registry_lock:
        handle, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
        _temporaries.add(Path(name))
    os.close(handle)
    return Path(name)


def new_temporary_directory(directory: Path, *, prefix: str) -> Path:
    """An empty scratch directory in ``directory``, created and registered at once."""
    with _registry_lock:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=directory))
        _temporaries.add(path)
    return path


def remove_temporary(path: Path) -> None:
    """Remove a registered temporary file or directory now, and forget it."""
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    unregister_temporary(path)


def stop_commits(timeout: float = 0.5) -> None:
    """Close every later commit (called when the run is interrupted; never released). Waits at
    most ``timeout`` seconds for a commit in progress (a rename is instant; a write to a
    stalled pipe may never end)."""
    _commit_lock.acquire(timeout=timeout)
