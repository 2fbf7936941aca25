"""What a newcomer is told: a pattern that matches nothing, the factory offline, and scopes."""

from __future__ import annotations

import logging

import pytest

from pytest_hfsnapshot import materialize
from pytest_hfsnapshot.testing.hub import LocalHub

FILES = {"config.json": "{}", "tokenizer.json": "{}", "model.safetensors": b"\x01" * 2048}


def cache_arg(hub: LocalHub) -> str:
    return f"--hf-cache-dir={hub.cache_dir}"


def test_an_allow_pattern_that_matches_nothing_warns(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    pytester.makeconftest(
        "from pytest_hfsnapshot import snapshot_fixture\n\n"
        "tiny = snapshot_fixture('org/tiny', allow_patterns=['config.json', 'tokenizer/*.json'])\n"
    )
    pytester.makepyfile("def test_tiny(tiny): assert tiny.files == ('config.json',)\n\ndef test_again(tiny): pass")
    result = pytester.runpytest(cache_arg(local_hub))
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*HfSnapshotWarning: org/tiny@main: allow_patterns entry 'tokenizer/*.json' matches no file; "
            "the snapshot is served with the files the other entries select*",
        ]
    )


def test_outside_pytest_it_is_a_log_warning(local_hub: LocalHub, caplog: pytest.LogCaptureFixture) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    with caplog.at_level(logging.WARNING, logger="pytest_hfsnapshot"):
        snap = materialize("org/tiny", allow_patterns=["*.json", "*.txt"], cache_dir=local_hub.cache_dir)
    assert snap.files == ("config.json", "tokenizer.json")
    assert [r.getMessage() for r in caplog.records if "matches no file" in r.getMessage()] == [
        "hfsnapshot: org/tiny@main: allow_patterns entry '*.txt' matches no file; "
        "the snapshot is served with the files the other entries select"
    ]


def test_patterns_that_all_match_do_not_warn(local_hub: LocalHub, caplog: pytest.LogCaptureFixture) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    with caplog.at_level(logging.WARNING, logger="pytest_hfsnapshot"):
        materialize("org/tiny", allow_patterns=["*.json"], cache_dir=local_hub.cache_dir)
    assert not [r for r in caplog.records if "matches no file" in r.getMessage()]


def test_the_factory_offline_names_the_hf_prefetch_option(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    pytester.makepyfile("def test_factory(hf_snapshots): hf_snapshots('org/tiny')")
    pytester.runpytest(cache_arg(local_hub), "--hf-prefetch-only").assert_outcomes()
    result = pytester.runpytest(cache_arg(local_hub), "--hf-offline", "-ra")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*org/tiny@main*hf_prefetch*"])
    assert local_hub.requests == []


def test_a_suite_using_the_factory_without_hf_prefetch_is_told_once(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    pytester.makepyfile(
        "def test_one(hf_snapshots): hf_snapshots('org/tiny')\n\ndef test_two(hf_snapshots): hf_snapshots('org/tiny')"
    )
    result = pytester.runpytest(cache_arg(local_hub))
    result.assert_outcomes(passed=2)
    note = "hfsnapshot: 2 tests use the hf_snapshots factory and the ini option hf_prefetch is empty: *"
    result.stdout.fnmatch_lines([note])
    assert len([line for line in result.stdout.lines if "hf_prefetch is empty" in line]) == 1
    pytester.makeini("[pytest]\nhf_prefetch = org/tiny\n")
    result = pytester.runpytest(cache_arg(local_hub))
    result.assert_outcomes(passed=2)
    assert "hf_prefetch is empty" not in result.stdout.str()


def test_a_module_scoped_fixture_uses_the_factory(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    pytester.makepyfile(
        """
        import pytest

        @pytest.fixture(scope="module")
        def model_dir(hf_snapshots):
            return hf_snapshots("org/tiny").path

        def test_it(model_dir):
            assert (model_dir / "config.json").is_file()
        """
    )
    pytester.runpytest(cache_arg(local_hub)).assert_outcomes(passed=1)


def test_the_marker_fixture_is_function_scoped(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.fixture(scope="module")
        def model_dir(hf_snapshot):
            return hf_snapshot.path

        def test_it(model_dir):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ScopeMismatch*"])
