"""Pin files: which commit each branch or tag means, read and written byte-stable.

A pin file is a manifest (one format): entries keyed by repo type, id and revision; those with
``files`` record an implicit use. The same pins always give the same bytes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ...errors import InvalidRequestError, RevisionNotFoundError
from ...request import SnapshotRequest, is_commit, repo_path, snapshot_label
from ...settings import pytest_command
from .layout import atomic_write_text

#: The keys every pin entry has (a manifest entry has ``files`` and ``size`` besides; a refusal may lack ``commit``).
KEYS = ("repo_id", "repo_type", "revision", "commit")
#: The Hub's refusals an implicit use records (``"refused"``), as its ``X-Error-Code`` names them.
REFUSALS = ("RepoNotFound", "GatedRepo", "RevisionNotFound")
#: A pin's identity: (repo type, repo id, revision); patterns do not matter.
Key = tuple[str, str, str]
#: The commit older pin files gave a refused use: read as no commit.
_MADE_UP_COMMIT = "0" * 40

_FORMAT = (
    "a pin file is a JSON list of objects with repo_id, repo_type, revision and commit, "
    f"as {pytest_command('manifest')} and {pytest_command('update_pins')} write it"
)


class Pin(NamedTuple):
    """One branch or tag (or commit) of one repo, and the commit it is pinned to."""

    repo_type: str
    repo_id: str
    revision: str
    #: None only for a refusal the Hub named no commit for (see :attr:`refusal`).
    commit: str | None
    #: The paths recorded for the pin (``files`` of its entries, their union), or None when no entry has any.
    files: tuple[str, ...] | None = None
    #: Paths the commit does not have, recorded from an implicit use.
    missing: tuple[str, ...] = ()
    #: The Hub's refusal recorded for an implicit use (one of :data:`REFUSALS`).
    refused: str | None = None

    @property
    def key(self) -> Key:
        return (self.repo_type, self.repo_id, self.revision)

    @property
    def refusal(self) -> str | None:
        """The refusal that stands for the snapshot: none when the entry records files obtained."""
        return None if self.files else self.refused

    @property
    def label(self) -> str:
        """``org/name@main``, ``datasets/org/name@main``: as the summary and the commands write it."""
        return snapshot_label(self.repo_id, self.repo_type, self.revision)

    @property
    def moves(self) -> bool:
        """False for a pin of a commit id, which can only mean itself."""
        return not is_commit(self.revision)

    def request(self) -> SnapshotRequest:
        """The request that asks the Hub what this pin's revision points at."""
        return SnapshotRequest(repo_id=self.repo_id, revision=self.revision, repo_type=self.repo_type)


class Move(NamedTuple):
    """A pin whose revision points at another commit now."""

    label: str
    old: str
    new: str

    def line(self) -> str:
        """``org/name@main: 0123456789ab -> 89abcdef0123``: one line per moved pin, everywhere."""
        return f"{self.label}: {self.old[:12]} -> {self.new[:12]}"


class Update(NamedTuple):
    """What writing new commits into a pin file changes: the new entries, the moved and new pins."""

    entries: tuple[dict[str, Any], ...]
    moved: tuple[Move, ...]
    added: tuple[Pin, ...]
    #: Pins of the file that stay as they were (used and unmoved, or not used at all).
    unchanged: int

    def render(self) -> str:
        return render(self.entries)


