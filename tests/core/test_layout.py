"""Where our own state lives in a cache: every path of it comes from ``core.cache.layout``, under one folder."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from pytest_hfsnapshot.core.cache import layout
from pytest_hfsnapshot.core.cache.layout import RepoCache


def test_every_path_of_our_own_state_is_in_our_folder(tmp_path: Path) -> None:
    repo = RepoCache(tmp_path, "org/x", "dataset")
    own = layout.own_dir(repo.cache_dir)
    assert own == repo.cache_dir / ".locks" / "hfsnapshot"
    paths = {
        "lock": repo.lock_path,
        "soft lock": repo.soft_lock_path,
        "holder": repo.holder_path,
        "refusal": repo.refusal_path,
        "record": repo.record_path("c" * 40, "all"),
        "resolution": repo.resolution_path("s1", "release/v1"),
        "failure memory": layout.failure_memory_file(repo.cache_dir, "s1", "k"),
        "gate": layout.endpoint_file(layout.gate_dir(repo.cache_dir, "s1"), "http://h:1"),
        "gate lock": layout.endpoint_lock(layout.endpoint_file(layout.gate_dir(repo.cache_dir, "s1"), "http://h:1")),
        "outage": layout.endpoint_file(layout.outage_dir(repo.cache_dir, "s1"), "http://h:1"),
        "probe": layout.flock_probe(repo.lock_path.parent),
    }
    assert {name: str(path.relative_to(own)) for name, path in paths.items()} == {
        "lock": "locks/datasets--org--x.lock",
        "soft lock": "locks/datasets--org--x.softlock",
        "holder": "locks/datasets--org--x.holder.json",
        "refusal": "refusals/datasets--org--x.json",
        "record": f"records/datasets--org--x/{'c' * 40}.all.json",
        "resolution": "resolutions/s1/datasets--org--x@release%2Fv1.json",
        "failure memory": "outcomes/s1/k.json",
        "gate": "gate/s1/http_h_1.json",
        "gate lock": "gate/s1/http_h_1.json.lock",
        "outage": "outages/s1/http_h_1.json",
        "probe": "locks/.flock-probe",
    }


@pytest.mark.parametrize(
    ("endpoint", "name"),
    [
        ("https://huggingface.co", "https_huggingface.co.json"),
        ("http://127.0.0.1:8080/api", "http_127.0.0.1_8080_api.json"),
        ("http://[::1]:9/api", "http_1_9_api.json"),
    ],
)
def test_one_file_name_per_endpoint(tmp_path: Path, endpoint: str, name: str) -> None:
    assert layout.endpoint_file(tmp_path, endpoint) == tmp_path / name


def test_the_own_dir_comment_lists_every_folder_of_ours() -> None:
    source = inspect.getsource(layout).splitlines()
    end = next(i for i, line in enumerate(source) if line.startswith("OWN_DIR = "))
    start = max(i for i in range(end) if not source[i].startswith("#:")) + 1
    listing = "\n".join(source[start:end])
    for folder in ("locks/", "records/", "usage/", "resolutions/", "refusals/", "outcomes/", "gate/", "outages/"):
        assert f"#:     {folder}" in listing, folder
