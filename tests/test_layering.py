"""How the package hangs together: no import cycle, a pytest-free core, a light plugin start-up, old names kept."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_hfsnapshot"
# The pytest layer: the only modules that may import pytest (the testing kit's fixtures included).
PYTEST_LAYER = {
    "pytest_hfsnapshot.declarations",
    "pytest_hfsnapshot.options",
    "pytest_hfsnapshot.plugin",
    "pytest_hfsnapshot.prefetch_run",
    "pytest_hfsnapshot.reporting",
    "pytest_hfsnapshot.session",
    "pytest_hfsnapshot.testing.fixtures",
    "pytest_hfsnapshot.testing_plugin",
    "pytest_hfsnapshot.verdicts",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    """Every module of the package, the demo's example suite (test files, not modules) aside."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "suite" not in path.relative_to(PACKAGE).parts[:-1]:
            found[module_name(path)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """What ``name`` imports at run time, in functions too; ``if TYPE_CHECKING:`` blocks are skipped."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known)
    return found


def import_graph() -> dict[str, set[str]]:
    """The package's modules and, for each, the package modules it imports."""
    modules = package_modules()
    known = set(modules)
    graph = {}
    for name, path in modules.items():
        found = imports(name, path, known)
        # A module's own parent packages are imported before it, whatever it imports: not an edge.
        graph[name] = {target for target in found if target in known and not f"{name}.".startswith(f"{target}.")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_deferred_or_not() -> None:
    assert cycles(import_graph()) == []


def test_the_graph_sees_imports_inside_functions() -> None:
    graph = import_graph()
    # Both are imported inside functions only.
    assert "pytest_hfsnapshot.engine" in graph["pytest_hfsnapshot.session"]
    assert "pytest_hfsnapshot.prefetch_run" in graph["pytest_hfsnapshot.plugin"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_core_never_imports_pytest_or_the_pytest_layer() -> None:
    graph = import_graph()
    modules = package_modules()
    offending = {}
    for name, path in modules.items():
        # The package's __init__ hands out snapshot_fixture on first use (its __getattr__), so
        # `import pytest_hfsnapshot` stays pytest-free (see the next test) without it being core.
        if name in PYTEST_LAYER or name == "pytest_hfsnapshot":
            continue
        direct = {t for t in imports(name, path, set(modules)) if t.partition(".")[0] in ("pytest", "_pytest")}
        layer = graph[name] & PYTEST_LAYER
        if direct or layer:
            offending[name] = sorted(direct | layer)
    assert offending == {}
    assert set(modules) >= PYTEST_LAYER, "a pytest-layer module was renamed: update PYTEST_LAYER"


def run_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_plugin_start_up_imports_no_http_stack() -> None:
    loaded = run_python(
        "import sys, pytest_hfsnapshot.plugin, pytest_hfsnapshot.testing_plugin; print('\\n'.join(sys.modules))"
    ).split()
    heavy = {"httpx", "httpx2", "huggingface_hub.errors", "huggingface_hub.utils", "huggingface_hub.hf_api"}
    ours = {"pytest_hfsnapshot.engine", "pytest_hfsnapshot.prefetch", "pytest_hfsnapshot.refusals"}
    assert sorted(set(loaded) & (heavy | ours)) == []


def test_every_core_module_imports_where_pytest_cannot_be() -> None:
    from test_cli import NO_PYTEST

    core = sorted(name for name in package_modules() if name not in PYTEST_LAYER)
    assert "pytest_hfsnapshot.prefetch" in core
    run_python(NO_PYTEST + "".join(f"import {name}\n" for name in core))
    layer = subprocess.run([sys.executable, "-c", NO_PYTEST + "import pytest_hfsnapshot.plugin"], capture_output=True)
    assert layer.returncode != 0 and b"pytest is not installed here" in layer.stderr


@pytest.mark.parametrize(
    ("module", "names"),
    [
        (
            "pytest_hfsnapshot.plugin",
            "AUTH_ACTIONS MISSING_ACTIONS VERIFY_MODES NO_TOKEN_REASON HfSnapshotSession Options "
            "SnapshotFactory SnapshotRecord fetch_snapshot get_options hf_snapshot hf_snapshots human_size "
            "primary_records request_from_marker requests_for_items session_id snapshot_fixture "
            "snapshot_records summary_lines",
        ),
        (
            "pytest_hfsnapshot.prefetch",
            "DEFAULT_WORKERS Display Outcome PrefetchResult parse_spec prefetch progress_line report_lines "
            "stream_display",
        ),
        (
            "pytest_hfsnapshot",
            "AuthError EntryNotFoundError HfSnapshotError InvalidRequestError LockTimeoutError "
            "OfflineMissingError RevisionNotFoundError Snapshot TransientError UnsafeCacheError "
            "UnverifiedRevisionError VerificationError materialize snapshot_fixture",
        ),
    ],
)
def test_names_that_moved_are_still_importable_from_where_they_were(module: str, names: str) -> None:
    imported = __import__(module, fromlist=["_"])
    assert [name for name in names.split() if not hasattr(imported, name)] == []


if __name__ == "__main__":
    graph = import_graph()
    print(f"{len(graph)} modules, {sum(map(len, graph.values()))} import edges")
    print("cycles:", cycles(graph) or "none")
