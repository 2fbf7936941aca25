"""The failure table of ``retry``: what each answer means, who retries it, and how long to wait.

Plain unit tests on the exception types huggingface_hub and its HTTP package raise; the
behaviour against a live server is covered by the fault suites.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import huggingface_hub
import pytest
from conftest import raised_from
from huggingface_hub import errors as hf_errors

from pytest_hfsnapshot.core.hub import retry

MAJOR = int(huggingface_hub.__version__.split(".")[0])


def request(method: str, url: str) -> Any:
    return SimpleNamespace(method=method, url=url)


def http_error(
    cls: type[hf_errors.HfHubHTTPError] = hf_errors.HfHubHTTPError,
    status: int = 500,
    *,
    method: str = "GET",
    url: str = "https://hub.test/org/x/resolve/main/model.safetensors",
    headers: dict[str, str] | None = None,
    message: str | None = None,
) -> hf_errors.HfHubHTTPError:
    # Only what the classification reads: the client's response class differs between 1.x and 2.x.
    response: Any = SimpleNamespace(status_code=status, headers=headers or {}, request=request(method, url), url=url)
    return cls(message or f"{status} error", response=response)


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504])
def test_transient_statuses(status: int) -> None:
    kind = retry.classify(http_error(status=status))
    assert (kind.kind, kind.status) == ("transient", status)


@pytest.mark.parametrize("status", [400, 405, 409, 416, 422])
def test_other_client_errors_are_fatal(status: int) -> None:
    assert retry.classify(http_error(status=status)).kind == "fatal"


@pytest.mark.parametrize(
    ("error", "kind", "reason"),
    [
        (http_error(hf_errors.GatedRepoError, 403), "auth", "gated"),
        (http_error(hf_errors.RepositoryNotFoundError, 401), "auth", "not_found_or_private"),
        (
            http_error(
                hf_errors.RepositoryNotFoundError, 401, message="401: Invalid credentials in Authorization header"
            ),
            "auth",
            "invalid_token",
        ),
        (http_error(status=401, message="401: Invalid credentials in Authorization header"), "auth", "invalid_token"),
        (http_error(status=401), "auth", "unauthorized"),
        (http_error(status=403), "auth", "unauthorized"),
        (http_error(hf_errors.RevisionNotFoundError, 404), "revision_not_found", None),
        (http_error(hf_errors.RemoteEntryNotFoundError, 404), "entry_not_found", None),
    ],
)
def test_hub_answers(error: BaseException, kind: str, reason: str | None) -> None:
    found = retry.classify(error)
    assert (found.kind, found.auth_reason) == (kind, reason)


def test_the_most_telling_link_of_a_chain_decides() -> None:
    # transformers re-raises the Hub's refusal as OSError(...) from it.
    wrapped = raised_from(OSError("Can't load config"), http_error(hf_errors.GatedRepoError, 403))
    assert retry.classify(wrapped).auth_reason == "gated"
    # huggingface_hub reports "unreachable and not cached" this way, whatever the cause.
    unreachable = raised_from(hf_errors.LocalEntryNotFoundError("not cached"), ConnectionResetError("reset"))
    assert retry.classify(unreachable).kind == "transient"


def test_transport_errors_are_transient_but_offline_mode_is_not() -> None:
    assert retry.classify(ConnectionResetError("reset")).kind == "transient"
    assert retry.classify(TimeoutError("slow")).kind == "transient"
    assert retry.classify(retry.ContentMismatch("cut")).kind == "transient"
    assert retry.classify(hf_errors.OfflineModeIsEnabled("offline")).kind == "fatal"
    assert retry.classify(ValueError("bug")).kind == "fatal"


@pytest.mark.parametrize(("header", "seconds"), [("7", 7.0), ("0", 0.0), ("-3", 0.0), ("soon", None), (None, None)])
def test_retry_after_is_read_from_the_answer(header: str | None, seconds: float | None) -> None:
    headers = {} if header is None else {"Retry-After": header}
    assert retry.classify(http_error(status=429, headers=headers)).retry_after == seconds


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"RateLimit": '"api";r=0;t=55', "RateLimit-Policy": '"fixed window";"api";q=500;w=300'}, 55.0),
        # Requests left in the window: not a reset to wait for; Retry-After decides.
        ({"RateLimit": '"api";r=3;t=55', "RateLimit-Policy": '"fixed window";"api";q=500;w=300'}, None),
        ({"RateLimit": '"api";r=3;t=55', "Retry-After": "2"}, 2.0),
        ({"Retry-After": "9"}, 9.0),
        ({"RateLimit": "garbage"}, None),
        ({}, None),
    ],
)
def test_the_reset_of_a_rate_limit_window(headers: dict[str, str], seconds: float | None) -> None:
    assert retry.rate_limit_reset(headers) == seconds
    assert retry.rate_limit_reset(None) is None


@pytest.mark.parametrize(
    ("method", "url", "status", "retried"),
    [
        # A file's HEAD: the client retries 5xx, 408, 429 and transport errors (1 + 5 tries).
        ("HEAD", "https://hub.test/org/x/resolve/main/a.bin", 503, True),
        ("HEAD", "https://hub.test/org/x/resolve/main/a.bin", 429, True),
        # A file's GET: only 408 and 429 (and some transport errors, below).
        ("GET", "https://hub.test/org/x/resolve/main/a.bin", 429, True),
        ("GET", "https://hub.test/org/x/resolve/main/a.bin", 408, True),
        ("GET", "https://hub.test/org/x/resolve/main/a.bin", 503, False),
        # The revision call: never retried by the client.
        ("GET", "https://hub.test/api/models/org/x/revision/main", 503, False),
        # Tree listings: retried by the client from 2.x on.
        ("GET", "https://hub.test/api/models/org/x/tree/abc", 503, MAJOR >= 2),
    ],
)
def test_which_failures_the_client_already_retried(method: str, url: str, status: int, retried: bool) -> None:
    kind = retry.classify(http_error(status=status, method=method, url=url))
    assert kind.client_retried is retried
    assert retry.client_retried(request(method, url), status=status) is retried


def test_client_retries_listings_follows_the_major_version() -> None:
    assert retry.client_retries_listings() is (MAJOR >= 2)


def test_transport_errors_the_client_get_retries() -> None:
    get = request("GET", "https://hub.test/org/x/resolve/main/a.bin")
    remote_protocol = type("RemoteProtocolError", (Exception,), {})
    read_error = type("ReadError", (Exception,), {})
    assert retry.client_retried(get, transport=remote_protocol("cut")) is True
    assert retry.client_retried(get, transport=read_error("reset")) is False


def test_backoff_budget_jitter_and_retry_after() -> None:
    sleeps: list[float] = []
    backoff = retry.Backoff(retries=3, base=0.5, cap=10.0, sleep=sleeps.append, rng=random.Random(1))

    assert [backoff.wait(None) for _ in range(4)] == [True, True, True, False]
    assert len(sleeps) == 3
    for attempt, delay in enumerate(sleeps, start=1):
        assert 0.0 <= delay <= min(10.0, 0.5 * 2 ** (attempt - 1))

    honours = retry.Backoff(retries=1, sleep=sleeps.append, max_retry_after=60.0)
    assert honours.next_delay(5.0) is not None and honours.next_delay(5.0) >= 5.0  # type: ignore[operator]
    assert honours.next_delay(600.0) == 60.0  # capped: a hostile Retry-After cannot stall a run


def test_backoff_stops_at_the_deadline() -> None:
    import time

    backoff = retry.Backoff(retries=10, deadline=time.monotonic() + 0.01, sleep=lambda _: None)
    assert backoff.next_delay(5.0) is None


@pytest.mark.parametrize(
    ("message", "kind", "status"),
    [
        (
            "CAS Client Error: Request error: HTTP status server error (503 Service Unavailable), domain: x",
            "transient",
            503,
        ),
        (
            "CAS Client Error: Request error: HTTP status client error (429 Too Many Requests), domain: x",
            "transient",
            429,
        ),
        ("CAS Client Error: Request error: error decoding response body", "transient", None),
        ("CAS Client Error: Request error: HTTP status client error (404 Not Found), domain: x", "fatal", 404),
    ],
)
def test_hf_xet_transfer_failures(message: str, kind: str, status: int | None) -> None:
    # What hf_xet raises (a plain RuntimeError) in a download of files the listing gives a Xet hash.
    found = retry.classify(RuntimeError(f"Task error: File reconstruction error: {message}"), through_xet=True)
    assert (found.kind, found.status, found.by_xet) == (kind, status, True)
    # hf_xet retried it already with its own backoff: ours must not multiply it.
    assert found.client_retried is (kind == "transient")


def test_hf_xet_reports_a_failed_write_by_its_os_error_number() -> None:
    full = RuntimeError("Task error: IO Error: No space left on device (os error 28)")
    found = retry.classify(full, through_xet=True)
    assert (found.kind, found.errno, found.by_xet) == ("disk", 28, True)
    assert retry.filesystem_errno(full) is None  # not a transfer through hf_xet: just a RuntimeError


def test_a_runtime_error_elsewhere_is_not_taken_for_hf_xet() -> None:
    text = "HTTP status server error (503 Service Unavailable)"
    assert retry.classify(RuntimeError(text)).kind == "fatal"
    # Only a plain RuntimeError is hf_xet's report, even in a transfer through it.
    subclass = type("ClientClosed", (RuntimeError,), {})
    assert retry.classify(subclass(text), through_xet=True).kind == "fatal"
    assert retry.classify(http_error(status=503), through_xet=True).by_xet is False


# --- Retrier: the one retry rule of a call ------------------------------------------------------
class Gone(Exception):
    """What the failures below turn a failure into."""


class Failures:
    """A :class:`retry.Failures` that keeps what the retrier asked of it."""

    def __init__(self, *, down: bool = False) -> None:
        self.is_down = down
        self.calls: list[tuple[str, ...]] = []

    def down(self, what: str) -> Exception | None:
        return Gone(f"down: {what}") if self.is_down else None

    def answered(self) -> None:
        self.calls.append(("answered",))

    def typed(self, error: BaseException, kind: retry.Classification) -> Exception:
        return Gone(f"typed: {kind.kind}")

    def gave_up(
        self,
        error: BaseException,
        kind: retry.Classification,
        attempts: int,
        what: str,
        filename: str | None,
        *,
        hub_call: bool,
    ) -> Exception:
        return Gone(f"gave up on {what} ({filename}) after {attempts}, hub_call={hub_call}")

    def retrying(self, what: str, kind: retry.Classification) -> None:
        self.calls.append(("retrying", what, kind.kind))


def failing(*errors: BaseException, then: int = 42) -> Any:
    """An attempt that raises ``errors`` in turn, then returns ``then``; ``.tries`` counts its calls."""
    left = list(errors)

    def attempt() -> int:
        attempt.tries += 1  # type: ignore[attr-defined]
        if left:
            raise left.pop(0)
        return then

    attempt.tries = 0  # type: ignore[attr-defined]
    return attempt


def retrier(failures: Failures, retries: int = 3, sleeps: list[float] | None = None) -> retry.Retrier:
    backoff = retry.Backoff(retries=retries, sleep=(sleeps if sleeps is not None else []).append)
    return retry.Retrier(backoff, failures)


def test_a_transient_failure_is_tried_again_and_the_value_returned() -> None:
    failures, sleeps = Failures(), []
    attempt = failing(ConnectionResetError("reset"), http_error(status=503))
    assert retrier(failures, sleeps=sleeps).call(attempt, what="the revision") == 42
    assert attempt.tries == 3 and len(sleeps) == 2
    assert failures.calls == [("retrying", "the revision", "transient")] * 2 + [("answered",)]


def test_a_failure_that_is_not_transient_becomes_the_typed_error_at_once() -> None:
    failures, cause = Failures(), http_error(hf_errors.RevisionNotFoundError, 404)
    attempt = failing(cause)
    with pytest.raises(Gone, match="typed: revision_not_found") as raised:
        retrier(failures).call(attempt, what="the revision")
    assert attempt.tries == 1 and raised.value.__cause__ is cause
    assert failures.calls == []


def test_the_budget_spent_is_a_give_up_naming_every_attempt() -> None:
    attempt = failing(*[ConnectionResetError("reset")] * 5)
    with pytest.raises(Gone, match=r"gave up on the file listing \(None\) after 3, hub_call=True"):
        retrier(Failures(), retries=2).call(attempt, what="the file listing")
    assert attempt.tries == 3


@pytest.mark.parametrize("method", ["HEAD", "GET"])
def test_what_the_client_retries_itself_is_not_tried_again(method: str) -> None:
    # huggingface_hub retries a file's HEAD itself; retried=False says so of a whole call (a GET here).
    error = http_error(status=503, method=method, url="https://hub.test/api/models/x")
    sleeps: list[float] = []
    attempt = failing(error)
    with pytest.raises(Gone, match="after 1"):
        retrier(Failures(), sleeps=sleeps).call(attempt, what="the revision", retried=method == "HEAD")
    assert attempt.tries == 1 and sleeps == []


def test_a_known_outage_raises_without_trying() -> None:
    attempt = failing()
    with pytest.raises(Gone, match="down: the revision"):
        retrier(Failures(down=True)).call(attempt, what="the revision")
    assert attempt.tries == 0


def test_our_own_errors_pass_through_untouched() -> None:
    from pytest_hfsnapshot.errors import VerificationError

    own = VerificationError("no commit id")
    with pytest.raises(VerificationError) as raised:
        retrier(Failures()).call(failing(own), what="the revision")
    assert raised.value is own


@pytest.mark.parametrize("gate_holds", [False, True])
def test_a_rate_limit_window_the_gate_holds_is_not_waited_out_again(gate_holds: bool) -> None:
    window = http_error(status=429, url="https://hub.test/api/models/x", headers={"Retry-After": "30"})
    sleeps: list[float] = []
    backoff = retry.Backoff(retries=1, base=0.5, sleep=sleeps.append, rng=random.Random(1))
    run = retry.Retrier(backoff, Failures(), waited_out=lambda kind: gate_holds and kind.status == 429)
    assert run.call(failing(window), what="the revision") == 42
    # The gate's own wait stands for Retry-After; what is left here is the plain backoff.
    assert sleeps == [30.0] if not gate_holds else len(sleeps) == 1 and sleeps[0] <= 0.5


def test_after_a_failed_download_the_give_up_is_no_hub_call() -> None:
    run = retrier(Failures(), retries=0)
    error = ConnectionResetError("reset")
    with pytest.raises(Gone, match=r"gave up on the download \(a.bin\) after 1, hub_call=False"):
        run.after(error, retry.classify(error), what="the download", filename="a.bin", hub_call=False)
