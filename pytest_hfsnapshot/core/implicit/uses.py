"""Implicit Hub use as one process saw it: each use keyed by repo and revision, and a session's :class:`Recorder`."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from ...request import is_commit, snapshot_label

if TYPE_CHECKING:
    from ...settings import Settings

#: (repo type, repo id, revision as asked): the pin key of an implicit use.
Key = tuple[str, str, str]

#: The phase names of requests sent outside a test.
COLLECTION = "collection"
SESSION = "session"


@dataclasses.dataclass
class ImplicitUse:
    """One snapshot that library code used by repo id during the session."""

    repo_type: str
    repo_id: str
    revision: str
    commit: str | None = None
    #: Path -> size in bytes (-1 when unknown) of every path obtained at the commit.
    files: dict[str, int] = dataclasses.field(default_factory=dict)
    missing: set[str] = dataclasses.field(default_factory=set)
    #: The Hub's error code when it refused the use (``RepoNotFound``, ``GatedRepo``, ``RevisionNotFound``).
    refused: str | None = None
    #: The node ids (or ``collection``, ``session``) that made the use, first first.
    tests: list[str] = dataclasses.field(default_factory=list)
    #: Bytes the session transferred for it (files that were not in the cache before).
    fetched: int = 0

    @property
    def key(self) -> Key:
        return (self.repo_type, self.repo_id, self.revision)

    @property
    def label(self) -> str:
        """``org/name@main``, ``datasets/org/name@main``."""
        return snapshot_label(self.repo_id, self.repo_type, self.revision)

    @property
    def size(self) -> int:
        return sum(size for size in self.files.values() if size > 0)

    @property
    def refusal(self) -> str | None:
        """The refusal that stands for the snapshot: none once files were obtained (the Hub refused
        one request, such as a repo-info probe library code caught, not the snapshot)."""
        return None if self.files else self.refused

    def merge(self, other: ImplicitUse) -> None:
        """Add ``other``'s paths, tests and bytes (another test's or worker's use of the same snapshot)."""
        self.commit = self.commit or other.commit
        for path, size in other.files.items():
            if self.files.get(path, -1) < 0:
                self.files[path] = size
        self.missing |= other.missing
        self.missing -= set(self.files)
        self.refused = self.refused or other.refused
        self.tests.extend(test for test in other.tests if test not in self.tests)
        self.fetched += other.fetched

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo_type": self.repo_type,
            "repo_id": self.repo_id,
            "revision": self.revision,
            "commit": self.commit,
            "files": dict(sorted(self.files.items())),
            "missing": sorted(self.missing),
            "refused": self.refused,
            "tests": list(self.tests),
            "fetched": self.fetched,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ImplicitUse:
        return cls(
            repo_type=str(data["repo_type"]),
            repo_id=str(data["repo_id"]),
            revision=str(data["revision"]),
            commit=data.get("commit"),
            files={str(p): int(s) for p, s in dict(data.get("files", {})).items()},
            missing={str(p) for p in data.get("missing", ())},
            refused=data.get("refused"),
            tests=[str(t) for t in data.get("tests", ())],
            fetched=int(data.get("fetched", 0)),
        )


def merged(uses: Iterable[ImplicitUse]) -> list[ImplicitUse]:
    """One use per key (the union of each key's uses), in key order.

    A use by commit id joins the use of a branch or tag of the same repo that resolved to that
    commit (library code resolves ``main``, then loads by commit; which came first to this process
    does not matter).
    """
    by_key: dict[Key, ImplicitUse] = {}
    for use in uses:
        known = by_key.get(use.key)
        if known is None:
            by_key[use.key] = ImplicitUse.from_dict(use.to_dict())
        else:
            known.merge(use)
    for key in [k for k in sorted(by_key) if is_commit(k[2])]:
        branch = next(
            (
                use
                for k, use in sorted(by_key.items())
                if k[:2] == key[:2] and not is_commit(k[2]) and use.commit == key[2]
            ),
            None,
        )
        if branch is not None:
            branch.merge(by_key.pop(key))
    return [by_key[key] for key in sorted(by_key)]


class Prepared(NamedTuple):
    """What materializing one file for a load found: the commit, whether it has the file, bytes fetched."""

    commit: str
    present: bool
    #: Bytes transferred for it (0 when the cache or a layer had it).
    fetched: int = 0


