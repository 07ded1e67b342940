"""Reading model files: GGUF metadata and tensors, quantizations, the default model's fetch, load-time memory."""
