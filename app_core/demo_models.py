"""The app's built-in demo models (assets/models/, written by tools/train_demo_models.py): a tiny T5 trained to
reverse its source, whose cross-attention draws the classic alignment, and a tiny BERT trained briefly as a masked
language model. The model picker offers each, clearly labelled, where the models folder has no readable model of
its family; a link names one by its file name without .gguf, as a file of the folder (a file of the folder with the
same name comes first)."""
from __future__ import annotations

from pathlib import Path

from app_core.families import ENCODER, SEQ2SEQ
from viz.text import N_

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "models"
DEMOS = {  # family -> (file, what the picker calls it)
    SEQ2SEQ: ("tiny-t5-reverse.gguf", N_("built-in tiny T5 (trained to reverse)")),
    ENCODER: ("tiny-bert-mlm.gguf", N_("built-in tiny BERT (masked LM, briefly trained)")),
}
DESCRIPTIONS = {  # family -> what the demo is, for a caption where it is shown
    SEQ2SEQ: N_("The built-in tiny T5 (2 + 2 layers, 4 heads, d_model 64) was trained for a few CPU minutes to write "
                "its source's tokens in reverse order, and does nothing else."),
    ENCODER: N_("The built-in tiny BERT (4 layers, 4 heads, d_model 64) was trained for a few CPU minutes as a masked "
                "language model on this app's example texts only: real patterns, but far simpler than a real BERT's."),
}


def offered(folder: list, info_of) -> list:
    """The demo models' ModelInfos (info_of(path)) to list beside the folder's: each one whose family no readable
    file of the folder has and whose name no file of the folder takes."""
    families = {info.family for info in folder if info.ok}
    names = {info.name for info in folder}
    return [info_of(ASSETS / file) for family, (file, _) in DEMOS.items()
            if family not in families and file.removesuffix(".gguf") not in names and (ASSETS / file).is_file()]


def label(info) -> str | None:
    """What the picker calls a demo model (N_-marked: translate where shown), None for any other file."""
    return next((name for file, name in DEMOS.values() if Path(info.path) == ASSETS / file), None)


def description(info) -> str | None:
    """What a demo model is (N_-marked), None for any other file."""
    return next((DESCRIPTIONS[family] for family, (file, _) in DEMOS.items() if Path(info.path) == ASSETS / file),
                None)
