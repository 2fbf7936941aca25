"""The pieces of implicit Hub use that need no pytest session: the Hub's routes, pin entries with
``files``, the answers given in the Hub's stead, and what child processes leave in the cache."""

from __future__ import annotations

import json
import os
import sys
import threading
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode

import pytest
from huggingface_hub import get_session, hf_hub_download, snapshot_download

from pytest_hfsnapshot import materialize
from pytest_hfsnapshot.core.cache import pins
from pytest_hfsnapshot.core.cache.layout import RepoCache
from pytest_hfsnapshot.core.hub import credentials, hub_calls, offline
from pytest_hfsnapshot.core.implicit import cache_changes, file_materialize, local_answers, observe
from pytest_hfsnapshot.core.implicit.uses import ImplicitUse, Recorder, merged
from pytest_hfsnapshot.core.own_work import busy, own_thread, own_work
from pytest_hfsnapshot.errors import InvalidRequestError
from pytest_hfsnapshot.request import SnapshotRequest
from pytest_hfsnapshot.settings import ImplicitMode, Settings
from pytest_hfsnapshot.testing.hub import LocalHub

HUB = "http://127.0.0.1:9"
C1 = "a" * 40
C2 = "b" * 40


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"{HUB}/api/models/org/tiny/revision/main", ("revision", "model", "org/tiny", "main", "")),
        (f"{HUB}/api/models/gpt2/revision/v1.0", ("revision", "model", "gpt2", "v1.0", "")),
        (f"{HUB}/api/datasets/org/c/tree/{C1}?recursive=true", ("tree", "dataset", "org/c", C1, "")),
        (f"{HUB}/api/models/org/tiny/tree/main/sub/dir", ("tree", "model", "org/tiny", "main", "sub/dir")),
        (f"{HUB}/api/models/org/tiny/paths-info/refs%2Fpr%2F1", ("paths-info", "model", "org/tiny", "refs/pr/1", "")),
        (f"{HUB}/api/spaces/org/s", ("info", "space", "org/s", "main", "")),
        (f"{HUB}/org/tiny/resolve/main/sub/config.json", ("file", "model", "org/tiny", "main", "sub/config.json")),
        (f"{HUB}/bert-base-uncased/resolve/{C1}/vocab.txt", ("file", "model", "bert-base-uncased", C1, "vocab.txt")),
        (f"{HUB}/datasets/org/c/resolve/main/a%20b.csv", ("file", "dataset", "org/c", "main", "a b.csv")),
        (f"{HUB}/api/models/org/tiny/xet-read-token/{C1}", ("xet-token", "model", "org/tiny", C1, "")),
    ],
)
def test_hub_routes_are_read_as_calls(url: str, expected: tuple[str, ...]) -> None:
    call = hub_calls.parse(url, HUB)
    assert call is not None
    assert (call.kind, call.repo_type, call.repo_id, call.revision, call.path) == expected


@pytest.mark.parametrize("url", ["http://127.0.0.2:9/org/tiny/resolve/main/x", f"{HUB}/api/whoami-v2", f"{HUB}/"])
def test_other_requests_are_no_calls(url: str) -> None:
    assert hub_calls.parse(url, HUB) is None


@pytest.mark.parametrize(
    ("url", "pinned"),
    [
        (f"{HUB}/api/models/org/tiny/revision/main?x=1", f"{HUB}/api/models/org/tiny/revision/{C1}?x=1"),
        (f"{HUB}/api/models/org/tiny", f"{HUB}/api/models/org/tiny/revision/{C1}"),
        (f"{HUB}/org/tiny/resolve/main/main/x", f"{HUB}/org/tiny/resolve/{C1}/main/x"),
        (f"{HUB}/api/models/org/tiny/tree/refs%2Fpr%2F1", f"{HUB}/api/models/org/tiny/tree/{C1}"),
    ],
)
def test_a_pinned_branch_is_asked_at_its_commit(url: str, pinned: str) -> None:
    call = hub_calls.parse(url, HUB)
    assert call is not None
    assert hub_calls.with_revision(url, call, C1) == pinned


def test_a_load_by_commit_is_filed_under_the_branch_that_resolved_to_it() -> None:
    recorder = Recorder()
    recorder.phase = "t.py::a"
    recorder.note("model", "org/tiny", "main", commit=C1, path="config.json", size=2)
    recorder.phase = "t.py::b"
    recorder.note("model", "org/tiny", C1, path="vocab.txt", size=5)
    recorder.note("model", "org/tiny", C2, missing="x.json")
    (main, by_commit) = sorted(recorder.uses(), key=lambda use: use.revision != "main")
    assert (main.revision, sorted(main.files), main.tests) == (
        "main",
        ["config.json", "vocab.txt"],
        ["t.py::a", "t.py::b"],
    )
    assert (by_commit.revision, by_commit.commit, by_commit.missing) == (C2, C2, {"x.json"})


