"""What a failure means, how long to wait, and the one retry rule of a call (:class:`Retrier`).

Libraries wrap the Hub's errors, so every decision walks the whole ``__cause__``/``__context__`` chain."""

from __future__ import annotations

import errno
import random
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from ...errors import HfSnapshotError
from .._hf_compat import hub_major
from .causes import chain, safe_attr

T = TypeVar("T")
Kind = Literal["auth", "revision_not_found", "entry_not_found", "transient", "disk", "fatal"]

_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
# Transport failures of httpx / httpx2 (huggingface_hub 1.x / 2.x) and the stdlib, matched by name
# so that neither HTTP package has to be importable.
# Connection and timeout failures (httpx's names): transient, and retried by the client's file GET.
_CONNECT_AND_TIMEOUTS = frozenset(
    {"ConnectError", "ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException"}
)
_TRANSPORT_NAMES = _CONNECT_AND_TIMEOUTS | frozenset(
    {
        "TransportError",
        "ReadError",
        "WriteError",
        "NetworkError",
        "RemoteProtocolError",
        "LocalProtocolError",
        "ProtocolError",
        "IncompleteRead",
        "ChunkedEncodingError",
        "ContentDecodingError",
    }
)
_TRANSPORT_MODULES = ("httpx", "httpx2", "httpcore", "h11", "http.client", "urllib3", "requests")


# hf_xet reports a failed transfer as a plain RuntimeError whose text carries the HTTP status, e.g.
# "CAS Client Error: Request error: HTTP status server error (503 Service Unavailable), domain: ...".
_XET_STATUS_RE = re.compile(r"HTTP status (?:client|server) error \((\d{3})")
# ...and a failed write as Rust's io::Error text, e.g. "IO Error: No space left on device (os error 28)"
# (hf_xet 1.8 on a full disk): only the number is read, never the rest of the text.
_XET_OS_ERROR_RE = re.compile(r"\(os error (\d+)\)")
# Error numbers a socket reports: an OSError carrying one is the network failing, not the disk.
_NETWORK_ERRNOS = frozenset(
    getattr(errno, name)
    for name in (
        "ECONNREFUSED",
        "ECONNRESET",
        "ECONNABORTED",
        "ETIMEDOUT",
        "EPIPE",
        "ENETUNREACH",
        "ENETDOWN",
        "ENETRESET",
        "EHOSTUNREACH",
        "EHOSTDOWN",
        "EADDRNOTAVAIL",
        "EADDRINUSE",
        "ENOTCONN",
        "ESHUTDOWN",
        "EPROTO",
    )
    if hasattr(errno, name)
)


class ContentMismatch(OSError):
    """A freshly downloaded file does not match the listing (cut or corrupted in transit)."""


@dataclass(frozen=True)
class Classification:
    """The meaning of one failure, read from its exception chain."""

    kind: Kind
    #: For auth: "gated", "unauthorized", "not_found_or_private" or "invalid_token".
    auth_reason: str | None = None
    status: int | None = None
    retry_after: float | None = None
    #: The most specific exception that decided the kind.
    decisive: BaseException | None = None
    #: huggingface_hub already retried this request with its own backoff (see client_retried).
    client_retried: bool = False
    #: For disk: the filesystem's error number (ENOSPC, EROFS, EACCES, ...).
    errno: int | None = None
    #: The decisive exception is hf_xet's report of a transfer it made (see :func:`xet_report`).
    by_xet: bool = False


def transient_status(status: int) -> bool:
    """Whether an answer with this status is worth asking again (5xx, 429, 408, 425)."""
    return status in _TRANSIENT_STATUS


def _status(error: BaseException) -> int | None:
    response = safe_attr(error, "response")
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


def _retry_after(error: BaseException) -> float | None:
    return retry_after(safe_attr(safe_attr(error, "response"), "headers"))


def retry_after(headers: Any) -> float | None:
    """Seconds a response's ``Retry-After`` header asks to wait, or None."""
    raw = headers.get("Retry-After") if hasattr(headers, "get") else None
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except (TypeError, ValueError):
        return None


