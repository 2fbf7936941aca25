"""Command-line options, their ini twins, validation, markers and the report header."""

from __future__ import annotations

import os

import huggingface_hub.constants as hf_constants
import pytest

from pytest_hfsnapshot.testing.hub import LocalHub

OPTIONS = [
    "--hf-offline",
    "--hf-on-auth-error",
    "--hf-on-missing",
    "--hf-strict",
    "--hf-retries",
    "--hf-lock-timeout",
    "--hf-lock-lease",
    "--hf-verify",
    "--hf-cache-dir",
    "--hf-prefetch-only",
    "--hf-manifest",
    "--hf-no-space-check",
    "--hf-max-rate-wait",
    "--hf-pins",
    "--hf-update-pins",
]

# A conftest hook rather than a test: a --hf-prefetch-only run runs no test.
SHOW_OPTIONS = """
from pytest_hfsnapshot.plugin.hooks import get_options

def pytest_sessionstart(session):
    print("OPTIONS", get_options(session.config))
"""


def test_every_option_and_ini_twin_is_in_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*Hugging Face Hub snapshots*"])
    out = result.stdout.str()
    for option in OPTIONS:
        assert option in out
        assert "hf_" + option.removeprefix("--hf-").replace("-", "_") + " " in out


def test_defaults(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SHOW_OPTIONS)
    result = pytester.runpytest("-s")
    result.stdout.fnmatch_lines(
        [
            "*OPTIONS Options(offline=False, strict=False, retries=5, lock_timeout=900.0, lock_lease=60.0, "
            "verify='size', cache_dir=None, cache_layers=(), space_check=True, max_rate_wait=300.0, pins=None, "
            "session=None, token=None, on_auth_error='skip', on_missing='fail', prefetch_only=False, manifest=None, "
            "update_pins=False, implicit='report', prefetch=())*"
        ]
    )


def test_command_line_values(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SHOW_OPTIONS)
    pytester.mkdir("layer")
    result = pytester.runpytest(
        "-s",
        "--hf-on-auth-error=xfail",
        "--hf-on-missing=skip",
        "--hf-strict",
        "--hf-retries=0",
        "--hf-lock-timeout=2.5",
        "--hf-verify=sha256",
        "--hf-cache-dir=rel/cache",
        "--hf-prefetch-only",
        "--hf-manifest=out/manifest.json",
        "--hf-no-space-check",
        "--hf-max-rate-wait=0",
        "--hf-pins=rel/pins.json",
        "--hf-update-pins",
        "--hf-cache-layer=layer",
        "--hf-lock-lease=7.5",
    )
    cache = pytester.path / "rel" / "cache"
    layer = pytester.path / "layer"
    manifest = pytester.path / "out" / "manifest.json"
    pins = pytester.path / "rel" / "pins.json"
    result.stdout.fnmatch_lines(
        [
            "*OPTIONS Options(offline=False, strict=True, retries=0, lock_timeout=2.5, lock_lease=7.5, "
            f"verify='sha256', cache_dir={cache!r}, cache_layers=({layer!r},), space_check=False, max_rate_wait=0.0, "
            f"pins={pins!r}, session=None, token=None, on_auth_error='xfail', on_missing='skip', prefetch_only=True, "
            f"manifest={manifest!r}, update_pins=True,*)*"
        ]
    )


def test_ini_twins(pytester: pytest.Pytester) -> None:
    pytester.mkdir("sub")
    pytester.mkdir("ini-layer")
    pytester.makeini(
        """
        [pytest]
        hf_on_auth_error = fail
        hf_on_missing = skip
        hf_strict = true
        hf_retries = 2
        hf_lock_timeout = 30
        hf_verify = sha256
        hf_cache_dir = ini-cache
        hf_prefetch_only = true
        hf_manifest = m.json
        hf_no_space_check = true
        hf_max_rate_wait = 90
        hf_pins = ci/pins.json
        hf_update_pins = true
        hf_cache_layers = ini-layer
        hf_lock_lease = 30
        """
    )
    pytester.makeconftest(SHOW_OPTIONS)
    # Relative ini paths start from the ini file's folder, wherever pytest is started.
    result = pytester.runpytest("-s", "--rootdir", str(pytester.path), "-c", str(pytester.path / "tox.ini"))
    cache = pytester.path / "ini-cache"
    manifest = pytester.path / "m.json"
    pins = pytester.path / "ci" / "pins.json"
    layer = pytester.path / "ini-layer"
    result.stdout.fnmatch_lines(
        [
            "*OPTIONS Options(offline=False, strict=True, retries=2, lock_timeout=30.0, lock_lease=30.0, "
            f"verify='sha256', cache_dir={cache!r}, cache_layers=({layer!r},), space_check=False, max_rate_wait=90.0, "
            f"pins={pins!r}, session=None, token=None, on_auth_error='fail', on_missing='skip', prefetch_only=True, "
            f"manifest={manifest!r}, update_pins=True,*)*"
        ]
    )


