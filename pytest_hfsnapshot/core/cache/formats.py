"""How sizes, ages, counts and requests are written in what users read."""

from __future__ import annotations

from collections.abc import Iterable

from ...request import SnapshotRequest

#: One failed snapshot as a row of the reports (the summary, prefetch): its label, the error's type
#: name, its message, and its ``cause`` (the repo-independent words some errors carry, e.g. one
#: full disk), or None.
FailureRow = tuple[str, str, str, str | None]


def human_size(size: int) -> str:
    """1536 -> '1.5 KiB'."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def human_age(seconds: float) -> str:
    """90 -> '1.5 min'; 7200 -> '2.0 h'; a negative age is 0 s."""
    seconds = max(0.0, seconds)
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:.1f} {unit}"
    return f"{seconds:.0f} s"


def count(n: float, noun: str) -> str:
    """``count(1, "file")`` -> '1 file'; ``count(2, "file")`` -> '2 files'; ``count(1.5, "day")`` -> '1.5 days'.

    The one rule for a number and its noun in what users read (``tests/test_words.py`` holds it).
    """
    shown = f"{n:g}" if isinstance(n, float) else str(n)
    return f"{shown} {noun}{'' if n == 1 else 's'}"


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


def failure_groups(rows: Iterable[FailureRow]) -> list[tuple[str, str]]:
    """``(labels, "Type: text")`` per cause: one line for every snapshot one cause stopped (a full disk).

    A failure without a cause keeps a line of its own with its message's first line; failures of
    one cause share a line naming them all, with their message when it is the same for all (a
    prefetch refused as a whole), else the cause.
    """
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for label, kind, message, cause in rows:
        first = (message.strip().splitlines() or [""])[0]
        groups.setdefault((kind, cause or f"{label}\0{first}"), []).append((label, first))
    lines = []
    for (kind, cause), members in groups.items():
        labels = [label for label, _ in members]
        text = members[0][1] if len({m for _, m in members}) == 1 else cause
        shown = ", ".join(labels[:5]) + (f" and {len(labels) - 5} more" if len(labels) > 5 else "")
        lines.append((shown, f"{kind}: {text}"))
    return lines


__all__ = ["FailureRow", "count", "failure_groups", "human_age", "human_size", "request_label"]
