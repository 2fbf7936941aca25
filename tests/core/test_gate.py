"""The gate's pure rules: what an origin and an endpoint of a URL are (one rule, used by the messages too);
and what the wings above the Hub door attach to every client it makes."""

from __future__ import annotations

import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_hfsnapshot.core.engine import error_builders
from pytest_hfsnapshot.core.hub import gate


@pytest.mark.parametrize(
    ("url", "origin", "endpoint"),
    [
        (
            "https://huggingface.co/api/models/org/x/revision/main",
            "https://huggingface.co",
            "https://huggingface.co/api",
        ),
        ("https://huggingface.co/org/x/resolve/main/a.bin", "https://huggingface.co", "https://huggingface.co"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://127.0.0.1:8080/apix/y", "http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://h:1?next=/api/x", "http://h:1", "http://h:1"),
        ("https://cas.test/v2/reconstructions/abc", "https://cas.test", "https://cas.test"),
    ],
)
def test_origin_and_endpoint_of_a_url(url: str, origin: str, endpoint: str) -> None:
    assert gate.origin_of(url) == origin
    assert gate.endpoint_of(url) == endpoint


def test_a_failed_request_is_named_by_its_origin() -> None:
    request = SimpleNamespace(method="GET", url="http://127.0.0.2:9/org/x/resolve/c/w%20b.bin?x=1")
    error = OSError("cut")
    error.request = request  # type: ignore[attr-defined]
    wrapped = RuntimeError("download failed")
    wrapped.__cause__ = error
    assert error_builders.failed_origin(wrapped) == "http://127.0.0.2:9"
    assert error_builders.failed_file(wrapped) == "w b.bin"
    assert error_builders.failed_origin(ValueError("no request")) == error_builders.hub()


def test_an_attacher_reaches_the_clients_made_before_and_after_it_registers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from huggingface_hub.utils import _http

    monkeypatch.setattr(gate, "_attachers", list(gate._attachers))
    monkeypatch.setattr(gate, "_made", weakref.WeakSet())
    make = gate.Gate(lambda: tmp_path, "attachers").client_factory(_http.default_client_factory)
    seen: list[Any] = []
    before = make()
    gate.on_new_client(seen.append)
    after = make()
    try:
        assert seen == [before, after]
    finally:
        before.close()
        after.close()


def test_the_observer_of_implicit_use_is_attached_by_registering_not_imported_by_the_gate() -> None:
    from pytest_hfsnapshot.core.implicit import observe

    assert gate._attachers.count(observe.attach) == 1
