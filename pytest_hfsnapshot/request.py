"""Validation of what a user asks for, shared by ``materialize`` and the pytest declarations."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, TypedDict

from huggingface_hub.constants import REPO_TYPES_URL_PREFIXES

from .errors import InvalidRequestError

if TYPE_CHECKING:
    from typing_extensions import Unpack

REPO_TYPES = ("model", "dataset", "space")
#: A full commit id: 40 lowercase hex digits (test a string with :func:`is_commit`).
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
# Git ref rules that matter for a cache path: no "..", no control chars, no leading "/" or "-".
_BAD_REVISION_RE = re.compile(r"(\.\.)|[\x00-\x20\x7f~^:?*\[\\]|^[/\-.]|/$|\.lock$|//|@\{")

#: Weight files skipped by ``metadata_only=True``.
WEIGHT_PATTERNS: tuple[str, ...] = (
    "*.safetensors",
    "*.bin",
    "*.pt",
    "*.pth",
    "*.ckpt",
    "*.gguf",
    "*.ggml",
    "*.onnx",
    "*.onnx_data",
    "*.h5",
    "*.msgpack",
    "*.tflite",
    "*.ot",
    "*.pb",
    "*.npz",
    "*.mlmodel",
    "*.keras",
    "*.pdparams",
)


class RequestKeywords(TypedDict, total=False):
    """The keywords every declaration form takes besides the repo id (``snapshot_fixture``, the
    ``hf_snapshot`` marker, the ``hf_snapshots`` factory, ``materialize``, JSON specs): the one
    place they are named. Their defaults are :class:`SnapshotRequest`'s; their validation is
    :meth:`SnapshotRequest.build`'s."""

    revision: str
    allow_patterns: str | Sequence[str] | None
    ignore_patterns: str | Sequence[str] | None
    repo_type: str
    metadata_only: bool
    private: bool


#: The names of :class:`RequestKeywords`, in their documented order.
KEYWORDS: tuple[str, ...] = tuple(RequestKeywords.__annotations__)


@dataclass(frozen=True)
class SnapshotRequest:
    """One normalized, validated request for a snapshot.

    Two requests with equal fields are the same snapshot for every process.
    """

    repo_id: str
    revision: str = "main"
    repo_type: str = "model"
    allow_patterns: tuple[str, ...] | None = None
    ignore_patterns: tuple[str, ...] | None = None
    metadata_only: bool = False
    #: The repo is private: a "not found or private" answer skips its tests instead of failing them.
    #: What is downloaded does not depend on it (see :meth:`selection_key`).
    private: bool = False

    @classmethod
    def build(cls, repo_id: object, **keywords: Unpack[RequestKeywords]) -> SnapshotRequest:
        """Validate raw user input and return the normalized request, or raise InvalidRequestError.

        The keywords are :class:`RequestKeywords` (each defaults to this class's field of its name),
        typed for callers; their values are checked here whatever their type.
        """
        return cls.from_keywords(repo_id, keywords, form="SnapshotRequest.build")

    @classmethod
    def from_keywords(cls, repo_id: object, keywords: Mapping[str, object], *, form: str) -> SnapshotRequest:
        """:meth:`build` for a declaration form's keywords; an unknown one is an InvalidRequestError naming ``form``."""
        unknown = sorted(set(keywords) - set(KEYWORDS))
        if unknown:
            raise InvalidRequestError(
                f"unknown argument(s) {', '.join(unknown)}; {form} takes the repo id and {', '.join(KEYWORDS)}"
            )
        given = {**KEYWORD_DEFAULTS, **keywords}
        revision, repo_type = given["revision"], given["repo_type"]
        allow_patterns, ignore_patterns = given["allow_patterns"], given["ignore_patterns"]
        metadata_only, private = given["metadata_only"], given["private"]
        if not isinstance(repo_id, str) or not repo_id:
            raise InvalidRequestError(
                f"repo_id must be a non-empty string like 'org/name', got {repo_id!r}.",
            )
        # Imported here: huggingface_hub.utils pulls in its HTTP stack, which a pytest run that
        # declares no snapshot should not pay for at start-up.
        from huggingface_hub.errors import HFValidationError
        from huggingface_hub.utils import validate_repo_id  # type: ignore[attr-defined]

        try:
            validate_repo_id(repo_id)
        except HFValidationError as error:
            raise InvalidRequestError(
                f"Invalid repo id {repo_id!r}: {error} Use the form 'org/name' as shown on the Hub.",
                repo_id=repo_id,
            ) from None
        if repo_type is None:
            repo_type = KEYWORD_DEFAULTS["repo_type"]
        if repo_type not in REPO_TYPES:
            raise InvalidRequestError(
                f"Unknown repo_type {repo_type!r} for {repo_id!r}: use one of {', '.join(REPO_TYPES)}.",
                repo_id=repo_id,
            )
        if revision is None:
            revision = KEYWORD_DEFAULTS["revision"]
        if not isinstance(revision, str) or not revision or _BAD_REVISION_RE.search(revision):
            raise InvalidRequestError(
                f"Invalid revision {revision!r} for {repo_id!r}: give a branch, a tag or a 40-hex commit id.",
                repo_id=repo_id,
            )
        if not isinstance(metadata_only, bool):
            raise InvalidRequestError(
                f"metadata_only must be True or False for {repo_id!r}, got {metadata_only!r}.",
                repo_id=repo_id,
            )
        if not isinstance(private, bool):
            raise InvalidRequestError(
                f"private must be True or False for {repo_id!r}, got {private!r}.",
                repo_id=repo_id,
            )
        return cls(
            repo_id=repo_id,
            revision=revision,
            repo_type=str(repo_type),
            allow_patterns=_patterns("allow_patterns", allow_patterns, repo_id),
            ignore_patterns=_patterns("ignore_patterns", ignore_patterns, repo_id),
            metadata_only=metadata_only,
            private=private,
        )

    @property
    def pinned(self) -> bool:
        """True when the revision is already a commit id (immutable)."""
        return is_commit(self.revision)

    @property
    def full(self) -> bool:
        """True when no pattern narrows the snapshot (metadata markers are then required)."""
        return self.allow_patterns is None and self.ignore_patterns is None

    @property
    def effective_ignore(self) -> tuple[str, ...] | None:
        """Ignore patterns to hand to huggingface_hub, weight files added for ``metadata_only``."""
        if not self.metadata_only:
            return self.ignore_patterns
        return (*(self.ignore_patterns or ()), *WEIGHT_PATTERNS)

    @property
    def label(self) -> str:
        """``repo@revision`` with a type prefix for datasets and spaces, as shown to users."""
        return snapshot_label(self.repo_id, self.repo_type, self.revision)

    def unmatched_allow_patterns(self, files: Iterable[str]) -> tuple[str, ...]:
        """The ``allow_patterns`` entries that select none of ``files`` (matched as huggingface_hub does)."""
        from huggingface_hub.utils import filter_repo_objects  # type: ignore[attr-defined]

        names = list(files)
        return tuple(
            pattern
            for pattern in self.allow_patterns or ()
            if not any(True for _ in filter_repo_objects(items=names, allow_patterns=[pattern]))
        )

    def unmatched_pattern_message(self, pattern: str) -> str:
        """The warning for an ``allow_patterns`` entry that selects nothing; the snapshot is still served."""
        return (
            f"{self.label}: allow_patterns entry {pattern!r} matches no file; "
            "the snapshot is served with the files the other entries select"
        )

    def selection_key(self) -> str:
        """Stable short hash of what is selected (patterns and metadata_only), for record names."""
        blob = json.dumps(
            [self.allow_patterns, self.ignore_patterns, self.metadata_only], separators=(",", ":")
        ).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


