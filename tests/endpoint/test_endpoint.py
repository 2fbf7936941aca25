"""The session endpoint in this process: what a child asking it gets, what is recorded, who is let in."""

from __future__ import annotations

import datetime
import email.utils
import hashlib
import http.client
import http.server
import json
import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from huggingface_hub import hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
)

from pytest_hfsnapshot.endpoint import SessionEndpoint
from pytest_hfsnapshot.endpoint.replies import NO_SECRET
from pytest_hfsnapshot.endpoint.server import READ_ROUTE
from pytest_hfsnapshot.testing.half_written import corrupted_blob, truncated_blob
from pytest_hfsnapshot.testing.hub import LocalHub

from .conftest import TEST, Answer, Served, as_child, ask

WEIGHTS = bytes(range(256)) * 64  # 16 KiB: an LFS file (Xet-backed on the xet transports)
FILES = {"config.json": '{"model_type": "bert"}', "model.safetensors": WEIGHTS}


def only_origin(url: str) -> str:
    return "/".join(url.split("/")[:3])


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_a_file_is_answered_as_the_hub_answers_it_and_recorded_under_the_test(
    local_hub: LocalHub, serve: type[Served]
) -> None:
    commit = local_hub.add_repo("org/tiny", FILES)
    served = serve("report")

    head = ask(f"{served.url}/org/tiny/resolve/main/model.safetensors", "HEAD")
    sha256 = hashlib.sha256(WEIGHTS).hexdigest()
    assert head.status == 200, head
    assert head.headers["X-Repo-Commit"] == commit
    assert (head.headers["ETag"], head.headers["X-Linked-Etag"]) == (f'"{sha256}"', f'"{sha256}"')
    assert (head.headers["X-Linked-Size"], head.headers["Content-Length"]) == (str(len(WEIGHTS)),) * 2
    assert head.headers["Accept-Ranges"] == "bytes"
    assert not [name for name in head.headers if name.lower().startswith("x-xet") or name.lower() == "link"]
    got = ask(f"{served.url}/org/tiny/resolve/{commit}/model.safetensors")
    assert (got.status, got.body) == (200, WEIGHTS)
    part = ask(f"{served.url}/org/tiny/resolve/main/model.safetensors", headers={"Range": "bytes=100-"})
    assert (part.status, part.body) == (206, WEIGHTS[100:])
    assert part.headers["Content-Range"] == f"bytes 100-{len(WEIGHTS) - 1}/{len(WEIGHTS)}"
    small = ask(f"{served.url}/org/tiny/resolve/main/config.json", "HEAD")
    assert "X-Linked-Etag" not in small.headers and len(small.headers["ETag"].strip('"')) == 40

    (use,) = served.observer.recorder.uses()
    assert (use.repo_id, use.revision, use.commit, sorted(use.files)) == (
        "org/tiny",
        "main",
        commit,
        ["config.json", "model.safetensors"],
    )
    assert use.tests == [TEST] and served.observer.recorder.keys_of(TEST) == {("model", "org/tiny", "main")}
    assert served.observer.recorder.phase == "session", "the test a handler acted for leaked out"


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_huggingface_hub_loads_by_repo_id_through_it(local_hub: LocalHub, serve: type[Served], tmp_path: Path) -> None:
    commit = local_hub.add_repo("org/tiny", {**FILES, "sub/vocab.txt": "a\nb\n"}, repo_type="dataset")
    served = serve("report")
    child_cache = tmp_path / "child-cache"

    with as_child():
        folder = snapshot_download("org/tiny", repo_type="dataset", endpoint=served.url, cache_dir=child_cache)
        absent = pytest.raises(RemoteEntryNotFoundError)
        with absent:
            hf_hub_download("org/tiny", "absent.json", repo_type="dataset", endpoint=served.url, cache_dir=child_cache)

    assert (Path(folder) / "model.safetensors").read_bytes() == WEIGHTS
    assert (Path(folder) / "sub" / "vocab.txt").read_text() == "a\nb\n"
    assert Path(folder).name == commit
    (use,) = served.observer.recorder.uses()
    assert (use.repo_type, sorted(use.files), use.missing) == (
        "dataset",
        ["config.json", "model.safetensors", "sub/vocab.txt"],
        {"absent.json"},
    )
    # The child's cache got plain bytes through /resolve/: nothing of Xet reached it.
    assert not list(child_cache.glob("blobs/*/*")), "the child wrote a shared Xet store"


