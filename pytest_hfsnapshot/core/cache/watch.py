"""Sleeping until a file lands in a folder: inotify where the kernel has it, else a plain sleep."""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import sys
import time
from pathlib import Path
from typing import Any

# <sys/inotify.h>: a file opened for writing was closed; a file was renamed into the folder (an
# atomic write's last step); the path must be a folder.
_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_TO = 0x00000080
_IN_ONLYDIR = 0x01000000
_MASK = _IN_CLOSE_WRITE | _IN_MOVED_TO | _IN_ONLYDIR
#: Enough for the events of many writes at once; more stay queued and wake the next wait.
_READ_BYTES = 64 * 1024
#: The empty file :func:`wake` closes a write of, then removes.
WAKE_NAME = ".wake"


def _load_libc() -> Any | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _load_libc()


def wake(folder: Path) -> None:
    """Wake the waits on ``folder`` of this host: close a write of an empty :data:`WAKE_NAME` file
    there, and remove it (the close is the event; nothing is left behind).

    Best effort: a folder that cannot take it (gone, read-only) wakes nobody, and its waiters find
    out on their own at their next look.
    """
    path = folder / WAKE_NAME
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    with contextlib.suppress(OSError):
        os.close(os.open(path, flags, 0o644))
        os.unlink(path)


class FolderWatch:
    """Wakes :meth:`wait` when a file is written into, or renamed into, ``folder``.

    Use as a context manager (or call :meth:`close`). Events that came before a wait are not lost:
    the next wait returns at once.
    """

    def __init__(self, folder: Path) -> None:
        self._fd: int | None = self._open(folder)

    @property
    def active(self) -> bool:
        """Whether writes wake :meth:`wait`; when False, it only sleeps."""
        return self._fd is not None

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds, less when a file is written into the folder meanwhile.

        True when a write woke it (its events are consumed), False when the time ran out.
        """
        timeout = max(0.0, timeout)
        if self._fd is None:
            time.sleep(timeout)
            return False
        readable, _, _ = select.select([self._fd], [], [], timeout)
        if not readable:
            return False
        with contextlib.suppress(BlockingIOError, InterruptedError):
            os.read(self._fd, _READ_BYTES)
        return True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> FolderWatch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def _open(folder: Path) -> int | None:
        if _LIBC is None:
            return None
        fd = int(_LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
        if fd < 0:
            return None  # EMFILE: the user's inotify instances are used up
        if int(_LIBC.inotify_add_watch(fd, os.fsencode(folder), _MASK)) < 0:
            os.close(fd)  # no such folder, or ENOSPC: the user's watches are used up
            return None
        return fd
