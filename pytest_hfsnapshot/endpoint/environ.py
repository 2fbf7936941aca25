"""The environment a session's child processes inherit: the endpoint's URL and how to talk to it.

Set in ``os.environ`` after huggingface_hub read its own settings at import, so this process keeps
talking to the Hub while every process a test starts (at any depth, in any language) talks to the
endpoint. Each value is put back at the end unless someone else changed it meanwhile.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

ENDPOINT = "HF_ENDPOINT"
#: Seconds a child waits for an answer: the endpoint answers a file's HEAD once the file is ready.
CHILD_TIMEOUT = "3600"
_TIMEOUTS = ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT")
#: The offline switches a child obeys (huggingface_hub's, transformers 4's).
_OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


class ChildEnvironment:
    """The variables set for children while the endpoint serves (:meth:`apply`, :meth:`restore`)."""

    def __init__(self, session_url: str, *, offline: bool) -> None:
        self.session_url = session_url
        values = {ENDPOINT: session_url, "HF_HUB_DISABLE_XET": "1"}
        values.update({name: CHILD_TIMEOUT for name in _TIMEOUTS if name not in os.environ})
        if offline:
            # The endpoint is the offline one: it serves the cache and sends nothing upstream, and a
            # child that asks it gets its loads recorded and its misses named in the test's report.
            values.update({name: "0" for name in _OFFLINE if name in os.environ or name == "HF_HUB_OFFLINE"})
        self._values = values
        self._before: dict[str, str | None] = {}

    def apply(self) -> None:
        self._before = {name: os.environ.get(name) for name in self._values}
        os.environ.update(self._values)

    def restore(self) -> None:
        """Put back each variable that still holds the value set here."""
        for name, value in self._values.items():
            if os.environ.get(name) != value:
                continue
            before = self._before.get(name)
            if before is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = before

    @contextlib.contextmanager
    def for_test(self, url: str) -> Iterator[None]:
        """``HF_ENDPOINT`` naming one test while it runs (unless something else holds the variable)."""
        if os.environ.get(ENDPOINT) != self.session_url:
            yield
            return
        os.environ[ENDPOINT] = url
        try:
            yield
        finally:
            if os.environ.get(ENDPOINT) == url:
                os.environ[ENDPOINT] = self.session_url


__all__ = ["CHILD_TIMEOUT", "ENDPOINT", "ChildEnvironment"]