def test_api_answers_come_back_without_xet_and_point_at_the_endpoint(local_hub: LocalHub, serve: type[Served]) -> None:
    local_hub.tree_page_size = 2
    commit = local_hub.add_repo("org/tiny", {**FILES, "a.txt": "a", "b.txt": "b"})
    served = serve("report")

    revision = ask(f"{served.url}/api/models/org/tiny/revision/main")
    assert revision.status == 200 and json.loads(revision.body)["sha"] == commit
    tree = ask(f"{served.url}/api/models/org/tiny/tree/{commit}?recursive=true")
    assert tree.status == 200 and len(json.loads(tree.body)) == 2
    assert tree.headers["Link"].startswith(f"<{served.url}/api/models/org/tiny/tree/"), tree.headers["Link"]
    listing = []
    url: str | None = f"{served.url}/api/models/org/tiny/tree/{commit}?recursive=true"
    while url:
        page = ask(url)
        listing += json.loads(page.body)
        link = page.headers.get("Link")
        url = link.split(";")[0].strip("<>") if link else None
    weights = next(entry for entry in listing if entry["path"] == "model.safetensors")
    assert "xetHash" not in weights and weights["lfs"]["size"] == len(WEIGHTS)
    info = ask(
        f"{served.url}/api/models/org/tiny/paths-info/{commit}",
        "POST",
        {"Content-Type": "application/x-www-form-urlencoded"},
        b"paths=model.safetensors",
    )
    assert info.status == 200 and "xetHash" not in json.loads(info.body)[0]
    missing = ask(f"{served.url}/api/models/org/nothing/revision/main")
    assert (missing.status, missing.headers["X-Error-Code"]) == (401, "RepoNotFound")
    assert any(TEST in use.tests for use in served.observer.recorder.uses())


def test_a_request_without_the_sessions_secret_is_refused(local_hub: LocalHub, serve: type[Served]) -> None:
    local_hub.add_repo("org/tiny", FILES)
    served = serve("report")
    origin = only_origin(served.url)
    secret = served.url.split("/")[3]

    for path in ("/org/tiny/resolve/main/config.json", "/", f"/{secret[:-1]}x/t/org/tiny/resolve/main/config.json"):
        refused = ask(origin + path)
        assert (refused.status, refused.body.decode()) == (403, NO_SECRET), path
    assert ask(f"{origin}/{secret}").status == 403
    assert NO_SECRET == "pytest-hfsnapshot's session endpoint: this request lacks the session's secret.\n"
    assert local_hub.requests == [], "a refused request reached the Hub"
    assert served.observer.recorder.uses() == []


def test_a_childs_read_from_the_cache_is_recorded_and_any_other_path_is_refused(
    local_hub: LocalHub, serve: type[Served], tmp_path: Path
) -> None:
    commit = local_hub.add_repo("org/tiny", FILES)
    path = hf_hub_download("org/tiny", "config.json")
    served = serve("report")
    read = f"{served.url}/{READ_ROUTE}"
    outside = tmp_path / "config.json"
    outside.write_text("{}")
    local_hub.reset_counters()

    def tell(data: object) -> int:
        return ask(read, "POST", {"Content-Type": "application/json"}, json.dumps(data).encode()).status

    assert [tell({"path": str(outside)}), tell({"path": path.replace(commit, "0" * 40)}), tell(["x"])] == [400] * 3
    assert served.observer.recorder.uses() == []
    assert tell({"path": path, "revision": "main"}) == 204
    (use,) = served.observer.recorder.uses()
    assert (use.repo_id, use.revision, use.commit, use.files, use.tests) == (
        "org/tiny", "main", commit, {"config.json": len(FILES["config.json"])}, [TEST]
    )  # fmt: skip
    assert local_hub.requests == [], "a read from the cache is answered with no request"


