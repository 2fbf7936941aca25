"""How sizes, counts and requests are written in what users read (the summary, prefetch, the demo)."""

from __future__ import annotations

from .request import SnapshotRequest


def human_size(size: int) -> str:
    """1536 -> '1.5 KiB'."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def count(n: int, noun: str) -> str:
    """``count(1, "file")`` -> '1 file'; ``count(2, "file")`` -> '2 files'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def request_label(request: SnapshotRequest) -> str:
    """``repo@revision`` and, when narrowed, its selection: ``org/x@main [allow *.json; metadata only]``."""
    narrowed = []
    if request.allow_patterns is not None:
        narrowed.append("allow " + ",".join(request.allow_patterns))
    if request.ignore_patterns is not None:
        narrowed.append("ignore " + ",".join(request.ignore_patterns))
    if request.metadata_only:
        narrowed.append("metadata only")
    return request.label + (f" [{'; '.join(narrowed)}]" if narrowed else "")


__all__ = ["count", "human_size", "request_label"]
