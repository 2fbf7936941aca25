"""Build the content's repositories as git repos in the layout olah serves offline.

olah reads ``<mirrors>/<models|datasets|spaces>/<org>/<name>`` as a non-bare git repo and
serves an LFS file from ``.git/lfs/objects/<sha[0:2]>/<sha[2:4]>/<sha256>`` when the
committed blob is a git-lfs pointer, so no git-lfs binary is needed. Commits are written
with plumbing (a private index, ``commit-tree``), never a checkout, so each commit's tree
is exactly its files, as with LocalHub's ``add_repo``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .content import Repo, is_lfs, lfs_pointer, sha256

GIT_TIMEOUT = 30.0

# Fixed identity and dates: the same content gives the same commit ids on every run.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "crosscheck",
    "GIT_AUTHOR_EMAIL": "crosscheck@example.invalid",
    "GIT_COMMITTER_NAME": "crosscheck",
    "GIT_COMMITTER_EMAIL": "crosscheck@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}


def _git(repo: Path, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=stdin,
        capture_output=True,
        check=False,
        timeout=GIT_TIMEOUT,
        env={**os.environ, **_GIT_ENV, **(env or {})},
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}: {result.stderr.decode(errors='replace')}")
    return result.stdout.decode().strip()


def mirror_path(mirrors: Path, repo: Repo) -> Path:
    """Where olah looks for ``repo`` under a ``mirrors-path`` entry."""
    return mirrors / f"{repo.repo_type}s" / repo.repo_id


def build(mirrors: Path, repo: Repo) -> dict[str, str]:
    """Write ``repo`` as a git repo under ``mirrors``; return commit label -> git commit id."""
    path = mirror_path(mirrors, repo)
    path.mkdir(parents=True)
    _git(path, "init", "--quiet", "--initial-branch=main")
    index = {"GIT_INDEX_FILE": str(path / ".git" / "crosscheck-index")}
    lfs_objects = path / ".git" / "lfs" / "objects"

    commits: dict[str, str] = {}
    heads: dict[str, str] = {}
    for number, commit in enumerate(repo.commits, start=1):
        _git(path, "read-tree", "--empty", env=index)
        for name, data in sorted(commit.files.items()):
            if is_lfs(name, data):
                digest = sha256(data)
                obj = lfs_objects / digest[:2] / digest[2:4] / digest
                obj.parent.mkdir(parents=True, exist_ok=True)
                obj.write_bytes(data)
                data = lfs_pointer(data)
            blob = _git(path, "hash-object", "-w", "--stdin", stdin=data)
            _git(path, "update-index", "--add", "--cacheinfo", f"100644,{blob},{name}", env=index)
        tree = _git(path, "write-tree", env=index)
        # A new branch starts from main, as a branch created on the Hub does.
        parent = heads.get(commit.branch) or heads.get("main")
        date = {"GIT_AUTHOR_DATE": f"{1_700_000_000 + number} +0000"}
        date["GIT_COMMITTER_DATE"] = date["GIT_AUTHOR_DATE"]
        sha = _git(
            path,
            "commit-tree",
            tree,
            *(["-p", parent] if parent else []),
            "-m",
            commit.label,
            env=date,
        )
        _git(path, "update-ref", f"refs/heads/{commit.branch}", sha)
        if commit.tag:
            _git(path, "tag", commit.tag, sha)
        heads[commit.branch] = sha
        commits[commit.label] = sha
    (path / ".git" / "crosscheck-index").unlink()
    return commits
