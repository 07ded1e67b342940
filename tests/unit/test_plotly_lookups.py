"""viz/plotly_lookups.py: the modules plotly reads from sys.modules without importing them, imported whole before a
page draws (a teacher's first QR code imported PIL.Image in one session while another session's figure found it
half-made: CI's "partially initialized module 'PIL.Image' has no attribute 'Image'")."""
import ast
import importlib.util
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import _plotly_utils
import plotly

from viz.plotly_lookups import LOOKED_UP

ROOT = Path(__file__).resolve().parents[2]
# A figure drawn while another thread imports a module plotly looks up, that import held in the middle (its module
# in sys.modules, not yet run) until the figure is written.
RACE = textwrap.dedent("""
    import importlib.abc, importlib.util, sys, threading
    import numpy as np, plotly.graph_objects as go
    WHOLE, NAME = sys.argv[1] == "1", sys.argv[2]
    if WHOLE:
        from viz import plotly_lookups
        plotly_lookups.import_whole()
    started, drawn = threading.Event(), threading.Event()

    class Held(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if name != NAME:
                return None
            sys.meta_path.remove(self)
            self.spec = importlib.util.find_spec(name)
            return importlib.util.spec_from_loader(name, self)
        def create_module(self, spec):
            return None
        def exec_module(self, module):
            started.set()
            drawn.wait(30)
            self.spec.loader.exec_module(module)

    sys.meta_path.insert(0, Held())
    importer = threading.Thread(target=importlib.import_module, args=(NAME,))
    importer.start()
    started.wait(0.5 if WHOLE else 30)
    try:
        go.Figure(go.Heatmap(z=np.eye(3), text=np.full((3, 3), "a"))).to_json()   # text: orjson fails, plotly cleans
        print("drawn")
    except Exception as e:
        print(type(e).__name__, e)
    drawn.set()
    importer.join()
""")


def draw_during_import(name: str, whole: bool) -> str:
    out = subprocess.run([sys.executable, "-c", RACE, "1" if whole else "0", name], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_race_breaks_a_figure_without_the_imports():
    """The hazard is real with the installed plotly: a figure drawn while PIL.Image is half-imported fails."""
    assert "partially initialized module 'PIL.Image'" in draw_during_import("PIL.Image", whole=False)


def test_every_module_looked_up_is_whole_before_a_figure():
    for name in LOOKED_UP:
        assert draw_during_import(name, whole=True) == "drawn", name


def lookups_in_plotlys_source() -> set[str]:
    """Every module name plotly's installed source reads with get_module(name, should_load=False)."""
    names = set()
    for package in (plotly, _plotly_utils):
        for path in Path(package.__file__).parent.rglob("*.py"):
            text = path.read_text(encoding="utf-8", errors="replace")
            names |= set(re.findall(r"""get_module\(\s*["']([\w.]+)["']\s*,\s*should_load\s*=\s*False""", text))
    return names


def test_the_list_covers_what_installed_plotly_looks_up():
    """Every such module that is installed (plotly also asks for sage.all and numpy: numpy is imported before any
    figure module runs) is in LOOKED_UP."""
    installed = {n for n in lookups_in_plotlys_source() if importlib.util.find_spec(n.split(".")[0]) is not None}
    assert "PIL.Image" in installed and "pandas" in installed
    assert installed - {"numpy"} <= set(LOOKED_UP)


def test_the_router_imports_them_before_any_page_runs():
    tree = ast.parse((ROOT / "router.py").read_text(encoding="utf-8"))
    calls = [ast.unparse(n.value) for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
    first_page_call = next(c for c in calls if c.startswith("st."))
    assert calls.index("plotly_lookups.import_whole()") < calls.index(first_page_call)
