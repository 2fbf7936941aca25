"""The transfer paths real users have, and the one switch between them.

- ``xet``: hf_xet downloads into huggingface_hub's shared blob store (the default on the Hub);
- ``xet-noshare``: hf_xet with ``HF_HUB_DISABLE_SHARED_BLOBS=1`` (repo-local blobs);
- ``http``: plain HTTP via the CDN origin (``HF_HUB_DISABLE_XET=1``).

A test that uses ``local_hub`` runs once, on ``xet`` (what real users get), unless it names its
transports with the ``transports`` marker, on the test or for a whole module::

    @pytest.mark.transports("xet", "xet-noshare", "http")   # one run per transport
    def test_a_truncated_blob_is_repaired(local_hub): ...

    pytestmark = pytest.mark.transports("xet", "xet-noshare", "http")   # every test of the module

A test opts in when its behaviour depends on the path the bytes take: it downloads and checks
files, blobs, links or the shared store, hashes or repairs them, puts faults on file bodies, or
kills or races processes mid-transfer. A test of what happens before any byte moves (a 403, a 401,
bad input, options, messages, summaries) runs once. A narrower list (``transports("http")``) pins
a test to the paths it is about; inside an opted-in module, ``transports("xet")`` on a test runs
it once. ``pytest --one-transport`` runs every test once, on the first transport it names (the
suite on another interpreter: the transfer code is huggingface_hub's and hf_xet's).

The switch is made the way a user makes it: through huggingface_hub's ``constants`` (read at
call time) for this process and the environment for children (xdist workers, subprocesses).
"""

from __future__ import annotations

import inspect
import os
import subprocess
from pathlib import Path

import pytest

# The whole core, imported by the outer session before any pytester run: an inline run drops the
# modules it imported from sys.modules, but a submodule stays reachable as an attribute of its
# package (`from pytest_hfsnapshot import retry`), so a later run would mix that old module, and
# the huggingface_hub error classes it holds, with freshly imported ones.
import pytest_hfsnapshot.core.engine.engine
import pytest_hfsnapshot.core.engine.prefetch
import pytest_hfsnapshot.core.hub.refusals  # noqa: F401
from pytest_hfsnapshot.testing.hub import LocalHub

TRANSPORTS = ("xet", "xet-noshare", "http")
DEFAULT_TRANSPORT = "xet"
# hf_xet retries a failed CAS request itself, 5 times with a backoff that starts at seconds (a
# 5xx storm costs it minutes). Fault tests keep every request and shrink only the waits, as the
# ``client_clock`` fixture does for huggingface_hub's own backoff. Read when hf_xet starts.
XET_FAST_RETRIES = {"HF_XET_CLIENT_RETRY_BASE_DELAY": "10ms"}
os.environ.update(XET_FAST_RETRIES)
_SWITCHES = {
    "xet": {"HF_HUB_DISABLE_XET": False, "HF_HUB_DISABLE_SHARED_BLOBS": False},
    "xet-noshare": {"HF_HUB_DISABLE_XET": False, "HF_HUB_DISABLE_SHARED_BLOBS": True},
    "http": {"HF_HUB_DISABLE_XET": True, "HF_HUB_DISABLE_SHARED_BLOBS": False},
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--one-transport",
        action="store_true",
        help="run each local_hub test once, on the first transport its transports marker names "
        "(tox's py310 and py313: the transfer code is huggingface_hub's and hf_xet's, not the interpreter's)",
    )
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast tier (tox -e fast): leave out the tests marked slow, and fail a test that starts a "
        "process anyway (it belongs in SLOW_TESTS)",
    )
    parser.addoption(
        "--tier",
        choices=sorted(TIERS),
        help="run only the tests an env of tox's env_list other than py repeats (floor: hub-min; python: "
        "py310 and py313); TIERS in tests/conftest.py says what each keeps and why",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "transports(*names): run this local_hub test on each of these transfer paths (default: xet once)"
    )
    config.addinivalue_line(
        "markers",
        "slow: needs a subprocess, a whole pytest session, a lease wait or a mount; "
        "left out of the fast tier (tox -e fast, pytest -m 'not slow')",
    )


