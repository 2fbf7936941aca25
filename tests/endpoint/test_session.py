"""CONTRACT section 11 in whole pytest sessions: suites whose tests start processes that load by repo id.

Each suite here is a user's: its tests start children with ``subprocess`` (a server-like script, a
plain HTTP client, a child of a child, a ``multiprocessing`` spawn worker, replicas started at
once), and the children know nothing of the plugin but the ``HF_ENDPOINT`` they inherit.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import pytest

from pytest_hfsnapshot.endpoint.replies import NO_SECRET
from pytest_hfsnapshot.plugin.implicit import offline_miss_line
from pytest_hfsnapshot.testing.half_written import corrupted_blob
from pytest_hfsnapshot.testing.hub import LocalHub

pytest.importorskip("transformers")

WEIGHTS = hashlib.sha256(b"weights").digest() * 32768  # 1 MiB: an early cut costs little of it
FILES = {
    "config.json": '{"model_type": "bert", "hidden_size": 8}',
    "tokenizer.json": "{}",
    "model.safetensors": WEIGHTS,
}
TIMEOUT = 300

#: The suite's helpers: each child prints ``<path> <sha256>`` for what it loaded.
HELPERS = '''
import hashlib, json, os, subprocess, sys

LOAD = """
import hashlib, sys
from huggingface_hub import hf_hub_download
for name in sys.argv[2:]:
    print(name, hashlib.sha256(open(hf_hub_download(sys.argv[1], name), "rb").read()).hexdigest())
"""


def run(code, *args):
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def replicas(n, repo, *names):
    """``n`` children loading at once, as a server's replicas do."""
    return at_once(*[[repo, *names]] * n)


def at_once(*loads):
    """One child per load (a repo id, then its files), all started at once."""
    started = [subprocess.Popen([sys.executable, "-c", LOAD, *x], stdout=subprocess.PIPE, text=True) for x in loads]
    outputs = [child.communicate(timeout=240)[0].split() for child in started]
    assert [child.returncode for child in started] == [0] * len(loads)
    return outputs
'''


def digest(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def suite(pytester: pytest.Pytester, tests: str) -> None:
    """A user's test module (``tests``) with the helpers above, and ``printed`` for what children print."""
    digests = {name: digest(content) for name, content in FILES.items()}
    printed = "def printed(*names):\n    return [word for name in names for word in (name, DIGESTS[name])]\n"
    helpers = f"{HELPERS}\nDIGESTS = {digests!r}\n\n{printed}"
    pytester.makepyfile(helpers=helpers, test_server=f"from helpers import *\n{tests}")


def run(pytester: pytest.Pytester, hub: LocalHub, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        f"--hf-cache-dir={hub.cache_dir}", "-p", "no:cacheprovider", "-rfE", *args, timeout=TIMEOUT
    )


def implicit_rows(output: str) -> dict[str, str]:
    """The ``hf implicit`` section's rows by snapshot label (``org/name@main``)."""
    lines = output.splitlines()
    at = next((i for i, line in enumerate(lines) if re.fullmatch(r"=+ hf implicit =+", line)), None)
    assert at is not None, output
    rows = {}
    for line in lines[at + 1 :]:
        if line.startswith(("=", "hfsnapshot:")):
            break
        rows[line.split()[0]] = line
    return rows


def file_bytes_ratio(hub: LocalHub, sizes: dict[str, int]) -> float:
    """Body bytes that carried the files (cut ones included) over their sizes; ``sizes`` by resolve path."""
    sent = 0
    for record in hub.counters().records:
        names = [name for name in (record.path, *record.aliases) if name in sizes]
        if names and record.method == "GET" and record.status in (200, 206) and "/reconstructions/" not in record.path:
            sent += record.body_bytes
    return sent / sum(sizes.values())


def weights_past_faults(hub: LocalHub, repo: str) -> dict[str, int]:
    """``repo`` with :data:`FILES`, its weights behind two 503s and a cut body; the sizes of what its
    children load (all but ``tokenizer.json``), by resolve path, for :func:`file_bytes_ratio`."""
    commit = hub.add_repo(repo, FILES)
    weights = f"*/{repo}/resolve/*/model.safetensors"
    hub.fail(weights, 503, times=2)
    hub.cut(weights, 4096)
    loaded = [name for name in FILES if name != "tokenizer.json"]
    return {f"/{repo}/resolve/{commit}/{name}": len(digest_source(FILES[name])) for name in loaded}


def prefetched(pytester: pytest.Pytester, hub: LocalHub, pins: Path) -> Path:
    """A cache as a CI job starts from: the pin file's snapshots prefetched into a new folder. The hub's
    counters are reset after."""
    assert hub.cache_dir is not None
    cold = hub.cache_dir.parent / "ci-cache"
    prefetch = pytester.runpytest_subprocess(
        f"--hf-cache-dir={cold}", f"--hf-pins={pins}", "--hf-prefetch-only", "-p", "no:cacheprovider", timeout=TIMEOUT
    )
    assert prefetch.ret == 0, prefetch.stdout.str()
    hub.reset_counters()
    return cold


def run_offline(pytester: pytest.Pytester, cache: Path, pins: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        f"--hf-cache-dir={cache}",
        f"--hf-pins={pins}",
        "--hf-offline",
        "-p",
        "no:cacheprovider",
        "-rfE",
        *args,
        timeout=TIMEOUT,
    )


def pinned(path: Path, entries: Iterable[dict[str, object]]) -> Path:
    path.write_text(json.dumps(list(entries), indent=2) + "\n")
    return path


# --- report: every kind of child, recorded under the test that started it -------------------------

CLIENTS = '''
import multiprocessing

