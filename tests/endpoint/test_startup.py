"""The start-up hook of the session's Python processes: a connection that hard-codes the Hub's host
is reported with its file and line, refused offline, and any other ``sitecustomize`` still runs; a
file huggingface_hub takes from the cache is told to the session's endpoint, and so is the import
of huggingface_hub's download module (the endpoint warms up meanwhile)."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import pytest_hfsnapshot.endpoint
from pytest_hfsnapshot.endpoint.server import DIRECT_ROUTE, READ_ROUTE, WARM_ROUTE

STARTUP = Path(pytest_hfsnapshot.endpoint.__file__).parent / "_startup"

#: A client that hard-codes the Hub (diffusers' ``load_numpy`` does this with requests).
HARD_CODED = """\
import urllib.request
try:
    urllib.request.urlopen("https://huggingface.co/datasets/org/data/resolve/main/a.npy", timeout=5)
except OSError as error:
    print("failed:", error)
"""


class Reports(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: list[tuple[str, dict[str, object]]] = []
        #: The paths of requests with no body (a warm-up), in arrival order.
        self.bare: list[str] = []
        self.arrived = threading.Condition()

    def wait_for_bare(self, count: int, timeout: float = 60) -> list[str]:
        """The bare requests once ``count`` have arrived (a child does not wait for its warm-up's answer)."""
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.bare) >= count, timeout=timeout)
            return list(self.bare)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Reports

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.arrived:
            if body:
                self.server.received.append((self.path, json.loads(body)))
            else:
                self.server.bare.append(self.path)
            self.server.arrived.notify_all()
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def reports() -> Iterator[Reports]:
    server = Reports()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def run_child(code: str, reports: Reports, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "client.py"
    script.write_text(code)
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(STARTUP), env.pop("PYTHONPATH", "")])),
        "HFSNAPSHOT_WATCH": "huggingface.co,hf.co",
        "HFSNAPSHOT_SESSION": f"http://127.0.0.1:{reports.server_port}/secret/test-token",
        **env,
    }
    return subprocess.run(
        [sys.executable, str(script)], env=environment, capture_output=True, text=True, timeout=60, check=True
    )


def test_a_hard_coded_connection_is_reported_with_its_file_and_line(reports: Reports, tmp_path: Path) -> None:
    run_child(HARD_CODED, reports, tmp_path)
    assert reports.received == [
        (
            f"/secret/test-token/{DIRECT_ROUTE}",
            {"host": "huggingface.co", "where": f"{tmp_path / 'client.py'}:3", "pid": reports.received[0][1]["pid"]},
        )
    ]


def test_offline_the_connection_is_refused_with_a_line_saying_so(reports: Reports, tmp_path: Path) -> None:
    done = run_child(HARD_CODED, reports, tmp_path, HFSNAPSHOT_OFFLINE="--hf-offline")
    assert (
        f"pytest-hfsnapshot: {tmp_path / 'client.py'}:3 connects to huggingface.co directly, past HF_ENDPOINT, "
        "and this test session is offline (--hf-offline): the connection is refused"
    ) in done.stdout
    assert len(reports.received) == 1


def test_other_hosts_and_the_endpoint_itself_are_left_alone(reports: Reports, tmp_path: Path) -> None:
    code = HARD_CODED.replace("huggingface.co", "example.invalid")
    done = run_child(code, reports, tmp_path, HFSNAPSHOT_OFFLINE="--hf-offline")
    assert "pytest-hfsnapshot" not in done.stdout and reports.received == []


def test_a_subdomain_is_the_hubs_host_too(reports: Reports, tmp_path: Path) -> None:
    run_child(HARD_CODED.replace("huggingface.co", "cdn-lfs.hf.co"), reports, tmp_path)
    assert [body["host"] for _, body in reports.received] == ["cdn-lfs.hf.co"]


def test_the_environments_own_sitecustomize_still_runs(reports: Reports, tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['THEIRS_RAN'] = 'yes'\n")
    done = run_child("import os\nprint(os.environ.get('THEIRS_RAN'))\n", reports, tmp_path, PYTHONPATH=str(theirs))
    assert done.stdout.strip() == "yes"


def test_the_caller_named_is_the_library_that_hard_codes_the_host(reports: Reports, tmp_path: Path) -> None:
    library = tmp_path / "lib" / "site-packages" / "loader"
    library.mkdir(parents=True)
    (library / "__init__.py").write_text(HARD_CODED.replace("try:\n    ", "def load():\n    ").split("except")[0])
    code = "import loader\ntry:\n    loader.load()\nexcept OSError:\n    pass\n"
    run_child(code, reports, tmp_path, PYTHONPATH=str(library.parent))
    assert [body["where"] for _, body in reports.received] == [f"{library / '__init__.py'}:3"]


#: A load by commit that the cache answers, with no request: transformers' way after a model's config.
FROM_CACHE = """\
import sys
from huggingface_hub import hf_hub_download, try_to_load_from_cache
cache, commit = sys.argv[1], sys.argv[2]
print(try_to_load_from_cache("org/name", "config.json", cache_dir=cache, revision=commit))
print(hf_hub_download("org/name", "config.json", cache_dir=cache, revision=commit))
"""


def test_a_file_taken_from_the_cache_is_told_to_the_sessions_endpoint_once(reports: Reports, tmp_path: Path) -> None:
    commit = "c" * 40
    cached = tmp_path / "cache" / "models--org--name" / "snapshots" / commit / "config.json"
    cached.parent.mkdir(parents=True)
    cached.write_text("{}")
    session = f"http://127.0.0.1:{reports.server_port}/secret/test-token"
    script = tmp_path / "load.py"
    script.write_text(FROM_CACHE)

    def load(endpoint: str) -> list[str]:
        env = {**os.environ, "PYTHONPATH": str(STARTUP), "HFSNAPSHOT_SESSION": session, "HF_ENDPOINT": endpoint}
        command = [sys.executable, str(script), str(tmp_path / "cache"), commit]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=True).stdout.split()

    assert load(session) == [str(cached)] * 2
    assert reports.received == [(f"/secret/test-token/{READ_ROUTE}", {"path": str(cached), "revision": commit})]
    assert load("http://127.0.0.1:9") == [str(cached)] * 2
    assert len(reports.received) == 1, "a load from another Hub's files was told to the session"


def test_the_import_of_the_download_module_tells_the_endpoint_to_warm_up(reports: Reports, tmp_path: Path) -> None:
    session = f"http://127.0.0.1:{reports.server_port}/secret/test-token"
    script = tmp_path / "imports.py"
    script.write_text("import huggingface_hub.file_download\nimport huggingface_hub.file_download\n")

    def child(endpoint: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(STARTUP), "HFSNAPSHOT_SESSION": session, "HF_ENDPOINT": endpoint}
        subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60, check=True)

    child("http://127.0.0.1:9")  # loads from another Hub: nothing for the session to warm
    child(session)
    assert reports.wait_for_bare(1) == [f"/secret/test-token/{WARM_ROUTE}"]
    child(session)
    warmed = reports.wait_for_bare(2)
    assert warmed == [f"/secret/test-token/{WARM_ROUTE}"] * 2, "one for each process, however often it imports"
    assert reports.received == []