#: Fixtures that start processes or whole pytest sessions, wait out leases or mount filesystems.
SLOW_FIXTURES = frozenset(
    {
        "pytester",  # a pytest session per run, often with xdist workers or in a subprocess
        "children",  # reliability: worker processes racing for one cache
        "other_host",  # a process that sees another host name (unshare)
        "two_hosts",
        "moto_server",  # fleet: an S3 server, rclone and FUSE mounts
        "rclone",
        "rclone_mount",
        "read_only_bind",
    }
)
#: Test modules (paths under tests/) whose every test starts processes, waits leases or mounts.
SLOW_MODULES = (
    "fleet/",
    "peers/",
    "endpoint/",
    "reliability/test_kill.py",
    "reliability/test_concurrency.py",
    "reliability/test_lease.py",
    "reliability/test_locks.py",
    "test_demo.py",
    "test_docs.py",
)
#: The other tests that start a process (the command line, a fresh interpreter, a dead holder's
#: pid, a small filesystem) or wait out a lease or a rate-limit window. ``--fast`` fails a test
#: that starts a process and is not named here or caught above.
SLOW_TESTS = {
    "core/test_cli.py": {
        "test_prefetch_repos_fails_for_a_repo_the_hub_does_not_show",
        "test_prefetch_repos_failures",
        "test_prefetch_repos_without_pytest",
        "test_prefetch_repos_works_where_pytest_cannot_be_imported",
        "test_python_m_help_in_a_fresh_interpreter",
    },
    "core/test_disk.py": {
        "test_a_disk_that_fills_during_the_transfer",
        "test_a_file_of_the_shared_store_does_not_count",
        "test_a_prefetch_that_cannot_fit_transfers_nothing",
        "test_a_read_only_cache",
        "test_a_repo_that_cannot_fit_fails_before_any_transfer",
        "test_a_snapshot_that_fits_is_fetched_with_the_check_on",
        "test_files_already_cached_do_not_count",
        "test_prefetch_only_checks_the_set_and_the_option_turns_it_off",
        "test_the_summary_says_a_full_disk_once_for_every_snapshot",
        "test_with_the_check_off_a_prefetch_fails_plainly_one_line_per_cause",
        "test_with_the_check_off_the_transfer_starts_and_fails_plainly",
    },
    "core/test_doctor.py": {
        "test_another_hosts_lease_is_stale_only_once_unrenewed_past_its_length",
        "test_every_half_written_state_is_reported_under_its_own_kind_then_repaired",
    },
    "core/test_hf_compat.py": {"test_http_client_loaded_tells_whether_the_http_layer_is_imported"},
    "core/test_layers.py": {"test_a_read_only_bind_mount_is_served_and_never_written"},
    "core/test_materialize.py": {"test_branch_resolution_is_shared_by_a_session_across_processes"},
    "core/test_pins.py": {
        "test_pins_check_and_update",
        "test_pins_commands_on_a_malformed_file_exit_2",
        "test_pins_commands_retry_and_wait_out_a_rate_limit",
        "test_pins_commands_with_the_hub_unreachable_exit_2",
        "test_pins_commands_work_where_pytest_cannot_be_imported",
        "test_pins_help",
        "test_pins_update_never_writes_the_token",
    },
    "core/test_rate_limit.py": {
        "test_a_429_on_a_file_head_is_not_sent_again_before_the_reset",
        "test_materialize_outside_pytest_has_a_gate_for_the_call",
        "test_materialize_words_the_cap_as_its_keyword_and_carries_it",
        "test_prefetch_takes_the_cap_as_its_own_flag",
        "test_prefetch_threads_share_the_gate",
    },
    "core/test_xet_settings.py": {"test_the_engines_xet_transfers_run_with_the_bounded_buffer"},
    "kit/test_half_written.py": {
        "test_stale_lock_dead_holder_on_this_host_is_taken_over_at_once",
        "test_stale_lock_leaves_the_holder_record_a_real_holder_writes",
        "test_stale_lock_never_blocks_the_kernel_lock",
        "test_stale_lock_other_host_is_taken_over_once_its_lease_runs_out",
        "test_stale_lock_other_host_is_waited_for_then_named",
        "test_stale_lock_state",
    },
    "kit/test_hub.py": {
        "test_429_retry_after_is_honoured",
        "test_a_persistent_cas_failure_surfaces_with_no_http_fallback",
        "test_child_processes_reach_the_hub_through_the_environment",
        "test_short_lived_cas_tokens_are_refreshed_and_an_expired_one_is_refused",
    },
    "kit/test_serve.py": {
        "test_a_whole_session_with_xdist_workers_runs_against_it",
        "test_bad_folders_are_clear_errors",
        "test_port_and_no_xet",
        "test_serve_prints_the_exports_then_one_line_per_repo",
    },
    "plugin/test_pins.py": {"test_the_pins_update_workflow_checks_updates_and_describes_the_pull_request"},
    "test_layering.py": {
        "test_every_core_module_imports_where_pytest_cannot_be",
        "test_plugin_start_up_imports_no_http_stack",
    },
}


