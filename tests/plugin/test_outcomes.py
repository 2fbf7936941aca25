"""What tests get when the Hub refuses, is unreachable, or the cache is incomplete offline."""

from __future__ import annotations

import pytest

from pytest_hfsnapshot.testing.hub import LocalHub

FILES = {"config.json": "{}", "model.safetensors": b"\x01" * 2048}

TWO_TESTS = """
def test_one(gated_model):
    pass

def test_two(gated_model):
    pass
"""


def cache_arg(hub: LocalHub) -> str:
    return f"--hf-cache-dir={hub.cache_dir}"


def declare(pytester: pytest.Pytester, repo_id: str, name: str = "gated_model") -> None:
    pytester.makeconftest(
        f"""
        from pytest_hfsnapshot import snapshot_fixture

        {name} = snapshot_fixture("{repo_id}")
        """
    )


def hub_requests_for(hub: LocalHub, repo_id: str) -> int:
    return hub.request_count(f"*{repo_id}*")


def test_gated_repo_without_token_skips_with_an_actionable_reason(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    local_hub.add_repo("org/gated", files=FILES, gated=True)
    declare(pytester, "org/gated")
    pytester.makepyfile(TWO_TESTS)
    result = pytester.runpytest(cache_arg(local_hub), "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]1[]] test_gated_repo_without_token_skips_with_an_actionable_reason.py:1: "
            "org/gated@main is gated and no Hub token is set: "
            f"accept the conditions at {local_hub.url}/org/gated and set HF_TOKEN to a token of that account",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*= hf snapshots =*",
            "Hub access refused: 2 tests (2 skipped)",
            "*short test summary*",
            "SKIPPED [[]1[]] *.py:1: org/gated@main is gated*",
            "SKIPPED [[]1[]] *.py:4: org/gated@main is gated*",
        ]
    )


def test_one_failed_materialization_is_remembered(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    # One file each: the client sends one HEAD per file in parallel threads and stops at the first
    # 403, so with several files the number of refused requests varies from run to run.
    local_hub.add_repo("org/gated-once", files={"config.json": "{}"}, gated=True)
    local_hub.add_repo("org/gated-thrice", files={"config.json": "{}"}, gated=True)
    pytester.makepyfile(
        test_once="""
        import pytest

        @pytest.mark.hf_snapshot("org/gated-once")
        def test_marker(hf_snapshot):
            pass
        """
    )
    pytester.runpytest(cache_arg(local_hub)).assert_outcomes(skipped=1)
    once = hub_requests_for(local_hub, "org/gated-once")
    assert once > 0
    pytester.makepyfile(
        test_once="",
        test_thrice="""
        import pytest

        @pytest.mark.hf_snapshot("org/gated-thrice")
        def test_marker(hf_snapshot):
            pass

        def test_factory(hf_snapshots):
            hf_snapshots("org/gated-thrice")

        @pytest.mark.hf_snapshot("org/gated-thrice")
        def test_marker_without_fixture():
            pass
        """,
    )
    pytester.runpytest(cache_arg(local_hub)).assert_outcomes(skipped=3)
    # Three tests, three forms, one request: the Hub is asked no more than for one test.
    assert hub_requests_for(local_hub, "org/gated-thrice") == once


def test_private_repo_not_declared_private_fails(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    # Without a token the Hub cannot tell a private repo from a typo: only private=True skips.
    local_hub.add_repo("org/secret", files=FILES, private=True)
    declare(pytester, "org/secret", name="secret")
    pytester.makepyfile("def test_secret(secret): pass")
    result = pytester.runpytest(cache_arg(local_hub), "-ra")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            f"org/secret@main was not found at {local_hub.url}: either the repo id "
            "is misspelt, or the repo is private and no Hub token is set*private=True*",
            "Hub access refused: 1 test (1 error)",
        ]
    )


