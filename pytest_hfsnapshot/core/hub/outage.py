"""One verdict per outage: once the Hub could not be reached, the session's processes know it for a while."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import NamedTuple

from ...errors import HfSnapshotError
from ..cache.layout import atomic_write_json, endpoint_file, outage_dir, read_json

#: Seconds an outage is believed before the Hub is asked again.
RECHECK_AFTER = 30.0


class Outage(NamedTuple):
    """An endpoint found unreachable: when, and why (a short, token-free cause)."""

    endpoint: str
    since: float
    cause: str

    def age(self) -> float:
        return max(0.0, time.time() - self.since)


def known(cache_dir: str | os.PathLike[str], session: str | None, endpoint: str) -> Outage | None:
    """The session's outage of ``endpoint`` if it is recent enough to be believed, else None."""
    if session is None:
        return None
    outage = _read(_path(cache_dir, session, endpoint))
    if outage is None or outage.age() >= RECHECK_AFTER:
        return None
    return outage


def remember(cache_dir: str | os.PathLike[str], session: str | None, endpoint: str, cause: str) -> None:
    """Write down that ``endpoint`` could not be reached (best effort: a read-only cache shares nothing)."""
    if session is None:
        return
    path = _path(cache_dir, session, endpoint)
    with contextlib.suppress(OSError, HfSnapshotError):
        atomic_write_json(path, {"endpoint": endpoint, "since": time.time(), "cause": cause})


def forget(cache_dir: str | os.PathLike[str], session: str | None, endpoint: str) -> None:
    """The endpoint answered: drop its outage (the file stays absent on the usual path: one failed unlink)."""
    if session is None:
        return
    path = _path(cache_dir, session, endpoint)
    with contextlib.suppress(OSError):
        os.replace(path, path.with_suffix(".back"))


def endpoints(cache_dir: str | os.PathLike[str], session: str) -> list[str]:
    """Every endpoint the session found unreachable at some point (for the summary)."""
    out: set[str] = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir(outage_dir(cache_dir, session)):
            outage = _read(Path(entry.path))
            if outage is not None:
                out.add(outage.endpoint)
    return sorted(out)


def remove(cache_dir: str | os.PathLike[str], session: str) -> None:
    """Delete the session's outage folder (the controller, at the end)."""
    shutil.rmtree(outage_dir(cache_dir, session), ignore_errors=True)


def _path(cache_dir: str | os.PathLike[str], session: str, endpoint: str) -> Path:
    return endpoint_file(outage_dir(cache_dir, session), endpoint)


def _read(path: Path) -> Outage | None:
    data = read_json(path)
    if not isinstance(data, dict):
        return None
    try:
        return Outage(str(data["endpoint"]), float(data["since"]), str(data.get("cause", "")))
    except (KeyError, TypeError, ValueError):
        return None


__all__ = ["RECHECK_AFTER", "Outage", "endpoints", "forget", "known", "remember", "remove"]
