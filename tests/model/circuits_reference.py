"""The independent references of the circuit analyses, on transformers models holding the engine's weights: the head
role formulas looped over transformers' output_attentions, activation patching with forward hooks, occlusion by
running every occluded text, gradient x input with autograd on inputs_embeds (all in float64)."""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import torch

from harness.tiny_gguf import Tiny, write_tiny
from model import load_model

ARCH_CASES = {"llama": Tiny(arch="llama"), "qwen2": Tiny(arch="qwen2"),
              "qwen3": Tiny(arch="qwen3", head_dim=32, n_heads=4, n_kv_heads=1), "gpt2": Tiny(arch="gpt2")}


class TinyModels(dict):
    """arch -> (our model, transformers' float64 copy of the same weights), each written on first use."""

    def __init__(self, folder: Path):
        super().__init__()
        self.folder = folder

    def __missing__(self, arch: str):
        path = self.folder / f"{arch}.gguf"
        hf = write_tiny(path, ARCH_CASES[arch])
        self[arch] = (load_model(path=path), copy.deepcopy(hf).double().eval())
        return self[arch]


def attentions(hf, ids: list[int]) -> np.ndarray:
    """[L, H, T, T] transformers' attention weights on ids."""
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]).numpy()


def role_scores_by_loop(attention: np.ndarray, ids: list[int]) -> dict[str, np.ndarray]:
    """The issue's four formulas, written out position by position."""
    L, H, T, _ = attention.shape
    out = {name: np.full((L, H), np.nan) for name in ("previous_token", "induction", "duplicate_token", "sink")}
    repeated = [i for i in range(T) if ids[i] in ids[:i]]
    for layer in range(L):
        for head in range(H):
            a = attention[layer, head]
            out["previous_token"][layer, head] = sum(a[i, i - 1] for i in range(1, T)) / (T - 1)
            out["sink"][layer, head] = sum(a[i, 0] for i in range(1, T)) / (T - 1)
            if repeated:
                out["duplicate_token"][layer, head] = np.mean(
                    [sum(a[i, j] for j in range(i) if ids[j] == ids[i]) for i in repeated])
                out["induction"][layer, head] = np.mean(
                    [sum(a[i, j + 1] for j in range(i - 1) if ids[j] == ids[i]) for i in repeated])
    return out


def blocks(hf):
    return hf.transformer.h if hasattr(hf, "transformer") else hf.model.layers


def out_projection(hf, layer: int):
    block = blocks(hf)[layer]
    return block.attn.c_proj if hasattr(block, "attn") else block.self_attn.o_proj


def logit_difference(hf, ids: list[int], answer: int, foil: int, hooks=()) -> float:
    """logit[answer] - logit[foil] at the last position, with (module, forward pre-hook) pairs in place."""
    handles = [module.register_forward_pre_hook(hook, with_kwargs=True) for module, hook in hooks]
    try:
        with torch.no_grad():
            logits = hf(torch.tensor([ids])).logits[0, -1]
    finally:
        for handle in handles:
            handle.remove()
    return float(logits[answer] - logits[foil])


def _replace_first_input(change):
    """A forward pre-hook (with kwargs) that replaces the module's input tensor by change(input)."""
    def hook(module, args, kwargs):
        if args:
            return (change(args[0].clone()), *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": change(kwargs["hidden_states"].clone())}
    return hook


def patching_by_hooks(hf, clean: list[int], corrupt: list[int], answer: int, foil: int, kind: str) -> np.ndarray:
    """Activation patching, one transformers run per patched activation."""
    d_clean = logit_difference(hf, clean, answer, foil)
    d_corrupt = logit_difference(hf, corrupt, answer, foil)
    L, T = len(blocks(hf)), len(clean)
    if kind == "resid":
        with torch.no_grad():
            streams = hf(torch.tensor([clean]), output_hidden_states=True).hidden_states   # [L + 1] of [1, T, D]
        out = np.empty((L, T))
        for layer in range(L):
            for p in range(T):
                def change(x, layer=layer, p=p):
                    x[:, p] = streams[layer][:, p]
                    return x
                out[layer, p] = logit_difference(hf, corrupt, answer, foil,
                                                 [(blocks(hf)[layer], _replace_first_input(change))])
    else:
        H = hf.config.num_attention_heads if hasattr(hf.config, "num_attention_heads") else hf.config.n_head
        mixed = {}

        def keep(layer):
            def change(x):
                mixed[layer] = x.clone()                                        # [1, T, H hd]
                return x
            return out_projection(hf, layer), _replace_first_input(change)
        logit_difference(hf, clean, answer, foil, [keep(layer) for layer in range(L)])
        out = np.empty((L, H))
        for layer in range(L):
            hd = mixed[layer].shape[-1] // H
            for head in range(H):
                def change(x, layer=layer, head=head, hd=hd):
                    x[..., head * hd:(head + 1) * hd] = mixed[layer][..., head * hd:(head + 1) * hd]
                    return x
                out[layer, head] = logit_difference(hf, corrupt, answer, foil,
                                                    [(out_projection(hf, layer), _replace_first_input(change))])
    return (out - d_corrupt) / (d_clean - d_corrupt)


def occlusion_by_runs(hf, ids: list[int], target: int, replacement: int) -> np.ndarray:
    """Every occluded text and the text itself, as one batch of transformers runs."""
    texts = [ids[:p] + [replacement] + ids[p + 1:] for p in range(len(ids))] + [ids]
    with torch.no_grad():
        logprobs = torch.log_softmax(hf(torch.tensor(texts)).logits[:, -1], -1)[:, target].double().numpy()
    return logprobs[:-1] - logprobs[-1]


def gradient_x_input_by_autograd(hf, ids: list[int], target: int) -> np.ndarray:
    embed = hf.get_input_embeddings()
    tokens = embed(torch.tensor([ids])).detach().requires_grad_(True)           # [1, T, D]
    torch.log_softmax(hf(inputs_embeds=tokens).logits[0, -1], -1)[target].backward()
    return (tokens.grad * tokens.detach()).sum(-1)[0].numpy()
