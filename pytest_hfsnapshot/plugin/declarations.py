"""Declarations (``snapshot_fixture``, the ``hf_snapshot`` marker), each failing where it is written."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from ..core.hub.credentials import hub_token
from ..errors import InvalidRequestError
from ..request import RequestKeywords, SnapshotRequest, keywords_signature
from ..snapshot import Snapshot
from .session import state_of

if TYPE_CHECKING:
    from typing_extensions import Unpack

NO_TOKEN_REASON = "needs a Hugging Face Hub token: set HF_TOKEN (or run `hf auth login`)"
#: The markers' lines for ``config.addinivalue_line("markers", ...)``.
MARKERS = (
    f"hf_snapshot(repo_id, {keywords_signature()}): the test needs this Hugging Face Hub snapshot "
    "(private=True: skip, not fail, when the Hub does not show the repo to the token in use); "
    "the hf_snapshot fixture gives it.",
    "hf_requires_token: skip the test when no Hugging Face Hub token is configured (HF_TOKEN).",
)
# The attribute of a snapshot_fixture function holding its request, for requests_for_items.
_REQUEST_ATTR = "hfsnapshot_request"


def snapshot_fixture(repo_id: str, **keywords: Unpack[RequestKeywords]) -> Callable[..., Snapshot]:
    """Declare a session-scoped fixture giving a verified :class:`~pytest_hfsnapshot.Snapshot`.

    Keywords, as for every declaration form: :class:`~pytest_hfsnapshot.request.RequestKeywords`
    (``revision="main"``, patterns, ``repo_type``, ``metadata_only``, ``private``; see
    :meth:`~pytest_hfsnapshot.request.SnapshotRequest.build`).

    The fixture is named after the variable it is assigned to (``tiny_bert = snapshot_fixture(...)``
    in a conftest defines ``tiny_bert``). The declaration is validated right away: a bad repo id,
    revision, repo type, pattern or keyword fails the import of the declaring file, whose
    traceback ends at the declaring line.
    """
    __tracebackhide__ = True  # pytest's traceback then ends at the declaring line
    try:
        request = SnapshotRequest.from_keywords(repo_id, keywords, form="snapshot_fixture")
    except InvalidRequestError as error:
        raise InvalidRequestError(f"invalid snapshot_fixture(...): {error}", repo_id=error.repo_id) from None

    def hf_snapshot_fixture(pytestconfig: pytest.Config) -> Snapshot:
        return state_of(pytestconfig).provide(request)

    hf_snapshot_fixture.__doc__ = f"Snapshot of {request.label} (declared with snapshot_fixture)."
    setattr(hf_snapshot_fixture, _REQUEST_ATTR, request)
    fixture = pytest.fixture(scope="session")(hf_snapshot_fixture)
    setattr(fixture, _REQUEST_ATTR, request)
    return fixture


def request_from_marker(marker: pytest.Mark) -> SnapshotRequest:
    """The request an ``hf_snapshot`` marker asks for; InvalidRequestError when it is malformed."""
    kwargs = dict(marker.kwargs)
    if len(marker.args) > 1 or (marker.args and "repo_id" in kwargs):
        raise InvalidRequestError("hf_snapshot takes one positional argument, the repo id ('org/name')")
    repo_id = marker.args[0] if marker.args else kwargs.pop("repo_id", None)
    kwargs.pop("repo_id", None)
    return SnapshotRequest.from_keywords(repo_id, kwargs, form="hf_snapshot")


def requests_for_items(items: Iterable[pytest.Item]) -> list[SnapshotRequest]:
    """Every snapshot the given tests declare, deduplicated, in first-use order.

    Covers ``snapshot_fixture`` declarations reachable through each item's fixture closure and the
    closest valid ``hf_snapshot`` marker; calls to the ``hf_snapshots`` factory cannot be known
    before they run.
    """
    found: dict[SnapshotRequest, None] = {}
    for item in items:
        marker = item.get_closest_marker("hf_snapshot")
        if marker is not None:
            with contextlib.suppress(InvalidRequestError):
                found.setdefault(request_from_marker(marker), None)
        info = getattr(item, "_fixtureinfo", None)
        name2defs: dict[str, Sequence[Any]] = getattr(info, "name2fixturedefs", {}) or {}
        for name in getattr(item, "fixturenames", ()):
            for request in _declared_requests(name, name2defs.get(name, ())):
                found.setdefault(request, None)
    return list(found)


def _declared_requests(name: str, defs: Sequence[Any]) -> list[SnapshotRequest]:
    # The last definition is the one the test sees; earlier ones matter only when it requests
    # its own name (an override extending the fixture it overrides).
    out: list[SnapshotRequest] = []
    for fixturedef in reversed(defs):
        request = getattr(getattr(fixturedef, "func", None), _REQUEST_ATTR, None)
        if isinstance(request, SnapshotRequest):
            out.append(request)
        if name not in getattr(fixturedef, "argnames", ()):
            break
    return out


class InvalidDeclaration(pytest.Collector):
    """Stands in for a test whose ``hf_snapshot`` marker is malformed: it fails at collection."""

    def __init__(self, *, message: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._message = message

    def collect(self) -> NoReturn:
        raise self.CollectError(self._message)


def checked(collector: pytest.Collector, node: object) -> object:
    """A collected test as the plugin wants it (``pytest_pycollect_makeitem``'s result, one node).

    ``hf_requires_token`` without a token adds a skip; a malformed ``hf_snapshot`` marker
    replaces the test by an :class:`InvalidDeclaration`; a marked test gets the ``hf_snapshot``
    fixture, so a refused access skips it even when it reads the snapshot by repo id.
    """
    if not isinstance(node, pytest.Function):
        return node
    if node.get_closest_marker("hf_requires_token") is not None and hub_token() is None:
        node.add_marker(pytest.mark.skip(reason=NO_TOKEN_REASON))
    marker = node.get_closest_marker("hf_snapshot")
    if marker is None:
        return node
    try:
        request_from_marker(marker)
    except InvalidRequestError as error:
        shown = ", ".join([*map(repr, marker.args), *(f"{k}={v!r}" for k, v in marker.kwargs.items())])
        message = f"{node.nodeid}: invalid @pytest.mark.hf_snapshot({shown}): {error}"
        return InvalidDeclaration.from_parent(collector, name=node.name, message=message)
    # Done here, for marked tests only (on a copy: parametrized siblings share the list), instead
    # of through an autouse fixture that every test of every suite would pay for.
    if "hf_snapshot" not in node.fixturenames:
        node.fixturenames = [*node.fixturenames, "hf_snapshot"]
    return node


__all__ = [
    "MARKERS",
    "NO_TOKEN_REASON",
    "InvalidDeclaration",
    "checked",
    "request_from_marker",
    "requests_for_items",
    "snapshot_fixture",
]