def test_uses_merge_as_a_union_across_workers() -> None:
    a = ImplicitUse("model", "org/t", "main", C1, {"a": 1}, {"m"}, tests=["x"], fetched=1)
    b = ImplicitUse("model", "org/t", "main", C1, {"b": 2, "m": 3}, set(), tests=["y", "x"], fetched=2)
    (use,) = merged([a, b])
    assert (use.files, use.missing, use.tests, use.fetched) == ({"a": 1, "b": 2, "m": 3}, set(), ["x", "y"], 3)
    assert ImplicitUse.from_dict(json.loads(json.dumps(use.to_dict()))) == use


def entry(**extra: object) -> dict[str, object]:
    return {"repo_id": "org/tiny", "repo_type": "model", "revision": "main", "commit": C1, **extra}


def test_pin_entries_with_files_are_read_and_joined(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    path.write_text(json.dumps([entry(files=["b", "a"], missing=["x"]), entry(files=["c", "x"])]))
    pin = pins.read(path).pins[("model", "org/tiny", "main")]
    assert (pin.files, pin.missing) == (("a", "b", "c", "x"), ())
    assert pins.read(path).pin_for("model", "org/tiny", C1) == pin


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"files": "config.json"}, "files must be a list of repo paths"),
        ({"files": [1]}, "files must be a list of repo paths"),
        ({"files": ["../etc/passwd"]}, "files entry '../etc/passwd' is not a path inside the repo"),
        ({"missing": ["/abs"]}, "missing entry '/abs' is not a path inside the repo"),
        ({"refused": "Nope"}, "refused must be one of RepoNotFound, GatedRepo, RevisionNotFound"),
    ],
)
def test_malformed_recorded_paths_name_the_file_and_entry(tmp_path: Path, extra: dict[str, object], words: str) -> None:
    path = tmp_path / "pins.json"
    path.write_text(json.dumps([entry(**extra)]))
    with pytest.raises(InvalidRequestError) as raised:
        pins.read(path)
    assert f"Pin file {path}, entry 1 (org/tiny@main)" in str(raised.value)
    assert words in str(raised.value)
    assert "{" not in str(raised.value) and "}" not in str(raised.value), "a placeholder left unformatted"