def test_command_line_beats_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nhf_on_auth_error = fail\nhf_retries = 2\n")
    pytester.makeconftest(SHOW_OPTIONS)
    result = pytester.runpytest("-s", "--hf-on-auth-error=skip", "--hf-retries=7")
    result.stdout.fnmatch_lines(["*OPTIONS Options(*retries=7*on_auth_error='skip'*"])


@pytest.mark.parametrize(
    ("args", "ini", "lease"),
    [([], "", "12.0"), ([], "hf_lock_lease = 20", "20.0"), (["--hf-lock-lease=8"], "hf_lock_lease = 20", "8.0")],
    ids=["environment", "ini-beats-environment", "command-line-beats-both"],
)
def test_lock_lease_falls_back_to_the_environment(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: list[str], ini: str, lease: str
) -> None:
    monkeypatch.setenv("HFSNAPSHOT_LOCK_LEASE", "12")
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makeconftest(SHOW_OPTIONS)
    result = pytester.runpytest("-s", *args)
    result.stdout.fnmatch_lines([f"*OPTIONS Options(*lock_lease={lease},*)*"])


@pytest.mark.parametrize("value", ["3", "soon", "inf"])
def test_bad_lock_lease_in_the_environment_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("HFSNAPSHOT_LOCK_LEASE", value)
    pytester.makepyfile("def test_never(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: HFSNAPSHOT_LOCK_LEASE={value!r} is not valid: give a number of seconds >= 5 (the default is 60)."]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hf-on-auth-error=ignore"], "--hf-on-auth-error: invalid value 'ignore'; use one of: skip, xfail, fail"),
        (["--hf-on-missing=xfail"], "--hf-on-missing: invalid value 'xfail'; use one of: fail, skip"),
        (["--hf-verify=md5"], "--hf-verify: invalid value 'md5'; use one of: size, sha256"),
        (["--hf-retries=-1"], "--hf-retries: invalid value '-1'; use an integer >= 0"),
        (["--hf-retries=many"], "--hf-retries: invalid value 'many'; use an integer >= 0"),
        (["--hf-retries=1.5"], "--hf-retries: invalid value '1.5'; use an integer >= 0"),
        (["--hf-lock-timeout=0"], "--hf-lock-timeout: invalid value '0'; use a number of seconds > 0"),
        (["--hf-lock-timeout=nan"], "--hf-lock-timeout: invalid value 'nan'; use a number of seconds > 0"),
        (["--hf-lock-timeout=soon"], "--hf-lock-timeout: invalid value 'soon'; use a number of seconds > 0"),
        (["--hf-lock-lease=4"], "--hf-lock-lease: invalid value '4'; use a number of seconds >= 5"),
        (["--hf-lock-lease=nan"], "--hf-lock-lease: invalid value 'nan'; use a number of seconds >= 5"),
        (["--hf-max-rate-wait=-1"], "--hf-max-rate-wait: invalid value '-1'; use a number of seconds >= 0"),
        (["--hf-max-rate-wait=inf"], "--hf-max-rate-wait: invalid value 'inf'; use a number of seconds >= 0"),
    ],
)
def test_bad_command_line_value_is_a_usage_error(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    pytester.makepyfile("def test_never(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    result.stdout.no_fnmatch_line("*test_never*")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "hf_on_auth_error = maybe",
            "ini option hf_on_auth_error: invalid value 'maybe'; use one of: skip, xfail, fail",
        ),
        ("hf_on_missing = ignore", "ini option hf_on_missing: invalid value 'ignore'; use one of: fail, skip"),
        ("hf_verify = crc", "ini option hf_verify: invalid value 'crc'; use one of: size, sha256"),
        ("hf_retries = lots", "ini option hf_retries: invalid value 'lots'; use an integer >= 0"),
        ("hf_lock_timeout = -3", "ini option hf_lock_timeout: invalid value '-3'; use a number of seconds > 0"),
        ("hf_lock_lease = soon", "ini option hf_lock_lease: invalid value 'soon'; use a number of seconds >= 5"),
        ("hf_max_rate_wait = soon", "ini option hf_max_rate_wait: invalid value 'soon'; use a number of seconds >= 0"),
        ("hf_offline = perhaps", "ini option hf_offline: invalid truth value 'perhaps'"),
    ],
)
def test_bad_ini_value_is_a_usage_error(pytester: pytest.Pytester, line: str, message: str) -> None:
    pytester.makeini(f"[pytest]\n{line}\n")
    pytester.makepyfile("def test_never(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


def test_markers_are_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.hf_snapshot(repo_id, revision='main', allow_patterns=None, *",
            "@pytest.mark.hf_requires_token: skip the test when no Hugging Face Hub token is configured*",
        ]
    )


