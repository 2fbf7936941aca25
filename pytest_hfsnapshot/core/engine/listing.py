"""A commit's file listing: fetched, parsed into what each file must be, and a request's selection of it."""

from __future__ import annotations

import re
from typing import Any

from huggingface_hub import HfApi
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils import filter_repo_objects  # type: ignore[attr-defined]

from ...errors import InvalidRequestError, VerificationError
from ...request import SnapshotRequest
from ..cache.layers import Layers
from ..cache.layout import XET_HASH_RE, RepoCache
from ..cache.verify import ExpectedFile
from ..hub import retry
from .call import Call

#: At least one of these must be in a full snapshot (README.md counts for datasets and spaces).
METADATA_MARKERS = (
    "config.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "processor_config.json",
    "model_index.json",
)
_ETAG_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a git blob sha1 or an LFS sha256


def fetch(api: HfApi, request: SnapshotRequest, commit: str) -> dict[str, dict[str, Any]]:
    """The raw listing of ``commit``: one recursive tree call (the caller retries it)."""
    out: dict[str, dict[str, Any]] = {}
    for item in api.list_repo_tree(request.repo_id, recursive=True, revision=commit, repo_type=request.repo_type):
        if not isinstance(item, RepoFile):
            continue  # a folder
        entry: dict[str, Any] = {"size": item.size, "blob_id": item.blob_id}
        if item.lfs is not None:
            entry["lfs_sha256"] = item.lfs.sha256
            entry["lfs_size"] = item.lfs.size
        xet_hash = getattr(item, "xet_hash", None)
        if xet_hash:
            entry["xet_hash"] = xet_hash
        out[item.path] = entry
    return out


def parse(repo: RepoCache, raw: dict[str, dict[str, Any]]) -> dict[str, ExpectedFile]:
    """What each listed file must be; ValueError (or KeyError, TypeError) for an entry that cannot be
    trusted, UnsafeCacheError for a path that would leave the repo folder."""
    listing: dict[str, ExpectedFile] = {}
    for path, info in raw.items():
        repo.safe_relpath(path)
        lfs = info.get("lfs_sha256")
        size = int(info["lfs_size"] if lfs else info["size"])
        etag = str(lfs or info["blob_id"])
        if not _ETAG_RE.fullmatch(etag):
            raise ValueError(f"bad blob id {etag!r}")
        xet = str(info.get("xet_hash") or "")
        if xet and not XET_HASH_RE.fullmatch(xet):
            raise ValueError(f"bad xet hash {xet!r}")
        listing[path] = ExpectedFile(path, size, etag, bool(lfs), xet=xet)
    return listing


def select(request: SnapshotRequest, listing: dict[str, ExpectedFile], commit: str) -> list[ExpectedFile]:
    """The files ``request`` selects, matched as huggingface_hub matches them; an error when the
    selection is empty, or a full snapshot lacks every metadata marker."""
    paths = list(
        filter_repo_objects(
            items=sorted(listing),
            allow_patterns=list(request.allow_patterns) if request.allow_patterns else None,
            ignore_patterns=list(request.effective_ignore) if request.effective_ignore else None,
        )
    )
    if not paths:
        raise InvalidRequestError(
            f"No file of {request.label} (commit {commit[:12]}) matches allow_patterns="
            f"{list(request.allow_patterns or [])} ignore_patterns={list(request.effective_ignore or [])}. "
            f"The repo has: {', '.join(sorted(listing)[:10]) or 'no files'}.",
            repo_id=request.repo_id,
            revision=request.revision,
        )
    if request.full:
        markers = METADATA_MARKERS + (("README.md",) if request.repo_type != "model" else ())
        if not any(p in markers for p in paths):
            raise VerificationError(
                f"{request.label} has none of the metadata files {', '.join(markers)}; a full snapshot "
                "without them is not a loadable repo. Select files with allow_patterns if this is expected.",
                repo_id=request.repo_id,
                revision=request.revision,
            )
    return [listing[p] for p in paths]


def cached(repo: RepoCache, layers: Layers, commit: str) -> dict[str, ExpectedFile] | None:
    """The listing of ``commit`` the cache holds (the client's tree cache), else the first layer's
    (copied where the client's own offline calls look); None when neither holds one to trust."""
    raw = repo.listings.read(commit)
    if raw is not None:
        try:
            return parse(repo, raw)
        except (KeyError, TypeError, ValueError):
            pass
    layered = layers.listing(repo, commit)
    if layered is None:
        return None
    try:
        listing = parse(repo, layered)
    except (KeyError, TypeError, ValueError):
        return None
    repo.listings.write(commit, layered)
    return listing


def load(call: Call, retrier: retry.Retrier, commit: str) -> dict[str, ExpectedFile]:
    """The listing of ``commit``: the cached one, else the Hub's (retried), then kept in the cache."""
    listing = cached(call.repo, call.layers, commit)
    if listing is not None:
        return listing
    raw = retrier.call(
        lambda: fetch(HfApi(token=call.settings.token), call.request, commit),
        what="the file listing",
        retried=not retry.client_retries_listings(),
    )
    listing = parse(call.repo, raw)
    call.repo.listings.write(commit, raw)
    return listing


__all__ = ["METADATA_MARKERS", "cached", "fetch", "load", "parse", "select"]
