"""viz/ is pure plotly + numpy: importing any figure module pulls in neither Streamlit nor torch."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(f"viz.{p.stem}" for p in (ROOT / "viz").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("module", MODULES)
def test_viz_module_imports_no_streamlit_or_torch(module):
    code = (f"import sys, {module}; bad = [m for m in ('streamlit', 'torch') if m in sys.modules]; "
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imports {out.stdout.strip()}"
