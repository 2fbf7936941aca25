"""CONTRACT section 9 on a suite written as vLLM, transformers, PEFT and diffusers write theirs.

The suite (``suite/``) imports nothing of the plugin and declares nothing. Each test here copies it
into a pytester folder and runs it in a fresh pytest process against the local Hub, in one
``--hf-implicit`` mode. What the suite should record is measured, not written down: the session
fixture ``baseline`` runs it once with the plugin absent and reads what huggingface_hub left in the
cache (``snapshots/<commit>/`` for the files, ``.no_exist/<commit>/`` for the missing paths).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from pytest_hfsnapshot.testing.half_written import corrupted_blob, truncated_blob
from pytest_hfsnapshot.testing.hub import LocalHub

pytest.importorskip("pytest_hfsnapshot.plugin.implicit")
pytest.importorskip("xdist")
# The real components the suite loads with (no torch): the repos are made with them too.
for _name in ("transformers", "tokenizers", "safetensors", "numpy"):
    pytest.importorskip(_name)

from . import repos  # noqa: E402
from .repos import BARE, BERT, CORPUS, PEFT, SERVER, WORD, file_requests, fill, peer_repos  # noqa: E402

SUITE = Path(__file__).resolve().parent / "suite"
SCRIPT = str(Path(sys.executable).with_name("pytest-hfsnapshot"))
#: (repo_type, repo_id, revision): how a pin file names a snapshot.
Key = tuple[str, str, str]
#: Paths the suite asks the Hub about without downloading them (``HfApi.file_exists``): recorded too.
METADATA_ONLY = {("model", BERT, "main"): {"README.md"}}
#: Every test of the suite that loads peers/tiny-bert, each with a request of its own.
BERT_TESTS = {
    "test_models.py::test_config[peers/tiny-bert]",
    "test_models.py::test_runner_encodes[peers/tiny-bert]",
    "test_hub_calls.py::test_weights_read_with_safetensors",
    "test_hub_calls.py::test_model_card_and_info",
}
SUITE_TESTS = 15
WORD_TESTS = {
    "test_models.py::test_config[peers/tiny-word]",
    "test_models.py::test_runner_encodes[peers/tiny-word]",
    "test_tokenization.py::TinyWordTokenizationTest::test_lowercases",
    "test_tokenization.py::TinyWordTokenizationTest::test_unknown_word",
}
RUN_TIMEOUT = 300


def key(repo_id: str, repo_type: str = "model", revision: str = "main") -> Key:
    return (repo_type, repo_id, revision)


REPOS = {key(repo.repo_id, repo.repo_type): repo for repo in peer_repos()}


# --- what the suite obtains, measured with the plugin absent ----------------------------------------


@dataclass(frozen=True)
class Baseline:
    """The suite run once with ``-p no:hfsnapshot`` on a cold cache: its outcome and what it obtained."""

    returncode: int
    output: str
    #: The pin file entries the suite's implicit uses make: commit, files, missing (omitted when empty).
    entries: dict[Key, dict[str, Any]]

    def pins(self, without: Iterable[Key] = ()) -> list[dict[str, Any]]:
        """The entries as a pin file holds them, leaving out ``without``."""
        left_out = set(without)
        return [
            {"repo_id": k[1], "repo_type": k[0], "revision": k[2], **entry}
            for k, entry in sorted(self.entries.items())
            if k not in left_out
        ]


def obtained(cache: Path) -> dict[Key, dict[str, Any]]:
    """What huggingface_hub left in ``cache`` for each repo's ``main``: files linked, paths marked absent."""
    found: dict[Key, dict[str, Any]] = {}
    for folder in sorted(cache.glob("*s--*")):
        kind, _, name = folder.name.partition("--")
        snapshot = key(name.replace("--", "/"), kind[:-1])
        commit = (folder / "refs" / "main").read_text().strip()
        files = set(relative_files(folder / "snapshots" / commit)) | METADATA_ONLY.get(snapshot, set())
        entry: dict[str, Any] = {"commit": commit, "files": sorted(files)}
        missing = relative_files(folder / ".no_exist" / commit)
        if missing:
            entry["missing"] = missing
        found[snapshot] = entry
    return found


def relative_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir())