def rate_limit_reset(headers: Any) -> float | None:
    """Seconds until the Hub's rate-limit window resets, read from a 429's headers, or None.

    ``RateLimit: "api";r=0;t=55`` first (parsed by huggingface_hub's own
    ``parse_ratelimit_headers``), else ``Retry-After``, the order huggingface_hub's backoff uses.
    """
    if not hasattr(headers, "get"):
        return None
    from huggingface_hub import utils as hf_utils

    parse = getattr(hf_utils, "parse_ratelimit_headers", None)
    info = parse(headers) if parse is not None else None
    if info is not None and info.remaining == 0:
        return float(info.reset_in_seconds)
    return retry_after(headers)


def _is_transport(error: BaseException) -> bool:
    from huggingface_hub import errors as hf_errors

    for cls in type(error).__mro__:
        if cls.__name__ in _TRANSPORT_NAMES and cls.__module__.split(".")[0] in {
            m.split(".")[0] for m in _TRANSPORT_MODULES
        }:
            return True
    return isinstance(error, ConnectionError | TimeoutError | ContentMismatch) and not isinstance(
        error, hf_errors.OfflineModeIsEnabled
    )


def classify(error: BaseException, *, through_xet: bool = False) -> Classification:
    """Classify a failure by the most telling exception anywhere in its chain.

    ``through_xet``: the failed call transferred files through hf_xet (the caller knows: files the
    listing gives a Xet hash, with Xet in use), so hf_xet's reports in the chain are read as such.
    """
    # huggingface_hub's errors are read when a failure is: they import its HTTP client, which a
    # session that never fails (or never loads huggingface_hub) must not pay for at start-up.
    from huggingface_hub import errors as hf_errors

    links = list(chain(error))
    for link in links:
        if isinstance(link, hf_errors.GatedRepoError):
            return Classification("auth", "gated", _status(link), decisive=link)
    for link in links:
        if isinstance(link, hf_errors.RevisionNotFoundError):
            return Classification("revision_not_found", status=_status(link), decisive=link)
        if isinstance(link, hf_errors.RemoteEntryNotFoundError):
            return Classification("entry_not_found", status=_status(link), decisive=link)
        if isinstance(link, hf_errors.RepositoryNotFoundError):
            reason = "invalid_token" if _status(link) == 401 and _says_auth(link) else "not_found_or_private"
            return Classification("auth", reason, _status(link), decisive=link)
    for link in links:
        status = _status(link)
        if status in (401, 403):
            reason = "invalid_token" if status == 401 and _says_auth(link) else "unauthorized"
            return Classification("auth", reason, status, decisive=link)
        if status in _TRANSIENT_STATUS:
            return Classification(
                "transient",
                status=status,
                retry_after=_retry_after(link),
                decisive=link,
                client_retried=client_retried(_request_of(link), status=status),
            )
        if status is not None and 400 <= status < 500:
            return Classification("fatal", status=status, decisive=link)
    for link in links:
        number = filesystem_errno(link, through_xet=through_xet)
        if number is not None:
            return Classification("disk", decisive=link, errno=number, by_xet=xet_report(link, through_xet))
    for link in links:
        if xet_report(link, through_xet):
            # hf_xet has retried it with its own backoff (6 tries, minutes for a 5xx) before raising.
            status = _xet_status(link)
            if status is None or status in _TRANSIENT_STATUS or status >= 500:
                return Classification("transient", status=status, decisive=link, client_retried=True, by_xet=True)
            return Classification("fatal", status=status, decisive=link, by_xet=True)
    for link in links:
        if _is_transport(link):
            return Classification(
                "transient", decisive=link, client_retried=client_retried(_request_of(link), transport=link)
            )
    for link in links:
        # huggingface_hub reports "Hub unreachable and not cached" this way, whatever the cause.
        if isinstance(link, hf_errors.LocalEntryNotFoundError) and not isinstance(
            link, hf_errors.IncompleteSnapshotError
        ):
            return Classification("transient", decisive=link)
    return Classification("fatal", decisive=links[-1] if links else error)


