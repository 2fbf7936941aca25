"""materialize(): the engine behind every fixture (work in progress)."""

from __future__ import annotations

from typing import Any


def materialize(repo_id: str, **kwargs: Any) -> Any:
    raise NotImplementedError("materialize is being written")
