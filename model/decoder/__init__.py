"""The decoder: its config, weights, forward pass with its trace, RoPE and generation with a KV cache."""
