"""A repo file asked for on ``/resolve/``: loaded by huggingface_hub in this process, under the session's
observer, and sent as the Hub sends it.

``hf_hub_download`` runs in the handler's thread: under ``manage`` and ``fail`` the observer's hook
materializes the file first (lock, gate, retries, verification and repair, pins, layers; a file made
ready before is only recorded); under ``report`` the load is recorded; offline it is served from the
cache with no request. The answer carries the Hub's headers (``X-Repo-Commit``, the blob's ``ETag``,
``X-Linked-Etag`` and ``X-Linked-Size`` for LFS files), never Xet's, and honours ``Range``.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from ..core.cache.layout import RepoCache
from ..core.hub import hub_calls
from ..core.implicit import file_materialize, local_answers
from ..core.implicit.observe import Observer, commit_of
from .access import Access
from .replies import Reply, for_error, gave_up, hub_error


def serve(
    call: hub_calls.HubCall,
    method: str,
    range_header: str | None,
    *,
    token: str | None,
    cache_dir: Path,
    access: Access,
    offline: bool,
    observer: Observer,
) -> Reply:
    """The answer to ``GET``/``HEAD`` of one file, loaded with ``token`` (None: the child sent none)."""
    try:
        path = observer.ready_file(cache_dir, call.repo_type, call.repo_id, call.revision, call.path)
        if path is None:
            from huggingface_hub import hf_hub_download  # not on a warm answer: its lazy import costs each call

            path = hf_hub_download(
                call.repo_id,
                call.path,
                repo_type=call.repo_type,
                revision=call.revision,
                cache_dir=cache_dir,
                token=token if token is not None else False,
            )
    except Exception as error:
        return for_error(error, offline=offline, asked=f"{call.label} {call.path}")
    commit = commit_of(path)
    repo = _repo(cache_dir, call.repo_id, call.repo_type)
    found = local_answers.file_headers(repo, commit, call.path, path) if commit is not None else None
    if commit is None or found is None:
        return gave_up(
            f"pytest-hfsnapshot: {call.repo_id}'s {call.path} was loaded but is not in the cache at a commit"
        )
    refused = access.check(call, commit, token, offline=offline)
    if refused is not None:
        return refused
    headers, size = found
    headers = {**headers, "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
    span = (0, size - 1)
    status = 200
    if range_header is not None:
        asked = parse_range(range_header, size)
        if asked is None:
            return hub_error(416, None, f"Range not satisfiable: {range_header}", {"Content-Range": f"bytes */{size}"})
        span, status = asked, 206
        headers["Content-Range"] = f"bytes {span[0]}-{span[1]}/{size}"
    return Reply(status, headers, file=os.path.realpath(path) if method == "GET" else None, span=span)


def warm(observer: Observer) -> None:
    """Import what :func:`serve` imports on its first call: huggingface_hub's download stack and, when
    the observer makes files ready (``manage``, ``fail``), the engine."""
    import huggingface_hub.file_download  # noqa: F401

    if observer.manages:
        file_materialize.warm()


@functools.lru_cache(maxsize=64)
def _repo(cache_dir: Path, repo_id: str, repo_type: str) -> RepoCache:
    return RepoCache(cache_dir, repo_id, repo_type)  # a warm answer's costliest step, once per repo


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """First and last byte of a single ``bytes=`` range of a ``size``-byte file, or None if unsatisfiable."""
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, _, last = spec.strip().partition("-")
    try:
        if not first:
            suffix = int(last)
            return (max(0, size - suffix), size - 1) if suffix > 0 and size > 0 else None
        start, end = int(first), int(last) if last else size - 1
    except ValueError:
        return None
    if start >= size or end < start:
        return None
    return start, min(end, size - 1)


__all__ = ["parse_range", "serve"]
