"""A session endpoint served from this process, as the plugin serves one, for the tests of this folder.

``serve(mode, ...)`` makes the observer, installs the session's gate and starts the endpoint against
the ``local_hub`` of the test; everything is stopped at the test's end. Requests are sent with the
standard library (``ask``), or by huggingface_hub itself in this thread marked as the plugin's own
work (``as_child``), so the host's observer sees only what the endpoint does for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

from pytest_hfsnapshot.core.cache import pins
from pytest_hfsnapshot.core.hub import gate
from pytest_hfsnapshot.core.implicit import file_materialize, observe
from pytest_hfsnapshot.core.own_work import own_work
from pytest_hfsnapshot.endpoint import SessionEndpoint
from pytest_hfsnapshot.settings import ImplicitMode, Settings, VerifyMode
from pytest_hfsnapshot.testing.hub import LocalHub

#: The node id the endpoint's URLs name in these tests.
TEST = "tests/test_models.py::test_server"


@dataclasses.dataclass
class Served:
    observer: observe.Observer
    endpoint: SessionEndpoint
    settings: Settings

    @property
    def url(self) -> str:
        """The ``HF_ENDPOINT`` of a child of :data:`TEST`."""
        return self.endpoint.url_for(TEST)


@dataclasses.dataclass
class Answer:
    status: int
    #: Read without regard to case, as HTTP header names are.
    headers: Message
    body: bytes


def ask(url: str, method: str = "GET", headers: dict[str, str] | None = None, data: bytes | None = None) -> Answer:
    """One request as a plain HTTP client sends it; an error status is an answer too."""
    request = urllib.request.Request(url, method=method, headers=headers or {}, data=data)
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=60) as response:
            return Answer(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:
        return Answer(error.code, error.headers, error.read())


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@contextlib.contextmanager
def as_child() -> Iterator[None]:
    """huggingface_hub in this thread acts as a child process would: unseen by the host's observer."""
    with own_work():
        yield


@pytest.fixture
def serve(local_hub: LocalHub) -> Iterator[Callable[..., Served]]:
    stack = contextlib.ExitStack()

    def start(
        mode: ImplicitMode = "report",
        *,
        pin_path: Path | None = None,
        offline: bool = False,
        retries: int = 5,
        verify: VerifyMode = "size",
    ) -> Served:
        from huggingface_hub import constants

        session = uuid.uuid4().hex
        settings = Settings(
            cache_dir=local_hub.cache_dir,
            retries=retries,
            session=session,
            pins=pin_path,
            offline=True if offline else None,
            verify=verify,
        )
        observer = observe.Observer(
            mode=mode,
            offline=lambda: offline,
            endpoint=lambda: str(constants.ENDPOINT),
            pin_file=lambda: pins.load(pin_path) if pin_path is not None else None,
            settings=lambda: settings,
            prepare=file_materialize.prepare,
        )
        session_gate = gate.acquire(lambda: gate.Gate(lambda: str(local_hub.cache_dir), session))
        stack.callback(gate.remove, session_gate.folders)
        stack.callback(gate.release, session_gate)
        stack.enter_context(observe.observing(observer))
        endpoint = SessionEndpoint(observer, lambda: settings)
        endpoint.start()
        stack.callback(endpoint.close)
        return Served(observer, endpoint, settings)

    with stack:
        yield start
