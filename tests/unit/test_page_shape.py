"""Every page of app_pages/ has one shape: its module body only imports, defines constants and functions; one
`render()` does the page's work, called under `if __name__ == "__main__"` (st.Page runs the file as __main__), so a
page can be imported without running. No class: the body runs again at every run (a dataclass made there cost ~1 ms
a run), so a page's classes live in a module it imports."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(p for p in (ROOT / "app_pages").glob("*.py") if not p.name.startswith("_"))
DEFINITIONS = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.Assert)
MAIN_GUARD = ast.unparse(ast.parse('if __name__ == "__main__":\n    render()'))


def test_the_pages_are_found():
    assert {p.stem for p in PAGES} >= {"attention", "causal_mask", "softmax", "generate", "inside", "positional",
                                       "efficient", "parameters", "train", "lessons", "circuits"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_runs_only_in_render(page):
    body = ast.parse(page.read_text(encoding="utf-8")).body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]                                                         # the module docstring
    *definitions, last = body
    assert ast.unparse(last) == MAIN_GUARD, f"{page.name} must end with the main guard calling render()"
    for node in definitions:
        assert isinstance(node, DEFINITIONS), f"{page.name}:{node.lineno} runs at import: {ast.unparse(node)[:80]}"
        if isinstance(node, ast.Assign | ast.AnnAssign):
            used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            assert "st" not in used, f"{page.name}:{node.lineno} reads Streamlit at import: {ast.unparse(node)[:80]}"
    render = [n for n in definitions if isinstance(n, ast.FunctionDef) and n.name == "render"]
    assert len(render) == 1 and not render[0].args.args and ast.get_docstring(render[0]), \
        f"{page.name} needs one render() without arguments, with a docstring"