def filesystem_errno(error: BaseException, *, through_xet: bool = False) -> int | None:
    """The error number of a filesystem failure (ENOSPC, EDQUOT, EROFS, EACCES, EMFILE, ...), else None.

    Any OSError with an errno counts, except the network's (a socket's reset, refusal or
    timeout), and so does hf_xet's report of a failed write (``through_xet``: see :func:`classify`),
    a RuntimeError whose text ends in ``(os error N)``. Not transient: a full or read-only disk
    stays so until someone acts.
    """
    if isinstance(error, OSError):
        number = error.errno
        if (
            not isinstance(number, int)
            or isinstance(error, ConnectionError | TimeoutError | socket.gaierror | socket.herror)
            or _is_transport(error)
        ):
            return None
    elif xet_report(error, through_xet):
        match = _XET_OS_ERROR_RE.search(str(error))
        if match is None:
            return None
        number = int(match.group(1))
    else:
        return None
    return None if number in _NETWORK_ERRNOS else number


def xet_report(error: BaseException | None, through_xet: bool) -> bool:
    """Whether ``error`` is hf_xet's report of a failed transfer: a plain RuntimeError (hf_xet raises
    no type of its own) met while the call transferred files through hf_xet."""
    return through_xet and error is not None and type(error) is RuntimeError


def _xet_status(error: BaseException) -> int | None:
    match = _XET_STATUS_RE.search(str(error))
    return int(match.group(1)) if match else None


def _request_of(error: BaseException) -> Any:
    return safe_attr(error, "request") or safe_attr(safe_attr(error, "response"), "request")


# Transport failures huggingface_hub's file GET retries itself (http_get: 5 tries, reset on progress).
_CLIENT_GET_RETRIES = _CONNECT_AND_TIMEOUTS | {"RemoteProtocolError"}


def file_get_retries(error: BaseException) -> bool:
    """Whether the client's file GET tries again after ``error`` itself (a cut body, a refused
    connection, a timeout), as the engine's own transfers do (``core.engine.resume``)."""
    return any(cls.__name__ in _CLIENT_GET_RETRIES for cls in type(error).__mro__)


def client_retried(request: Any, *, status: int | None = None, transport: BaseException | None = None) -> bool:
    """Whether huggingface_hub already retried this failed request with a backoff of its own.

    Measured on 1.x and 2.x: a file's HEAD is retried on 5xx, 408, 429 and transport errors
    (1 + 5 tries); a file's GET on 408 and 429 and on connect, timeout and protocol errors
    (5 tries); a tree listing on 2.x (see client_retries_listings). The revision API and a
    GET answered 5xx are not retried by the client: those are ours to retry.
    """
    method = str(safe_attr(request, "method") or "").upper()
    url = str(safe_attr(request, "url") or "")
    if method == "HEAD":
        return True
    if method == "GET" and "/resolve/" in url:
        if status is not None:
            return status in (408, 429)
        return transport is not None and file_get_retries(transport)
    return method == "GET" and "/tree/" in url and client_retries_listings()


def _says_auth(error: BaseException) -> bool:
    # The Hub answers 401 for both "private" and "bad token"; only the message tells them apart:
    # "Invalid credentials in Authorization header" (or, formerly, "Invalid username or password")
    # means the token itself was rejected.
    text = str(error).lower()
    return "invalid username or password" in text or "invalid credentials" in text