def test_private_repo_opens_with_the_token(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_hub.add_repo("org/secret", files=FILES, private=True)
    monkeypatch.setenv("HF_TOKEN", local_hub.token)
    declare(pytester, "org/secret", name="secret")
    pytester.makepyfile("def test_secret(secret): assert secret.files == ('config.json', 'model.safetensors')")
    result = pytester.runpytest(cache_arg(local_hub))
    result.assert_outcomes(passed=1)
    assert local_hub.token not in result.stdout.str()


@pytest.mark.parametrize(
    ("action", "outcome", "line"),
    [
        ("xfail", {"xfailed": 2}, "XFAIL *test_one - org/gated@main is gated*"),
        ("fail", {"errors": 2}, "ERROR *test_one - Failed: org/gated@main is gated*"),
        ("skip", {"skipped": 2}, "SKIPPED *org/gated@main is gated*"),
    ],
)
def test_on_auth_error(
    pytester: pytest.Pytester, local_hub: LocalHub, action: str, outcome: dict[str, int], line: str
) -> None:
    local_hub.add_repo("org/gated", files=FILES, gated=True)
    declare(pytester, "org/gated")
    pytester.makepyfile(TWO_TESTS)
    result = pytester.runpytest(cache_arg(local_hub), f"--hf-on-auth-error={action}", "-ra")
    result.assert_outcomes(**outcome)  # type: ignore[arg-type]
    result.stdout.fnmatch_lines([line])
    # pytest's own words: a failure in setup is an error.
    past = {"skip": "2 skipped", "xfail": "2 xfailed", "fail": "2 errors"}[action]
    result.stdout.fnmatch_lines([f"Hub access refused: 2 tests ({past})"])
    # No traceback into the plugin or the client for a refused access.
    assert "huggingface_hub" not in result.stdout.str().replace("huggingface.co", "")


def test_on_auth_error_ini(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/gated", files=FILES, gated=True)
    pytester.makeini("[pytest]\nhf_on_auth_error = xfail\n")
    declare(pytester, "org/gated")
    pytester.makepyfile(TWO_TESTS)
    result = pytester.runpytest(cache_arg(local_hub))
    result.assert_outcomes(xfailed=2)


def test_auth_errors_raised_by_test_code_are_classified(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/gated", files=FILES, gated=True)
    pytester.makepyfile(
        """
        import pytest
        from huggingface_hub import hf_hub_download

        def load(repo_id):
            # What transformers does with the client's errors.
            try:
                return hf_hub_download(repo_id, "config.json")
            except Exception as error:
                raise OSError(f"You are trying to access a gated repo {repo_id}.") from error

        def test_from_library():
            load("org/gated")

        @pytest.fixture
        def model():
            return load("org/gated")

        def test_from_fixture(model):
            pass

        def test_expected_error():
            with pytest.raises(OSError):
                load("org/gated")

        def test_other_oserror():
            raise OSError("disk full")
        """
    )
    result = pytester.runpytest(cache_arg(local_hub), "-rsf")
    result.assert_outcomes(skipped=2, passed=1, failed=1)
    result.stdout.fnmatch_lines_random(
        [
            "SKIPPED [[]1[]] test_auth_errors_raised_by_test_code_are_classified.py:11: org/gated is gated*",
            "SKIPPED [[]1[]] test_auth_errors_raised_by_test_code_are_classified.py:18: org/gated is gated*",
            "FAILED *test_other_oserror*",
            "Hub access refused: 2 tests (2 skipped)",
        ]
    )


def test_auth_errors_raised_by_test_code_fail_with_fail(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/gated", files=FILES, gated=True)
    pytester.makepyfile(
        """
        from huggingface_hub import hf_hub_download

        def test_from_library():
            hf_hub_download("org/gated", "config.json")
        """
    )
    result = pytester.runpytest(cache_arg(local_hub), "--hf-on-auth-error=fail")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*GatedRepoError*"])


def test_a_401_repo_not_found_from_test_code_is_told_apart_by_its_message(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Hub answers 401 RepoNotFound for a private repo and, on some versions, for a bad token:
    # the plugin classifies what test code raises as the engine does (retry.classify).
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(pytester.path / "no-token"))
    pytester.makepyfile(
        """
        from types import SimpleNamespace

        from huggingface_hub.errors import RepositoryNotFoundError

        def refused(message):
            url = "https://hub.test/api/models/org/x/revision/main"
            response = SimpleNamespace(status_code=401, headers={}, request=None, url=url)
            return RepositoryNotFoundError(message, response=response)

        def test_bad_token():
            raise refused("401 Client Error. Invalid credentials in Authorization header")

        def test_private_or_missing():
            raise refused("401 Client Error. Repository Not Found for url")
        """
    )
    result = pytester.runpytest("-ra", "-p", "no:cacheprovider")
    # A rejected token fails with our message; a repo the Hub does not show fails as raised (no
    # declaration says whether it is private).
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines_random(
        [
            "the Hub at * rejected the token for org/x: the token in use is invalid or expired*",
            "E * huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. Repository Not Found for url",
            "Hub access refused: 1 test (1 failed)",
        ]
    )


def test_requires_token_marker(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(pytester.path / "no-token"))
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.hf_requires_token
        def test_needs_token():
            pass

        @pytest.mark.hf_requires_token
        class TestNeedsToken:
            def test_in_class(self):
                pass

        def test_no_token_needed():
            pass
        """
    )
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=2, passed=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]1[]] test_requires_token_marker.py:3: needs a Hugging Face Hub token: "
            "set HF_TOKEN (or run `hf auth login`)",
        ]
    )
    monkeypatch.setenv("HF_TOKEN", "hf_SENTINEL_marker_1234")
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=3)


def test_offline_and_not_cached_fails_naming_what_is_missing(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    declare(pytester, "org/tiny", name="tiny")
    pytester.makepyfile("def test_tiny(tiny): pass\n\ndef test_again(tiny): pass")
    result = pytester.runpytest(cache_arg(local_hub), "--hf-offline", "-ra")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        ["*ERROR at setup of test_tiny*", "org/tiny@main: offline and not fully cached: *org/tiny@main*"]
    )
    assert local_hub.requests == []


def test_offline_missing_skip(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    declare(pytester, "org/tiny", name="tiny")
    pytester.makepyfile("def test_tiny(tiny): pass")
    result = pytester.runpytest(cache_arg(local_hub), "--hf-offline", "--hf-on-missing=skip", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED *org/tiny@main: offline and not fully cached*"])
    assert local_hub.requests == []


def test_offline_and_cached_runs_without_network(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    declare(pytester, "org/tiny", name="tiny")
    pytester.makepyfile("def test_tiny(tiny): assert (tiny / 'model.safetensors').stat().st_size == 2048")
    pytester.runpytest(cache_arg(local_hub)).assert_outcomes(passed=1)
    local_hub.reset_counters()
    result = pytester.runpytest(cache_arg(local_hub), "--hf-offline")
    result.assert_outcomes(passed=1)
    assert local_hub.requests == []
    result.stdout.fnmatch_lines(["org/tiny@main *cache*"])


def test_revision_not_found_is_an_error_at_setup(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    pytester.makeconftest(
        """
        from pytest_hfsnapshot import snapshot_fixture

        tiny = snapshot_fixture("org/tiny", revision="v9")
        """
    )
    pytester.makepyfile("def test_tiny(tiny): pass")
    result = pytester.runpytest(cache_arg(local_hub), "-ra")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_tiny*", "org/tiny@v9: RevisionNotFoundError: *'v9'*"])


def test_transient_failures_are_an_error_after_retries(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    local_hub.fail("*", 503, times=100)
    declare(pytester, "org/tiny", name="tiny")
    pytester.makepyfile("def test_tiny(tiny): pass\n\ndef test_again(tiny): pass")
    result = pytester.runpytest(cache_arg(local_hub), "--hf-retries=1", "-ra")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_tiny*", "org/tiny@main: TransientError: *2 attempts*"])
    assert len(local_hub.requests) <= 2


SENTINEL = "hf_SENTINEL_abc123"


def test_token_never_appears_in_any_output(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_hub.add_repo("org/gated", files=FILES, gated=True)
    local_hub.add_repo("org/secret", files=FILES, private=True)
    local_hub.add_repo("org/tiny", files=FILES)
    monkeypatch.setenv("HF_TOKEN", SENTINEL)
    pytester.makeconftest(
        """
        import logging
        from pytest_hfsnapshot import snapshot_fixture

        gated = snapshot_fixture("org/gated")
        secret = snapshot_fixture("org/secret")
        tiny = snapshot_fixture("org/tiny", revision="no-such-branch")
        """
    )
    pytester.makepyfile(
        """
        import logging
        import os
        import pytest
        from huggingface_hub import hf_hub_download

        def test_gated(gated): pass

        def test_secret(secret): pass

        def test_missing_revision(tiny): pass

        @pytest.mark.hf_requires_token
        def test_library_error():
            hf_hub_download("org/secret", "config.json")

        def test_careless_test_code():
            token = os.environ["HF_TOKEN"]
            print("token is", token)
            logging.getLogger("careless").warning("token %s", token)
            assert token == "something else"
        """
    )
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest(
        cache_arg(local_hub), "-rA", "-vv", "--showlocals", f"--junitxml={junit}", "--hf-on-auth-error=fail"
    )
    result.assert_outcomes(errors=3, failed=2)
    result.stdout.fnmatch_lines(["*token=set*", "*hf snapshots*"])
    for text in (result.stdout.str(), result.stderr.str(), junit.read_text()):
        assert SENTINEL not in text
    assert "***" in junit.read_text()