#: What the envs of tox's env_list other than py repeat (``--tier``); py runs every test. A tier keeps
#: the tests whose outcome the env's difference can change; what it leaves out runs in py, and the
#: package code those tests drive runs in the tier too (docs/contributing.md, "Which tests to run").
#: - ``floor`` (hub-min: huggingface_hub, filelock, pytest and pytest-xdist at their floors): the
#:   folders that drive them, each test on its transports: the download path (core/), the kit's
#:   Hub answering the floor's client (kit/), kills, locks and leases (reliability/), the plugin in
#:   pytest and xdist sessions (plugin/), and the session endpoint children reach (endpoint/). Left
#:   out: fleet/ (what storage does under the cache: rclone, FUSE, S3, binds, other hosts), peers/
#:   (which calls transformers makes) and the top level's docs, demo, prose and import-order checks.
#: - ``python`` (py310, py313: another interpreter under the same code): the fast tier (every test
#:   that runs our code in its own process), and where the fast tier cannot reach, the pytest layer
#:   in sessions (plugin/) and each module imported in a fresh interpreter (test_layering.py). Left
#:   out: the other slow tests, whose subject is what other processes, the kernel, storage or
#:   transformers do (kills, leases, locks across processes, full disks, mounts, peers/, the docs'
#:   and demo's sessions), on top of code the fast tier runs.
TIERS = {
    "floor": ("core/", "kit/", "reliability/", "plugin/", "endpoint/"),
    "python": ("plugin/", "test_layering.py"),
}


def _where(path: Path) -> str:
    """``path`` relative to tests/, as SLOW_MODULES and TIERS name it ("" for tests/ itself and outside it)."""
    tests = Path(__file__).parent
    return path.relative_to(tests).as_posix() if path.is_relative_to(tests) and path != tests else ""