class PinFile(NamedTuple):
    """A validated pin file: its entries as read, and one :class:`Pin` per key."""

    path: Path
    entries: tuple[dict[str, Any], ...]
    pins: Mapping[Key, Pin]

    def commit_for(self, request: SnapshotRequest) -> str | None:
        """The commit pinned for ``request``'s repo and revision, whatever its patterns; None when unlisted."""
        pin = self.pins.get(key(request))
        return pin.commit if pin is not None else None

    def pin_for(self, repo_type: str, repo_id: str, revision: str) -> Pin | None:
        """The pin of a repo at ``revision``; a commit id also finds the branch or tag pinned to it."""
        pin = self.pins.get((repo_type, repo_id, revision))
        if pin is None and is_commit(revision):
            pin = next(
                (p for p in self.pins.values() if (p.repo_type, p.repo_id, p.commit) == (repo_type, repo_id, revision)),
                None,
            )
        return pin

    def with_files(self) -> list[Pin]:
        """The pins that record paths (``files``): what a prefetch fetches beside the declarations."""
        return [pin for _, pin in sorted(self.pins.items()) if pin.files is not None or pin.refused is not None]

    def where(self, pin: Pin) -> str:
        """How a message names ``pin``'s first entry: ``Pin file PATH, entry N (org/name@main)``."""
        number, entry = next((n, e) for n, e in enumerate(self.entries, 1) if _entry_key(e) == pin.key)
        return _where(self.path, number, entry)

    def _made_up_commit(self, k: Key) -> bool:
        """Whether an entry of ``k`` holds the 40 zeros older files gave a refusal (rewritten without them)."""
        return any(_entry_key(e) == k and e.get("commit") == _MADE_UP_COMMIT for e in self.entries)

    def _records_use(self, k: Key) -> bool:
        """Whether an entry of ``k`` records an implicit use (``files`` without a manifest's ``size``)."""
        return any(_entry_key(e) == k and "files" in e and "size" not in e for e in self.entries)

    def branches(self) -> list[Pin]:
        """The pins of a branch or tag (those that can move), in the file's order of keys; a refused
        use is no pin to move (the Hub names no commit for it)."""
        return [pin for k, pin in sorted(self.pins.items()) if pin.moves and pin.refusal is None]

    def updated(self, commits: Mapping[Key, str], implicit: Mapping[Key, Recorded] | None = None) -> Update:
        """The file with ``commits`` (what each key's branch or tag points at now) written in.

        Keys the file lacks are added; pins ``commits`` does not name are kept as they are. A key
        whose revision is a commit id needs no pin and is not added, unless ``implicit`` records
        paths for it. ``implicit``: the implicit uses of the session, by key: their entry gets
        ``files`` and ``missing`` (the union with the file's own, when the commit did not move) and
        ``refused``; a key in both maps takes ``implicit``'s commit.
        """
        moved: list[Move] = []
        added: list[Pin] = []
        fresh: dict[Key, dict[str, Any]] = {}
        recorded = dict(implicit or {})
        wanted = {**commits, **{k: r.commit for k, r in recorded.items()}}
        for k in sorted(wanted):
            use = recorded.get(k)
            if is_commit(k[2]) and use is None:
                continue
            repo_type, repo_id, revision = k
            pin = Pin(repo_type, repo_id, revision, wanted[k])
            old = self.pins.get(k)
            entry: dict[str, Any] = {name: getattr(pin, name) for name in KEYS if getattr(pin, name) is not None}
            if use is not None:
                entry.update(_recorded_paths(use, old if old is not None and old.commit == pin.commit else None))
            elif old is not None and old.files is not None and self._records_use(k):
                # Moved with no use this session: the paths recorded at the old commit are the best guess
                # (a prefetch says which one the new commit lacks).
                entry.update(_recorded_paths(Recorded(pin.commit), old))
            if (
                old is not None
                and old.commit == pin.commit
                and (use is None or _same_paths(old, entry))
                and not self._made_up_commit(k)
            ):
                continue
            if old is None or (old.commit is None and pin.commit is not None):
                added.append(pin)  # a refusal named no commit: the first one is a new pin
            elif old.commit is not None and pin.commit is not None and old.commit != pin.commit:
                moved.append(Move(pin.label, old.commit, pin.commit))
            fresh[k] = entry
        kept = [entry for entry in self.entries if _entry_key(entry) not in fresh]
        entries = sorted([*kept, *fresh.values()], key=_entry_key)  # stable: one pin's entries keep their order
        unchanged = len(self.pins) - len(moved) - sum(1 for pin in added if pin.key in self.pins)
        return Update(tuple(entries), tuple(moved), tuple(added), unchanged)


class Recorded(NamedTuple):
    """What a session recorded of one implicit use, for the pin file (no commit: a refusal that named none)."""

    commit: str | None
    files: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    refused: str | None = None


def _recorded_paths(use: Recorded, old: Pin | None) -> dict[str, Any]:
    """The ``files``/``missing``/``refused`` keys of an implicit use's entry, with ``old``'s paths kept."""
    files = set(use.files) | set(old.files or () if old is not None else ())
    missing = (set(use.missing) | set(old.missing if old is not None else ())) - files
    keys: dict[str, Any] = {"files": sorted(files)}
    if missing:
        keys["missing"] = sorted(missing)
    refused = None if files else use.refused or (old.refused if old is not None else None)
    if refused is not None:
        keys["refused"] = refused
    return keys


def _same_paths(old: Pin, entry: Mapping[str, Any]) -> bool:
    return (
        tuple(old.files or ()) == tuple(entry.get("files", ()))
        and old.missing == tuple(entry.get("missing", ()))
        and old.refused == entry.get("refused")
    )


