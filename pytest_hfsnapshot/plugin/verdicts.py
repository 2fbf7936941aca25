"""What a test gets when its snapshot cannot be had: one skip, xfail or failure per failed request."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest
from huggingface_hub import constants as hf_constants

from ..core.hub.credentials import token_set
from ..errors import AuthError, HfSnapshotError, OfflineMissingError
from ..request import SnapshotRequest
from ..settings import AUTH_ACTIONS, AuthAction, pytest_command, spelling
from .options import Options

#: The report (and exception) attribute holding ``{"action": ..., "reason": ...}`` for refused accesses.
AUTH_TAG = "hfsnapshot_auth"


class Verdict(NamedTuple):
    """What every test needing a failed request gets: the same answer, without asking the Hub again."""

    action: AuthAction
    message: str
    #: The refusal's reason (``"gated"``, ...) when the Hub refused access, else None.
    auth: str | None = None

    def exception(self) -> BaseException:
        """The exception that gives a test this verdict when raised in its setup or call."""
        exc: BaseException
        if self.action == "skip":
            exc = pytest.skip.Exception(self.message, _use_item_location=True)
        elif self.action == "xfail":
            exc = pytest.xfail.Exception(self.message)
        else:
            exc = pytest.fail.Exception(self.message, pytrace=False)
        if self.auth is not None:
            setattr(exc, AUTH_TAG, {"action": self.action, "reason": self.auth})
        return exc

    def to_dict(self) -> dict[str, Any]:
        """Plain data for :class:`~pytest_hfsnapshot.core.cache.state.FailureMemory`."""
        return self._asdict()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict | None:
        """Inverse of :meth:`to_dict`; None for data this version did not write."""
        action = data.get("action")
        for known in AUTH_ACTIONS:
            if action == known:
                auth = data.get("auth")
                return cls(known, str(data.get("message", "")), auth if isinstance(auth, str) else None)
        return None


#: Appended to an offline "not cached" verdict for a snapshot the ``hf_snapshots`` factory asked for.
FACTORY_OFFLINE_HINT = (
    " The hf_snapshots factory's snapshots are prefetched only when they are listed in the ini option "
    f"{spelling('prefetch').ini} (one org/name[@revision] or JSON object per line): no collection can see a "
    f"factory call. Add it there, then run `{pytest_command('prefetch_only')}` online."
)


def for_failure(
    request: SnapshotRequest, error: HfSnapshotError, options: Options, *, factory: bool = False
) -> Verdict:
    """The verdict for tests needing ``request``, which failed with the core's ``error``.

    ``factory``: the request came from the ``hf_snapshots`` factory (an offline miss then names
    the ``hf_prefetch`` ini option, the only way a prefetch sees it).
    """
    if isinstance(error, AuthError):
        from ..core.hub.refusals import auth_message, skips  # on first use: see for_test_code

        message = auth_message(
            error.reason,
            repo_id=request.repo_id,
            repo_type=request.repo_type,
            revision=request.revision,
            endpoint=hf_constants.ENDPOINT,
            token_set=token_set(),
            private=request.private,
        )
        action: AuthAction = options.on_auth_error if skips(error.reason, private=request.private) else "fail"
        return Verdict(action, message, auth=error.reason)
    if isinstance(error, OfflineMissingError):
        message = f"{request.label}: offline and not fully cached: {error}"
        missing = [name for name in error.missing if name not in str(error)]
        if missing:
            shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
            message += f" (missing: {shown})"
        if factory:
            message += FACTORY_OFFLINE_HINT
        return Verdict(options.on_missing, message)
    return Verdict("fail", f"{request.label}: {type(error).__name__}: {error}")


def for_test_code(exc: BaseException, options: Options) -> Verdict | None:
    """The verdict for a refused Hub access raised by test code (e.g. transformers' OSError from
    GatedRepoError); None when ``exc`` is something else or is to fail as it is.

    A rejected token fails with our message; a repo the Hub does not show fails as raised (no
    declaration says whether it is private).
    """
    # Imported on the first failing test, not at start-up: classification needs
    # huggingface_hub's errors, and with them its HTTP client.
    from ..core.hub.refusals import auth_message, auth_repo, classify_auth, skips

    reason = classify_auth(exc)
    if reason is None:
        return None
    if skips(reason, private=False):
        if options.on_auth_error == "fail":
            return None
        action: AuthAction = options.on_auth_error
    elif reason == "invalid_token":
        action = "fail"
    else:
        return None
    repo = auth_repo(exc)
    message = auth_message(
        reason,
        repo_id=repo[0] if repo else None,
        repo_type=repo[1] if repo else "model",
        endpoint=hf_constants.ENDPOINT,
        token_set=token_set(),
    )
    return Verdict(action, message, auth=reason)


def apply_to_call(options: Options | None, call: pytest.CallInfo[None]) -> pytest.ExceptionInfo[BaseException] | None:
    """Replace a refused Hub access raised in a test's setup or call by its verdict's exception.

    Returns the call's exception info as it now is, for :func:`tag_report`.
    """
    excinfo = call.excinfo
    if options is None or excinfo is None or call.when not in ("setup", "call"):
        return excinfo
    if not isinstance(excinfo.value, Exception):
        return excinfo
    verdict = for_test_code(excinfo.value, options)
    if verdict is not None:
        call.excinfo = excinfo = _raised(verdict.exception())
    return excinfo


def tag_report(excinfo: pytest.ExceptionInfo[BaseException] | None, report: pytest.TestReport) -> None:
    """Copy the verdict's auth tag, if any, from the call's exception to its report."""
    auth = getattr(excinfo.value, AUTH_TAG, None) if excinfo is not None else None
    if auth is not None:
        setattr(report, AUTH_TAG, auth)


def auth_outcome(report: pytest.TestReport) -> str | None:
    """For a setup or call report of a refused Hub access, pytest's own word for what the test got:
    ``"skipped"``, ``"xfailed"``, ``"failed"`` or ``"error"`` (a failure in setup)."""
    auth = getattr(report, AUTH_TAG, None)
    if not isinstance(auth, dict) or report.when not in ("setup", "call"):
        return None
    if report.skipped:
        return "xfailed" if hasattr(report, "wasxfail") else "skipped"
    if report.failed:
        return "error" if report.when == "setup" else "failed"
    return None


def _raised(exc: BaseException) -> pytest.ExceptionInfo[BaseException]:
    """``exc`` as pytest sees an exception that was raised (with a traceback)."""
    try:
        raise exc
    except BaseException:
        return pytest.ExceptionInfo.from_current()


__all__ = [
    "AUTH_TAG",
    "FACTORY_OFFLINE_HINT",
    "Verdict",
    "apply_to_call",
    "auth_outcome",
    "for_failure",
    "for_test_code",
    "tag_report",
]
