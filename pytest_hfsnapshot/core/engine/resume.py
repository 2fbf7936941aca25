"""The engine's plain-HTTP transfers go on from the byte where a cut stopped them (CONTRACT section 11).

huggingface_hub starts each call from byte 0 and deletes what it wrote when the call fails. Inside
:func:`transfers` its ``http_get`` is this module's: a cut is retried with ``Range``, and a failed
transfer leaves ``blobs/<etag>.incomplete`` (``core.cache.layout.partial_blob``) for the next one to
start from. Nothing is trusted on its name: the engine checks every file's sha256 as before."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from .. import _hf_compat
from ..cache.layout import INCOMPLETE_RE, partial_blob
from ..cache.verify import CHUNK
from ..hub import retry

log = logging.getLogger("pytest_hfsnapshot")

#: Tries in a row that bring no new byte before a transfer fails (huggingface_hub's ``http_get``: 5).
TRIES = 5
#: Seconds before trying again after a try that brought nothing (huggingface_hub's: 1).
PAUSE = 1.0
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")

_here = threading.local()
_lock = threading.Lock()
_users = 0
_undo: Callable[[], None] | None = None


@contextlib.contextmanager
def transfers(path: str, label: str) -> Iterator[None]:
    """The client's plain-HTTP transfers in this thread resume while inside (``path``: the repo file,
    ``label``: its snapshot, for the progress bar and the log). The client's function is replaced
    while any thread is inside."""
    global _users, _undo
    with _lock:
        if _users == 0:
            _undo = _hf_compat.wrap_http_get(_resuming)
        _users += 1
    _here.file = (path, label)
    try:
        yield
    finally:
        _here.file = None
        with _lock:
            _users -= 1
            if _users == 0 and _undo is not None:
                _undo()
                _undo = None


def _resuming(original: Callable[..., Any]) -> Callable[..., Any]:
    def http_get(
        url: str,
        temp_file: BinaryIO,
        *,
        resume_size: int = 0,
        headers: dict[str, Any] | None = None,
        expected_size: int | None = None,
        **rest: Any,
    ) -> None:
        file: tuple[str, str] | None = getattr(_here, "file", None)
        name = getattr(temp_file, "name", None)
        match = INCOMPLETE_RE.match(os.path.basename(name)) if isinstance(name, str) else None
        out = Path(str(name)) if match else None
        partial = partial_blob(out.parent, match.group("etag")) if out and match else None
        # Only a download of the engine's, into the client's per-call file, from its start, of a size the
        # client takes over plain HTTP (it refuses a larger one itself).
        if (
            file is None
            or out is None
            or partial is None
            or out == partial
            or resume_size
            or expected_size is None
            or expected_size > _largest()
        ):
            original(url, temp_file, resume_size=resume_size, headers=headers, expected_size=expected_size, **rest)
            return
        Transfer(url, temp_file, out, partial, headers or {}, expected_size, file).run()

    return http_get


def _largest() -> int:
    """The largest file huggingface_hub downloads over plain HTTP."""
    from huggingface_hub import constants

    return constants.MAX_HTTP_DOWNLOAD_SIZE


class Transfer:
    """One file's ``size`` bytes streamed into ``out`` (the client's ``.incomplete`` file, open at
    ``path``), from ``partial`` when a failed transfer left one; ``file``: the repo file and its snapshot."""

    def __init__(
        self,
        url: str,
        out: BinaryIO,
        path: Path,
        partial: Path,
        headers: dict[str, Any],
        size: int,
        file: tuple[str, str],
    ) -> None:
        self.url, self.out, self.path, self.partial, self.headers, self.size = url, out, path, partial, headers, size
        self.name = file[0]
        self.label = f"{file[0]} of {file[1]}"
        #: Bytes in ``out`` so far.
        self.offset = 0

    def run(self) -> None:
        self.offset = self._take_partial()
        try:
            if self.offset < self.size:
                self._receive()
        except BaseException:
            self._keep_partial()
            raise

    def _take_partial(self) -> int:
        """Copy the kept partial into ``out`` and remove it; its length (0 without a usable one)."""
        try:
            fd = os.open(self.partial, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            return 0
        except OSError:
            self._drop_partial()  # a link, or unreadable: nothing to go on from
            return 0
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > self.size:
            os.close(fd)  # not a file, or longer than the file: not a part of it
            copied = 0
        else:
            with io.FileIO(fd, "rb") as source:
                shutil.copyfileobj(source, self.out, CHUNK)
            copied = self.out.tell()
        self._drop_partial()
        if copied:
            log.info("hfsnapshot: %s goes on from byte %d of %d (a cut transfer's)", self.label, copied, self.size)
        return copied

    def _drop_partial(self) -> None:
        try:
            os.unlink(self.partial)
        except FileNotFoundError:
            pass
        except OSError as error:  # a folder of that name: nothing is kept there either (see _keep_partial)
            log.debug("hfsnapshot: %s cannot be removed: %s", self.partial, error)

    def _keep_partial(self) -> None:
        """After a failure: the bytes received become the partial (the client then finds its file gone)."""
        try:
            self.out.flush()
            if 0 < os.fstat(self.out.fileno()).st_size <= self.size:
                os.replace(self.path, self.partial)
        except OSError as error:
            log.debug("hfsnapshot: the bytes of a failed transfer of %s are not kept: %s", self.label, error)

    def _receive(self) -> None:
        """GET the rest, trying again after a cut, from the last byte received."""
        from huggingface_hub import constants
        from huggingface_hub.utils import http_stream_backoff, tqdm  # type: ignore[attr-defined]

        left = TRIES
        desc = self.name if len(self.name) <= 40 else f"(…){self.name[-40:]}"
        with tqdm(  # type: ignore[no-untyped-call]
            unit="B", unit_scale=True, total=self.size, initial=self.offset, desc=desc, name="huggingface_hub.http_get"
        ) as bar:
            while self.offset < self.size:
                headers = dict(self.headers)
                if self.offset:
                    headers["Range"] = f"bytes={self.offset}-"
                got = 0
                try:
                    with http_stream_backoff(
                        "GET",
                        self.url,
                        headers=headers,
                        timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT,
                        retry_on_exceptions=(),
                        retry_on_status_codes=(408, 429),
                    ) as response:
                        _hf_compat.raise_for_answer(response)
                        if self.offset and not self._continues(response):
                            bar.update(-self.offset)
                            self._start_over()
                            if response.status_code != 200:
                                continue  # another part than asked: ask again for the whole file
                        for chunk in response.iter_bytes():
                            self.out.write(chunk)
                            self.offset += len(chunk)
                            got += len(chunk)
                            bar.update(len(chunk))
                except Exception as error:
                    if not retry.file_get_retries(error):
                        raise
                    left = TRIES if got else left
                    if left == 0:
                        raise
                    left -= 1
                    log.info(
                        "hfsnapshot: %s cut after byte %d of %d (%s); asking for the rest",
                        self.label,
                        self.offset,
                        self.size,
                        error,
                    )
                    if not got:
                        time.sleep(PAUSE)
                    continue
                if self.offset != self.size:
                    raise OSError(
                        f"Consistency check failed: file should be of size {self.size} but has size "
                        f"{self.offset} ({self.label})."
                    )

    def _continues(self, response: Any) -> bool:
        """Whether ``response`` carries the rest of this file from ``offset`` (206 with that range)."""
        found = _CONTENT_RANGE.fullmatch(str(response.headers.get("Content-Range", "")).strip())
        return (
            response.status_code == 206
            and found is not None
            and int(found.group(1)) == self.offset
            and int(found.group(3)) == self.size
        )

    def _start_over(self) -> None:
        log.info("hfsnapshot: %s: the server did not send the range asked for; starting over", self.label)
        self.out.seek(0)
        self.out.truncate()
        self.offset = 0


__all__ = ["PAUSE", "TRIES", "Transfer", "transfers"]