def test_it_listens_on_loopback_only_and_nothing_is_left_once_closed(local_hub: LocalHub, serve: type[Served]) -> None:
    local_hub.add_repo("org/tiny", FILES)
    served = serve("report")
    url = served.url
    port = served.endpoint.port
    assert url.startswith(f"http://127.0.0.1:{port}/")
    assert served.endpoint.address == ("127.0.0.1", port)
    # A child's keep-alive connection, made and used during the session.
    kept_open = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    kept_open.request("GET", url[len(only_origin(url)) :] + "/org/tiny/resolve/main/config.json")
    assert kept_open.getresponse().read() == FILES["config.json"].encode()
    try:
        served.endpoint.close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        with pytest.raises((http.client.HTTPException, OSError)):
            kept_open.request("GET", url[len(only_origin(url)) :] + "/org/tiny/resolve/main/config.json")
            kept_open.getresponse()
    finally:
        kept_open.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{url}/org/tiny/resolve/main/config.json", timeout=5)


def test_a_gated_file_is_served_only_to_a_token_the_hub_accepted(
    local_hub: LocalHub, serve: type[Served], tmp_path: Path
) -> None:
    commit = local_hub.add_repo("org/gated", FILES, gated=True)
    served = serve("report")
    file_url = f"{served.url}/org/gated/resolve/{commit}/model.safetensors"
    bearer = {"Authorization": f"Bearer {local_hub.token}"}

    refused = ask(file_url, "HEAD")
    assert (refused.status, refused.headers["X-Error-Code"]) == (403, "GatedRepo")
    allowed = ask(file_url, headers=bearer)
    assert (allowed.status, allowed.body) == (200, WEIGHTS)
    local_hub.reset_counters()
    again = ask(file_url, headers=bearer)
    assert again.status == 200 and local_hub.requests == [], "a granted token's cached file cost a request"
    # Now cached: asked with no token, or a token the Hub never accepted, the Hub is asked and refuses.
    assert ask(file_url, "HEAD").headers.get("X-Error-Code") == "GatedRepo"
    wrong = ask(file_url, "HEAD", {"Authorization": "Bearer hf_not_granted"})
    assert wrong.status in (401, 403) and wrong.status != 200
    with as_child(), pytest.raises(GatedRepoError):
        hf_hub_download(
            "org/gated", "config.json", revision=commit, endpoint=served.url, token=False, cache_dir=tmp_path
        )
    private = local_hub.add_repo("org/private", FILES, private=True)
    assert ask(f"{served.url}/org/private/resolve/{private}/config.json", headers=bearer).status == 200
    with as_child(), pytest.raises(RepositoryNotFoundError):
        hf_hub_download(
            "org/private", "config.json", revision=private, endpoint=served.url, token=False, cache_dir=tmp_path
        )


def test_an_open_repo_is_asked_once_then_known_from_the_cache(
    local_hub: LocalHub, serve: type[Served], tmp_path: Path
) -> None:
    commit = local_hub.add_repo("org/open", FILES)
    served = serve("report")
    bearer = {"Authorization": f"Bearer {local_hub.token}"}
    assert ask(f"{served.url}/org/open/resolve/main/config.json", headers=bearer).status == 200
    local_hub.reset_counters()
    # Cached at its commit: the Hub is asked once, with no token, whether the repo's files are open.
    assert ask(f"{served.url}/org/open/resolve/{commit}/config.json").status == 200
    assert [(m, s) for m, _, s in local_hub.requests] == [("HEAD", 200)]
    served.endpoint.close()
    local_hub.reset_counters()
    later = serve("report")  # another session on the same cache
    assert ask(f"{later.url}/org/open/resolve/{commit}/config.json").status == 200
    assert local_hub.requests == []


def test_the_token_is_never_written_anywhere(local_hub: LocalHub, serve: type[Served]) -> None:
    commit = local_hub.add_repo("org/gated", FILES, gated=True)
    served = serve("manage")
    bearer = {"Authorization": f"Bearer {local_hub.token}"}
    assert ask(f"{served.url}/org/gated/resolve/main/model.safetensors", headers=bearer).status == 200
    assert ask(f"{served.url}/api/models/org/gated/revision/{commit}", headers=bearer).status == 200
    assert ask(f"{served.url}/org/gated/resolve/main/config.json").status == 403
    assert local_hub.cache_dir is not None
    token = local_hub.token.encode()
    written = [
        p for p in local_hub.cache_dir.rglob("*") if p.is_file() and not p.is_symlink() and token in p.read_bytes()
    ]
    assert written == []


