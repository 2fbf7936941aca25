"""refusals: classify_auth, auth_repo and auth_message; plain unit tests, no pytest plugin involved."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from conftest import raised_from
from huggingface_hub import errors as hf_errors

from pytest_hfsnapshot.core.hub import causes, retry
from pytest_hfsnapshot.core.hub.refusals import auth_message, auth_repo, classify_auth, replay_refused, skips
from pytest_hfsnapshot.errors import AuthError, TransientError


def http_error(
    cls: type[hf_errors.HfHubHTTPError],
    status: int,
    url: str = "https://hub.test/api/whoami",
    message: str | None = None,
) -> hf_errors.HfHubHTTPError:
    # Only what HfHubHTTPError reads: the client's response class differs between 1.x and 2.x.
    response: Any = SimpleNamespace(status_code=status, headers={}, request=None, url=url)
    return cls(message or f"{status} error", response=response)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (AuthError("no", reason="gated", repo_id="org/x"), "gated"),
        (AuthError("no", reason="not_found_or_private"), "not_found_or_private"),
        (http_error(hf_errors.GatedRepoError, 403), "gated"),
        (http_error(hf_errors.RepositoryNotFoundError, 401), "not_found_or_private"),
        (http_error(hf_errors.HfHubHTTPError, 401), "unauthorized"),
        (http_error(hf_errors.HfHubHTTPError, 403), "unauthorized"),
        (http_error(hf_errors.HfHubHTTPError, 500), None),
        (http_error(hf_errors.RevisionNotFoundError, 404), None),
        (TransientError("down", attempts=3), None),
        (OSError("disk full"), None),
    ],
)
def test_classify_auth(error: BaseException, reason: str | None) -> None:
    assert classify_auth(error) == reason


BAD_TOKEN = "401 Client Error. Invalid credentials in Authorization header"


@pytest.mark.parametrize(
    ("message", "reason"),
    [(BAD_TOKEN, "invalid_token"), ("401 Client Error. Repository Not Found", "not_found_or_private")],
    ids=["invalid-credentials", "plain-repo-not-found"],
)
def test_a_401_repository_not_found_is_classified_as_the_engine_does(message: str, reason: str) -> None:
    # The Hub answers 401 both for a private repo and for a bad token; only the message tells
    # them apart. The engine (retry.classify) and refusals must agree on which is which.
    error = http_error(hf_errors.RepositoryNotFoundError, 401, url="https://hub.test/api/models/org/x", message=message)
    decided = retry.classify(error)
    assert (decided.kind, decided.auth_reason) == ("auth", reason)
    assert classify_auth(error) == reason
    assert classify_auth(raised_from(OSError("wrapped by a library"), error)) == reason


def test_our_auth_error_decides_over_the_client_error_behind_it() -> None:
    behind = http_error(hf_errors.RepositoryNotFoundError, 401, message=BAD_TOKEN)
    assert classify_auth(raised_from(AuthError("refused", reason="gated"), behind)) == "gated"


def test_classify_through_cause_like_transformers() -> None:
    wrapped = raised_from(OSError("You are trying to access a gated repo."), http_error(hf_errors.GatedRepoError, 403))
    assert classify_auth(wrapped) == "gated"


def test_classify_through_implicit_context() -> None:
    try:
        try:
            raise http_error(hf_errors.RepositoryNotFoundError, 401)
        except Exception:
            raise ValueError("while loading") from None
    except ValueError as error:
        suppressed = error
    # `from None` hides the context from tracebacks, but it is still what happened.
    assert classify_auth(suppressed) == "not_found_or_private"


def test_exception_chain_survives_cycles() -> None:
    first, second = ValueError("a"), KeyError("b")
    first.__cause__, second.__context__ = second, first
    assert list(causes.chain(first)) == [first, second]
    assert classify_auth(first) is None


def test_auth_repo_reads_the_client_error() -> None:
    error = http_error(hf_errors.GatedRepoError, 403)
    error.repo_id, error.repo_type = "org/gated", "dataset"
    assert auth_repo(raised_from(OSError("wrapped"), error)) == ("org/gated", "dataset")
    assert auth_repo(OSError("plain")) is None


@pytest.mark.parametrize(
    ("url", "repo"),
    [
        ("https://hub.test/api/models/org/m/revision/main", ("org/m", "model")),
        ("https://hub.test/api/datasets/org/d/tree/abc?recursive=true", ("org/d", "dataset")),
        ("https://hub.test/org/m/resolve/abc/config.json", ("org/m", "model")),
        ("https://hub.test/spaces/org/s/resolve/main/app.py", ("org/s", "space")),
        ("https://hub.test/api/whoami-v2", None),
    ],
)
def test_auth_repo_from_the_refused_url(url: str, repo: tuple[str, str] | None) -> None:
    # huggingface_hub 1.x errors carry no repo_id: the URL tells it.
    error = http_error(hf_errors.GatedRepoError, 403, url=url)
    error.repo_id = None
    assert auth_repo(error) == repo


@pytest.mark.parametrize(
    ("reason", "token_set", "expected"),
    [
        (
            "gated",
            False,
            "datasets/org/x@v1 is gated and no Hub token is set: accept the conditions at "
            "https://hub.test/datasets/org/x and set HF_TOKEN to a token of that account",
        ),
        ("gated", True, "datasets/org/x@v1 is gated and the token in use has not been granted access: *"),
        (
            "unauthorized",
            True,
            "the Hub refused datasets/org/x@v1 (401/403) for the token in use: "
            "set HF_TOKEN to a token that can read it",
        ),
        (
            "not_found_or_private",
            False,
            "datasets/org/x@v1 was not found at https://hub.test: either the repo id is misspelt, or the repo is "
            "private and no Hub token is set. Check the repo id and repo_type; for a private repo, declare it "
            "with private=True so that its tests skip without a token that can read it, and set HF_TOKEN to "
            "such a token to run them",
        ),
        (
            "not_found_or_private",
            True,
            "datasets/org/x@v1 was not found at https://hub.test: either the repo id is misspelt, or the repo is "
            "private and the token in use cannot read it. *",
        ),
        (
            "invalid_token",
            True,
            "the Hub at https://hub.test rejected the token for datasets/org/x@v1: the token in use is invalid "
            "or expired. Set HF_TOKEN to a valid token (or run `hf auth login` again), or unset it for public repos",
        ),
    ],
)
def test_auth_message(reason: str, token_set: bool, expected: str) -> None:
    message = auth_message(
        reason, repo_id="org/x", repo_type="dataset", revision="v1", endpoint="https://hub.test/", token_set=token_set
    )
    if expected.endswith("*"):
        assert message.startswith(expected[:-1])
    else:
        assert message == expected


@pytest.mark.parametrize("token_set", [False, True])
def test_auth_message_for_a_declared_private_repo(token_set: bool) -> None:
    message = auth_message(
        "not_found_or_private", repo_id="org/x", endpoint="https://hub.test", token_set=token_set, private=True
    )
    why = "the token in use cannot read it" if token_set else "no Hub token is set"
    assert message.startswith(f"org/x is declared private=True and {why}: set HF_TOKEN to a token that can read it")


@pytest.mark.parametrize(
    ("reason", "private", "skipped"),
    [
        ("gated", False, True),
        ("unauthorized", False, True),
        ("not_found_or_private", False, False),
        ("not_found_or_private", True, True),
        ("invalid_token", False, False),
        ("invalid_token", True, False),
    ],
)
def test_which_refusals_skip(reason: str, private: bool, skipped: bool) -> None:
    assert skips(reason, private=private) is skipped


@pytest.mark.parametrize(
    ("recorded", "now", "replayed"),
    [(False, False, True), (True, True, True), (False, True, False), (True, False, False)],
)
def test_a_refusal_is_replayed_only_under_the_same_token_situation(recorded: bool, now: bool, replayed: bool) -> None:
    assert replay_refused(recorded_token_set=recorded, token_set=now) is replayed


def test_auth_message_without_repo() -> None:
    message = auth_message("gated", repo_id=None, endpoint="https://hub.test", token_set=False)
    assert message.startswith("a Hub repo is gated and no Hub token is set: accept the conditions at https://hub.test/")
