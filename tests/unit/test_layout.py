"""The repository's layout stays as ARCHITECTURE.md draws it: bench/ measures the app through harness/ and the pure
layers (never the tests, never a page), harness/ is what tests and bench share (it imports neither), and no source
file outside tests/ grows past 500 lines."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 500
SOURCE_SUFFIXES = {".py", ".c", ".h", ".js", ".css"}
SKIPPED_DIRS = {"tests", "__pycache__", "build", "dist", "node_modules"}


def imported_modules(source: str) -> set[str]:
    """Every absolute module a Python source imports, at any depth (inside functions too): `import a.b` gives a.b,
    `from a.b import c` gives a.b and a.b.c."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def imports_of(package: str) -> dict[str, set[str]]:
    """{file under package/: the modules it imports}."""
    return {str(path.relative_to(ROOT)): imported_modules(path.read_text(encoding="utf-8"))
            for path in sorted((ROOT / package).rglob("*.py"))}


def reaching(imports: dict[str, set[str]], roots: tuple[str, ...]) -> dict[str, list[str]]:
    """{file: its imports of any module under roots}, for the files that have some."""
    out = {}
    for file, modules in imports.items():
        bad = sorted(m for m in modules if m.split(".")[0] in roots)
        if bad:
            out[file] = bad
    return out


def source_files() -> list[Path]:
    """The repository's source files outside tests/ (hidden folders, caches and build output left out)."""
    return sorted(path for path in ROOT.rglob("*")
                  if path.suffix in SOURCE_SUFFIXES and path.is_file()
                  and not any(part.startswith(".") or part in SKIPPED_DIRS or part.endswith(".egg-info")
                              for part in path.relative_to(ROOT).parts[:-1]))


def test_the_import_reader_finds_every_form():
    source = ("import tests\nimport os, app_pages.positional as page\nfrom tests.app import apptest\n"
              "from . import sibling\n"
              "def f():\n    from app_pages import _caches\n    import bench.ws_tap\n")
    assert imported_modules(source) == {"tests", "os", "app_pages.positional", "tests.app", "tests.app.apptest",
                                        "app_pages", "app_pages._caches", "bench.ws_tap"}
    assert reaching({"x.py": imported_modules(source)}, ("tests",)) == {"x.py": ["tests", "tests.app",
                                                                                  "tests.app.apptest"]}


def test_no_bench_module_imports_the_tests_or_a_page():
    imports = imports_of("bench")
    assert len(imports) > 10
    assert reaching(imports, ("tests", "app_pages")) == {}


def test_harness_imports_neither_the_tests_nor_bench():
    imports = imports_of("harness")
    assert "harness/tiny_gguf.py" in imports
    assert reaching(imports, ("tests", "bench")) == {}


def test_no_source_file_outside_tests_is_over_500_lines():
    files = source_files()
    assert any(path.relative_to(ROOT).parts[0] == "bench" for path in files)
    assert not any(path.relative_to(ROOT).parts[0] == "tests" for path in files)
    long = {str(path.relative_to(ROOT)): n for path in files
            if (n := len(path.read_text(encoding="utf-8", errors="replace").splitlines())) > MAX_LINES}
    assert long == {}
