"""The session's rate-limit gate: after a 429 that says when its window resets, nothing of the
session is sent to that endpoint until then; without a 429 it adds nothing.

Times come from the local Hub's request log (``at``, when each request arrived): the facts are
orderings of requests against the window a 429 announced.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import huggingface_hub
import pytest

from pytest_hfsnapshot import TransientError, materialize
from pytest_hfsnapshot.core.hub import gate
from pytest_hfsnapshot.testing.hub import LocalHub, ServedRequest

pytest.importorskip("xdist")

REPO = "org/limited"
CONFIG = '{"model_type": "bert"}'


def _file_requests(hub: LocalHub) -> list[ServedRequest]:
    """The requests to the Hub's file endpoint (resolve), in arrival order."""
    records = [r for r in hub.counters().records if r.origin == "hub" and not r.path.startswith("/api/")]
    return sorted(records, key=lambda r: r.at)


def test_a_429_on_a_file_head_is_not_sent_again_before_the_reset(local_hub: LocalHub) -> None:
    # One file, so one HEAD: nothing else of the call can be in flight when the 429 comes.
    local_hub.add_repo(REPO, {"config.json": CONFIG})
    local_hub.fail("*/resolve/*/config.json", 429, retry_after=2, method="HEAD")

    snap = materialize(REPO, retries=2)

    assert snap.source == "download"
    refused, *after = _file_requests(local_hub)
    assert (refused.method, refused.status) == ("HEAD", 429)
    assert after and all(r.at >= refused.at + 2 for r in after), [(r.method, r.at - refused.at) for r in after]
    assert local_hub.request_count("*/resolve/*", status=429) == 1


def test_the_window_holds_only_its_endpoint(local_hub: LocalHub) -> None:
    local_hub.add_repo(REPO, {"config.json": CONFIG})
    installed = gate.active()
    assert installed is not None  # the plugin's, for this test session
    installed.record(gate.endpoint_of(f"{local_hub.url}/org/x/resolve/main/a"), 5)

    info = huggingface_hub.HfApi().model_info(REPO)  # the API is another endpoint: not held

    assert info.sha is not None


