"""The allocator setting of calib_cli.allocator: applied on glibc, a no-op elsewhere."""

from __future__ import annotations

import ctypes.util
import platform

import pytest

import calib_cli.allocator as allocator


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only"
)
def test_glibc_takes_the_threshold() -> None:
    assert allocator.tune_allocator() is True
    assert allocator.tune_allocator(allocator.MMAP_THRESHOLD) is True


def test_other_systems_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator.sys, "platform", "darwin")
    assert allocator.tune_allocator() is False


def test_no_c_library_found_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    assert allocator.tune_allocator() is False