def test_hf_hub_download():
    names = ["config.json", "model.safetensors"]
    assert run(LOAD, "org/hf", *names) == printed(*names)

def test_snapshot_download():
    code = """
import hashlib, os
from huggingface_hub import snapshot_download
folder = snapshot_download("org/snap")
for name in sorted(os.listdir(folder)):
    print(name, hashlib.sha256(open(os.path.join(folder, name), "rb").read()).hexdigest())
"""
    assert run(code) == printed(*sorted(DIGESTS))

def test_transformers_config():
    code = "from transformers import AutoConfig; print(AutoConfig.from_pretrained('org/auto').hidden_size)"
    assert run(code) == ["8"]

def test_plain_http_client():
    code = """
import hashlib, os, urllib.request
url = os.environ["HF_ENDPOINT"] + "/org/plain/resolve/main/config.json"
print("config.json", hashlib.sha256(urllib.request.urlopen(url).read()).hexdigest())
"""
    assert run(code) == printed("config.json")

def test_child_of_a_child():
    code = "import subprocess, sys; subprocess.run([sys.executable, '-c', sys.argv[1], 'org/nested', 'config.json'])"
    assert run(code, LOAD) == printed("config.json")

def test_spawn_worker():
    assert run("import worker; worker.main()") == printed("config.json")