def test_manage_gets_a_child_past_a_503_and_repairs_a_damaged_cached_file(
    local_hub: LocalHub, serve: type[Served]
) -> None:
    commit = local_hub.add_repo("org/tiny", FILES)
    served = serve("manage")
    local_hub.fail("*/org/tiny/resolve/*/model.safetensors", 503, times=2)

    first = ask(f"{served.url}/org/tiny/resolve/main/model.safetensors")
    assert (first.status, first.body) == (200, WEIGHTS)
    assert local_hub.pending_faults() == []
    assert local_hub.cache_dir is not None
    corrupted_blob(local_hub.cache_dir, "org/tiny", "model.safetensors")
    served.endpoint.close()
    later = serve("manage", verify="sha256")  # a new session re-checks the file before a child reads it

    again = ask(f"{later.url}/org/tiny/resolve/main/model.safetensors")
    assert (again.status, again.body) == (200, WEIGHTS)
    (use,) = later.observer.recorder.uses()
    assert (use.commit, use.tests) == (commit, [TEST])


def test_pins_are_followed_with_no_request_naming_the_branch(
    local_hub: LocalHub, serve: type[Served], tmp_path: Path
) -> None:
    pinned = local_hub.add_repo("org/tiny", FILES)
    local_hub.add_repo("org/tiny", {**FILES, "config.json": '{"model_type": "gpt2"}'})
    pin_path = tmp_path / "pins.json"
    entry = {"repo_id": "org/tiny", "repo_type": "model", "revision": "main", "commit": pinned}
    pin_path.write_text(json.dumps([entry]) + "\n")
    served = serve("manage", pin_path=pin_path)

    head = ask(f"{served.url}/org/tiny/resolve/main/config.json", "HEAD")
    assert head.headers["X-Repo-Commit"] == pinned
    assert ask(f"{served.url}/org/tiny/resolve/main/config.json").body == FILES["config.json"].encode()
    info = ask(f"{served.url}/api/models/org/tiny/revision/main")
    assert json.loads(info.body)["sha"] == pinned
    assert [path for _, path, _ in local_hub.requests if "/main" in path] == []
    local_hub.reset_counters()
    assert ask(f"{served.url}/org/tiny/resolve/main/config.json").status == 200
    assert local_hub.requests == [], "a pinned file verified in the cache cost a request"
    other = "tests/test_models.py::test_other"
    again = ask(f"{served.endpoint.url_for(other)}/org/tiny/resolve/main/config.json")
    assert (again.status, again.headers["X-Repo-Commit"]) == (200, pinned)
    (use,) = served.observer.recorder.uses()
    assert (use.revision, use.commit, use.tests) == ("main", pinned, [TEST, other]), "the warm answer went unrecorded"
    assert local_hub.cache_dir is not None
    truncated_blob(local_hub.cache_dir, "org/tiny", "config.json", revision=pinned)
    repaired = ask(f"{served.url}/org/tiny/resolve/main/config.json")
    assert repaired.body == FILES["config.json"].encode(), "a file changed since it was verified was served as it is"


