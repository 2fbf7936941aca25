"""FolderWatch: a wait that a write into the folder ends, and a plain sleep where inotify is missing."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from pytest_hfsnapshot.core.cache import watch
from pytest_hfsnapshot.core.cache.layout import atomic_write_json
from pytest_hfsnapshot.core.cache.watch import FolderWatch, wake

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
#: Longer than any test here may take: a wait that runs this long was not woken.
NEVER = 60.0


@linux
def test_an_atomic_write_wakes_the_wait(tmp_path: Path) -> None:
    with FolderWatch(tmp_path) as folder:
        assert folder.active
        writer = threading.Timer(0.05, atomic_write_json, (tmp_path / "record.json", {"done": True}))
        writer.start()
        try:
            assert folder.wait(NEVER) is True
        finally:
            writer.join()
    assert (tmp_path / "record.json").exists()


@linux
def test_a_write_before_the_wait_is_not_lost(tmp_path: Path) -> None:
    with FolderWatch(tmp_path) as folder:
        (tmp_path / "plain.json").write_text("{}")
        assert folder.wait(NEVER) is True
        assert folder.wait(0.0) is False, "the events of one write woke two waits"


@linux
def test_nothing_written_the_wait_runs_out(tmp_path: Path) -> None:
    (tmp_path / "before.json").write_text("{}")
    with FolderWatch(tmp_path) as folder:
        (tmp_path / "before.json").read_text()
        assert folder.wait(0.05) is False


def test_a_missing_folder_gives_a_plain_sleep(tmp_path: Path) -> None:
    with FolderWatch(tmp_path / "absent") as folder:
        assert not folder.active
        assert folder.wait(0.0) is False


def test_without_inotify_it_sleeps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "_LIBC", None)
    with FolderWatch(tmp_path) as folder:
        assert not folder.active
        (tmp_path / "plain.json").write_text("{}")
        assert folder.wait(0.0) is False


def _inotify_descriptors() -> int:
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            count += os.readlink(fd) == "anon_inode:inotify"
        except OSError:
            continue  # closed while listed
    return count


@linux
def test_closing_releases_the_descriptor(tmp_path: Path) -> None:
    before = _inotify_descriptors()
    for _ in range(20):
        with FolderWatch(tmp_path) as folder:
            assert folder.active
    assert _inotify_descriptors() == before


@linux
def test_wake_ends_the_wait_and_leaves_nothing(tmp_path: Path) -> None:
    with FolderWatch(tmp_path) as folder:
        wake(tmp_path)
        assert folder.wait(NEVER) is True
    assert list(tmp_path.iterdir()) == []


def test_wake_of_a_missing_folder_does_nothing(tmp_path: Path) -> None:
    wake(tmp_path / "absent")
    assert not (tmp_path / "absent").exists()