@pytest.mark.transports("xet")
def test_a_reset_past_the_cap_fails_at_once_naming_the_limit(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo(REPO, {"config.json": CONFIG})
    local_hub.rate_limit(1, 120, pattern="*/revision/*")
    huggingface_hub.HfApi().model_info(REPO, revision="main")  # the window's only request
    pytester.makepyfile(f"def test_it(hf_snapshots):\n    hf_snapshots({REPO!r})\n")

    result = pytester.runpytest_subprocess(
        f"--hf-cache-dir={local_hub.cache_dir}", "-p", "no:cacheprovider", "--hf-max-rate-wait=5"
    )

    result.assert_outcomes(failed=1)
    result.stdout.no_fnmatch_line("*waiting 1?? s until*")
    result.stdout.fnmatch_lines(
        [
            f"*RateLimitError: The Hub rate-limited this session at {local_hub.url}/api (its limit: 1 "
            '"api" request per 120 s): its window resets in 1?? s, longer than --hf-max-rate-wait=5 s allows '
            "waiting. Run again later, raise --hf-max-rate-wait, or set HF_TOKEN (signed-in requests get higher "
            "limits).*"
        ]
    )
    assert local_hub.request_count("*/revision/*", status=429) == 1  # not sent again


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_warm_paths_send_nothing_and_a_cold_run_nothing_extra(local_hub: LocalHub) -> None:
    files = {"config.json": CONFIG, "model.safetensors": b"\x01" * 4096, "vocab.txt": "a\nb\n"}
    commit = local_hub.add_repo(REPO, files)
    assert gate.active() is not None

    materialize(REPO, revision=commit)
    cold = local_hub.requests
    local_hub.reset_counters()
    warm = materialize(REPO, revision=commit)

    assert warm.source == "cache"
    assert local_hub.requests == []
    # The gate sends nothing of its own: every request is one of the client's protocol.
    assert all(
        p.startswith(("/api/models/org/limited/", "/org/limited/resolve/", "/v", "/xorbs/", "/cdn/"))
        for _, p, _ in cold
    )


def test_summary_says_how_long_the_session_waited(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo(REPO, {"config.json": CONFIG})
    local_hub.fail("*/resolve/*/config.json", 429, retry_after=1, method="HEAD")
    pytester.makepyfile(
        f"""
        def test_it(hf_snapshots):
            assert hf_snapshots({REPO!r}).files == ("config.json",)
        """
    )
    result = pytester.runpytest_subprocess(f"--hf-cache-dir={local_hub.cache_dir}", "-p", "no:cacheprovider")

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*= hf snapshots =*", f"Hub rate limit: waited 1.?s for 1 window to reset ({local_hub.url})"]
    )
    assert not (local_hub.cache_dir / ".locks" / "hfsnapshot" / "gate").exists() or not any(
        (local_hub.cache_dir / ".locks" / "hfsnapshot" / "gate").iterdir()
    )


def test_workers_send_nothing_into_a_window_after_its_first_429(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    repos = [f"org/r{n}" for n in range(8)]
    for repo in repos:
        local_hub.add_repo(repo, {"config.json": CONFIG, **{f"f{k}.txt": f"{repo} {k}" for k in range(5)}})
    window = 3
    local_hub.rate_limit(12, window, pattern="*/resolve/*")
    pytester.makepyfile(
        "\n".join(
            f"def test_{n}(hf_snapshots):\n    assert len(hf_snapshots('org/r{n}').files) == 6\n" for n in range(8)
        )
    )
    result = pytester.runpytest_subprocess(f"--hf-cache-dir={local_hub.cache_dir}", "-p", "no:cacheprovider", "-n", "4")

    result.assert_outcomes(passed=8)
    late = into_windows(_file_requests(local_hub), window, in_flight=0.5)
    assert local_hub.request_count("*/resolve/*", status=429) >= 1
    assert late == [], late


def into_windows(records: list[ServedRequest], window: float, *, in_flight: float) -> list[tuple[str, float]]:
    """Requests that arrived in a closed window more than ``in_flight`` seconds after its first 429.

    The windows are replayed from the log the way the local Hub opens them (at the first request
    after the last one closed); a request sent before the 429 reached its process may still be
    on its way, hence the slack.
    """
    late: list[tuple[str, float]] = []
    opened, first_429 = float("-inf"), None
    for record in records:
        if record.at >= opened + window:
            opened, first_429 = record.at, None
        if first_429 is not None and record.at > first_429 + in_flight:
            late.append((record.path, round(record.at - first_429, 3)))
        if record.status == 429 and first_429 is None:
            first_429 = record.at
    return late


def test_the_gate_chains_the_users_factory_and_is_gone_after_the_session(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    local_hub.add_repo(REPO, {"config.json": CONFIG})
    pytester.makepyfile(
        test_it=f"""
        from huggingface_hub.utils import _http
        from pytest_hfsnapshot.core.hub import gate

        def test_it(hf_snapshots):
            hf_snapshots({REPO!r})
            client = _http.get_session()
            assert gate.active().before in client.event_hooks["request"]
            assert client.headers["x-mine"] == "1"  # made by the user's factory
        """
    )
    script = textwrap.dedent(
        f"""
        import sys
        import pytest
        import huggingface_hub
        from huggingface_hub.utils import _http

        def mine():
            client = _http.default_client_factory()
            client.headers["x-mine"] = "1"
            return client

        huggingface_hub.set_client_factory(mine)
        code = pytest.main(["-q", "-p", "no:cacheprovider", "--hf-cache-dir={local_hub.cache_dir}", "test_it.py"])
        assert _http._GLOBAL_CLIENT_FACTORY is mine, _http._GLOBAL_CLIENT_FACTORY
        from pytest_hfsnapshot.core.hub import gate
        assert gate.active() is None
        assert _http.get_session().event_hooks["request"] == mine().event_hooks["request"]
        print("RESTORED")
        sys.exit(code)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=pytester.path, capture_output=True, text=True, timeout=120
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "RESTORED" in done.stdout


def test_prefetch_threads_share_the_gate(tmp_path: Path, local_hub: LocalHub) -> None:
    repos = [f"org/p{n}" for n in range(4)]
    for repo in repos:
        local_hub.add_repo(repo, {"config.json": CONFIG, "vocab.txt": f"{repo}\n"})
    window = 3
    local_hub.rate_limit(3, window, pattern="*/resolve/*")
    args = [a for repo in repos for a in ("--repo", repo)]

    done = subprocess.run(
        [sys.executable, "-m", "pytest_hfsnapshot", "prefetch", *args, "--workers", "4"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert local_hub.request_count("*/resolve/*", status=429) >= 1
    assert into_windows(_file_requests(local_hub), window, in_flight=0.5) == []
    assert not any((local_hub.cache_dir / ".locks" / "hfsnapshot" / "gate").glob("*/*.json"))


def test_materialize_outside_pytest_has_a_gate_for_the_call(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        from huggingface_hub.utils import _http
        from pytest_hfsnapshot.core.hub import gate
        from pytest_hfsnapshot import TransientError, materialize
        from pytest_hfsnapshot.testing.hub import LocalHub

        before = _http._GLOBAL_CLIENT_FACTORY
        with LocalHub() as hub, hub.configure_client("cache") as cache:
            hub.add_repo("org/limited", {"config.json": "{}"})
            hub.fail("*/resolve/*/config.json", 429, retry_after=2, method="HEAD")
            materialize("org/limited")
            files = sorted((r for r in hub.counters().records if "/resolve/" in r.path), key=lambda r: r.at)
            assert files[0].status == 429 and all(r.at >= files[0].at + 2 for r in files[1:]), files
            assert not list((cache / ".locks" / "hfsnapshot" / "gate").glob("*/*.json"))
        assert gate.active() is None and _http._GLOBAL_CLIENT_FACTORY is before
        print("GATED")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "GATED" in done.stdout


# hf_xet's requests (CAS reconstructions, xorb ranges) go through its own Rust HTTP client: the
# gate's hooks never see them, nor the 429s they meet. hf_xet retries a 429 after its own backoff
# (HF_XET_CLIENT_RETRY_* settings, Retry-After ignored), then the engine retries the file after its
# own; both land inside the window the CAS closed, and no other process of the session learns of it.
XET_ESCAPES_THE_GATE = (
    "hf_xet's CAS and xorb requests bypass huggingface_hub's client, so the gate neither records the "
    "429s they meet nor holds them: hf_xet's own retries and the engine's next try land in the closed window"
)


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_nothing_reaches_a_files_bytes_inside_the_window_they_closed(
    local_hub: LocalHub, request: pytest.FixtureRequest
) -> None:
    import huggingface_hub.constants as constants

    if local_hub.xet and not constants.HF_HUB_DISABLE_XET:
        request.applymarker(pytest.mark.xfail(strict=True, reason=XET_ESCAPES_THE_GATE))
    local_hub.add_repo(REPO, {"config.json": CONFIG, "model.safetensors": bytes(range(256)) * 256})
    window = 3
    # What comes before the file's bytes is admitted, the bytes refused: over Xet the reconstruction
    # (then the xorb range is refused), over HTTP the HEAD and the resolve's 302 (then the CDN).
    admitted = 1 if local_hub.xet and not constants.HF_HUB_DISABLE_XET else 2
    local_hub.rate_limit(admitted, window, pattern="*/resolve/*/model.safetensors")

    outcome: object
    try:
        outcome = materialize(REPO, retries=8).source
    except TransientError as error:  # hf_xet gave up inside the window, and the engine does not retry it
        outcome = error

    records = sorted(
        (r for r in local_hub.counters().records if r.matches("*/resolve/*/model.safetensors")), key=lambda r: r.at
    )
    assert any(r.status == 429 for r in records)
    # One file: its requests go one after another, so none was in flight when the 429 came.
    assert into_windows(records, window, in_flight=0) == []
    assert outcome == "download"


def test_materialize_words_the_cap_as_its_keyword_and_carries_it(tmp_path: Path) -> None:
    # In a process of its own: inside this test session the session's gate (and its cap) would serve.
    script = textwrap.dedent(
        """
        import huggingface_hub
        from pytest_hfsnapshot import RateLimitError, materialize
        from pytest_hfsnapshot.testing.hub import LocalHub

        with LocalHub() as hub, hub.configure_client("cache"):
            hub.add_repo("org/limited", {"config.json": "{}"})
            hub.rate_limit(1, 120, pattern="*/revision/*")
            huggingface_hub.HfApi().model_info("org/limited", revision="main")  # the window's only request
            try:
                materialize("org/limited", max_rate_wait=5)
            except RateLimitError as error:
                assert (error.setting, error.limit, error.cap) == ("max_rate_wait", 5, 5), vars(error)
                print(error)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "longer than max_rate_wait=5 s allows waiting. Run again later, raise max_rate_wait=," in done.stdout


def test_prefetch_takes_the_cap_as_its_own_flag(tmp_path: Path, local_hub: LocalHub) -> None:
    local_hub.add_repo(REPO, {"config.json": CONFIG})
    local_hub.rate_limit(1, 120, pattern="*/revision/*")
    huggingface_hub.HfApi().model_info(REPO, revision="main")

    done = subprocess.run(
        [sys.executable, "-m", "pytest_hfsnapshot", "prefetch", "--repo", REPO, "--max-rate-wait", "5"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 1, done.stdout + done.stderr
    assert "longer than --max-rate-wait=5 s allows waiting. Run again later, raise --max-rate-wait," in done.stdout
    assert local_hub.request_count("*/revision/*", status=429) == 1