def test_offline_the_cache_serves_and_a_miss_is_named_for_the_test(
    local_hub: LocalHub, serve: type[Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants as constants

    commit = local_hub.add_repo("org/tiny", FILES)
    online = serve("report")
    assert ask(f"{online.url}/org/tiny/resolve/main/config.json").status == 200
    online.endpoint.close()
    local_hub.reset_counters()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    served = serve("report", offline=True)

    head = ask(f"{served.url}/org/tiny/resolve/main/config.json", "HEAD")
    assert (head.status, head.headers["X-Repo-Commit"]) == (200, commit)
    miss = ask(f"{served.url}/org/tiny/resolve/main/model.safetensors", "HEAD")
    assert miss.status == 404 and "X-Error-Code" not in miss.headers
    assert "offline" in miss.headers["X-Error-Message"]
    assert local_hub.requests == []
    # What the offline test's failure will name (a load the cache served is not a failure to name).
    misses = {(m.phase, m.label, m.path) for m in served.observer.offline_misses}
    assert (TEST, "org/tiny@main", "model.safetensors") in misses


def test_an_answer_is_a_plain_http_answer(local_hub: LocalHub, serve: type[Served]) -> None:
    served = serve("report")
    answer = ask(f"{served.url}/org/none/resolve/main/config.json")
    assert isinstance(answer, Answer) and answer.status == 401
    assert answer.headers["X-Error-Code"] == "RepoNotFound"
    assert json.loads(answer.body)["error"]


def test_answers_on_one_kept_alive_connection_are_framed_as_http_11_says(
    local_hub: LocalHub, serve: type[Served]
) -> None:
    # The endpoint writes its status line and headers itself (one write, a Date made once a second).
    local_hub.add_repo("org/tiny", FILES)
    served = serve("report")
    host, port = served.endpoint.address
    prefix = served.url.split(f":{port}", 1)[1]
    connection = http.client.HTTPConnection(host, port, timeout=60)
    try:
        answers = []
        for method, path in [("HEAD", "model.safetensors"), ("GET", "config.json"), ("GET", "missing.bin")]:
            connection.request(method, f"{prefix}/org/tiny/resolve/main/{path}")
            response = connection.getresponse()
            answers.append((method, response.status, response.reason, response.getheaders(), response.read()))
    finally:
        connection.close()
    (_, *head), (_, *got), (_, *missing) = answers
    assert (head[0], head[1], head[3]) == (200, "OK", b"")
    assert (got[0], got[1], got[3]) == (200, "OK", FILES["config.json"].encode())
    assert (missing[0], missing[1]) == (404, "Not Found") and json.loads(missing[3])["error"]
    for method, status, _, headers, body in answers:
        named = dict(headers)
        assert named["Server"] == "pytest-hfsnapshot"
        sent = email.utils.parsedate_to_datetime(named["Date"])
        assert abs((datetime.datetime.now(datetime.timezone.utc) - sent).total_seconds()) < 60
        length = len(WEIGHTS) if method == "HEAD" else len(body)
        assert int(named["Content-Length"]) == length, (status, named)


def test_a_failure_the_retries_cannot_get_past_reaches_the_child_as_a_502_with_the_plugins_message(
    local_hub: LocalHub, serve: type[Served]
) -> None:
    local_hub.add_repo("org/tiny", FILES)
    served = serve("manage", retries=1)
    local_hub.fail("*/org/tiny/resolve/*/model.safetensors", 503, times=50)

    failed = ask(f"{served.url}/org/tiny/resolve/main/model.safetensors", "HEAD")

    assert failed.status == 502 and "X-Error-Code" not in failed.headers
    assert "org/tiny" in failed.headers["X-Error-Message"] and "model.safetensors" in failed.headers["X-Error-Message"]


class _Renamed(http.server.BaseHTTPRequestHandler):
    """An upstream that answers as the Hub does for a renamed repo, and pages a listing."""

    def do_GET(self) -> None:
        self.send_response(307 if "/old/" in self.path else 200)
        if "/old/" in self.path:
            self.send_header("Location", self.path.replace("/old/", "/new/"))
        origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.send_header("Link", f'<{origin}/api/models/new/name/tree/main?cursor=1>; rel="next"')
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"[]")

    def log_message(self, format: str, *args: object) -> None:
        return


def test_a_redirect_and_a_next_page_point_at_the_endpoint(local_hub: LocalHub, serve: type[Served]) -> None:
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Renamed)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    try:
        served = serve("report")
        endpoint = SessionEndpoint(served.observer, lambda: served.settings)
        endpoint.upstream = f"http://127.0.0.1:{upstream.server_address[1]}"
        endpoint.start()
        try:
            url = endpoint.url_for(TEST)
            moved = ask(f"{url}/api/models/old/name/revision/main")
            assert (moved.status, moved.headers["Location"]) == (307, f"{url}/api/models/new/name/revision/main")
            assert moved.headers["Link"] == f'<{url}/api/models/new/name/tree/main?cursor=1>; rel="next"'
        finally:
            endpoint.close()
    finally:
        upstream.shutdown()
        upstream.server_close()
