"""Cross-check tier: the same download tests against our LocalHub and against olah.

olah (a self-hosted Hub mirror serving local git repos offline) is a server nobody here
wrote: where both answer the same, LocalHub has not drifted from a real implementation;
where they differ, each test states both servers' behaviour explicitly.

What olah cannot serve, so what this tier leaves to the Xet-serving LocalHub of ``tests/``:
the Xet storage path. Serving local git repos offline, olah has no CAS: its listings carry no
``xetHash`` and its resolve route serves LFS objects itself. As a proxy of a real Hub (measured
with olah 0.5.4) it strips the Xet headers (``X-Xet-Hash``, ``Link: rel="xet-auth"``) from HEAD
answers and passes the tree listing (with ``xetHash``) and the xet-read-token route through to
its upstream, so a client behind it mixes both paths. The cross-check therefore compares both
servers on plain HTTP storage (``LocalHub(xet=False)``); every transfer path real users have
(Xet with the shared blob store, Xet with repo-local blobs, plain HTTP) is covered against
LocalHub by the main suite (``tests/conftest.py``).

Missing prerequisites (git, the olah venv from ``setup_olah.sh``) skip with a reason
on a developer machine and fail when ``CI`` is set, so CI never goes green by skipping.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from pytest_hfsnapshot.testing.hub import LocalHub

from . import gitmirror
from .client import pointed_at
from .content import REPOS
from .olah_server import OlahServer, find_olah_cli
from .servers import SERVERS, TREE_PAGE_SIZE, Server, Target


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: the cross-check tier must run, not skip)", pytrace=False)
    pytest.skip(reason)


def usable_olah_cli() -> str:
    """The ``olah-cli`` to run; skips (fails when ``CI`` is set) when it or git is missing."""
    if shutil.which("git") is None:
        _unavailable("git is not installed: olah serves git repos")
    olah_cli = find_olah_cli()
    if olah_cli is None:
        _unavailable(
            f"olah-cli not found (OLAH_CLI={os.environ.get('OLAH_CLI', '<unset>')}): "
            "run crosscheck/setup_olah.sh, or set OLAH_CLI to an olah-cli executable"
        )
    return olah_cli


@pytest.fixture(scope="session")
def olah_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    olah_cli = usable_olah_cli()
    workdir = tmp_path_factory.mktemp("olah")
    mirrors = workdir / "mirrors"
    commits = {repo.repo_id: gitmirror.build(mirrors, repo) for repo in REPOS}
    server = OlahServer(olah_cli, workdir, mirrors, probe=REPOS[0])
    server.start()
    try:
        yield Server("olah", server.url, commits, lambda cache: pointed_at(server.url, cache))
    finally:
        server.stop()


@pytest.fixture(scope="session")
def local_server() -> Iterator[Server]:
    # A small page size, so LocalHub's listings paginate where olah's never do. Plain HTTP storage:
    # olah serves git LFS objects itself and no Xet (what it cannot serve: see the module docstring).
    with LocalHub(tree_page_size=TREE_PAGE_SIZE, xet=False) as hub:
        commits: dict[str, dict[str, str]] = {}
        for repo in REPOS:
            labels = commits.setdefault(repo.repo_id, {})
            for commit in repo.commits:
                labels[commit.label] = hub.add_repo(
                    repo.repo_id,
                    files=commit.files,
                    repo_type=repo.repo_type,
                    branch=commit.branch,
                    tag=commit.tag,
                )
        yield Server("local", hub.url, commits, hub.configure_client)


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    """Each test runs once against LocalHub and once against olah, with a fresh cache."""
    hub: Server = request.getfixturevalue(f"{request.param}_server")
    with hub.configure(tmp_path / "hf-cache") as cache_dir:
        yield Target(hub, Path(cache_dir))
