"""A session process's request past the secret: a file from the cache (:mod:`.files`), the rest upstream."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from ..core.cache import layout
from ..core.hub import credentials, hub_calls
from ..core.implicit.observe import Observer
from ..errors import HfSnapshotError
from ..settings import Settings
from . import files, proxy
from .access import Access, bearer
from .replies import Reply, gave_up


class Answers:
    """The endpoint's answers, each given for the test that started the process (``phase``) with the
    token it sent: recorded, and under ``manage`` made ready, as that test's own loads are."""

    def __init__(
        self,
        observer: Observer,
        access: Access,
        upstream: str,
        settings: Callable[[], Settings],
        cache_dir: Callable[[], Path],
        before_upstream: Callable[[], None] = lambda: None,
    ) -> None:
        self.observer = observer
        self.access = access
        self.upstream = upstream
        self._settings = settings
        self._cache_dir = cache_dir
        self._before_upstream = before_upstream

    def read(self, phase: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """A child's huggingface_hub took a file from the cache (its start-up hook says which, and at
        which revision it was asked): under ``manage`` it is verified and repaired before the child's
        call returns, and it is recorded under the test that started the child."""
        try:
            data = json.loads(body)
            path, revision = os.path.abspath(str(data["path"])), str(data.get("revision") or "")
        except (ValueError, KeyError, TypeError, AttributeError):
            path, revision = "", ""
        place = layout.snapshot_file(path) if path else None
        if place is None or not os.path.isfile(path):
            return Reply(400, {"Content-Type": "text/plain"}, b"a read names a file of a snapshot in a cache\n")
        token = bearer(_header(headers, "authorization"))
        with self.observer.recorder.acting_for(phase), credentials.sending(token):
            try:
                self.observer.read_from_cache(
                    place.cache_dir,
                    place.repo_type,
                    place.repo_id,
                    revision or place.commit,
                    place.commit,
                    place.relpath,
                )
            except HfSnapshotError as error:  # the file could not be made right: the child's call fails with this
                return gave_up(str(error))
        return Reply(204)

    def warm(self) -> None:
        """Load what the first answer for a file loads (huggingface_hub's download stack, the gate and,
        under ``manage``, the engine), so that a child's first load does not wait for the imports."""
        self._before_upstream()
        files.warm(self.observer)

    def answer(
        self, phase: str, method: str, rest: str, headers: Mapping[str, str], body: bytes, *, here: str
    ) -> Reply:
        """The reply to a request for ``rest`` (the path past the secret and the test); ``here``: the URL
        the child reached the endpoint at, which redirects are rewritten to."""
        target = "/" + rest
        observer = self.observer
        offline = observer.offline()
        self._before_upstream()
        token = bearer(_header(headers, "authorization"))
        with observer.recorder.acting_for(phase), credentials.sending(token):
            url = self.upstream + target
            call = hub_calls.parse(url, self.upstream)
            if call is not None and call.kind == "file" and method in ("GET", "HEAD"):
                return files.serve(
                    call,
                    method,
                    _header(headers, "range"),
                    token=token,
                    cache_dir=self._cache_dir(),
                    access=self.access,
                    offline=offline,
                    observer=observer,
                )
            listed = hub_calls.refs_of(url, self.upstream) if method == "GET" else None
            made = observer.local_refs(*listed) if listed is not None else None
            if made is not None:
                return Reply(made.status, dict(made.headers), made.body)
            retries = self._settings().retries if observer.manages else None
            reply = proxy.forward(
                method, target, headers, body, upstream=self.upstream, here=here, retries=retries, offline=offline
            )
            if call is not None and call.kind in ("revision", "info"):
                # The commit a branch resolved to, which the child's later loads by commit name: read
                # here, where the answer is read anyway (huggingface_hub's own client leaves it unread).
                commit = proxy.commit_in(reply)
                if commit is not None:
                    observer.recorder.note(call.repo_type, call.repo_id, call.revision, commit=commit)
            elif listed is not None:
                # llama.cpp's -hf takes main's commit from the refs and loads by commit: main's loads.
                commit = proxy.main_in(reply)
                if commit is not None:
                    observer.recorder.note(*listed, "main", commit=commit)
            return reply


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


__all__ = ["Answers"]
