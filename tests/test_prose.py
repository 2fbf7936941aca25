"""The prose names only what exists: every module path and repository path in the words around the code.

Docstrings and comments of every Python file, the manual, the README, the changelog and the
examples are read for dotted names under ``pytest_hfsnapshot`` (resolved by import and
``getattr``, no network) and for paths in the repository (``tests/...``, ``docs/...``, ...). A
file that moves or a function that is renamed leaves words behind; this test finds them.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "pytest_hfsnapshot"

#: Folders whose Python files' docstrings and comments are prose.
PYTHON_TREES = (PACKAGE, "tests", "bench", "crosscheck", "compat", "docs/hooks")
#: Files of other projects, kept as they ship them: their prose names their own paths.
VENDORED = "compat/vendor"
#: Pages and files that are prose throughout.
PAGES = (
    "README.md",
    "CHANGELOG.md",
    "docs/**/*.md",
    "examples/**/*",
    "bench/*.md",
    "tox.ini",
    "mkdocs.yml",
    "pyproject.toml",
    ".ci/run",
)
#: The repository's top folders that a path in prose may start with.
TOP_FOLDERS = (PACKAGE, "tests", "docs", "examples", "bench", "crosscheck", "compat")

#: Top-level packages of the repository that prose may name by their dotted path.
IMPORTABLE = (PACKAGE, "bench")

#: Paths the prose names that are of another project, not of this repository.
NOT_OURS = {
    "tests/hf-pins.json": "the pin file of the user's project in docs/how-to/pins.md and its workflow",
    "tests/testing_utils.py": "PEFT's module that tests/peers/suite copies",
}

DOTTED = re.compile(rf"(?<![\w.]){PACKAGE}(?:\.\w+)+")
REPO_PATH = re.compile(rf"(?<![\w./~-])(?:{'|'.join(TOP_FOLDERS)})/[\w./-]*[\w/]")
ROLE = re.compile(r":(mod|func|class|meth|attr|data|exc|obj):`([^`]+)`")


def python_files() -> Iterator[Path]:
    for tree in PYTHON_TREES:
        yield from sorted(p for p in (ROOT / tree).rglob("*.py") if not p.is_relative_to(ROOT / VENDORED))


def module_name(path: Path) -> str | None:
    """The importable name of a file of the package or of the bench, else None."""
    relative = path.relative_to(ROOT).with_suffix("")
    if relative.parts[0] not in IMPORTABLE:
        return None
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def prose_of_python(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, text)`` of every comment and docstring line of a Python file."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                for offset, line in enumerate(first.value.value.splitlines()):
                    yield first.lineno + offset, line


def prose_of_pages() -> Iterator[tuple[Path, int, str]]:
    for pattern in PAGES:
        for path in sorted(ROOT.glob(pattern)):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".py":
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                    yield path, number, line


def resolves(dotted: str) -> bool:
    """Whether ``a.b.c`` is a module, or an attribute (of an attribute ...) of one.

    An instance attribute of a class counts where the class's source sets it (``self.reason =``)
    or annotates it (a dataclass field).
    """
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:]:
            if hasattr(found, name):
                found = getattr(found, name)
            elif isinstance(found, type) and sets_attribute(found, name):
                found = None
            else:
                return False
        return True
    return False


def sets_attribute(cls: type, name: str) -> bool:
    for klass in cls.__mro__:
        if name in getattr(klass, "__annotations__", {}):
            return True
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        if re.search(rf"\bself\.{name}\b *(?::[^=]*)?=", source):
            return True
    return False


def role_target(target: str, module: str | None) -> str | None:
    """The absolute dotted name a Sphinx role's target means in ``module``, None where it cannot tell.

    ``.name`` is relative to the module's package, ``Name.attr`` to the module itself unless
    ``Name`` is a module anyone can import (``filelock.Timeout``); a bare method or attribute name
    (``:meth:`wait```) belongs to a class the role does not say.
    """
    target = target.removeprefix("~").removesuffix("()")
    first = target.split(".")[0]
    if first in IMPORTABLE or ("." in target and first and importlib.util.find_spec(first) is not None):
        return target
    if module is None:
        return None
    if target.startswith("."):
        return module.rpartition(".")[0] + target
    return f"{module}.{target}" if "." in target else None


def exists(path: str) -> bool:
    """Whether ``path`` is in the repository, or is what a run writes into an ignored folder of it."""
    if path in NOT_OURS:
        return True
    ignored = [
        line.strip().strip("/")
        for line in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
        if "/" in line.strip().strip("/")
    ]
    return (ROOT / path.removesuffix("/")).exists() or any(path.startswith(f"{folder}/") for folder in ignored)


def stale() -> list[str]:
    found = []
    for path in python_files():
        where = path.relative_to(ROOT).as_posix()
        module = module_name(path)
        for line, text in prose_of_python(path):
            names = set(DOTTED.findall(text))
            names |= {name for role, target in ROLE.findall(text) if (name := role_target(target, module))}
            found += [f"{where}:{line}: {name}" for name in sorted(names) if not resolves(name)]
            found += [f"{where}:{line}: {named}" for named in REPO_PATH.findall(text) if not exists(named)]
    for path, line, text in prose_of_pages():
        where = path.relative_to(ROOT).as_posix()
        found += [f"{where}:{line}: {name}" for name in DOTTED.findall(text) if not resolves(name)]
        found += [f"{where}:{line}: {named}" for named in REPO_PATH.findall(text) if not exists(named)]
    return found


def test_the_prose_names_only_modules_and_paths_that_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))  # the bench is imported from the checkout, not installed
    found = stale()
    assert not found, "names in prose that do not exist (where: name):\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("see :func:`pytest_hfsnapshot.core.nowhere.skips`.", "pytest_hfsnapshot.core.nowhere.skips"),
        ("# as pytest_hfsnapshot.errors.NoSuchError says", "pytest_hfsnapshot.errors.NoSuchError"),
        ("tested in tests/plugin/test_gone.py, see docs/how-to/gone.md.", "tests/plugin/test_gone.py"),
    ],
)
def test_a_stale_name_is_found(text: str, named: str) -> None:
    names = DOTTED.findall(text) + REPO_PATH.findall(text)
    assert named in names
    assert not (resolves(named) if named.startswith(PACKAGE) else exists(named))


def test_names_that_exist_resolve() -> None:
    assert resolves("pytest_hfsnapshot.testing.hub.LocalHub.add_repo")
    assert resolves("pytest_hfsnapshot.materialize")
    assert exists("tests/test_prose.py") and exists("docs/how-to/")
    assert REPO_PATH.findall("see https://example.org/docs/x.md and /tmp/tests/y") == []


#: The most lines the package's module docstrings may take together, quotes included: each says
#: what its module is for and why in a few lines; what a user needs is in the manual.
MAX_MODULE_DOCSTRING_LINES = 250


def module_docstring_lines(path: Path) -> int:
    """The physical lines of a module's docstring, from its opening quotes to its closing ones."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return (first.end_lineno or first.lineno) - first.lineno + 1
    return 0


def test_the_module_docstrings_are_short(tmp_path: Path) -> None:
    modules = [path for path in sorted((ROOT / PACKAGE).rglob("*.py")) if "suite" not in path.parts]
    lines = {path.relative_to(ROOT).as_posix(): module_docstring_lines(path) for path in modules}
    assert sum(lines.values()) <= MAX_MODULE_DOCSTRING_LINES, sorted(lines.items(), key=lambda item: -item[1])[:10]
    sample = tmp_path / "sample.py"
    sample.write_text('"""One.\n\nTwo.\n"""\n\nx = """not a docstring"""\n')
    assert module_docstring_lines(sample) == 4