def child_env() -> dict[str, str]:
    """This process's environment without the outer session's pytest and plugin settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HFSNAPSHOT_"))}


def measure_baseline(root: Path) -> Baseline:
    suite = shutil.copytree(SUITE, root / "suite", ignore=shutil.ignore_patterns("__pycache__"))
    with LocalHub() as hub, hub.configure_client(root / "cache") as cache:
        fill(hub)
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:hfsnapshot", "-p", "no:cacheprovider", "-q", "-p", "no:xdist"],
            cwd=suite,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
    return Baseline(done.returncode, done.stdout + done.stderr, obtained(cache))


@pytest.fixture(scope="session")
def baseline(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Baseline:
    """Measured once per session: xdist workers share it through a file, as pytest-xdist's docs show."""
    if worker_id == "master":
        return measure_baseline(tmp_path_factory.mktemp("peers-baseline"))
    shared = tmp_path_factory.getbasetemp().parent / "peers-baseline.json"
    with FileLock(f"{shared}.lock"):
        if not shared.is_file():
            measured = measure_baseline(tmp_path_factory.mktemp("peers-baseline"))
            entries = [[list(k), v] for k, v in measured.entries.items()]
            shared.write_text(json.dumps([measured.returncode, measured.output, entries]))
    returncode, output, entries = json.loads(shared.read_text())
    return Baseline(returncode, output, {(k[0], k[1], k[2]): v for k, v in entries})


# --- running the suite ----------------------------------------------------------------------------


def copy_suite(pytester: pytest.Pytester) -> None:
    for source in SUITE.glob("*.py"):
        (pytester.path / source.name).write_text(source.read_text())


def run(pytester: pytest.Pytester, hub: LocalHub, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        f"--hf-cache-dir={hub.cache_dir}", "-p", "no:cacheprovider", "-rfE", *args, timeout=RUN_TIMEOUT
    )


