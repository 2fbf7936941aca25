"""Every request of a child that is not a file on ``/resolve/``: sent upstream through huggingface_hub's
own client, so the session's gate and the observer's hooks apply (a pinned branch asked at its commit,
the use recorded, offline answered from the pin file and the cache or refused).

The child's method, query, body and ``Authorization`` go upstream, hop-by-hop headers do not.
Under ``manage`` and ``fail`` a 5xx, a 429 or a cut answer is tried again with the plugin's retry
policy. The answer comes back without Xet (no ``X-Xet-*`` headers, no ``xetHash`` in listings), and
the upstream's URLs in ``Location`` and ``Link`` point at the endpoint.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from ..core.hub import gate
from ..core.hub.causes import chain
from ..core.hub.retry import Backoff, classify, rate_limit_reset, transient_status
from ..errors import RateLimitError
from ..request import is_commit
from .replies import Reply, for_error, gave_up, hub_error

#: Headers of one connection, never forwarded (RFC 9110 section 7.6.1), and those the endpoint sets itself.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "content-encoding",
        "accept-encoding",
        "server",
        "date",
    }
)
_XET_RELS = ('rel="xet-auth"', 'rel="xet-reconstruction-info"')


def forward(
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    upstream: str,
    here: str,
    retries: int | None,
    offline: bool,
) -> Reply:
    """Send one request upstream (``target``: its path and query) and make its answer the child's.

    ``here``: the endpoint's base URL for this child (what the upstream's URLs become). ``retries``:
    the plugin's retry budget (None: one try, the child left to itself as under ``report``).
    """
    import huggingface_hub

    from ..core.engine.call import RETRY_DEADLINE  # the engine's bound; not loaded at the plugin's start

    url = upstream + target
    sent = {name: value for name, value in headers.items() if name.lower() not in _HOP_BY_HOP}
    backoff = Backoff(retries=retries or 0, deadline=time.monotonic() + RETRY_DEADLINE)
    while True:
        try:
            response = huggingface_hub.get_session().request(
                method, url, headers=sent, content=body or None, follow_redirects=False
            )
            content = response.content  # a cut body raises here, inside the retries
        except RateLimitError as error:
            return hub_error(429, None, str(error), {"Retry-After": str(int(error.wait) + 1)})
        except Exception as error:
            if (
                retries is None
                or offline
                or any(type(link).__name__ == "OfflineModeIsEnabled" for link in chain(error))
            ):
                return for_error(error, offline=offline, asked=f"{method} {target.split('?')[0]}")
            kind = classify(error)
            if kind.kind == "transient" and backoff.wait(None if gate.holds(kind) else kind.retry_after):
                continue
            return gave_up(f"pytest-hfsnapshot could not get an answer from {upstream} after retries: {error}")
        status = int(response.status_code)
        if retries is not None and transient_status(status):
            wait = rate_limit_reset(response.headers)
            held = status == 429 and wait is not None and gate.active() is not None
            if backoff.wait(None if held else wait):
                continue
        return _answer(response, content, upstream=upstream, here=here)


def commit_in(reply: Reply) -> str | None:
    """The commit a repo-info answer names (its ``sha``), if it is one."""
    sha = _field(reply, "sha")
    return sha if isinstance(sha, str) and is_commit(sha) else None


def main_in(reply: Reply) -> str | None:
    """The commit a refs answer names for the ``main`` branch, if it names one."""
    branches = _field(reply, "branches")
    for branch in branches if isinstance(branches, list) else ():
        if isinstance(branch, dict) and branch.get("name") == "main":
            commit = branch.get("targetCommit")
            return commit if isinstance(commit, str) and is_commit(commit) else None
    return None


def _field(reply: Reply, name: str) -> Any:
    """The ``name`` field of a 200 answer's JSON object, or None (the body is searched before it is parsed)."""
    if reply.status != 200 or f'"{name}"'.encode() not in reply.body:
        return None
    try:
        data = json.loads(reply.body)
    except ValueError:
        return None
    return data.get(name) if isinstance(data, dict) else None


def _answer(response: Any, content: bytes, *, upstream: str, here: str) -> Reply:
    headers: dict[str, str] = {}
    for name, value in response.headers.multi_items():
        lower = name.lower()
        if lower in _HOP_BY_HOP or lower.startswith("x-xet-"):
            continue
        if lower == "link":
            value = ", ".join(part for part in value.split(",") if not any(rel in part for rel in _XET_RELS))
            if not value.strip():
                continue
        if lower in ("location", "link"):
            value = _pointed_here(value, upstream, here)
        headers[name] = f"{headers[name]}, {value}" if name in headers and lower == "link" else value
    return Reply(int(response.status_code), headers, _without_xet(content, headers))


def _pointed_here(value: str, upstream: str, here: str) -> str:
    """The upstream's URLs in a header made the endpoint's (a relative path too, for ``Location``)."""
    if value.startswith("/") and not value.startswith("//"):
        return here + value
    return value.replace(upstream + "/", here + "/")


def _without_xet(content: bytes, headers: Mapping[str, str]) -> bytes:
    """A JSON listing or repo info without ``xetHash``: the child then downloads through ``/resolve/``."""
    if b'"xetHash"' not in content:
        return content
    try:
        data = json.loads(content)
    except ValueError:
        return content
    entries = data if isinstance(data, list) else data.get("siblings") if isinstance(data, dict) else None
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, dict):
            entry.pop("xetHash", None)
    return json.dumps(data).encode()


__all__ = ["commit_in", "forward", "main_in"]
