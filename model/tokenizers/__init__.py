"""Tokenizers read from a GGUF: byte-level BPE (with the file's pre-tokenizer) and SentencePiece, readable labels."""