def key(request: SnapshotRequest) -> Key:
    """The pin key of a request: its repo type, repo id and revision."""
    return (request.repo_type, request.repo_id, request.revision)


def read(path: str | os.PathLike[str], *, missing_ok: bool = False) -> PinFile:
    """Read and validate the pin file at ``path``; InvalidRequestError naming the file and the entry.

    ``missing_ok``: a file that does not exist yet is an empty pin file (``update_pins`` creates it).
    """
    target = Path(path)
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        if missing_ok:
            return PinFile(target, (), {})
        raise InvalidRequestError(
            f"Pin file {target} does not exist: write it with `{pytest_command(('pins', target), 'update_pins')}` "
            "(or give the path of an existing pin file or manifest)."
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidRequestError(f"Pin file {target} cannot be read ({error}): {_FORMAT}.") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise InvalidRequestError(f"Pin file {target} is not JSON ({error}): {_FORMAT}.") from None
    if not isinstance(data, list):
        raise InvalidRequestError(f"Pin file {target} holds a JSON {_json_kind(data)}, not a list: {_FORMAT}.")
    pins: dict[Key, Pin] = {}
    first: dict[Key, int] = {}
    for number, entry in enumerate(data, 1):
        pin = _pin(target, number, entry)
        known = pins.get(pin.key)
        if known is not None and None not in (known.commit, pin.commit) and known.commit != pin.commit:
            raise InvalidRequestError(
                f"Pin file {target}, entries {first[pin.key]} and {number}: both pin {pin.label}, to different "
                f"commits ({known.commit} and {pin.commit}). Keep the entry of the commit you want; entries "
                "that differ only in their files or patterns must pin the same commit."
            )
        pins[pin.key] = _union(known, pin) if known is not None else pin
        first.setdefault(pin.key, number)
    return PinFile(target, tuple(data), pins)


def _union(a: Pin, b: Pin) -> Pin:
    """One pin from two entries of the same key and commit (or one naming none): their recorded paths joined."""
    if a.files is None and b.files is None:
        return a._replace(commit=a.commit or b.commit)
    files = tuple(sorted(set(a.files or ()) | set(b.files or ())))
    missing = tuple(sorted((set(a.missing) | set(b.missing)) - set(files)))
    return a._replace(commit=a.commit or b.commit, files=files, missing=missing, refused=a.refused or b.refused)


# Parsed pin files by path, with the stat they were read under: a test session's thousands of
# materializations read the file once, and a file rewritten meanwhile is read again.
_loaded: dict[str, tuple[tuple[int, int, int], PinFile]] = {}


def load(path: str | os.PathLike[str]) -> PinFile:
    """:func:`read` once per version of the file in this process (what every materialization calls, and
    a session endpoint for each load a child makes)."""
    absolute = path if isinstance(path, str) and os.path.isabs(path) else os.path.abspath(path)
    try:
        st = os.stat(absolute)
    except OSError:
        return read(absolute)  # says what is wrong with it
    stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    known = _loaded.get(absolute)
    if known is not None and known[0] == stamp:
        return known[1]
    pin_file = read(absolute)
    _loaded[absolute] = (stamp, pin_file)
    return pin_file


def render(entries: Iterable[Mapping[str, Any]]) -> str:
    """A pin file's text: the manifest's formatting (``indent=2``, sorted keys, trailing newline)."""
    return json.dumps(list(entries), indent=2, sort_keys=True) + "\n"


def write(path: str | os.PathLike[str], update: Update) -> bool:
    """Write ``update`` atomically (readers see the old file or the whole new one); False when the
    file already holds exactly these bytes and is left untouched.

    Missing parent folders are created. Raises OSError when the file cannot be written.
    """
    target = Path(path)
    text = update.render()
    try:
        if target.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, text)  # the umask's mode: a file the user commits, like the manifest
    return True


def missing_commit(
    path: str | os.PathLike[str], request: SnapshotRequest, commit: str, endpoint: str
) -> RevisionNotFoundError:
    """The error of a pinned commit the Hub does not have (force-pushed away, or a repo rewritten)."""
    return RevisionNotFoundError(
        f"The pin file {path} pins {request.label} to commit {commit}, which the Hub at {endpoint} does not "
        f"have (the branch was force-pushed, or the repo rewritten). Pin what {request.revision!r} points at "
        f"now with `{pytest_command(('pins', path), 'update_pins')}` or `pytest-hfsnapshot pins update {path}`.",
        repo_id=request.repo_id,
        revision=request.revision,
    )