'''

WORKER = """
import hashlib, multiprocessing

def load(name):
    from huggingface_hub import hf_hub_download
    return hashlib.sha256(open(hf_hub_download("org/spawned", name), "rb").read()).hexdigest()

def main():
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        print("config.json", pool.apply(load, ("config.json",)))
"""


def test_report_records_each_childs_loads_under_the_test_that_started_it(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    repos = ("org/hf", "org/snap", "org/auto", "org/plain", "org/nested", "org/spawned")
    commits = {repo: local_hub.add_repo(repo, FILES) for repo in repos}
    suite(pytester, CLIENTS)
    pytester.makepyfile(worker=WORKER)
    pins = pytester.path / "pins.json"

    result = run(pytester, local_hub, f"--hf-pins={pins}", "--hf-update-pins")

    result.assert_outcomes(passed=6)
    rows = implicit_rows(result.stdout.str())
    started_by = {
        "org/hf": "test_hf_hub_download",
        "org/snap": "test_snapshot_download",
        "org/auto": "test_transformers_config",
        "org/plain": "test_plain_http_client",
        "org/nested": "test_child_of_a_child",
        "org/spawned": "test_spawn_worker",
    }
    for repo, test in started_by.items():
        row = rows.get(f"{repo}@main", "")
        assert row.startswith(f"{repo}@main {commits[repo][:12]} "), (repo, row)
        assert row.endswith(f" 1 test (first: test_server.py::{test})"), (repo, row)
    assert " 3 files " in rows["org/snap@main"] and " 2 files 1.0 MiB fetched " in rows["org/hf@main"]
    recorded = {entry["repo_id"]: entry for entry in json.loads(pins.read_text())}
    assert recorded["org/hf"]["files"] == ["config.json", "model.safetensors"]
    assert recorded["org/snap"]["files"] == sorted(FILES)
    assert recorded["org/plain"]["files"] == ["config.json"]
    assert "config.json" in recorded["org/auto"]["files"]
    assert {repo: recorded[repo]["commit"] for repo in repos} == commits


def digest_source(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


# --- start-up: huggingface_hub is paid for when a test loads it -----------------------------------


def test_the_hooks_go_on_huggingface_hub_when_a_test_first_imports_it(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    local_hub.add_repo("org/late", FILES)
    # huggingface_hub does not retry a HEAD's 503: the test passes only if manage's hooks are on.
    local_hub.fail("*/org/late/resolve/*/config.json", 503, times=1)
    pytester.makepyfile(
        test_late="""
import sys

HEAVY = ("huggingface_hub.file_download", "huggingface_hub.errors", "httpx", "httpx2", "filelock", "http.server")

def test_before():
    assert [name for name in HEAVY if name in sys.modules] == []

def test_late():
    from huggingface_hub import hf_hub_download
    assert open(hf_hub_download("org/late", "config.json")).read().startswith("{")
"""
    )

    result = run(pytester, local_hub, "--hf-implicit=manage")

    result.assert_outcomes(passed=2)
    assert local_hub.pending_faults() == []
    assert implicit_rows(result.stdout.str())["org/late@main"].endswith("(first: test_late.py::test_late)")


def test_a_childs_import_of_the_download_module_warms_the_session_up_before_it_asks(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    pytester.makepyfile(
        test_warm="""
import subprocess, sys, time

LOADED = ("huggingface_hub.file_download", "pytest_hfsnapshot.core.engine.engine")

def test_warm():
    assert [name for name in LOADED if name in sys.modules] == []
    subprocess.run([sys.executable, "-c", "import huggingface_hub.file_download"], check=True, timeout=120)
    deadline = time.monotonic() + 120  # the child never waits for the endpoint's answer
    while not all(name in sys.modules for name in LOADED) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [name for name in LOADED if name not in sys.modules] == []
"""
    )

    result = run(pytester, local_hub, "--hf-implicit=manage")

    result.assert_outcomes(passed=1)
    assert local_hub.requests == [], "a warm-up sends nothing to the Hub"


# --- manage: faults in the way of three replicas ------------------------------------------------


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_manage_three_replicas_past_a_503_and_a_cut_fetch_the_weights_once(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    sizes = weights_past_faults(local_hub, "org/served")
    suite(
        pytester,
        """
def test_replicas():
    loaded = replicas(3, "org/served", "config.json", "model.safetensors")
    assert loaded == [printed("config.json", "model.safetensors")] * 3
""",
    )

    result = run(pytester, local_hub, "--hf-implicit=manage")

    result.assert_outcomes(passed=1)
    assert local_hub.pending_faults() == []
    assert file_bytes_ratio(local_hub, sizes) <= 1.01


def test_after_a_429_no_process_sends_until_the_window_ends(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    for repo in ("org/a", "org/b", "org/c"):
        local_hub.add_repo(repo, FILES)
    local_hub.fail("/org/a/resolve/*/config.json", 429, retry_after=3)
    assert local_hub.cache_dir is not None
    windows = local_hub.cache_dir / ".locks" / "hfsnapshot" / "gate"
    suite(
        pytester,
        f"""
import glob, time

def test_replicas():
    first = subprocess.Popen([sys.executable, "-c", LOAD, "org/a", "config.json"], stdout=subprocess.PIPE, text=True)
    while not glob.glob({str(windows)!r} + "/*/*.json"):  # the session's gate has met the 429
        assert first.poll() is None, "the first replica ended before the 429 closed the window"
        time.sleep(0.01)
    others = at_once(["org/b", "config.json"], ["org/c", "config.json"])
    assert [first.communicate(timeout=240)[0].split(), *others] == [printed("config.json")] * 3
""",
    )

    run(pytester, local_hub, "--hf-implicit=manage").assert_outcomes(passed=1)

    # The gate keeps the Hub's API apart from its files (separate quotas): the window is the files'.
    records = [r for r in local_hub.counters().records if r.origin == "hub" and not r.path.startswith("/api/")]
    limited = next(r for r in records if r.status == 429)
    during = [r for r in records if limited.at < r.at < limited.at + 2.9]
    assert during == [], "a request reached the Hub inside the rate-limit window"
    assert {r.path.split("/")[2] for r in records if r.at >= limited.at + 2.9} == {"a", "b", "c"}


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_manage_repairs_a_flipped_byte_before_the_child_reads_it(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    from huggingface_hub import hf_hub_download

    local_hub.add_repo("org/served", FILES)
    hf_hub_download("org/served", "model.safetensors")
    assert local_hub.cache_dir is not None
    corrupted_blob(local_hub.cache_dir, "org/served", "model.safetensors")
    suite(
        pytester,
        """
def test_server():
    assert run(LOAD, "org/served", "model.safetensors") == printed("model.safetensors")
""",
    )

    run(pytester, local_hub, "--hf-implicit=manage", "--hf-verify=sha256").assert_outcomes(passed=1)


def test_a_pinned_branch_is_never_asked_for_and_the_child_gets_the_pinned_commit(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    old = local_hub.add_repo("org/served", FILES)
    moved = {**FILES, "config.json": '{"model_type": "gpt2", "hidden_size": 4}'}
    local_hub.add_repo("org/served", moved)
    pins = pinned(
        pytester.path / "pins.json",
        [{"repo_id": "org/served", "repo_type": "model", "revision": "main", "commit": old}],
    )
    suite(
        pytester,
        """
def test_server():
    assert run(LOAD, "org/served", "config.json") == printed("config.json")

def test_transformers_config():
    code = "from transformers import AutoConfig; print(AutoConfig.from_pretrained('org/served').hidden_size)"
    assert run(code) == ["8"]
""",
    )

    run(pytester, local_hub, "--hf-implicit=manage", f"--hf-pins={pins}").assert_outcomes(passed=2)

    assert [path for _, path, _ in local_hub.requests if "/main" in path] == []


# --- loads by commit that the cache answers: no request reaches the endpoint ----------------------

#: transformers' way: the first file resolves ``main``, the rest are loaded by the commit it named.
BY_COMMIT = '''
def test_server():
    code = """
import hashlib, os, sys
from huggingface_hub import hf_hub_download
commit = os.path.basename(os.path.dirname(hf_hub_download("org/warm", "config.json")))
for name in sys.argv[1:]:
    print(name, hashlib.sha256(open(hf_hub_download("org/warm", name, revision=commit), "rb").read()).hexdigest())
"""
    assert run(code, "tokenizer.json", "model.safetensors") == printed("tokenizer.json", "model.safetensors")

