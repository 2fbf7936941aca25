"""What the session endpoint sends back, in the Hub's words: so a child's huggingface_hub raises what it
raises against the Hub (``X-Error-Code`` and status as the Hub sends them), and any other client gets
a plain HTTP answer."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..core.hub.causes import chain, safe_attr
from ..errors import HfSnapshotError

#: The answer to a request that lacks the session's secret (no detail of the session in it).
NO_SECRET = "pytest-hfsnapshot's session endpoint: this request lacks the session's secret.\n"
#: Headers of the Hub's error answers that say what the client raises or how long to wait.
_ERROR_HEADERS = ("X-Error-Code", "X-Error-Message", "X-Repo-Commit", "Retry-After", "RateLimit", "RateLimit-Policy")
#: Statuses a child's huggingface_hub retries (a 503 the plugin could not get past is no news to retry).
_RETRIED_BY_CLIENTS = frozenset({429, 500, 502, 503, 504})


@dataclasses.dataclass
class Reply:
    """One answer: status, headers, and a body of bytes or of a cached file (``span``: the first and last
    byte of the file the answer is about; a ``HEAD`` answer names no file to send)."""

    status: int
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    body: bytes = b""
    file: str | None = None
    span: tuple[int, int] | None = None

    @property
    def length(self) -> int:
        if self.span is not None:
            return self.span[1] - self.span[0] + 1
        return len(self.body)


def header_value(text: str, limit: int = 2000) -> str:
    """``text`` as one header line: no line breaks, Latin-1, at most ``limit`` characters."""
    flat = " ".join(text.split())
    return flat.encode("latin-1", "replace").decode("latin-1")[:limit]


def hub_error(status: int, code: str | None, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An error as the Hub words it: ``X-Error-Code`` (when there is one), ``X-Error-Message``, a JSON body."""
    extra = {"X-Error-Message": header_value(message), **(headers or {})}
    if code is not None:
        extra["X-Error-Code"] = code
    body = json.dumps({"error": message}).encode()
    return Reply(status, {"Content-Type": "application/json", **extra}, body)


def no_secret() -> Reply:
    return Reply(403, {"Content-Type": "text/plain; charset=utf-8"}, NO_SECRET.encode())


def offline_miss(what: str) -> Reply:
    """What a child gets for a load this offline session cannot serve.

    A 404 with no ``X-Error-Code``: huggingface_hub (1.33 to 2.4) retries neither it nor a file's HEAD
    answered so, falls back to its cache as it does offline, and raises ``LocalEntryNotFoundError``
    when the cache lacks the file, as it does offline.
    """
    return hub_error(
        404,
        None,
        f"pytest-hfsnapshot: this test session is offline, and its cache cannot answer {what}. "
        "The failing test's report names the command that records it.",
    )


def gave_up(message: str) -> Reply:
    """A failure the plugin's retries could not get past (or the Hub could not be reached): its message."""
    return hub_error(502, None, message)


def for_error(error: BaseException, *, offline: bool, asked: str = "this request") -> Reply:
    """The answer for what the host's huggingface_hub (or the plugin) raised on a child's behalf.

    A refusal or an absence is the Hub's own answer, replayed (so the child raises the same type); a
    failure the plugin gave up on is a 502 with its message; offline, a load the cache cannot serve
    is :func:`offline_miss` (``asked``: what the child asked for, in words); any other answer of the
    Hub is replayed as it came.
    """
    links = list(chain(error))
    answered = [link for link in links if isinstance(_status(link), int)]
    for link in answered:
        status = _status(link)
        if status is not None and 400 <= status < 500 and status not in _RETRIED_BY_CLIENTS:
            return _replayed(link)
    plugin = next((link for link in links if isinstance(link, HfSnapshotError)), None)
    if plugin is not None:
        return gave_up(str(plugin))
    if offline or any(type(link).__name__ == "OfflineModeIsEnabled" for link in links):
        return offline_miss(asked)
    if answered:
        return _replayed(answered[0])
    return gave_up(str(error))


def _status(error: BaseException) -> int | None:
    code = safe_attr(safe_attr(error, "response"), "status_code")
    return code if isinstance(code, int) else None


def _replayed(error: BaseException) -> Reply:
    """The Hub's answer an error carries: its status and the headers that decide what the client raises."""
    response: Any = safe_attr(error, "response")
    headers = {name: header_value(response.headers[name]) for name in _ERROR_HEADERS if name in response.headers}
    message = headers.get("X-Error-Message") or str(error)
    body = json.dumps({"error": message}).encode()
    return Reply(int(response.status_code), {"Content-Type": "application/json", **headers}, body)


__all__ = ["NO_SECRET", "Reply", "for_error", "gave_up", "header_value", "hub_error", "no_secret", "offline_miss"]