def prefetch(how: str, pytester: pytest.Pytester, hub: LocalHub, pins_file: Path) -> tuple[int, str]:
    """The prefetch of ``pins_file`` (at ``pins.json`` in the test's folder) by ``pytest
    --hf-prefetch-only`` or by the CLI (``how``): its exit code, and its stdout and stderr."""
    if how == "pytest":
        result = run(pytester, hub, "--hf-prefetch-only", "--hf-pins=pins.json")
        return result.ret, result.stdout.str() + result.stderr.str()
    done = subprocess.run(
        [SCRIPT, "prefetch", "--pins", str(pins_file), "--cache-dir", str(hub.cache_dir)],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    return done.returncode, done.stdout + done.stderr


def implicit_mode(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, where: str, mode: str) -> list[str]:
    """``mode`` set by the option (returned, for the command line), the ini key or the environment."""
    if where == "ini":
        pytester.makeini(f"[pytest]\nhf_implicit = {mode}\n")
    elif where == "env":
        monkeypatch.setenv("HFSNAPSHOT_IMPLICIT", mode)
    return [f"--hf-implicit={mode}"] if where == "option" else []


def write_pins(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(entries, indent=2) + "\n")
    return path


def implicit_entries(path: Path) -> dict[Key, dict[str, Any]]:
    """The pin file's entries that record implicit uses (those with ``files``), by snapshot."""
    found: dict[Key, dict[str, Any]] = {}
    for entry in json.loads(path.read_text()):
        if "files" not in entry:
            continue
        assert entry["files"] == sorted(entry["files"]), f"files not sorted in {entry}"
        if "missing" in entry:
            assert entry["missing"], f"an empty missing list is written, not omitted: {entry}"
            assert entry["missing"] == sorted(entry["missing"]), f"missing not sorted in {entry}"
        snapshot = key(entry["repo_id"], entry["repo_type"], entry["revision"])
        assert snapshot not in found, f"two entries for {snapshot} in {path}"
        found[snapshot] = {k: entry[k] for k in ("commit", "files", "missing") if k in entry}
    return found


def implicit_section(output: str) -> list[str]:
    """The lines of the ``hf implicit`` summary section; [] when there is none."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if re.fullmatch(r"=+ hf implicit =+", line)]
    if not starts:
        return []
    assert len(starts) == 1, output
    section = []
    for line in lines[starts[0] + 1 :]:
        if line.startswith("="):
            break
        section.append(line)
    return section


class _AnySize(str):
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and re.fullmatch(r"\d+(\.\d+)? [KMGT]?i?B", other) is not None

    __hash__ = str.__hash__


#: Compares equal to any size as the summary writes it ("0 B", "1.2 MiB").
ANY_SIZE = _AnySize("<size>")


@dataclass(frozen=True)
class Row:
    """One ``hf implicit`` row: files, bytes fetched, tests, and the first test that used it."""

    files: int
    fetched: str
    tests: int
    first: str


def summary_rows(output: str) -> dict[str, Row]:
    """The ``hf implicit`` rows by ``folder@revision``, each snapshot once."""
    rows: dict[str, Row] = {}
    pattern = re.compile(
        r"^(?P<name>\S+@\S+)\s+(?P<commit>[0-9a-f]{12})\s+(?P<files>\d+) files?\s+(?P<fetched>.+?) fetched\s+"
        r"(?P<tests>\d+) tests? \(first: (?P<first>.+?)\)(?=\s|$)"
    )
    for line in implicit_section(output):
        found = pattern.match(line)
        if found is None:
            continue
        name = f"{found['name']} {found['commit']}"
        assert name not in rows, f"{name} has two rows in the hf implicit section:\n{output}"
        rows[name] = Row(int(found["files"]), found["fetched"], int(found["tests"]), found["first"])
    return rows


def junit_failures(path: Path) -> dict[str, str]:
    """Each failed or erroring test's report text, by ``file.py::name`` (the class kept for unittest)."""
    failures: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        problems = [*case.findall("failure"), *case.findall("error")]
        if problems:
            classname = case.get("classname", "")
            module, _, cls = classname.partition(".")
            nodeid = f"{module}.py::{cls + '::' if cls else ''}{case.get('name')}"
            failures[nodeid] = "\n".join(f"{p.get('message', '')}\n{p.text or ''}" for p in problems)
    return failures


def fetched_files(hub: LocalHub) -> dict[str, int]:
    """How many times each repo file's bytes were fetched (a GET answered 200: a body or a reconstruction)."""
    counts: dict[str, int] = {}
    for method, _, status, _, names in file_requests(hub):
        if method == "GET" and status == 200:
            for name in names:
                counts[name] = counts.get(name, 0) + 1
    return counts


def resolve_path(snapshot: Key, commit: str, path: str) -> str:
    repo = REPOS[snapshot]
    return f"/{repo.folder}/resolve/{commit}/{path}"


def file_bytes_ratio(hub: LocalHub, commits: Mapping[Key, str]) -> float:
    return repos.file_bytes_ratio(hub, {REPOS[k].folder: commit for k, commit in commits.items()})


def filled_hub(hub: LocalHub, baseline: Baseline) -> dict[Key, str]:
    """The peer repos on ``hub``, at the commits the baseline ran against (the local Hub's ids are stable)."""
    by_folder = fill(hub)
    commits = {k: by_folder[repo.folder] for k, repo in REPOS.items()}
    expected = {k: entry["commit"] for k, entry in baseline.entries.items()}
    assert commits == expected, "the local Hub gave other commit ids than in the baseline run"
    return commits


def cache_folder(hub: LocalHub, snapshot: Key) -> Path:
    assert hub.cache_dir is not None
    return hub.cache_dir / f"{snapshot[0]}s--{snapshot[1].replace('/', '--')}"


def assert_cached_as_pinned(hub: LocalHub, entries: Mapping[Key, Mapping[str, Any]]) -> None:
    """Each entry's ``refs/main`` names its commit, its files hold the Hub's bytes, its missing paths are marked."""
    for snapshot, entry in entries.items():
        folder = cache_folder(hub, snapshot)
        commit = entry["commit"]
        assert (folder / "refs" / "main").read_text() == commit, snapshot
        for path in entry["files"]:
            cached = folder / "snapshots" / commit / path
            assert cached.read_bytes() == REPOS[snapshot].files[path], f"{snapshot} {path}"
        for path in entry.get("missing", ()):
            assert (folder / ".no_exist" / commit / path).is_file(), f"no .no_exist marker for {snapshot} {path}"


# --- the suite as it is ------------------------------------------------------------------------------


def test_the_suite_passes_without_the_plugin(baseline: Baseline) -> None:
    assert baseline.returncode == 0, baseline.output
    assert f"{SUITE_TESTS} passed" in baseline.output
    assert set(baseline.entries) == set(REPOS)
    # transformers probes optional files: the suite has paths to record as missing.
    assert "missing" in baseline.entries[key(WORD)]
    assert "preprocessor_config.json" in baseline.entries[key(WORD)]["missing"]
    assert "tf_model.h5" not in baseline.entries[key(BERT)]["files"]


# --- report (the default) and recording --------------------------------------------------------------


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_report_and_record_cold_under_xdist_then_warm(
    pytester: pytest.Pytester, local_hub: LocalHub, baseline: Baseline
) -> None:
    commits = filled_hub(local_hub, baseline)
    copy_suite(pytester)

    cold = run(pytester, local_hub, "-n", "4", "--hf-pins=pins.json", "--hf-update-pins")

    cold.assert_outcomes(passed=SUITE_TESTS)
    assert implicit_entries(pytester.path / "pins.json") == baseline.entries
    rows = summary_rows(cold.stdout.str())
    assert set(rows) == {f"{REPOS[k].folder}@main {c[:12]}" for k, c in commits.items()}, "\n".join(
        implicit_section(cold.stdout.str())
    )
    for snapshot, entry in baseline.entries.items():
        row = rows[f"{REPOS[snapshot].folder}@main {entry['commit'][:12]}"]
        assert row.files == len(entry["files"]), (snapshot, row)
    bert = rows[f"{BERT}@main {commits[key(BERT)][:12]}"]
    assert bert.tests == len(BERT_TESTS) and bert.first in BERT_TESTS, bert
    corpus = rows[f"datasets/{CORPUS}@main {commits[key(CORPUS, 'dataset')][:12]}"]
    assert (corpus.tests, corpus.first) == (1, "test_hub_calls.py::test_dataset_snapshot"), corpus
    bare = rows[f"{BARE}@main {commits[key(BARE)][:12]}"]
    assert (bare.tests, bare.first) == (1, "test_tokenization.py::test_canonical_id_without_org"), bare
    # Loaded only by the child process the suite starts, through the session endpoint of the worker
    # that ran the test (CONTRACT section 11): attributed to that test.
    server = rows[f"{SERVER}@main {commits[key(SERVER)][:12]}"]
    assert (server.tests, server.first) == (1, "test_server.py::test_server_loads_the_model"), server

    # Warm: the same files are read from the cache, most with no request. An entry the session does
    # not use is kept, and a kept entry's paths are kept (the union).
    unused = {"repo_id": "peers/unused", "repo_type": "model", "revision": "main", "commit": "c" * 40}
    kept_bert = {**next(p for p in baseline.pins() if p["repo_id"] == BERT), "files": ["tf_model.h5"]}
    kept_bert.pop("missing", None)
    write_pins(pytester.path / "warm.json", [kept_bert, unused])

    warm = run(pytester, local_hub, "--hf-pins=warm.json", "--hf-update-pins")

    warm.assert_outcomes(passed=SUITE_TESTS)
    recorded = implicit_entries(pytester.path / "warm.json")
    # The child process is recorded for what it asks the session endpoint: the weights it loads by
    # branch. What its transformers reads from the warm cache by commit sends no request at all,
    # and is not seen (a pin file recorded cold keeps those paths: entries are merged as a union).
    server = recorded.pop(key(SERVER))
    assert server["commit"] == baseline.entries[key(SERVER)]["commit"]
    assert "model.safetensors" in server["files"] and set(server["files"]) <= set(
        baseline.entries[key(SERVER)]["files"]
    )
    expected = {k: v for k, v in baseline.entries.items() if k != key(SERVER)}
    expected[key(BERT)] = {**expected[key(BERT)], "files": sorted([*expected[key(BERT)]["files"], "tf_model.h5"])}
    assert recorded == expected
    assert unused in json.loads((pytester.path / "warm.json").read_text())


def test_report_rows_the_pin_file_and_what_it_lacks(
    pytester: pytest.Pytester, local_hub: LocalHub, baseline: Baseline
) -> None:
    commits = filled_hub(local_hub, baseline)
    bare = key(BARE)
    write_pins(pytester.path / "pins.json", [p for p in baseline.pins() if key(p["repo_id"], p["repo_type"]) == bare])
    pytester.makepyfile(
        test_small=f"""
        from huggingface_hub import hf_hub_download, snapshot_download

        def test_corpus():
            snapshot_download("{CORPUS}", repo_type="dataset")

        def test_bare():
            hf_hub_download("{BARE}", "config.json")
        """
    )

    result = run(pytester, local_hub, "--hf-pins=pins.json")

    result.assert_outcomes(passed=2)
    corpus, bare_commit = commits[key(CORPUS, "dataset")][:12], commits[bare][:12]
    section = implicit_section(result.stdout.str())
    # One row per snapshot, as the tests asked for it (snapshot_download's own per-file calls at
    # the commit are part of that use).
    assert summary_rows(result.stdout.str()) == {
        f"datasets/{CORPUS}@main {corpus}": Row(3, ANY_SIZE, 1, "test_small.py::test_corpus"),
        f"{BARE}@main {bare_commit}": Row(1, ANY_SIZE, 1, "test_small.py::test_bare"),
    }, "\n".join(section)
    not_listed = [line for line in section if "--hf-update-pins" in line]
    assert len(not_listed) == 1, section
    assert re.search(r"\b1\b", not_listed[0]) and not re.search(r"\b2\b", not_listed[0]), not_listed
    assert "pins.json" in not_listed[0]


@pytest.mark.parametrize("where", ["option", "ini", "env"])
def test_off_observes_reports_and_records_nothing(
    pytester: pytest.Pytester, local_hub: LocalHub, baseline: Baseline, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    filled_hub(local_hub, baseline)
    pytester.makepyfile(
        test_small=f"""
        from huggingface_hub import snapshot_download

        def test_corpus():
            snapshot_download("{CORPUS}", repo_type="dataset")
        """
    )
    mode = implicit_mode(pytester, monkeypatch, where, "off")

    result = run(pytester, local_hub, "--hf-pins=pins.json", "--hf-update-pins", *mode)

    result.assert_outcomes(passed=1)
    assert implicit_section(result.stdout.str()) == [], result.stdout.str()
    pins_file = pytester.path / "pins.json"
    assert not pins_file.exists() or implicit_entries(pins_file) == {}


def test_hf_file_system_reads_are_recorded(pytester: pytest.Pytester, local_hub: LocalHub, baseline: Baseline) -> None:
    commits = filled_hub(local_hub, baseline)
    pytester.makepyfile(
        test_fs=f"""
        from huggingface_hub import HfFileSystem

        def test_read():
            assert HfFileSystem().read_text("{WORD}/config.json").startswith("{{")
        """
    )

    result = run(pytester, local_hub, "--hf-pins=pins.json", "--hf-update-pins")

    result.assert_outcomes(passed=1)
    entry = implicit_entries(pytester.path / "pins.json")[key(WORD)]
    assert entry["commit"] == commits[key(WORD)] and "config.json" in entry["files"], entry


# --- prefetch and offline runs ------------------------------------------------------------------------


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_prefetch_fetches_exactly_the_recorded_paths_then_offline_sends_nothing(
    pytester: pytest.Pytester, local_hub: LocalHub, baseline: Baseline
) -> None:
    commits = filled_hub(local_hub, baseline)
    copy_suite(pytester)
    write_pins(pytester.path / "pins.json", baseline.pins())

    prefetch = run(pytester, local_hub, "--hf-prefetch-only", "--hf-pins=pins.json")

    assert prefetch.ret == 0, prefetch.stdout.str()
    prefetch.assert_outcomes()
    wanted = {
        resolve_path(k, entry["commit"], path) for k, entry in baseline.entries.items() for path in entry["files"]
    }
    assert fetched_files(local_hub) == dict.fromkeys(wanted, 1)
    assert local_hub.request_count("*/revision/*") == 0
    at_commits = tuple(f"/resolve/{c}/" for c in commits.values())
    assert [r for r in file_requests(local_hub) if not any(c in n for c in at_commits for n in r[4])] == []
    assert local_hub.served("*/tf_model.h5") == 0
    assert file_bytes_ratio(local_hub, commits) <= 1.01
    assert_cached_as_pinned(local_hub, baseline.entries)

    local_hub.reset_counters()
    offline = run(pytester, local_hub, "-n", "2", "--hf-offline", "--hf-pins=pins.json")

    offline.assert_outcomes(passed=SUITE_TESTS)
    assert local_hub.requests == []


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_a_call_with_its_own_cache_dir_is_served_offline_from_the_session_cache(
    pytester: pytest.Pytester, local_hub: LocalHub, baseline: Baseline
) -> None:
    filled_hub(local_hub, baseline)
    write_pins(pytester.path / "pins.json", baseline.pins())
    expected = REPOS[key(BERT)].files
    pytester.makepyfile(
        test_own_cache=f"""
        import pytest
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

        def test_own_cache(tmp_path):
            for path, content in {{"config.json": {expected["config.json"]!r},
                                  "model.safetensors": {expected["model.safetensors"]!r}}}.items():
                loaded = hf_hub_download("{BERT}", path, cache_dir=tmp_path / "own")
                assert loaded.startswith(str(tmp_path / "own"))
                assert open(loaded, "rb").read() == content
            with pytest.raises(LocalEntryNotFoundError):
                hf_hub_download("{BERT}", "tf_model.h5", cache_dir=tmp_path / "own")
        """
    )
    assert run(pytester, local_hub, "--hf-prefetch-only", "--hf-pins=pins.json").ret == 0
    local_hub.reset_counters()

    result = run(pytester, local_hub, "--hf-offline", "--hf-pins=pins.json")

    result.assert_outcomes(passed=1)
    assert local_hub.requests == []


def test_a_recorded_refusal_is_replayed_offline_only_under_the_same_token_situation(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_hub.add_repo("peers/gated", {"config.json": "{}"}, gated=True)
    pytester.makepyfile(
        test_gated="""
        import os, pytest
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError

        def test_gated():
            expected = {"gated": GatedRepoError, "not-cached": LocalEntryNotFoundError}[os.environ["EXPECT"]]
            with pytest.raises(expected):
                hf_hub_download("peers/gated", "config.json")
        """
    )
    monkeypatch.setenv("EXPECT", "gated")
    run(pytester, local_hub, "--hf-pins=pins.json", "--hf-update-pins").assert_outcomes(passed=1)
    assert json.loads((pytester.path / "pins.json").read_text())[0]["refused"] == "GatedRepo"
    local_hub.reset_counters()

    run(pytester, local_hub, "--hf-offline", "--hf-pins=pins.json").assert_outcomes(passed=1)
    monkeypatch.setenv("HF_TOKEN", local_hub.token)
    monkeypatch.setenv("EXPECT", "not-cached")
    with_token = run(pytester, local_hub, "--hf-offline", "--hf-pins=pins.json")

    with_token.assert_outcomes(passed=1)
    assert local_hub.requests == []
    assert local_hub.token not in with_token.stdout.str()


def test_an_implicit_load_is_a_use_the_doctor_sees(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    from pytest_hfsnapshot.core.cache.layout import RepoCache
    from pytest_hfsnapshot.core.cache.usage import last_use

    commit = local_hub.add_repo("peers/used", {"config.json": "{}"})
    pytester.makepyfile(
        test_used="""
        from huggingface_hub import hf_hub_download

        def test_used():
            hf_hub_download("peers/used", "config.json")
        """
    )
    assert local_hub.cache_dir is not None
    started = time.time()

    run(pytester, local_hub).assert_outcomes(passed=1)

    used = last_use(RepoCache(local_hub.cache_dir, "peers/used", "model"), commit)
    assert used is not None and used >= started - 1


def test_a_refused_request_library_code_caught_leaves_the_files_obtained_pinned_and_served_offline(
    pytester: pytest.Pytester, local_hub: LocalHub, baseline: Baseline
) -> None:
    filled_hub(local_hub, baseline)
    # As olah answers a repo-info request with no revision: transformers' resolve_revision catches it.
    local_hub.fail(f"/api/models/{BERT}", 401, times=100, error_code="RepoNotFound")
    pytester.makepyfile(
        test_config=f"""
        from transformers import AutoConfig

        def test_config():
            assert AutoConfig.from_pretrained("{BERT}").model_type == "bert"
        """
    )
    run(pytester, local_hub, "--hf-pins=pins.json", "--hf-update-pins").assert_outcomes(passed=1)
    entry = implicit_entries(pytester.path / "pins.json")[key(BERT)]
    assert "config.json" in entry["files"], entry
    assert "refused" not in json.loads((pytester.path / "pins.json").read_text())[0], "files were obtained"
    local_hub.clear_faults()
    shutil.rmtree(cache_folder(local_hub, key(BERT)))

    assert run(pytester, local_hub, "--hf-prefetch-only", "--hf-pins=pins.json").ret == 0
    local_hub.reset_counters()
    offline = run(pytester, local_hub, "--hf-offline", "--hf-pins=pins.json")

    offline.assert_outcomes(passed=1)
    assert local_hub.requests == []


def test_cli_prefetch_with_pins_fetches_the_recorded_paths(
    pytester: pytest.Pytester, local_hub: LocalHub, baseline: Baseline
) -> None:
    filled_hub(local_hub, baseline)
    pins_file = write_pins(pytester.path / "pins.json", baseline.pins())

    code, output = prefetch("cli", pytester, local_hub, pins_file)

    assert code == 0, output
    wanted = {
        resolve_path(k, entry["commit"], path) for k, entry in baseline.entries.items() for path in entry["files"]
    }
    assert fetched_files(local_hub) == dict.fromkeys(wanted, 1)
    assert local_hub.request_count("*/revision/*") == 0
    assert_cached_as_pinned(local_hub, baseline.entries)


def test_offline_use_not_prefetched_fails_naming_the_repo_path_and_command(
    pytester: pytest.Pytester, local_hub: LocalHub, baseline: Baseline
) -> None:
    filled_hub(local_hub, baseline)
    copy_suite(pytester)
    write_pins(pytester.path / "pins.json", baseline.pins(without=[key(BARE)]))
    bare_test = "test_tokenization.py::test_canonical_id_without_org"

    result = run(pytester, local_hub, "--hf-offline", "--hf-pins=pins.json", "--junitxml=report.xml", bare_test)

    result.assert_outcomes(failed=1)
    assert local_hub.requests == []
    text = junit_failures(pytester.path / "report.xml")[bare_test]
    hints = [line for line in text.splitlines() if BARE in line and "config.json" in line]
    assert [line for line in hints if "--hf-update-pins" in line and "--hf-prefetch-only --hf-pins=" in line], text


def test_offline_api_call_not_recorded_fails_naming_the_repo_and_command(
    pytester: pytest.Pytester, local_hub: LocalHub, baseline: Baseline
) -> None:
    filled_hub(local_hub, baseline)
    pytester.makepyfile(
        test_info=f"""
        from huggingface_hub import HfApi

        def test_info():
            HfApi().model_info("{BARE}")
        """
    )

    result = run(pytester, local_hub, "--hf-offline", "--junitxml=report.xml")

    result.assert_outcomes(failed=1)
    assert local_hub.requests == []
    text = junit_failures(pytester.path / "report.xml")["test_info.py::test_info"]
    assert "OfflineModeIsEnabled" in text, text
    assert [line for line in text.splitlines() if f"hfsnapshot: {BARE}@main" in line and "--hf-update-pins" in line], (
        text
    )


# --- manage ----------------------------------------------------------------------------------------------


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_manage_cold_under_xdist_and_faults_then_warm_with_pins(
    pytester: pytest.Pytester, local_hub: LocalHub, baseline: Baseline
) -> None:
    commits = filled_hub(local_hub, baseline)
    copy_suite(pytester)
    weights = f"*/{BERT}/resolve/*/model.safetensors"
    local_hub.fail(weights, 503)
    local_hub.cut(weights, 4096)
    local_hub.fail(f"*/{PEFT}/resolve/*/model.safetensors", 502)
    # A 429 window on one repo's resolver calls (its small files: hf_xet's CAS requests are not
    # resolver calls), as the Hub answers past its quota: refused for a second, then served.
    local_hub.fail(f"/{WORD}/resolve/*.json", 429, times=3, retry_after=1)

    cold = run(pytester, local_hub, "-n", "4", "--hf-implicit=manage")

    cold.assert_outcomes(passed=SUITE_TESTS)
    assert local_hub.pending_faults() == []
    assert file_bytes_ratio(local_hub, commits) <= 1.01

    write_pins(pytester.path / "pins.json", baseline.pins())
    cached = {
        resolve_path(k, commits[k], path)
        for k, repo in REPOS.items()
        for path in repo.files
        if (cache_folder(local_hub, k) / "snapshots" / commits[k] / path).is_file()
    }
    local_hub.reset_counters()
    warm = run(pytester, local_hub, "--hf-implicit=manage", "--hf-pins=pins.json")

    warm.assert_outcomes(passed=SUITE_TESTS)
    # The child process is managed too: through the session endpoint (CONTRACT section 11).
    ours = local_hub.requests
    assert [r for r in ours if r[1] in cached] == [], "a pinned file verified in the cache cost a request"
    # The one file the cold run asked about without downloading it (HfApi.file_exists) may be asked again.
    assert {r[1] for r in ours if "/resolve/" in r[1]} <= {resolve_path(key(BERT), commits[key(BERT)], "README.md")}
    assert [r for r in ours if "/main" in r[1]] == [], "a request named a pinned branch"
    # What is left: repo-info or tree requests of library code, sent at the pinned commit.
    assert [r for r in ours if not any(c in r[1] for c in commits.values())] == []


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_manage_repairs_a_damaged_cached_file_before_the_test_reads_it(
    pytester: pytest.Pytester, local_hub: LocalHub, baseline: Baseline
) -> None:
    from huggingface_hub import hf_hub_download

    commits = filled_hub(local_hub, baseline)
    copy_suite(pytester)
    cache = local_hub.cache_dir
    assert cache is not None
    for path in ("config.json", "model.safetensors"):
        hf_hub_download(BERT, path)
    truncated_blob(cache, BERT, "config.json")
    corrupted_blob(cache, BERT, "model.safetensors")
    snapshot = cache_folder(local_hub, key(BERT)) / "snapshots" / commits[key(BERT)]
    files = REPOS[key(BERT)].files
    assert (snapshot / "config.json").read_bytes() != files["config.json"]
    assert (snapshot / "model.safetensors").read_bytes() != files["model.safetensors"]

    result = run(
        pytester,
        local_hub,
        "--hf-implicit=manage",
        "--hf-verify=sha256",
        "test_models.py::test_config",
        "test_hub_calls.py::test_weights_read_with_safetensors",
    )

    result.assert_outcomes(passed=3)
    for path in ("config.json", "model.safetensors"):
        assert hashlib.sha256((snapshot / path).read_bytes()).digest() == hashlib.sha256(files[path]).digest(), path


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_manage_repairs_a_file_damaged_between_two_loads_of_one_process(
    pytester: pytest.Pytester, local_hub: LocalHub, baseline: Baseline
) -> None:
    filled_hub(local_hub, baseline)
    expected = REPOS[key(BERT)].files["config.json"]
    pytester.makepyfile(
        test_twice=f"""
        from huggingface_hub import hf_hub_download
        from pytest_hfsnapshot.testing.half_written import truncated_blob

        def test_loaded_twice():
            first = hf_hub_download("{BERT}", "config.json")
            assert open(first, "rb").read() == {expected!r}
            truncated_blob("{local_hub.cache_dir}", "{BERT}", "config.json")
            again = hf_hub_download("{BERT}", "config.json")
            assert open(again, "rb").read() == {expected!r}
        """
    )

    run(pytester, local_hub, "--hf-implicit=manage").assert_outcomes(passed=1)


def test_manage_with_update_pins_loads_and_pins_the_branch_as_it_is_now(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    old = local_hub.add_repo("peers/moving", {"config.json": '{"v": 1}'})
    new = local_hub.add_repo("peers/moving", {"config.json": '{"v": 2}'})
    local_hub.add_repo("peers/unlisted", {"config.json": "{}"})
    write_pins(pytester.path / "pins.json", [{"repo_id": "peers/moving", "repo_type": "model", "revision": "main",
                                              "commit": old, "files": ["config.json"]}])  # fmt: skip
    pytester.makepyfile(
        test_moving=f"""
        from huggingface_hub import HfApi, hf_hub_download

        def test_now():
            assert open(hf_hub_download("peers/moving", "config.json")).read() == '{{"v": 2}}'
            assert HfApi().model_info("peers/moving").sha == "{new}"
            hf_hub_download("peers/unlisted", "config.json")
        """
    )

    result = run(pytester, local_hub, "--hf-implicit=fail", "--hf-pins=pins.json", "--hf-update-pins")

    result.assert_outcomes(passed=1)
    assert implicit_entries(pytester.path / "pins.json")[key("peers/moving")]["commit"] == new


# --- fail ---------------------------------------------------------------------------------------------------


def test_fail_fails_the_tests_whose_use_the_pin_file_lacks(
    pytester: pytest.Pytester, local_hub: LocalHub, baseline: Baseline
) -> None:
    filled_hub(local_hub, baseline)
    copy_suite(pytester)
    write_pins(pytester.path / "pins.json", baseline.pins(without=[key(WORD)]))

    result = run(
        pytester,
        local_hub,
        "--hf-implicit=fail",
        "--hf-pins=pins.json",
        "--junitxml=report.xml",
        "test_models.py",
        "test_tokenization.py",
    )

    # tiny-bert and tiny-bare are listed; tiny-word is not, loaded by two tests and a setUpClass.
    result.assert_outcomes(passed=3, failed=len(WORD_TESTS))
    failures = junit_failures(pytester.path / "report.xml")
    assert set(failures) == WORD_TESTS
    for nodeid, text in failures.items():
        assert f"{WORD}@main" in text and "--hf-update-pins" in text, text
        assert nodeid in text or nodeid.rpartition("::")[2] in text, text


# --- bad input ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["option", "ini", "env"])
def test_unknown_mode_is_a_usage_error(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    mode = implicit_mode(pytester, monkeypatch, where, "bogus")

    result = run(pytester, local_hub, *mode)

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    named = {"option": "--hf-implicit", "ini": "hf_implicit", "env": "HFSNAPSHOT_IMPLICIT"}[where]
    assert named in output and "bogus" in output, output
    assert all(mode in output for mode in ("report", "manage", "fail", "off")), output
    assert local_hub.requests == []


@pytest.mark.parametrize(
    "files",
    ["config.json", [1], ["../config.json"], ["/config.json"], [""]],
    ids=["a-string", "a-number", "dot-dot", "absolute", "empty"],
)
def test_files_that_are_not_repo_paths_are_a_usage_error(
    pytester: pytest.Pytester, local_hub: LocalHub, files: object
) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    entry = {"repo_id": "peers/odd", "repo_type": "model", "revision": "main", "commit": "a" * 40, "files": files}
    pins_file = write_pins(pytester.path / "pins.json", [entry])

    result = run(pytester, local_hub, "--hf-pins=pins.json")
    code, prefetched = prefetch("cli", pytester, local_hub, pins_file)

    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    output = result.stdout.str() + result.stderr.str()
    assert "pins.json" in output and "peers/odd" in output and "files" in output, output
    assert code == 2, prefetched
    assert "pins.json" in prefetched and "peers/odd" in prefetched
    assert local_hub.requests == []


@pytest.mark.parametrize("how", ["pytest", "cli"])
def test_a_recorded_path_the_commit_lacks_fails_the_prefetch(
    pytester: pytest.Pytester, local_hub: LocalHub, how: str
) -> None:
    commit = local_hub.add_repo("peers/small", {"config.json": "{}", "tokenizer.json": "{}"})
    entry = {
        "repo_id": "peers/small",
        "repo_type": "model",
        "revision": "main",
        "commit": commit,
        "files": ["config.json", "nope/weights.bin"],
    }
    pins_file = write_pins(pytester.path / "pins.json", [entry])
    pytester.makepyfile("def test_nothing():\n    pass\n")

    code, output = prefetch(how, pytester, local_hub, pins_file)

    assert code != 0, output
    assert f"Pin file {pins_file}, entry 1 (peers/small@main): files names 'nope/weights.bin'" in output, output
    assert "matches no file" not in output, output