def test_transformers_config():
    # transformers resolves main once, then reads the commit's files with try_to_load_from_cache
    code = "from transformers import AutoConfig; print(AutoConfig.from_pretrained('org/warm-auto').hidden_size)"
    assert run(code) == ["8"]
'''


def warm(hub: LocalHub, repo: str) -> str:
    """``repo``'s files in the hub's cache, loaded as a user's earlier run left them; its commit."""
    from huggingface_hub import hf_hub_download

    commit = hub.add_repo(repo, FILES)
    for name in FILES:
        hf_hub_download(repo, name)
    return commit


def test_a_childs_load_by_commit_that_the_cache_answers_is_recorded_under_its_test(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    commits = {repo: warm(local_hub, repo) for repo in ("org/warm", "org/warm-auto")}
    suite(pytester, BY_COMMIT)
    pins = pytester.path / "pins.json"
    local_hub.reset_counters()

    result = run(pytester, local_hub, f"--hf-pins={pins}", "--hf-update-pins")

    result.assert_outcomes(passed=2)
    assert [path for _, path, _ in local_hub.requests if "/resolve/" in path and "/config.json" not in path] == []
    assert [path for _, path, _ in local_hub.requests if "warm-auto/resolve/" in path] == []
    rows = implicit_rows(result.stdout.str())
    assert rows["org/warm@main"].endswith(" 1 test (first: test_server.py::test_server)")
    assert rows["org/warm-auto@main"].endswith(" 1 test (first: test_server.py::test_transformers_config)")
    recorded = {entry["repo_id"]: entry for entry in json.loads(pins.read_text())}
    assert {repo: entry["commit"] for repo, entry in recorded.items()} == commits
    assert recorded["org/warm"]["files"] == sorted(FILES)
    assert recorded["org/warm-auto"]["files"] == ["config.json"]


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_manage_repairs_a_flipped_byte_in_a_file_a_child_loads_by_commit_from_the_cache(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    warm(local_hub, "org/warm")
    warm(local_hub, "org/warm-auto")
    assert local_hub.cache_dir is not None
    corrupted_blob(local_hub.cache_dir, "org/warm", "model.safetensors")
    suite(pytester, BY_COMMIT)

    run(pytester, local_hub, "--hf-implicit=manage", "--hf-verify=sha256").assert_outcomes(passed=2)


# --- offline, fail ---------------------------------------------------------------------------------


def test_offline_after_a_prefetch_sends_nothing_and_a_miss_names_the_command(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    local_hub.add_repo("org/served", FILES)
    suite(
        pytester,
        """
def test_server():
    names = ["config.json", "model.safetensors"]
    assert run(LOAD, "org/served", *names) == printed(*names)

def test_tokenizer():
    assert run(LOAD, "org/served", "tokenizer.json") == printed("tokenizer.json")
""",
    )
    pins = pytester.path / "pins.json"
    run(pytester, local_hub, f"--hf-pins={pins}", "--hf-update-pins", "test_server.py::test_server").assert_outcomes(
        passed=1
    )
    cold = prefetched(pytester, local_hub, pins)

    offline = run_offline(pytester, cold, pins)

    offline.assert_outcomes(passed=1, failed=1)
    assert local_hub.requests == []
    hint = offline_miss_line("org/served@main", "tokenizer.json", pins)
    assert hint in offline.stdout.str()
    assert "LocalEntryNotFoundError" in offline.stdout.str()


def test_fail_fails_the_test_whose_child_made_an_unlisted_use(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/served", FILES)
    suite(
        pytester,
        """
def test_server():
    assert run(LOAD, "org/served", "config.json") == printed("config.json")

def test_nothing():
    pass
""",
    )
    pins = pinned(pytester.path / "pins.json", [])

    result = run(pytester, local_hub, "--hf-implicit=fail", f"--hf-pins={pins}")

    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_server.py::test_server loaded org/served@main from the Hub by repo id*"])


# --- security -----------------------------------------------------------------------------------


def test_the_secret_the_gated_file_and_the_token_in_a_session(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_hub.add_repo("org/gated", FILES, gated=True)
    monkeypatch.setenv("HF_TOKEN", local_hub.token)
    suite(
        pytester,
        """
import urllib.error, urllib.request

def test_granted():
    assert run(LOAD, "org/gated", "config.json") == printed("config.json")

def test_no_token():
    # With a cache of its own: huggingface_hub returns a file its own cache holds whatever the Hub answers.
    env = {name: value for name, value in os.environ.items() if name != "HF_TOKEN"}
    env["HF_HUB_CACHE"] = os.path.abspath("own-cache")
    done = subprocess.run([sys.executable, "-c", LOAD, "org/gated", "config.json"], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode != 0 and "GatedRepoError" in done.stderr, done.stderr

def test_without_the_secret():
    url = os.environ["HF_ENDPOINT"]
    origin = "/".join(url.split("/")[:3])
    with open("endpoint.txt", "w") as handle:
        handle.write(origin)
    try:
        urllib.request.urlopen(origin + "/org/gated/resolve/main/config.json")
    except urllib.error.HTTPError as error:
        print("REFUSED", error.code, error.read().decode())
    else:
        raise AssertionError("served without the secret")
""",
    )

    result = run(pytester, local_hub, "-s", "--junitxml=report.xml", "--hf-pins=pins.json", "--hf-update-pins")

    result.assert_outcomes(passed=3)
    assert f"REFUSED 403 {NO_SECRET}" in result.stdout.str()
    origin = (pytester.path / "endpoint.txt").read_text()
    with pytest.raises(urllib.error.URLError) as closed:
        urllib.request.urlopen(origin + "/", timeout=5)
    assert isinstance(closed.value.reason, ConnectionRefusedError)
    token = local_hub.token
    assert token not in result.stdout.str() + result.stderr.str()
    assert local_hub.cache_dir is not None
    written = [
        p for p in [*local_hub.cache_dir.rglob("*"), *pytester.path.rglob("*")] if p.is_file() and not p.is_symlink()
    ]
    assert [p for p in written if token.encode() in p.read_bytes()] == []


def test_a_miss_of_a_process_no_test_started_is_named_in_the_summary(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    local_hub.add_repo("org/served", FILES)
    pytester.makeconftest(
        """
import subprocess, sys

def pytest_sessionstart(session):
    # A server started before any test: its loads belong to the session.
    code = "from huggingface_hub import hf_hub_download; hf_hub_download('org/served', 'config.json')"
    subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=240)
"""
    )
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    pins = pinned(pytester.path / "pins.json", [])

    result = run(pytester, local_hub, "--hf-offline", f"--hf-pins={pins}")

    result.assert_outcomes(passed=1)
    assert offline_miss_line("org/served@main", "config.json", pins) in result.stdout.str().splitlines()
    assert local_hub.requests == []


def test_with_xdist_each_worker_serves_its_tests_children(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    commits = {repo: local_hub.add_repo(repo, FILES) for repo in ("org/a", "org/b", "org/c", "org/d")}
    suite(
        pytester,
        """
import pytest

@pytest.mark.parametrize("repo", ["org/a", "org/b", "org/c", "org/d"])
def test_server(repo):
    with open(repo.replace("/", "-") + ".endpoint", "w") as handle:
        handle.write(os.environ["HF_ENDPOINT"])
    assert run(LOAD, repo, "config.json") == printed("config.json")
""",
    )

    result = run(pytester, local_hub, "-n", "2", "--hf-implicit=manage")

    result.assert_outcomes(passed=4)
    rows = implicit_rows(result.stdout.str())
    for repo, commit in commits.items():
        assert rows[f"{repo}@main"].startswith(f"{repo}@main {commit[:12]} 1 file "), rows
        assert rows[f"{repo}@main"].endswith(f"1 test (first: test_server.py::test_server[{repo}])"), rows
    urls = {path.read_text() for path in pytester.path.glob("*.endpoint")}
    assert len(urls) == 4, "two tests' children were given one URL"


@pytest.mark.parametrize("workers", ["2", "4"])
def test_with_xdist_the_workers_children_fetch_one_repo_once_past_a_503_and_a_cut(
    pytester: pytest.Pytester, local_hub: LocalHub, workers: str
) -> None:
    sizes = weights_past_faults(local_hub, "org/shared")
    suite(
        pytester,
        """
import pytest

@pytest.mark.parametrize("n", range(4))
def test_server(n):
    assert run(LOAD, "org/shared", "config.json", "model.safetensors") == printed("config.json", "model.safetensors")
""",
    )

    result = run(pytester, local_hub, "-n", workers, "--hf-implicit=manage")

    result.assert_outcomes(passed=4)
    assert local_hub.pending_faults() == []
    assert file_bytes_ratio(local_hub, sizes) <= 1.01


def test_an_interrupted_session_leaves_no_endpoint(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    pytester.makepyfile(
        test_interrupted="""
import os

def test_interrupted():
    with open("endpoint.txt", "w") as handle:
        handle.write("/".join(os.environ["HF_ENDPOINT"].split("/")[:3]))
    raise KeyboardInterrupt
"""
    )

    result = run(pytester, local_hub)

    assert result.ret == pytest.ExitCode.INTERRUPTED
    origin = (pytester.path / "endpoint.txt").read_text()
    with pytest.raises(urllib.error.URLError) as closed:
        urllib.request.urlopen(origin + "/", timeout=5)
    assert isinstance(closed.value.reason, ConnectionRefusedError)