def test_an_update_records_paths_and_keeps_the_old_ones_at_the_same_commit(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    path.write_text(json.dumps([entry(files=["a"]), {**entry(), "repo_id": "org/kept"}]))
    recorded = {("model", "org/tiny", "main"): pins.Recorded(C1, ("b",), ("m",))}
    update = pins.read(path).updated({}, recorded)
    assert [e.get("files") for e in update.entries] == [None, ["a", "b"]]
    assert update.entries[1]["missing"] == ["m"]
    moved = pins.read(path).updated({}, {("model", "org/tiny", "main"): pins.Recorded(C2, ("b",))})
    assert moved.entries[1]["files"] == ["b"] and [m.line() for m in moved.moved] == [
        f"org/tiny@main: {C1[:12]} -> {C2[:12]}"
    ]


def test_a_recorded_entry_moved_by_pins_update_keeps_its_paths_and_a_refusal_is_not_moved(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    refused = {**entry(), "repo_id": "org/gone", "commit": "0" * 40, "files": [], "refused": "RepoNotFound"}
    path.write_text(json.dumps([entry(files=["a"], missing=["m"]), refused]))
    pin_file = pins.read(path)
    assert [pin.repo_id for pin in pin_file.branches()] == ["org/tiny"]
    update = pin_file.updated({("model", "org/tiny", "main"): C2})
    moved = next(e for e in update.entries if e["repo_id"] == "org/tiny")
    assert (moved["commit"], moved["files"], moved["missing"]) == (C2, ["a"], ["m"])


def test_answers_for_a_recorded_snapshot(local_hub: LocalHub, tmp_path: Path) -> None:
    commit = local_hub.add_repo("org/tiny", {"config.json": "{}", "model.safetensors": b"\x01" * 2048})
    snapshot_download("org/tiny")
    path = tmp_path / "pins.json"
    path.write_text(json.dumps([entry(commit=commit, files=["config.json"], missing=["x.json"])]))
    pin_file = pins.read(path)

    def ask(url: str, method: str = "HEAD") -> local_answers.Answer | None:
        call = hub_calls.parse(f"{local_hub.url}{url}", local_hub.url)
        assert call is not None
        return local_answers.answer(call, method, pin_file, local_hub.cache_dir)

    head = ask("/org/tiny/resolve/main/config.json")
    assert head is not None and head.status == 200 and head.headers["X-Repo-Commit"] == commit
    got = ask("/org/tiny/resolve/main/config.json", "GET")
    assert got is not None and got.body == b"{}"
    weights = ask("/org/tiny/resolve/main/model.safetensors")
    assert weights is not None and weights.headers["X-Linked-Size"] == "2048"
    absent = ask("/org/tiny/resolve/main/x.json")
    assert absent is not None and (absent.status, absent.headers["X-Error-Code"]) == (404, "EntryNotFound")
    revision = ask("/api/models/org/tiny/revision/main", "GET")
    assert revision is not None and json.loads(revision.body)["sha"] == commit
    assert ask("/org/other/resolve/main/config.json") is None


def test_what_a_child_process_left_in_the_cache_is_a_use(local_hub: LocalHub) -> None:
    local_hub.add_repo("org/kept", {"config.json": "{}"})
    commit = local_hub.add_repo("org/new", {"config.json": "{}"})
    hf_hub_download("org/kept", "config.json")
    before = cache_changes.scan(local_hub.cache_dir)
    hf_hub_download("org/new", "config.json")
    with pytest.raises(Exception):  # noqa: B017 - the Hub's 404, which leaves a marker
        hf_hub_download("org/new", "absent.json")
    (use,) = cache_changes.uses_between(before, cache_changes.scan(local_hub.cache_dir))
    assert (use.repo_id, use.revision, use.commit) == ("org/new", "main", commit)
    assert (sorted(use.files), use.missing, use.tests) == (["config.json"], {"absent.json"}, ["session"])


def test_a_use_by_commit_joins_its_branch_whatever_the_order_seen() -> None:
    by_commit = ImplicitUse("model", "org/t", C1, C1, {"vocab.txt": 5}, tests=["w1"])
    branch = ImplicitUse("model", "org/t", "main", C1, {"config.json": 2}, tests=["w2"])
    (use,) = merged([by_commit, branch])
    assert (use.revision, sorted(use.files), use.tests) == ("main", ["config.json", "vocab.txt"], ["w2", "w1"])


# --- threads: the plugin's own work and the test a thread acts for ---------------------------------


def observer_for(hub: LocalHub, mode: ImplicitMode) -> observe.Observer:
    from huggingface_hub import constants

    return observe.Observer(
        mode=mode,
        offline=lambda: False,
        endpoint=lambda: str(constants.ENDPOINT),
        pin_file=lambda: None,
        settings=lambda: Settings(cache_dir=hub.cache_dir),
        prepare=file_materialize.prepare,
    )


def test_own_work_belongs_to_the_thread_doing_it() -> None:
    inside, leave = threading.Event(), threading.Event()

    def engine() -> None:
        with own_work():
            inside.set()
            leave.wait(10)

    worker = threading.Thread(target=engine)
    worker.start()
    try:
        assert inside.wait(10)
        assert not busy(), "another thread's own work made this thread's loads the plugin's"
    finally:
        leave.set()
        worker.join()
    with ThreadPoolExecutor(1, initializer=own_thread) as pool:
        assert pool.submit(busy).result()


def test_a_load_while_another_thread_runs_the_engine_is_still_managed(local_hub: LocalHub) -> None:
    # The race of a session endpoint: one handler thread inside the engine, another running library code.
    commit = local_hub.add_repo("org/tiny", {"config.json": "{}"})
    observer = observer_for(local_hub, "manage")
    inside, leave = threading.Event(), threading.Event()

    def engine() -> None:
        with own_work():
            inside.set()
            leave.wait(10)

    worker = threading.Thread(target=engine)
    with observe.observing(observer):
        worker.start()
        try:
            assert inside.wait(10)
            with observer.recorder.acting_for("t.py::child"):
                hf_hub_download("org/tiny", "config.json")
        finally:
            leave.set()
            worker.join()
    (use,) = observer.recorder.uses()
    assert (use.repo_id, use.commit, sorted(use.files), use.tests) == (
        "org/tiny",
        commit,
        ["config.json"],
        ["t.py::child"],
    )
    repo = RepoCache(local_hub.cache_dir, "org/tiny", "model")
    assert repo.record_paths(commit), "the load was not materialized by the plugin first"
    assert observer.recorder.phase == "session", "acting for a test leaked out of the block"


def test_the_engines_worker_threads_are_its_own_work(local_hub: LocalHub) -> None:
    local_hub.add_repo("org/tiny", {"config.json": "{}", "model.safetensors": b"\x01" * 4096})
    observer = observer_for(local_hub, "report")
    with observe.observing(observer):
        materialize("org/tiny", cache_dir=local_hub.cache_dir)
    assert observer.recorder.uses() == [], "the engine's fetch threads were seen as implicit use"


def test_a_thread_sends_the_token_it_acts_with(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_host")
    assert (credentials.hub_token(), credentials.sent_token()) == ("hf_host", None)
    with credentials.sending(None):
        assert (credentials.hub_token(), credentials.sent_token(), credentials.token_set()) == (None, False, False)
        with credentials.sending("hf_child"):
            assert (credentials.hub_token(), credentials.sent_token()) == ("hf_child", "hf_child")
        assert credentials.sent_token() is False
    assert (credentials.hub_token(), credentials.sent_token()) == ("hf_host", None)


def test_a_refused_entry_names_no_commit_and_an_older_one_with_forty_zeros_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    refused = {"repo_id": "org/gated", "repo_type": "model", "revision": "main", "files": [], "refused": "GatedRepo"}
    older = {**refused, "repo_id": "org/gone", "commit": "0" * 40, "refused": "RepoNotFound"}
    path.write_text(json.dumps([refused, older, entry(files=["a"])]))
    pin_file = pins.read(path)
    gated, gone = pin_file.pins[("model", "org/gated", "main")], pin_file.pins[("model", "org/gone", "main")]
    assert (gated.commit, gated.refusal) == (None, "GatedRepo")
    assert (gone.commit, gone.refusal) == (None, "RepoNotFound"), "40 zeros are no commit"
    assert pin_file.pin_for("model", "org/gone", "0" * 40) is None
    assert pin_file.commit_for(SnapshotRequest("org/gated")) is None
    assert [pin.repo_id for pin in pin_file.branches()] == ["org/tiny"]
    # Recorded again, a refusal is written with no commit, and the made-up one goes.
    update = pin_file.updated(
        {},
        {
            ("model", "org/gated", "main"): pins.Recorded(None, refused="GatedRepo"),
            ("model", "org/gone", "main"): pins.Recorded(None, refused="RepoNotFound"),
            ("model", "org/new", "main"): pins.Recorded(None, refused="RepoNotFound"),
        },
    )
    written = {e["repo_id"]: e for e in update.entries}
    assert [name for name, e in written.items() if "commit" in e] == ["org/tiny"], update.entries
    assert written["org/new"] == {**refused, "repo_id": "org/new", "refused": "RepoNotFound"}
    assert update.moved == ()
    path.write_text(update.render())
    assert pins.read(path).pins[("model", "org/new", "main")].commit is None
    # Once the Hub lets the tests in, the use gets its commit: a new pin, not a move from a made-up one.
    granted = pins.read(path).updated({}, {("model", "org/gated", "main"): pins.Recorded(C2, ("config.json",))})
    assert [pin.label for pin in granted.added] == ["org/gated@main"] and granted.moved == ()
    assert granted.unchanged == 3
    assert next(e for e in granted.entries if e["repo_id"] == "org/gated")["commit"] == C2


@pytest.mark.parametrize(
    "extra",
    [{}, {"files": ["a"], "refused": "GatedRepo"}],
    ids=["not-refused", "refused-with-files"],
)
def test_only_a_refusal_may_leave_out_the_commit(tmp_path: Path, extra: dict[str, object]) -> None:
    path = tmp_path / "pins.json"
    path.write_text(json.dumps([{"repo_id": "org/tiny", "repo_type": "model", "revision": "main", **extra}]))
    with pytest.raises(InvalidRequestError) as raised:
        pins.read(path)
    assert f"Pin file {path}, entry 1 (org/tiny@main): the key 'commit' is missing" in str(raised.value)


@pytest.mark.parametrize(
    ("route", "form"),
    [
        ("tree/main", None),
        ("tree/main?recursive=True&expand=False", None),
        ("tree/main/data?recursive=False&expand=False", None),
        ("tree/main/data%2Fsub?recursive=True", None),
        ("paths-info/main", {"paths": ["data", "data/sub/b.csv", "nope.txt"], "expand": "False"}),
    ],
)
def test_listings_answered_for_a_recorded_snapshot_are_the_hubs(
    local_hub: LocalHub, tmp_path: Path, route: str, form: dict[str, object] | None
) -> None:
    files = {"README.md": "# c", "data/a.csv": "a\n1\n", "data/sub/b.csv": "b\n2\n"}
    commit = local_hub.add_repo("org/c", files, repo_type="dataset")
    snapshot_download("org/c", repo_type="dataset")  # leaves the listing where the client keeps it
    path = tmp_path / "pins.json"
    path.write_text(json.dumps([entry(repo_id="org/c", repo_type="dataset", commit=commit, files=sorted(files))]))
    url = f"{local_hub.url}/api/datasets/org/c/{route}"
    call = hub_calls.parse(url, local_hub.url)
    assert call is not None
    body = urlencode(form, doseq=True).encode() if form is not None else b""

    answered = local_answers.answer(call, "POST" if form else "GET", pins.read(path), local_hub.cache_dir, body)
    hub = get_session().request("POST" if form else "GET", url, data=form)

    assert answered is not None and answered.status == hub.status_code == 200
    assert answered.headers["X-Repo-Commit"] == commit

    def shown(entries: list[dict[str, object]]) -> list[tuple[object, ...]]:
        return sorted((e["type"], e["path"], e["size"] if e["type"] == "file" else 0) for e in entries)

    assert shown(json.loads(answered.body)) == shown(hub.json())


def test_a_tree_of_a_folder_the_commit_lacks_is_the_hubs_404(local_hub: LocalHub, tmp_path: Path) -> None:
    commit = local_hub.add_repo("org/tiny", {"config.json": "{}"})
    snapshot_download("org/tiny")
    path = tmp_path / "pins.json"
    path.write_text(json.dumps([entry(commit=commit, files=["config.json"])]))
    call = hub_calls.parse(f"{local_hub.url}/api/models/org/tiny/tree/main/nope", local_hub.url)
    assert call is not None
    answered = local_answers.answer(call, "GET", pins.read(path), local_hub.cache_dir)
    assert answered is not None and (answered.status, answered.headers["X-Error-Code"]) == (404, "EntryNotFound")


@pytest.mark.parametrize("user", [None, "1"], ids=["unset", "set-by-the-user"])
def test_an_offline_run_leaves_datasets_on_its_hub_path_unless_the_user_chose(
    monkeypatch: pytest.MonkeyPatch, user: str | None
) -> None:
    from huggingface_hub import constants

    if user is None:
        monkeypatch.delenv(offline.DATASETS_OFFLINE, raising=False)
    else:
        monkeypatch.setenv(offline.DATASETS_OFFLINE, user)
    # What datasets read at its import, offline (the real one is loaded by tests/peers/test_routes.py).
    config = types.SimpleNamespace(HF_HUB_OFFLINE=True, HF_DATASETS_OFFLINE=True)
    monkeypatch.setitem(sys.modules, "datasets.config", config)
    before = dict(os.environ)

    restore = offline.force_offline(datasets_hub_path=True)
    try:
        assert constants.HF_HUB_OFFLINE and os.environ["HF_HUB_OFFLINE"] == "1"
        assert os.environ.get(offline.DATASETS_OFFLINE) == (user or "0")
        assert config.HF_HUB_OFFLINE is config.HF_DATASETS_OFFLINE is (user is not None)
    finally:
        restore()

    assert dict(os.environ) == before
    assert config.HF_HUB_OFFLINE is config.HF_DATASETS_OFFLINE is True


def test_a_recorded_absence_leaves_the_clients_marker_in_the_calls_own_cache(
    local_hub: LocalHub, tmp_path: Path
) -> None:
    # huggingface_hub's own test_try_to_load_from_cache_no_exist, under manage with the pin file that recorded it.
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import EntryNotFoundError
    from huggingface_hub.file_download import _CACHED_NO_EXIST

    commit = local_hub.add_repo("org/tiny", {"config.json": "{}"})
    entry = {"repo_id": "org/tiny", "repo_type": "model", "revision": "main", "commit": commit}
    pin_path = tmp_path / "pins.json"
    pin_path.write_text(json.dumps([{**entry, "files": ["config.json"], "missing": ["absent.json"]}]) + "\n")
    observer = observer_for(local_hub, "manage")
    observer._pin_file = lambda: pins.load(pin_path)
    own = tmp_path / "own-cache"
    with observe.observing(observer):
        for cache in (None, own):
            with pytest.raises(EntryNotFoundError):
                hf_hub_download("org/tiny", "absent.json", cache_dir=cache)
            found = try_to_load_from_cache("org/tiny", "absent.json", cache_dir=cache, revision=commit)
            assert found is _CACHED_NO_EXIST, cache