@dataclass
class Backoff:
    """Exponential backoff with full jitter, honouring ``Retry-After``, within a total budget.

    One instance serves a whole ``materialize`` call: ``retries`` counts the extra attempts of
    every step together (revision, listing, download), and ``deadline`` (a ``time.monotonic``
    value) bounds the wall-clock time of the call, the client's own internal retries included,
    so that the layers never multiply into hours.
    """

    retries: int = 5
    base: float = 0.5
    cap: float = 10.0
    deadline: float | None = None
    max_retry_after: float = 60.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random | None = None
    attempts: int = 0

    def next_delay(self, retry_after: float | None) -> float | None:
        """Seconds to wait before the next attempt, or None when the budget is spent."""
        if self.attempts > self.retries:
            return None
        rng = self.rng or random
        delay = rng.uniform(0.0, min(self.cap, self.base * 2 ** (self.attempts - 1)))
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_retry_after))
        if self.deadline is not None and time.monotonic() + delay > self.deadline:
            return None
        return delay

    def wait(self, retry_after: float | None) -> bool:
        """Record one failed attempt; sleep and return True if another attempt is allowed."""
        self.attempts += 1
        delay = self.next_delay(retry_after)
        if delay is None:
            return False
        self.sleep(delay)
        return True


def client_retries_listings() -> bool:
    """huggingface_hub 2.x pages tree listings through its own backoff (5 retries, 1-8 s); 1.x does not.

    Where the client already retries, wrapping the listing in our retries would multiply the two.
    """
    return hub_major() >= 2


class Failures(Protocol):
    """What a call's failures become: its typed errors, its give-ups, and the session's memory of outages."""

    def down(self, what: str) -> Exception | None:
        """The give-up of a call to the Hub not even tried (the session found it unreachable moments ago)."""
        ...

    def answered(self) -> None:
        """A call to the Hub succeeded."""
        ...

    def typed(self, error: BaseException, kind: Classification) -> Exception:
        """The error a failure that is not transient becomes."""
        ...

    def gave_up(
        self,
        error: BaseException,
        kind: Classification,
        attempts: int,
        what: str,
        filename: str | None,
        *,
        hub_call: bool,
    ) -> Exception:
        """The error a transient failure becomes once it is not tried again."""
        ...

    def retrying(self, what: str, kind: Classification) -> None:
        """Say that a call to the Hub is tried again after ``kind``."""
        ...


@dataclass
class Retrier:
    """The one retry rule of a call: its :class:`Backoff` budget, spent by every step together, and
    the caller's :class:`Failures` for what a failure becomes when it is not tried again."""

    backoff: Backoff
    failures: Failures
    #: Whether a failure's rate-limit window is waited out elsewhere (the session's gate), not here.
    waited_out: Callable[[Classification], bool] = lambda kind: False

    def call(self, attempt: Callable[[], T], *, what: str, filename: str | None = None, retried: bool = True) -> T:
        """``attempt()``, a call to the Hub (``what``: "the revision", ...), tried again on transient failures.

        ``retried=False``: the client retries this call itself, so a failure is not tried again here.
        """
        down = self.failures.down(what)
        if down is not None:
            raise down
        while True:
            try:
                result = attempt()
            except HfSnapshotError:
                raise
            except Exception as error:
                kind = classify(error)
                self.after(error, kind, what=what, filename=filename, retried=retried, hub_call=True)
                self.failures.retrying(what, kind)
            else:
                self.failures.answered()
                return result

    def after(
        self,
        error: BaseException,
        kind: Classification,
        *,
        what: str,
        filename: str | None,
        retried: bool = True,
        hub_call: bool,
    ) -> None:
        """After a failed attempt: return once the backoff has passed, to try again; otherwise raise
        the typed error (not transient) or the give-up (budget spent).

        ``retried=False``, or a request the client has just retried with its own backoff: another
        round of ours on top would multiply the layers. A rate-limit window the session's gate holds
        is waited out there, not here. ``hub_call``: a call to the Hub itself (revision, listing),
        whose give-up makes the session remember an outage.
        """
        if kind.kind != "transient":
            raise self.failures.typed(error, kind) from error
        backoff = self.backoff
        if not retried or kind.client_retried:
            backoff.attempts += 1
        elif backoff.wait(None if self.waited_out(kind) else kind.retry_after):
            return
        raise self.failures.gave_up(error, kind, backoff.attempts, what, filename, hub_call=hub_call) from error
