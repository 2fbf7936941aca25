"""A folder of repos served as a local Hub for a whole session: ``pytest-hfsnapshot serve DIR``."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TextIO

from ..core.cache.formats import count, human_size
from ..request import repo_path
from .hub import LocalHub

#: Marker files at the top of a repo folder, and the access they give the repo.
ACCESS_MARKERS = {".gated": "gated", ".private": "private"}
#: Folders of ``DIR`` holding repos of another type than models.
TYPE_FOLDERS = {"datasets": "dataset", "spaces": "space"}
# Never served: version-control and editor folders a repo folder may hold.
_SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__"})


class ServeError(ValueError):
    """``DIR`` cannot be served: it does not exist, holds no repo, or a repo folder is unusable."""


@dataclasses.dataclass(frozen=True)
class ServedRepo:
    """One repo loaded from the folder."""

    repo_type: str
    repo_id: str
    commit: str
    files: int
    size: int
    #: ``"public"``, ``"gated"`` or ``"private"``.
    access: str

    @property
    def label(self) -> str:
        """``org/name``, with ``datasets/`` or ``spaces/`` in front for other repo types."""
        return repo_path(self.repo_id, self.repo_type)


def repo_folders(root: Path) -> Iterator[tuple[str, str, Path]]:
    """``(repo_type, repo_id, folder)`` for every repo folder under ``root``, sorted."""
    for org in _subdirs(root):
        repo_type = TYPE_FOLDERS.get(org.name)
        if repo_type is None:
            for repo in _subdirs(org):
                yield "model", f"{org.name}/{repo.name}", repo
        else:
            for type_org in _subdirs(org):
                for repo in _subdirs(type_org):
                    yield repo_type, f"{type_org.name}/{repo.name}", repo


def _subdirs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in _SKIPPED_DIRS)


def read_repo(folder: Path) -> tuple[dict[str, bytes], str]:
    """The files of one repo folder (relative POSIX paths) and its access (``"public"``, ...)."""
    files: dict[str, bytes] = {}
    access = "public"
    for name, marker_access in ACCESS_MARKERS.items():
        if (folder / name).is_file():
            access = marker_access
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        here = Path(dirpath)
        for filename in sorted(filenames):
            path = (here / filename).relative_to(folder).as_posix()
            if path in ACCESS_MARKERS:
                continue
            files[path] = (here / filename).read_bytes()
    return files, access


def load_folder(hub: LocalHub, root: str | os.PathLike[str]) -> list[ServedRepo]:
    """Add every repo under ``root`` to ``hub`` (one commit on ``main`` each); ServeError when there is none."""
    folder = Path(root)
    if not folder.is_dir():
        raise ServeError(f"{folder} does not exist or is not a folder: give a folder of repos (DIR/<org>/<name>/)")
    served: list[ServedRepo] = []
    for repo_type, repo_id, repo_folder in repo_folders(folder):
        files, access = read_repo(repo_folder)
        if not files:
            continue
        try:
            commit = hub.add_repo(
                repo_id, files, repo_type=repo_type, gated=access == "gated", private=access == "private"
            )
        except ValueError as error:
            raise ServeError(f"{repo_folder} cannot be served as {repo_type} {repo_id!r}: {error}") from None
        served.append(ServedRepo(repo_type, repo_id, commit, len(files), sum(map(len, files.values())), access))
    if not served:
        raise ServeError(
            f"{folder} holds no repo: put each repo's files in {folder}/<org>/<name>/ "
            f"(datasets in {folder}/datasets/<org>/<name>/, spaces in {folder}/spaces/<org>/<name>/)"
        )
    return served


def client_exports(hub: LocalHub, *, token: bool = True) -> dict[str, str]:
    """The environment that points huggingface_hub in another process (and its children) at ``hub``.

    ``HF_ENDPOINT``; ``HF_TOKEN`` (the token opening the gated and private repos) when ``token``;
    ``NO_PROXY`` with the loopback hosts, so an ambient HTTP proxy is not used for them.
    """
    exports = {"HF_ENDPOINT": hub.url}
    if token:
        exports["HF_TOKEN"] = hub.token
    ambient = [h.strip() for h in os.environ.get("NO_PROXY", os.environ.get("no_proxy", "")).split(",") if h.strip()]
    exports["NO_PROXY"] = ",".join(dict.fromkeys([*ambient, "127.0.0.1", "127.0.0.2", "localhost"]))
    return exports


def repo_line(repo: ServedRepo, width: int = 0) -> str:
    """One line per served repo, as ``serve`` prints them (labels padded to ``width``)."""
    access = "" if repo.access == "public" else f"  ({repo.access})"
    return f"  {repo.label.ljust(width)}  {count(repo.files, 'file')}, {human_size(repo.size)}{access}"


def banner(hub: LocalHub, root: Path, repos: list[ServedRepo], exports: Mapping[str, str]) -> list[str]:
    """What ``serve`` prints before serving: the exports for another shell first, then the repos."""
    storage = "Xet storage (hf_xet downloads, as on huggingface.co)" if hub.xet else "plain HTTP (no Xet)"
    return [
        f"pytest-hfsnapshot serve: a local Hub at {hub.url} serving {root} over {storage}.",
        "Run these in another shell (pytest and its xdist workers then use this Hub):",
        *(f"export {name}={value}" for name, value in exports.items()),
        f"Repos ({len(repos)}; HF_TOKEN opens the gated and private ones):",
        *(repo_line(repo, max(len(r.label) for r in repos)) for repo in repos),
        "Serving until interrupted (Ctrl-C).",
    ]


def serve(
    root: str | os.PathLike[str],
    *,
    port: int = 0,
    xet: bool | None = None,
    out: TextIO = sys.stdout,
    stop: threading.Event | None = None,
) -> None:
    """Serve ``root`` until Ctrl-C, SIGTERM or ``stop`` is set; ServeError for an unusable folder."""
    folder = Path(root).expanduser().resolve()
    if not folder.is_dir():
        raise ServeError(f"{folder} does not exist or is not a folder: give a folder of repos (DIR/<org>/<name>/)")
    stop = stop or threading.Event()
    # Ctrl-C and SIGTERM only ask to stop: the Hub then shuts down in order, whenever they come.
    previous = {}
    if _main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    try:
        with LocalHub(port=port, xet=xet) as hub:
            repos = load_folder(hub, folder)
            for line in banner(hub, folder, repos, client_exports(hub)):
                print(line, file=out, flush=True)
            while not stop.wait(0.5):
                pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


__all__ = [
    "ACCESS_MARKERS",
    "ServeError",
    "ServedRepo",
    "banner",
    "client_exports",
    "load_folder",
    "read_repo",
    "repo_folders",
    "repo_line",
    "serve",
]
