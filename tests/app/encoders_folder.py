"""A models folder holding a tiny BERT and a tiny T5 (harness/tiny_encoders.py: written as llama.cpp's converter
writes them) beside a tiny decoder, written once per test session, with the transformers models that hold the files'
numbers and the vocabularies they came from: the independent references of the encoder views' tests."""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.tiny_encoders import TinyBert, TinyT5, write_bert, write_t5

BERT, T5, DECODER = "tiny-bert", "tiny-t5", "tiny-llama"
SHAPES = {BERT: TinyBert(), T5: TinyT5()}       # BERT 2 layers x 4 heads; T5 2 + 3 layers x 4 heads


@dataclass(frozen=True)
class EncodersFolder:
    path: Path
    bert: object            # transformers BertModel with the file's numbers
    bert_vocab: list[str]   # its WordPiece vocabulary
    t5: object              # transformers T5ForConditionalGeneration with the file's numbers
    t5_proto: bytes         # its sentencepiece model


def write_encoders(folder: Path, decoders: Path) -> EncodersFolder:
    """The tiny BERT and T5 in folder, and tiny-llama copied from the decoders' folder."""
    bert, vocab = write_bert(folder / f"{BERT}.gguf", SHAPES[BERT], seed=5)
    t5, proto = write_t5(folder / f"{T5}.gguf", SHAPES[T5], seed=5)
    shutil.copy(decoders / f"{DECODER}.gguf", folder / f"{DECODER}.gguf")
    return EncodersFolder(folder, bert, vocab, t5, proto)
