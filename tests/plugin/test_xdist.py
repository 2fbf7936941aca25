"""pytest-xdist: one download however many workers ask, one merged summary, one session id."""

from __future__ import annotations

import json

import pytest
from conftest import file_fetches

from pytest_hfsnapshot.core.cache.layout import own_dir
from pytest_hfsnapshot.testing.hub import LocalHub

pytest.importorskip("xdist")

FILES = {"config.json": "{}", "model.safetensors": b"\x02" * (256 * 1024)}
WEIGHT_GET = "*/resolve/*/model.safetensors"


@pytest.fixture
def tiny(local_hub: LocalHub, pytester: pytest.Pytester) -> str:
    commit = local_hub.add_repo("org/tiny", files=FILES)
    pytester.makeconftest(
        """
        from pytest_hfsnapshot import snapshot_fixture

        tiny = snapshot_fixture("org/tiny")
        """
    )
    return commit


def many_tests(pytester: pytest.Pytester, count: int) -> None:
    pytester.makepyfile(
        "\n".join(
            f"def test_{n}(tiny):\n    assert (tiny / 'model.safetensors').stat().st_size == 256 * 1024\n"
            for n in range(count)
        )
    )


def run(pytester: pytest.Pytester, hub: LocalHub, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(f"--hf-cache-dir={hub.cache_dir}", "-p", "no:cacheprovider", *args)


def test_two_workers_one_download_one_row(pytester: pytest.Pytester, local_hub: LocalHub, tiny: str) -> None:
    many_tests(pytester, 3)
    local_hub.slow(2 * 1024 * 1024)
    result = run(pytester, local_hub, "-n", "2", "--dist", "each")
    result.assert_outcomes(passed=6)
    assert file_fetches(local_hub, WEIGHT_GET) == 1
    result.stdout.fnmatch_lines(
        [
            "*= hf snapshots =*",
            f"org/tiny@main  {tiny[:12]}  2 files  256.0 KiB  download  *s  lock wait *s  "
            "download by gw?; 1 other waited *s",
        ]
    )
    assert len([line for line in result.stdout.lines if line.startswith("org/tiny@main")]) == 1


def test_snapshot_uses_reach_the_controller_by_session_finish(
    pytester: pytest.Pytester, local_hub: LocalHub, tiny: str
) -> None:
    # What a manifest writer relies on: in the controller's pytest_sessionfinish, every worker's
    # uses are there (one per worker that materialized), and primary_uses keeps one per request.
    pytester.makeconftest(
        """
        import json
        import pytest
        from pytest_hfsnapshot import snapshot_fixture
        from pytest_hfsnapshot.plugin.hooks import primary_uses, snapshot_uses

        tiny = snapshot_fixture("org/tiny")

        def pytest_sessionfinish(session):
            if hasattr(session.config, "workerinput"):
                return
            uses = snapshot_uses(session.config)
            with open("uses.json", "w") as out:
                json.dump(
                    {
                        "workers": sorted(u.worker for u in uses),
                        "primary": [u.to_dict() for u in primary_uses(uses)],
                    },
                    out,
                )
        """
    )
    many_tests(pytester, 2)
    run(pytester, local_hub, "-n", "2", "--dist", "each").assert_outcomes(passed=4)
    data = json.loads((pytester.path / "uses.json").read_text())
    assert data["workers"] == ["gw0", "gw1"]
    (primary,) = data["primary"]
    assert primary["snapshot"]["commit"] == tiny
    assert primary["snapshot"]["source"] == "download"
    assert primary["snapshot"]["files"] == ["config.json", "model.safetensors"]


def test_four_workers_one_download(pytester: pytest.Pytester, local_hub: LocalHub, tiny: str) -> None:
    many_tests(pytester, 8)
    result = run(pytester, local_hub, "-n", "4")
    result.assert_outcomes(passed=8)
    assert file_fetches(local_hub, WEIGHT_GET) == 1
    assert file_fetches(local_hub, "*/revision/main") == 1
    result.stdout.fnmatch_lines(["org/tiny@main  *download by gw?*"])


@pytest.mark.parametrize("dist", ["loadscope", "loadgroup", "worksteal"])
def test_distribution_modes(pytester: pytest.Pytester, local_hub: LocalHub, tiny: str, dist: str) -> None:
    pytester.makepyfile(
        test_a="""
        import pytest

        @pytest.mark.xdist_group("a")
        def test_a(tiny): pass

        @pytest.mark.hf_snapshot("org/tiny", allow_patterns="*.json")
        def test_marked(hf_snapshot): assert hf_snapshot.files == ("config.json",)
        """,
        test_b="""
        import pytest

        @pytest.mark.xdist_group("b")
        def test_b(tiny): pass

        def test_factory(hf_snapshots): assert hf_snapshots("org/tiny").commit
        """,
    )
    result = run(pytester, local_hub, "-n", "2", "--dist", dist)
    result.assert_outcomes(passed=4)
    assert file_fetches(local_hub, WEIGHT_GET) == 1


def test_workers_share_the_session_id(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import os
        from pytest_hfsnapshot.plugin.hooks import session_id

        def test_a(pytestconfig, tmp_path_factory):
            worker = os.environ["PYTEST_XDIST_WORKER"]
            with open(f"session-{worker}.txt", "w") as out:
                out.write(session_id(pytestconfig))
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "each", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    ids = {path.read_text() for path in pytester.path.glob("session-gw*.txt")}
    assert len(list(pytester.path.glob("session-gw*.txt"))) == 2
    assert len(ids) == 1
    assert len(ids.pop()) == 32


def test_offline_reaches_workers(pytester: pytest.Pytester, local_hub: LocalHub, tiny: str) -> None:
    many_tests(pytester, 2)
    run(pytester, local_hub).assert_outcomes(passed=2)
    local_hub.reset_counters()
    pytester.makepyfile(
        test_env="""
        import os
        import huggingface_hub.constants as c

        def test_worker_is_offline():
            assert os.environ["PYTEST_XDIST_WORKER"]
            assert c.HF_HUB_OFFLINE is True
        """
    )
    result = run(pytester, local_hub, "-n", "2", "--hf-offline")
    result.assert_outcomes(passed=3)
    assert local_hub.requests == []
    result.stdout.fnmatch_lines(["hfsnapshot: *offline=True*", "org/tiny@main  *cache*"])


def test_auth_outcome_is_shared_across_workers(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    # One file each: the client sends one HEAD per file in parallel threads and stops at the first
    # 403, so with several files the number of refused requests varies from run to run.
    local_hub.add_repo("org/gated-alone", files={"config.json": "{}"}, gated=True)
    local_hub.add_repo("org/gated-shared", files={"config.json": "{}"}, gated=True)
    pytester.makepyfile(
        test_alone="""
        import pytest

        @pytest.mark.hf_snapshot("org/gated-alone")
        def test_alone():
            pass
        """
    )
    run(pytester, local_hub).assert_outcomes(skipped=1)
    alone = local_hub.request_count("*org/gated-alone*")
    assert alone > 0
    pytester.makepyfile(
        test_alone="",
        test_shared=f"""
        import pathlib
        import time
        import pytest

        @pytest.mark.xdist_group("first")
        @pytest.mark.hf_snapshot("org/gated-shared")
        def test_first():
            pass

        @pytest.fixture
        def later():
            # Let the other worker meet the refusal first: wait until it has recorded it.
            outcomes = pathlib.Path({str(own_dir(local_hub.cache_dir))!r}) / "outcomes"
            deadline = time.monotonic() + 60
            while not list(outcomes.glob("*/*.json")) and time.monotonic() < deadline:
                time.sleep(0.05)

        @pytest.mark.xdist_group("second")
        def test_second(later, hf_snapshots):
            hf_snapshots("org/gated-shared")
        """,
    )
    result = run(pytester, local_hub, "-n", "2", "--dist", "loadgroup", "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["Hub access refused: 2 tests (2 skipped)"])
    # Two workers, one question to the Hub: the second worker read the first one's answer.
    assert local_hub.request_count("*org/gated-shared*") == alone
    # The session's outcome files are cleaned up by the controller.
    assert not list(own_dir(local_hub.cache_dir).glob("outcomes/*/*"))


def test_runs_without_xdist(pytester: pytest.Pytester, local_hub: LocalHub, tiny: str) -> None:
    many_tests(pytester, 2)
    result = run(pytester, local_hub, "-p", "no:xdist")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["org/tiny@main  *download*"])
    result.stdout.no_fnmatch_line("*download by*")
