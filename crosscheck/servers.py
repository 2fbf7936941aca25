"""The two servers under test, as the tests see them."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from .content import Repo

SERVERS = ("local", "olah")
TREE_PAGE_SIZE = 3


@dataclass(frozen=True)
class Server:
    """A running Hub loaded with ``content.REPOS``; commit ids differ per server."""

    name: str
    url: str
    commits: dict[str, dict[str, str]]
    configure: Callable[[Path], AbstractContextManager[Path]]

    def commit(self, repo: Repo, label: str) -> str:
        return self.commits[repo.repo_id][label]


@dataclass(frozen=True)
class Target:
    """A server with the client pointed at it and a fresh, empty cache for one test."""

    server: Server
    cache_dir: Path

    @property
    def name(self) -> str:
        return self.server.name

    @property
    def url(self) -> str:
        return self.server.url

    def commit(self, repo: Repo, label: str) -> str:
        return self.server.commit(repo, label)