def _under(where: str, places: tuple[str, ...]) -> bool:
    """Whether ``where`` is one of ``places`` or inside one (a folder's name ends with "/")."""
    return any(where == place.rstrip("/") or (place.endswith("/") and where.startswith(place)) for place in places)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``--tier``, the modules and folders the tier leaves out whole are not collected at all."""
    tier = config.getoption("tier")
    where = _where(collection_path)
    if tier is None or not where:
        return None
    kept = TIERS[tier]
    if tier == "python":
        return True if _under(where, SLOW_MODULES) and not _under(where, kept) else None
    holds_kept = any(place.startswith(f"{where}/") for place in kept)
    return None if _under(where, kept) or holds_kept or where == "conftest.py" else True


def is_slow(item: pytest.Item) -> bool:
    where = _where(item.path)
    name = item.originalname if isinstance(item, pytest.Function) else item.name
    return (
        bool(SLOW_FIXTURES.intersection(item.fixturenames))
        or where.startswith(SLOW_MODULES)
        or name in SLOW_TESTS.get(where, ())
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests the fast tier leaves out (docs/contributing.md, "Which tests to run"); ``--fast`` drops them,
    ``--tier python`` those outside the places it keeps whole."""
    slow = [item for item in items if is_slow(item)]
    for item in slow:
        item.add_marker(pytest.mark.slow)
    if config.getoption("tier") == "python":
        # The slow tests outside the folders the tier keeps whole.
        slow = [item for item in slow if not _under(_where(item.path), TIERS["python"])]
    elif not config.getoption("fast"):
        return
    if slow:
        dropped = set(slow)
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item not in dropped]


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_process(request: pytest.FixtureRequest) -> None:
    """Under ``--fast``, a test that starts a process fails, naming where to list it."""
    if not request.config.getoption("fast"):
        return
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError(
            f"{request.node.nodeid} starts a process: name it in SLOW_TESTS in tests/conftest.py "
            "(the fast tier starts none)"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refused)
    monkeypatch.setattr(os, "fork", refused)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "transport" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("transports")
    if marker is None:
        if "transport" in inspect.signature(metafunc.function).parameters:
            # A test that branches on the transport and runs on one of them tests less than it says.
            raise ValueError(
                f"{metafunc.definition.nodeid} asks for `transport` but names none: mark it "
                '@pytest.mark.transports("xet", "xet-noshare", "http") (or the ones it is about)'
            )
        return  # one run, on the ``transport`` fixture's default
    names = marker.args
    if not names:
        raise ValueError(f"transports() needs at least one of {TRANSPORTS}")
    unknown = set(names) - set(TRANSPORTS)
    if unknown:
        raise ValueError(f"unknown transports {sorted(unknown)}: use {TRANSPORTS}")
    if metafunc.config.getoption("one_transport"):
        names = names[:1]
    metafunc.parametrize("transport", names, indirect=True)


def raised_from(outer: BaseException, inner: BaseException) -> BaseException:
    """``outer`` as raised ``from inner`` (how libraries such as transformers wrap the Hub's errors)."""
    try:
        try:
            raise inner
        except BaseException as error:
            raise outer from error
    except BaseException as caught:
        return caught


def xet_in_use(hub: LocalHub) -> bool:
    """Whether the client downloads the hub's LFS files through hf_xet in this test."""
    import huggingface_hub.constants as constants

    return hub.xet and not constants.HF_HUB_DISABLE_XET


def file_fetches(hub: LocalHub, resolve_path: str) -> int:
    """How many times one repo file's bytes were fetched, whichever way the client took.

    A file body is a 200 answer to a GET: on ``resolve`` itself (small files), on the CDN
    (plain HTTP), or a Xet reconstruction; the local Hub matches the last two as that file's
    ``resolve`` path. Redirects (302) and xorb ranges (206) are parts of one fetch.
    """
    return hub.request_count(resolve_path, method="GET", status=200)


def file_byte_bodies(hub: LocalHub, resolve_path: str) -> int:
    """How many answers carried some of one repo file's bytes (GET, 200 or 206), cut ones included.

    A small file's bytes come from ``resolve`` itself, an LFS file's from the CDN (plain HTTP) or
    from xorb ranges (Xet, matched as the file's ``resolve`` path); a Xet reconstruction says
    where they are and carries none of them.
    """
    return sum(
        1
        for r in hub.counters().records
        if r.matches(resolve_path)
        and r.method == "GET"
        and r.status in (200, 206)
        and "/reconstructions/" not in r.path
    )


@pytest.fixture
def transport(request: pytest.FixtureRequest) -> str:
    """The transfer path of this test run: ``xet`` unless the ``transports`` marker says otherwise."""
    return str(getattr(request, "param", DEFAULT_TRANSPORT))


@pytest.fixture
def local_hub(local_hub: LocalHub, transport: str, monkeypatch: pytest.MonkeyPatch) -> LocalHub:
    import huggingface_hub.constants as constants

    for name, value in _SWITCHES[transport].items():
        if hasattr(constants, name):
            monkeypatch.setattr(constants, name, value)
        monkeypatch.setenv(name, "1" if value else "0")
    return local_hub