#: Materializes one file (repo type, repo id, revision, path, settings); see :mod:`.file_materialize`.
Preparer = Callable[[str, str, str, str, "Settings"], "Prepared | None"]


class _Acting:
    """:meth:`Recorder.acting_for` (a class, not a generator: it is entered for every request a session
    endpoint answers)."""

    __slots__ = ("_before", "_local", "_phase")

    def __init__(self, local: threading.local, phase: str) -> None:
        self._local, self._phase, self._before = local, phase, None

    def __enter__(self) -> None:
        self._before = getattr(self._local, "phase", None)
        self._local.phase = self._phase

    def __exit__(self, *exc: object) -> None:
        self._local.phase = self._before


class Recorder:
    """This process's implicit uses, and which test is running (set by the plugin's hooks)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._uses: dict[Key, ImplicitUse] = {}
        self._phase = SESSION
        #: A thread acting for another test than the running one (:meth:`acting_for`).
        self._acting = threading.local()
        #: Keys used by each phase (what ``fail`` mode checks at the end of a test).
        self._by_phase: dict[str, set[Key]] = {}

    @property
    def phase(self) -> str:
        """The node id of the test in setup, call or teardown; else ``collection`` or ``session``.

        A thread inside :meth:`acting_for` sees the phase it acts for instead.
        """
        acting: str | None = getattr(self._acting, "phase", None)
        return acting if acting is not None else self._phase

    @phase.setter
    def phase(self, value: str) -> None:
        self._phase = value

    def acting_for(self, phase: str) -> contextlib.AbstractContextManager[None]:
        """Record this thread's uses under ``phase`` (a session endpoint serving a test's child process)
        while the test's own thread goes on under its own."""
        return _Acting(self._acting, phase)

    def reset(self) -> None:
        with self._lock:
            self._uses.clear()
            self._by_phase.clear()
            self._phase = SESSION

    def note(
        self,
        repo_type: str,
        repo_id: str,
        revision: str,
        *,
        commit: str | None = None,
        path: str | None = None,
        size: int = -1,
        missing: str | None = None,
        refused: str | None = None,
        fetched: int = 0,
        phase: str | None = None,
    ) -> Key:
        """Record what one call learnt of a snapshot; returns the key it was filed under.

        A call by commit id is filed under the branch or tag this process saw resolve to that
        commit (transformers resolves ``main`` once, then loads every file by commit).
        """
        phase = phase or self.phase
        with self._lock:
            key = (repo_type, repo_id, revision)
            if is_commit(revision) and key not in self._uses:
                key = next(
                    (
                        k
                        for k, use in self._uses.items()
                        if k[:2] == key[:2] and use.commit == revision and not is_commit(k[2])
                    ),
                    key,
                )
            use = self._uses.get(key)
            if use is None:
                use = self._uses[key] = ImplicitUse(*key)
            if commit is not None:
                use.commit = commit
            elif is_commit(key[2]):
                use.commit = key[2]
            if path is not None and use.files.get(path, -1) < 0:
                use.files[path] = size
                use.missing.discard(path)
            if missing is not None and missing not in use.files:
                use.missing.add(missing)
            if refused is not None:
                use.refused = refused
            use.fetched += fetched
            if phase not in use.tests:
                use.tests.append(phase)
            self._by_phase.setdefault(phase, set()).add(key)
            return key

    def uses(self) -> list[ImplicitUse]:
        """A copy of every use, in key order."""
        with self._lock:
            return [ImplicitUse.from_dict(self._uses[key].to_dict()) for key in sorted(self._uses)]

    def get(self, key: Key) -> ImplicitUse | None:
        with self._lock:
            use = self._uses.get(key)
            return ImplicitUse.from_dict(use.to_dict()) if use is not None else None

    def keys_of(self, phase: str) -> set[Key]:
        """The keys the phase (a node id) used."""
        with self._lock:
            return set(self._by_phase.get(phase, ()))


__all__ = [
    "COLLECTION",
    "SESSION",
    "ImplicitUse",
    "Key",
    "Prepared",
    "Preparer",
    "Recorder",
    "merged",
]
