"""Which typed error huggingface_hub raises for what is missing, per server.

LocalHub answers as the Hub does (CONTRACT.md section 6, HUB-FACTS.md error mapping);
olah offline answers 401 RepoNotFound for any revision or file it cannot find
(HUB-FACTS.md), and 404 EntryNotFound for the tree of an unknown commit id. These are
olah's documented limits, asserted so that a change on either side shows up here.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from huggingface_hub import hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from .content import MODEL
from .servers import Target

UNKNOWN_COMMIT = "0123456789abcdef0123456789abcdef01234567"

CASES: dict[str, Callable[[], object]] = {
    "missing-file": lambda: hf_hub_download(MODEL.repo_id, "nothere.txt"),
    "missing-revision": lambda: snapshot_download(MODEL.repo_id, revision="nope"),
    "missing-repo": lambda: snapshot_download("crosscheck/nothere"),
    "missing-commit": lambda: snapshot_download(MODEL.repo_id, revision=UNKNOWN_COMMIT),
}

# case -> server -> (error raised, error it was raised from or None)
EXPECTED: dict[str, dict[str, tuple[type[Exception], type[Exception] | None]]] = {
    "missing-file": {
        "local": (RemoteEntryNotFoundError, None),
        "olah": (RepositoryNotFoundError, None),
    },
    "missing-revision": {
        "local": (RevisionNotFoundError, None),
        "olah": (RepositoryNotFoundError, None),
    },
    "missing-repo": {
        "local": (RepositoryNotFoundError, None),
        "olah": (RepositoryNotFoundError, None),
    },
    "missing-commit": {
        "local": (RevisionNotFoundError, None),
        "olah": (LocalEntryNotFoundError, RemoteEntryNotFoundError),
    },
}


@pytest.mark.parametrize("case", list(CASES))
def test_missing_things_raise_typed_errors(server: Target, case: str) -> None:
    error, cause = EXPECTED[case][server.name]

    with pytest.raises(Exception) as excinfo:
        CASES[case]()

    assert type(excinfo.value) is error, repr(excinfo.value)
    if cause is not None:
        assert type(excinfo.value.__cause__) is cause, repr(excinfo.value.__cause__)
    assert list(server.cache_dir.rglob("*.incomplete")) == []