#: Each keyword's default: the field of its name (what a declaration that leaves it out gets).
KEYWORD_DEFAULTS: dict[str, object] = {f.name: f.default for f in fields(SnapshotRequest) if f.name in KEYWORDS}


def keywords_signature() -> str:
    """``revision='main', allow_patterns=None, ...``: the keywords with their defaults, as a signature reads."""
    return ", ".join(f"{name}={KEYWORD_DEFAULTS[name]!r}" for name in KEYWORDS)


def is_commit(text: str) -> bool:
    """Whether ``text`` is a full commit id (40 lowercase hex digits, nothing around them)."""
    return len(text) == 40 and COMMIT_RE.fullmatch(text) is not None  # the length first: most names are short


def repo_path(repo_id: str, repo_type: str = "model") -> str:
    """``org/name``, ``datasets/org/name`` or ``spaces/org/name``: the repo as the Hub's URLs name it.

    The prefix is huggingface_hub's own (``constants.REPO_TYPES_URL_PREFIXES``); models have none.
    """
    return REPO_TYPES_URL_PREFIXES.get(repo_type, "") + repo_id


def snapshot_label(repo_id: str, repo_type: str, revision: str) -> str:
    """``org/name@main``, ``datasets/org/name@main``: how every message and summary row names a snapshot."""
    return f"{repo_path(repo_id, repo_type)}@{revision}"


def repo_type_of_prefix(prefix: str) -> str | None:
    """The repo type a URL prefix names without its slash (``"datasets"`` -> ``"dataset"``), else None."""
    for repo_type in REPO_TYPES:
        if REPO_TYPES_URL_PREFIXES.get(repo_type) == f"{prefix}/":
            return repo_type
    return None


def _patterns(name: str, value: object, repo_id: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    items: Iterable[object]
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, Sequence | set | frozenset):
        items = value
    else:
        raise InvalidRequestError(
            f"{name} for {repo_id!r} must be a string or a list of glob strings, got {type(value).__name__}.",
            repo_id=repo_id,
        )
    out: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise InvalidRequestError(
                f"{name} for {repo_id!r} holds {item!r}: every pattern must be a non-empty glob string "
                "such as '*.json'.",
                repo_id=repo_id,
            )
        out.append(item)
    if not out:
        raise InvalidRequestError(
            f"{name} for {repo_id!r} is empty: pass None to select everything, or at least one glob.",
            repo_id=repo_id,
        )
    return tuple(sorted(set(out)))
