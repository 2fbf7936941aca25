"""Snapshots written as text: ``org/name[@revision]`` and JSON specs."""

from __future__ import annotations

import json

from ...errors import InvalidRequestError
from ...request import KEYWORDS, SnapshotRequest, repo_type_of_prefix

#: The keys of a JSON spec: the repo id and the keywords of every declaration form.
SPEC_KEYS: tuple[str, ...] = ("repo_id", *KEYWORDS)


def parse_spec(text: str) -> SnapshotRequest:
    """``org/name[@revision]``, ``datasets/org/name[@revision]``, or a JSON object of the factory's arguments."""
    text = text.strip()
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except ValueError as error:
            raise InvalidRequestError(f"not valid JSON ({error}): {text}") from None
        unknown = sorted(set(spec) - set(SPEC_KEYS))
        if unknown:
            raise InvalidRequestError(f"unknown key(s) {', '.join(unknown)}; use {', '.join(SPEC_KEYS)}: {text}")
        if "repo_id" not in spec:
            raise InvalidRequestError(f"a repo_id is required: {text}")
        return SnapshotRequest.build(spec.pop("repo_id"), **spec)
    repo_id, at, revision = text.partition("@")
    repo_type = "model"
    prefix, _, rest = repo_id.partition("/")
    if rest.count("/") == 1 and (kind := repo_type_of_prefix(prefix)) is not None:
        repo_type, repo_id = kind, rest
    return SnapshotRequest.build(repo_id, revision=revision if at else "main", repo_type=repo_type)


__all__ = ["SPEC_KEYS", "parse_spec"]
