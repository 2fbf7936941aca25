"""A typo fails, a declared private repo skips, a rejected token fails, and a refusal is replayed
only under the token situation it was recorded in (CONTRACT section 3)."""

from __future__ import annotations

import pytest

from pytest_hfsnapshot.testing.hub import LocalHub

FILES = {"config.json": "{}", "model.safetensors": b"\x01" * 2048}


def cache_arg(hub: LocalHub) -> str:
    return f"--hf-cache-dir={hub.cache_dir}"


def declare(pytester: pytest.Pytester, line: str) -> None:
    pytester.makeconftest(f"from pytest_hfsnapshot import snapshot_fixture\n\nmodel = snapshot_fixture({line})\n")


def test_a_misspelt_repo_id_fails_naming_both_possibilities(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("acme/tiny-bert", files=FILES)
    declare(pytester, '"acme/tiny-bret"')
    pytester.makepyfile("def test_model(model): pass\n\ndef test_again(model): pass")
    result = pytester.runpytest(cache_arg(local_hub), "-ra")
    result.assert_outcomes(errors=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            f"*acme/tiny-bret@main was not found at {local_hub.url}: either the repo id is misspelt, or the repo "
            "is private and no Hub token is set*private=True*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "Hub access refused: 2 tests (2 errors)",
        ]
    )


def test_the_marker_and_the_factory_fail_too(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.hf_snapshot("acme/nope")
        def test_marker(hf_snapshot):
            pass

        def test_factory(hf_snapshots):
            hf_snapshots("acme/nope2")
        """
    )
    result = pytester.runpytest(cache_arg(local_hub), "-ra")
    result.assert_outcomes(errors=1, failed=1)
    result.stdout.fnmatch_lines_random(["*acme/nope@main was not found at*", "*acme/nope2@main was not found at*"])


@pytest.mark.parametrize(
    "form",
    [
        "conftest",
        "marker",
        "factory",
    ],
)
def test_private_true_skips_without_a_token(pytester: pytest.Pytester, local_hub: LocalHub, form: str) -> None:
    local_hub.add_repo("org/secret", files=FILES, private=True)
    if form == "conftest":
        declare(pytester, '"org/secret", private=True')
        pytester.makepyfile("def test_secret(model): pass")
    elif form == "marker":
        pytester.makepyfile(
            "import pytest\n\n@pytest.mark.hf_snapshot('org/secret', private=True)\n"
            "def test_secret(hf_snapshot): pass\n"
        )
    else:
        pytester.makepyfile("def test_secret(hf_snapshots): hf_snapshots('org/secret', private=True)\n")
    result = pytester.runpytest(cache_arg(local_hub), "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            "Hub access refused: 1 test (1 skipped)",
            "SKIPPED [[]1[]] *: org/secret@main is declared private=True and no Hub token is set: "
            "set HF_TOKEN to a token that can read it*",
        ]
    )


def test_private_true_opens_with_the_token(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_hub.add_repo("org/secret", files=FILES, private=True)
    monkeypatch.setenv("HF_TOKEN", local_hub.token)
    declare(pytester, '"org/secret", private=True')
    pytester.makepyfile("def test_secret(model): assert (model / 'config.json').is_file()")
    pytester.runpytest(cache_arg(local_hub)).assert_outcomes(passed=1)


def test_private_true_obeys_on_auth_error(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/secret", files=FILES, private=True)
    declare(pytester, '"org/secret", private=True')
    pytester.makepyfile("def test_secret(model): pass")
    pytester.runpytest(cache_arg(local_hub), "--hf-on-auth-error=xfail").assert_outcomes(xfailed=1)


@pytest.mark.parametrize("repo", ["org/tiny", "org/gated", "org/secret"])
def test_an_invalid_token_fails_with_that_message(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch, repo: str
) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    local_hub.add_repo("org/gated", files=FILES, gated=True)
    local_hub.add_repo("org/secret", files=FILES, private=True)
    monkeypatch.setenv("HF_TOKEN", "hf_expiredTOKENexpiredTOKEN1234")
    declare(pytester, f'"{repo}", private=True')
    pytester.makepyfile("def test_model(model): pass")
    result = pytester.runpytest(cache_arg(local_hub), "-ra")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [f"*the Hub at {local_hub.url} rejected the token for {repo}@main: the token in use is invalid or expired*"]
    )
    assert "hf_expiredTOKEN" not in result.stdout.str()


def test_an_invalid_token_met_by_test_code_fails_with_that_message(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    monkeypatch.setenv("HF_TOKEN", "hf_expiredTOKENexpiredTOKEN1234")
    pytester.makepyfile(
        """
        from huggingface_hub import hf_hub_download

        def test_library():
            hf_hub_download("org/tiny", "config.json")
        """
    )
    result = pytester.runpytest(cache_arg(local_hub), "-ra")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the token in use is invalid or expired*"])


def test_a_gated_refusal_is_replayed_offline_under_the_same_token_situation(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    local_hub.add_repo("org/gated", files=FILES, gated=True)
    declare(pytester, '"org/gated"')
    pytester.makepyfile("def test_gated(model): pass")
    pytester.runpytest(cache_arg(local_hub), "--hf-prefetch-only")
    result = pytester.runpytest(cache_arg(local_hub), "--hf-offline", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED *org/gated@main is gated and no Hub token is set*"])


def test_a_refusal_is_not_replayed_under_another_token_situation(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_hub.add_repo("org/gated", files=FILES, gated=True)
    declare(pytester, '"org/gated"')
    pytester.makepyfile("def test_gated(model): pass")
    pytester.runpytest(cache_arg(local_hub), "--hf-prefetch-only")
    local_hub.reset_counters()
    monkeypatch.setenv("HF_TOKEN", local_hub.token)
    result = pytester.runpytest(cache_arg(local_hub), "--hf-offline", "-ra")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*org/gated@main is not cached: the Hub refused it during an earlier online run when no Hub token "
            "was set, and a token is set now; prefetch it online with the current token*",
        ]
    )
    assert "not been granted" not in result.stdout.str()
    assert local_hub.requests == []


def test_a_misspelt_repo_fails_the_prefetch(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/gated", files=FILES, gated=True)
    local_hub.add_repo("org/secret", files=FILES, private=True)
    pytester.makeconftest(
        """
        from pytest_hfsnapshot import snapshot_fixture

        gated = snapshot_fixture("org/gated")
        secret = snapshot_fixture("org/secret", private=True)
        """
    )
    pytester.makepyfile("def test_a(gated, secret): pass")
    result = pytester.runpytest(cache_arg(local_hub), "--hf-prefetch-only")
    assert result.ret == 0, result.stdout.str()
    pytester.makepyfile("import pytest\n\n@pytest.mark.hf_snapshot('org/typo')\ndef test_b(hf_snapshot): pass")
    result = pytester.runpytest(cache_arg(local_hub), "--hf-prefetch-only")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*org/typo@main*was not found at*"])