def _pin(path: Path, number: int, entry: object) -> Pin:
    """Entry ``number`` (from 1) of the file as a Pin, or the InvalidRequestError naming it."""
    if not isinstance(entry, dict):
        raise InvalidRequestError(
            f"Pin file {path}, entry {number}: a JSON {_json_kind(entry)} ({_excerpt(entry)}), "
            f"not an object: {_FORMAT}."
        )
    where = _where(path, number, entry)
    # A refusal that obtained no file may name no commit: the Hub gave none.
    refusal_only = entry.get("refused") is not None and not entry.get("files")
    for name in KEYS:
        if name not in entry and not (name == "commit" and refusal_only):
            raise InvalidRequestError(f"{where}: the key {name!r} is missing: {_FORMAT}.")
        if name in entry and not isinstance(entry[name], str):
            raise InvalidRequestError(f"{where}: {name} must be a string, got {_excerpt(entry[name])}.")
    try:
        request = SnapshotRequest.build(entry["repo_id"], revision=entry["revision"], repo_type=entry["repo_type"])
    except InvalidRequestError as error:
        raise InvalidRequestError(f"{where}: {error}") from None
    commit = entry.get("commit")
    if commit is not None and not is_commit(commit):
        raise InvalidRequestError(f"{where}: commit {commit!r} is not a commit id (40 lowercase hex digits).")
    if refusal_only and commit == _MADE_UP_COMMIT:
        commit = None
    if request.pinned and commit is not None and request.revision != commit:
        raise InvalidRequestError(
            f"{where}: the revision is itself a commit id, but the entry pins it to another commit ({commit}); "
            "a commit can only be pinned to itself."
        )
    files = _paths(where, entry, "files")
    missing = _paths(where, entry, "missing")
    refused = entry.get("refused")
    if refused is not None and refused not in REFUSALS:
        raise InvalidRequestError(
            f"{where}: refused must be one of {', '.join(REFUSALS)} (the Hub's error code), got {_excerpt(refused)}; "
            f"record the entry again with {pytest_command('update_pins')}."
        )
    return Pin(
        request.repo_type,
        request.repo_id,
        request.revision,
        commit,
        files=None if files is None else tuple(sorted(set(files))),
        missing=tuple(sorted(set(missing or ()) - set(files or ()))),
        refused=refused,
    )


def _paths(where: str, entry: Mapping[str, Any], name: str) -> list[str] | None:
    """Entry ``name`` (``files`` or ``missing``) as repo paths; None when the entry has no such key."""
    if name not in entry:
        return None
    value = entry[name]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidRequestError(
            f'{where}: {name} must be a list of repo paths (strings such as "config.json"), got '
            f"{_excerpt(value)}; fix the entry or record it again with {pytest_command('update_pins')}."
        )
    for item in value:
        if not _repo_path_ok(item):
            raise InvalidRequestError(
                f"{where}: {name} entry {item!r} is not a path inside the repo (relative, '/'-separated, "
                f"no '..' or empty part); fix the entry or record it again with {pytest_command('update_pins')}."
            )
    return value


def _repo_path_ok(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and "\\" not in path and "\0" not in path and all(p not in ("", ".", "..") for p in parts)


def _entry_key(entry: Mapping[str, Any]) -> Key:
    return (entry["repo_type"], entry["repo_id"], entry["revision"])


def _where(path: Path, number: int, entry: Mapping[str, Any]) -> str:
    """How a message names an entry: ``Pin file PATH, entry N (org/name@main)``."""
    return f"Pin file {path}, entry {number} ({_entry_label(entry)})"


def _entry_label(entry: Mapping[str, Any]) -> str:
    repo_id, revision, repo_type = entry.get("repo_id"), entry.get("revision"), entry.get("repo_type")
    if not isinstance(repo_id, str):
        return _excerpt(entry)
    prefix = repo_path(repo_id, repo_type) if isinstance(repo_type, str) else repo_id
    return f"{prefix}@{revision}" if isinstance(revision, str) else prefix


def _excerpt(value: object) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _json_kind(value: object) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "number"


__all__ = [
    "KEYS",
    "REFUSALS",
    "Key",
    "Move",
    "Pin",
    "PinFile",
    "Recorded",
    "Update",
    "key",
    "load",
    "missing_commit",
    "read",
    "render",
    "write",
]
