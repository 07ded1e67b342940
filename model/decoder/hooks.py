"""Named hook points: where a caller reads or changes the tensors of one pass, in TransformerLens' convention.

A hook is a function f(tensor, hook) -> tensor | None. It gets the tensor at its point and a Hook (the point's full
name and its block) and returns the tensor the pass goes on with, of the same shape and dtype (None: the same
tensor, perhaps changed in place). Hooks are passed per call (`Decoder.run(text, hooks={name: f})`,
`Decoder.run_blocks`) and live only in that call: the shared model holds none, so threads calling one model with
different hooks each get their own result. Shapes: B sequences, T positions run, Tk keys attended (T, plus the
shared positions before them in Decoder.run_blocks(past=...)), H query heads, KV key/value heads, hd head width,
D the stream's width, F the MLP's.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from model.decoder.config import ModelConfig

BLOCK_POINTS = {   # point inside block i (full name "blocks.{i}.<point>"): what it holds
    "hook_resid_pre": "[B, T, D] the residual stream entering the block",
    "ln1.hook_normalized": "[B, T, D] the attention's norm of resid_pre: what q, k and v are projected from",
    "attn.hook_q": "[B, H, T, hd] queries (with their bias and q norm where the model has them), before RoPE",
    "attn.hook_k": "[B, KV, T, hd] keys, before RoPE",
    "attn.hook_v": "[B, KV, T, hd] values",
    "attn.hook_rot_q": "[B, H, T, hd] queries after RoPE (hook_q's values in a model without RoPE)",
    "attn.hook_rot_k": "[B, KV, T, hd] keys after RoPE (hook_k's values in a model without RoPE)",
    "attn.hook_attn_scores": "[B, H, T, Tk] q . k / sqrt(hd) before the mask (the mask is applied after the hook: "
                             "no hook lets a query see a later key)",
    "attn.hook_pattern": "[B, H, T, Tk] the softmax of the masked scores (0 where masked)",
    "attn.hook_z": "[B, H, T, hd] each head's pattern @ v, before the output projection",
    "hook_attn_out": "[B, T, D] the attention's output projection (with its bias)",
    "hook_resid_mid": "[B, T, D] resid_pre + attn_out",
    "ln2.hook_normalized": "[B, T, D] the MLP's norm of resid_mid",
    "mlp.hook_pre": "[B, T, F] SwiGLU: the gate projection; GELU: the up projection (with its bias), before GELU",
    "mlp.hook_pre_linear": "[B, T, F] the up projection (SwiGLU models only)",
    "mlp.hook_post": "[B, T, F] what the down projection reads: silu(gate) * up, or gelu(up)",
    "hook_mlp_out": "[B, T, D] the MLP's down projection (with its bias)",
    "hook_resid_post": "[B, T, D] resid_mid + mlp_out: the next block's resid_pre",
}
MODEL_POINTS = {   # points outside the blocks (Decoder.run / run_ids only)
    "hook_embed": "[B, T, D] the token embeddings",
    "hook_pos_embed": "[B, T, D] the learned position embeddings (GPT-2 only), added to hook_embed",
    "ln_final.hook_normalized": "[B, T, D] the final norm of the last block's output: what the LM head reads",
}
_BLOCK_NAME = re.compile(r"blocks\.(\d+)\.(.+)")


@dataclass(frozen=True)
class Hook:
    """What a hook function gets beside the tensor: its point's full name and block (None outside the blocks)."""

    name: str
    layer: int | None


HookFn = Callable[[torch.Tensor, Hook], "torch.Tensor | None"]


