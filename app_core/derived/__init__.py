"""What pages derive from a model and its traces, as functions of a Workspace: each is computed through
Workspace.compute (keyed by the call, shared by every session), never by a page itself. The generic adapters
are here; a page's own computations in a module named after the page."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any


def of_trace(ws, method: str, text: str, *args) -> Any:
    """The model's `method` on text's trace: ws.model.<method>(trace, *args) (a model pass: one at a time)."""
    return getattr(ws.model, method)(ws.trace(text), *args)


def of_model(ws, method: str, *args) -> Any:
    """The model's `method` on these arguments (a model pass: one at a time)."""
    return getattr(ws.model, method)(*args)


def pure(ws, fn: Callable[..., Any], *args, **kwargs) -> Any:
    """fn(*args, **kwargs), a pure function of its arguments (the workspace only keys and keeps it)."""
    return fn(*args, **kwargs)
