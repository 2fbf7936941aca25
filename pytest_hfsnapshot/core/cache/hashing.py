"""Hashing downloads while their bytes arrive, so a verified file is not read twice.

A digest counts only for the very file followed to its last byte, unchanged since; any other file
is read again in full by :func:`~pytest_hfsnapshot.core.cache.verify.hash_mismatches`."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .layout import INCOMPLETE_RE
from .verify import CHUNK, ExpectedFile, hash_mismatches, new_digest, read_buffer

T = TypeVar("T")

#: How long the follower sleeps when it follows no file yet and finds none.
POLL_SECONDS = 0.004
#: While a file is still arriving, its new bytes are read once at least this many are there (or
#: the file is whole), and a look that finds fewer sleeps :data:`BATCH_SECONDS`: reading each
#: write as it lands costs much more CPU (docs/benchmarks.md).
BATCH = 4 * CHUNK
BATCH_SECONDS = 0.02
#: At most this much is read from one file before the others get their turn.
_TURN = 16 * CHUNK
#: While a file is followed, the blob folder is listed for new ones at most this often (a file
#: missed meanwhile is read back, not trusted).
LOOK_SECONDS = 0.05


@dataclass(frozen=True)
class Arrival:
    """What was hashed of one file: its identity when the last byte was read, and the digest."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    digest: str


class _Followed:
    def __init__(self, handle: io.FileIO, expected: ExpectedFile) -> None:
        self.handle = handle
        self.expected = expected
        self.digest = new_digest(lfs=expected.lfs, size=expected.size)
        self.position = 0
        self.spoiled = False


class ArrivalHasher:
    """Hash the files a download writes into ``blobs`` (a repo's blob folder) as they are written.

    ``expected``: the files being downloaded. :meth:`run` runs the download while following;
    :meth:`mismatches` then verifies the downloaded files, reading back only those it could not
    follow in full. :attr:`rehashed` counts the bytes read after the transfer had finished.
    """

    def __init__(self, blobs: Path, expected: Iterable[ExpectedFile], poll: float = POLL_SECONDS) -> None:
        self.blobs = str(blobs)
        self.wanted = {f.blob_name: f for f in expected}
        self.poll = poll
        self.arrivals: dict[str, list[Arrival]] = {}
        #: Bytes hashed after the transfer: the unread tails of followed files, and whole files read back.
        self.rehashed = 0
        self._followed: list[_Followed] = []
        self._seen: set[str] = set()
        self._inodes: set[tuple[int, int]] = set()
        self._stop = threading.Event()
        self._buffer = read_buffer()

    # --- following ------------------------------------------------------------------------------
    def run(self, download: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``download(*args, **kwargs)``, with the blob folder followed meanwhile (and the tails read after)."""
        if os.name == "nt":
            return download(*args, **kwargs)  # an open file cannot be renamed there: read back instead
        self._seen = set(self._names())  # what is there already was not written by this download
        thread = threading.Thread(target=self._follow, name="hfsnapshot-arrivals", daemon=True)
        thread.start()
        try:
            return download(*args, **kwargs)
        finally:
            self._stop.set()
            thread.join()
            for item in self._followed:
                self._finish(item, tail=True)
            self._followed = []

    def _names(self) -> list[str]:
        try:
            return os.listdir(self.blobs)
        except OSError:
            return []

    def _follow(self) -> None:
        looked = -LOOK_SECONDS
        while not self._stop.is_set():
            now = time.monotonic()
            if not self._followed or now - looked >= LOOK_SECONDS:
                looked = now
                with contextlib.suppress(OSError):
                    self._discover()
            progressed = False
            for item in self._followed:
                try:
                    progressed = self._read(item, _TURN) > 0 or progressed
                except OSError:
                    item.spoiled = True
                if item.spoiled or item.position == item.expected.size:
                    self._finish(item)  # done: its descriptor is not held while others arrive
            self._followed = [item for item in self._followed if not item.handle.closed]
            if not progressed:
                self._stop.wait(BATCH_SECONDS if self._followed else self.poll)

    def _discover(self) -> None:
        names = self._names()
        for name in names:
            if name in self._seen:
                continue
            self._seen.add(name)
            match = INCOMPLETE_RE.match(name)
            expected = self.wanted.get(match.group("etag") if match else name)
            if expected is None:
                continue
            try:
                fd = os.open(os.path.join(self.blobs, name), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            except OSError:
                continue  # renamed or linked into the store before we looked: read back later
            handle = io.FileIO(fd, "rb")
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in self._inodes:
                handle.close()  # not a file, or one followed already under its name in flight
                continue
            self._inodes.add((st.st_dev, st.st_ino))
            self._followed.append(_Followed(handle, expected))

    def _read(self, item: _Followed, limit: int | None) -> int:
        """Hash what was written to ``item`` since the last read (up to ``limit`` bytes); bytes read."""
        size = os.fstat(item.handle.fileno()).st_size
        if size < item.position or size > item.expected.size:
            item.spoiled = True  # cut back (rewritten from the start) or longer than listed
            return 0
        if limit is not None and size < item.expected.size and size - item.position < BATCH:
            return 0  # still arriving: wait for a batch
        view = self._buffer
        done = 0
        while item.position < size and (limit is None or done < limit):
            n = item.handle.readinto(view[: min(CHUNK, size - item.position)])
            if not n:
                break
            item.digest.update(view[:n])
            item.position += n
            done += n
        return done

    def _finish(self, item: _Followed, *, tail: bool = False) -> None:
        try:
            if tail and not item.spoiled:
                self.rehashed += self._read(item, None)
            st = os.fstat(item.handle.fileno())
            if not item.spoiled and st.st_size == item.position:
                arrival = Arrival(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, item.digest.hexdigest())
                self.arrivals.setdefault(item.expected.blob_name, []).append(arrival)
        except OSError:
            pass  # not hashed in full: read back
        finally:
            item.handle.close()

    # --- verifying ------------------------------------------------------------------------------
    def trusted(self, expected: ExpectedFile, path: Path) -> bool:
        """Whether ``path`` (followed through links) is a file that was hashed in full to ``expected``'s etag.

        It must be the file followed (same device and inode) with the size and modification time
        it had when its last byte was read. Unseen: a writer rewriting bytes already read without
        the file shrinking at a moment the follower looks, within the filesystem's timestamp
        granularity; huggingface_hub does so only when a server ignores a resumed download's
        ``Range``, and then writes the same bytes again.
        """
        try:
            st = os.stat(path)
        except OSError:
            return False
        return any(
            (a.device, a.inode, a.size, a.mtime_ns) == (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            and a.size == expected.size
            and a.digest == expected.etag
            for a in self.arrivals.get(expected.blob_name, ())
        )

    def mismatches(self, files: Iterable[tuple[ExpectedFile, Path]]) -> list[str]:
        """:func:`.verify.hash_mismatches`, reading back only the files not hashed as they arrived."""
        rest = [(f, path) for f, path in files if not self.trusted(f, path)]
        for f, _ in rest:
            self.rehashed += f.size
        return hash_mismatches(rest)