class PointHooks:
    """The hooks of one block (points as in BLOCK_POINTS) or of the model's own points, for one call."""

    __slots__ = ("fns",)

    def __init__(self, fns: dict[str, tuple[HookFn, Hook]]):
        self.fns = fns

    def __bool__(self) -> bool:
        return bool(self.fns)

    def has(self, *points: str) -> bool:
        return any(point in self.fns for point in points)

    def __call__(self, point: str, tensor: torch.Tensor) -> torch.Tensor:
        """tensor as the hook at point leaves it (itself where there is none)."""
        entry = self.fns.get(point)
        if entry is None:
            return tensor
        fn, hook = entry
        out = fn(tensor, hook)
        if out is None:
            return tensor
        if not isinstance(out, torch.Tensor) or out.shape != tensor.shape or out.dtype != tensor.dtype:
            got = f"{out.dtype} {tuple(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"The hook at {hook.name} returned {got}; it must return None or a tensor of the shape "
                             f"and dtype it got ({tensor.dtype} {tuple(tensor.shape)})")
        return out

    def changes(self, point: str, tensor: torch.Tensor) -> tuple[torch.Tensor, bool]:
        """(tensor as the hook leaves it, whether its values changed): where one native call made this tensor and
        the next ones, a hook that changed nothing keeps the call's numbers."""
        if point not in self.fns:
            return tensor, False
        before = tensor.clone()
        after = self(point, tensor)
        return after, not torch.equal(after, before)


NO_HOOKS = PointHooks({})


class Hooks:
    """A call's hooks checked against one model's points: `layer(i)` and `model` look them up."""

    def __init__(self, hooks: Mapping[str, HookFn] | None, config: ModelConfig):
        self.names = tuple(hooks or ())
        blocks: list[dict[str, tuple[HookFn, Hook]]] = [{} for _ in range(config.n_layers)]
        model: dict[str, tuple[HookFn, Hook]] = {}
        valid_block, valid_model = block_points(config), model_points(config)
        for name, fn in (hooks or {}).items():
            if not callable(fn):
                raise ValueError(f"The hook at {name!r} must be a function f(tensor, hook), got {type(fn).__name__}")
            found = _BLOCK_NAME.fullmatch(name) if isinstance(name, str) else None
            if found and found[2] in valid_block and int(found[1]) < config.n_layers and found[1] == str(int(found[1])):
                blocks[int(found[1])][found[2]] = (fn, Hook(name, int(found[1])))
            elif name in valid_model:
                model[name] = (fn, Hook(name, None))
            else:
                raise ValueError(unknown_point(name, config))
        self.model = PointHooks(model)
        self._blocks = [PointHooks(fns) if fns else NO_HOOKS for fns in blocks]

    def __bool__(self) -> bool:
        return bool(self.names)

    def layer(self, i: int) -> PointHooks:
        return self._blocks[i]


def block_points(config: ModelConfig) -> list[str]:
    """The points of every block of a model of this config."""
    return [p for p in BLOCK_POINTS if p != "mlp.hook_pre_linear" or config.mlp == "swiglu"]


def model_points(config: ModelConfig) -> list[str]:
    return [p for p in MODEL_POINTS if p != "hook_pos_embed" or config.positional == "learned"]


def hook_names(config: ModelConfig) -> list[str]:
    """Every hook point of a model of this config, in the order a pass reaches them."""
    first, final = model_points(config)[:-1], model_points(config)[-1:]
    return first + [f"blocks.{i}.{p}" for i in range(config.n_layers) for p in block_points(config)] + final


def unknown_point(name, config: ModelConfig) -> str:
    """The error for a name that is no hook point of this model: the names it has, and the nearest one."""
    found = _BLOCK_NAME.fullmatch(name) if isinstance(name, str) else None
    if found and found[2] in block_points(config):
        return (f"No hook point {name!r}: this model's blocks are blocks.0 to blocks.{config.n_layers - 1}")
    near = difflib.get_close_matches(str(name), hook_names(config), n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    points = ", ".join(model_points(config)[:-1] + [f"blocks.{{i}}.{p}" for p in block_points(config)] +
                       model_points(config)[-1:])
    return (f"No hook point {name!r}{hint}. This model's points are: {points}; i from 0 to {config.n_layers - 1} "
            f"(model.decoder.hooks.BLOCK_POINTS and MODEL_POINTS say what each holds).")


def capture(names, into: dict) -> dict[str, HookFn]:
    """Hooks that keep the tensor at each of names in `into` under its name, changing nothing."""
    def keep(tensor: torch.Tensor, hook: Hook) -> None:
        into[hook.name] = tensor
    return {name: keep for name in names}