def test_markers_pass_strict_markers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.hf_requires_token
        def test_token():
            pass

        @pytest.mark.hf_snapshot("org/name", revision="v1")
        def test_marked():
            pass
        """
    )
    result = pytester.runpytest("--strict-markers", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*2 tests collected*"])


def test_report_header(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_SENTINEL_header_1234")
    pytester.makepyfile("def test_ok(): pass")
    cache = pytester.path / "cache"
    result = pytester.runpytest(f"--hf-cache-dir={cache}")
    result.stdout.fnmatch_lines([f"hfsnapshot: cache={cache} endpoint={hf_constants.ENDPOINT} offline=False token=set"])
    assert "hf_SENTINEL_header_1234" not in result.stdout.str()


def test_report_header_without_token_defaults_to_hub_cache(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(hf_constants, "HF_TOKEN_PATH", str(pytester.path / "no-token"))
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(pytester.path / "default-cache"))
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest()
    result.stdout.fnmatch_lines([f"hfsnapshot: cache={pytester.path / 'default-cache'} *token=unset"])


def test_offline_option_patches_and_restores(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # Children ask the session endpoint, itself offline (CONTRACT section 11); with no endpoint
    # (--hf-implicit=off) they are offline themselves.
    for implicit, children in (("report", "0"), ("off", "1")):
        # A module of its own per run: the two texts have one size, and a .pyc of the same second
        # would pass for the other's (the second run then ran the first's test).
        pytester.makepyfile(
            **{
                f"test_offline_{implicit}": f"""
            import os
            import huggingface_hub.constants as c

            def test_offline_inside():
                assert c.HF_HUB_OFFLINE is True
                assert os.environ["HF_HUB_OFFLINE"] == "{children}"
            """
            }
        )
        result = pytester.runpytest("--hf-offline", f"--hf-implicit={implicit}", f"test_offline_{implicit}.py")
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["hfsnapshot: *offline=True*"])
        assert hf_constants.HF_HUB_OFFLINE is False
        assert "HF_HUB_OFFLINE" not in os.environ


def test_offline_ini(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    pytester.makeini("[pytest]\nhf_offline = true\n")
    pytester.makepyfile(
        """
        import huggingface_hub.constants as c

        def test_offline_inside():
            assert c.HF_HUB_OFFLINE is True
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert os.environ["HF_HUB_OFFLINE"] == "0"


def test_hf_hub_offline_environment_shows_in_header(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["hfsnapshot: *offline=True*"])


def test_plugin_can_be_disabled(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("-p", "no:hfsnapshot")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("hfsnapshot:*")


KIT_AND_PLUGIN = """
def test_kit(local_hub):
    pass

def test_plugin(hf_snapshots):
    pass
"""


@pytest.mark.parametrize(
    ("args", "outcomes"),
    [
        ((), {"passed": 2}),
        (("-p", "no:hfsnapshot-testing"), {"passed": 1, "errors": 1}),
        (("-p", "no:hfsnapshot"), {"errors": 2}),
    ],
    ids=["both", "no-testing-kit", "no-plugin"],
)
def test_the_testing_kit_and_the_plugin_can_be_turned_off(
    pytester: pytest.Pytester, args: tuple[str, ...], outcomes: dict[str, int]
) -> None:
    pytester.makepyfile(KIT_AND_PLUGIN)
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    result.assert_outcomes(**outcomes)
    out = result.stdout.str()
    assert ("fixture 'local_hub' not found" in out) is (outcomes.get("errors", 0) >= 1)
    assert ("fixture 'hf_snapshots' not found" in out) is (outcomes.get("errors", 0) == 2)


def test_with_autoload_off_each_entry_point_is_asked_for_by_name(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(KIT_AND_PLUGIN)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "hfsnapshot")
    result.assert_outcomes(passed=1, errors=1)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "hfsnapshot", "-p", "hfsnapshot-testing")
    result.assert_outcomes(passed=2)


def test_hf_hub_offline_set_after_import_still_means_offline(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # huggingface_hub read HF_HUB_OFFLINE when it was imported, long before this run sets it.
    local_hub.add_repo("org/tiny", files={"config.json": "{}"})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.hf_snapshot("org/tiny")
        def test_needs_it(hf_snapshot):
            pass
        """
    )
    result = pytester.runpytest(f"--hf-cache-dir={local_hub.cache_dir}", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*offline=True*", "*offline and not fully cached*"])
    assert local_hub.requests == []
