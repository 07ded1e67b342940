"""A hashable key for one call of a pure function (its name and arguments), so that sessions asking for the same
figure share one: a class's followers draw the view the teacher drew a moment earlier. Arrays are keyed by their
shape, dtype and a digest of their bytes; plain values, tuples, lists, dicts, frozensets and frozen dataclasses by
value; a module's functions by their names."""
from __future__ import annotations

import hashlib
import types
from collections.abc import Callable, Hashable
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np


class Unkeyable(TypeError):
    """An argument that has no key by value (a model, a widget, an open file): the call is not shared."""


def value_key(value: Any) -> Hashable:
    """A key equal for equal values (arrays: same shape, dtype and bytes). Unkeyable for other objects."""
    if value is None or isinstance(value, bool | int | float | str | bytes | np.generic):
        return (type(value).__name__, value)
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:                          # its bytes are addresses, not values
            raise Unkeyable("no key by value for an array of Python objects")
        data = np.ascontiguousarray(value)
        return ("ndarray", data.shape, data.dtype.str, hashlib.blake2b(data.data, digest_size=16).digest())
    if isinstance(value, types.FunctionType) and "<" not in value.__qualname__:     # a module's function, by name
        return ("function", value.__module__, value.__qualname__)
    if isinstance(value, frozenset):
        return ("frozenset", frozenset(value_key(v) for v in value))
    if isinstance(value, list | tuple):
        return (type(value).__name__, *(value_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", *((value_key(k), value_key(v)) for k, v in value.items()))
    if is_dataclass(value) and not isinstance(value, type) and value.__dataclass_params__.frozen:
        return (type(value).__qualname__, *(value_key(getattr(value, f.name)) for f in fields(value)))
    raise Unkeyable(f"no key by value for a {type(value).__name__}")


def call_key(fn: Callable, args: tuple, kwargs: dict) -> Hashable:
    """The key of fn(*args, **kwargs): fn's module and name, the arguments' keys. Unkeyable if one has none."""
    return (fn.__module__, fn.__qualname__, value_key(args), value_key(dict(sorted(kwargs.items()))))
