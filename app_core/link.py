"""Share links: typed parameters, one schema per page, and the codec between query params and state.

Pure Python (no Streamlit): the Streamlit layer (_shell.py) only reads st.query_params into decode() and writes
encode()'s result back. Rules every page gets for free:
- a parameter is in the link only on its own page, only while it applies (`when`), and only when it differs from
  its default (short links);
- unknown parameters are dropped; a repeated one keeps its last value (with a note);
- a malformed or out-of-range value is clamped or dropped with a note the user sees, never an exception.
Bounds that depend on the model or the text (layer, head, query token) are functions of a Context.
"""
from __future__ import annotations

import math
import re
from collections import ChainMap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NOTE_VALUE_CHARS = 24        # a bad value is quoted in its note up to this many characters


@dataclass(frozen=True)
class Context:
    """What bounds depend on: the model's shape and the current text's token count (None: no text)."""

    n_layers: int = 1
    n_heads: int = 1
    head_dim: int = 2
    vocab_size: int = 1
    n_tokens: int | None = None


class Note(str):
    """A note for the user about a link: its English text, with the template and values it was made from so the
    shell can show it in the reader's language (app_pages/_i18n)."""

    template: str
    values: dict


def note(template: str, **values) -> Note:
    """The note `template` (str.format) filled with values; the template is a message of the catalog."""
    out = Note(template.format(**values))
    out.template, out.values = template, values
    return out


def shown(raw: str) -> str:
    """A bad query-param value, short and literal, for a note."""
    return repr(raw[:NOTE_VALUE_CHARS] + ("…" if len(raw) > NOTE_VALUE_CHARS else ""))


def _resolve(bound, ctx: Context):
    return bound(ctx) if callable(bound) else bound


@dataclass(frozen=True)
class Param:
    """One setting: its query-param name, its session-state key (the widget's key) and its default.

    `when(state)` says whether the setting applies to what the page shows now (a control that does nothing is
    neither drawn nor put in the link). The default is a value or a function of the Context (e.g. the last token);
    a default of None means "automatic" (the page decides), and None is then a valid value.
    """

    name: str
    key: str
    default: Any = None
    when: Callable[[Mapping[str, Any]], bool] | None = field(default=None, compare=False)

    def applies(self, state: Mapping[str, Any]) -> bool:
        return self.when is None or bool(self.when(state))

    def default_for(self, ctx: Context) -> Any:
        return self.default(ctx) if callable(self.default) else self.default

    def is_default(self, value: Any, ctx: Context) -> bool:
        return value is None or value == self.default_for(ctx)

    def parse(self, raw: str) -> Any:
        """The value of a query-param string; ValueError(note) when it is not one."""
        raise NotImplementedError

    def clamp(self, value: Any, ctx: Context) -> tuple[Any, str | None]:
        """(a valid value, None) or (the nearest valid value, a note saying what changed)."""
        return value, None

    def encode(self, value: Any) -> str:
        return str(value)


@dataclass(frozen=True)
class Int(Param):
    """A whole number in [lo, hi] (bounds: numbers or functions of the Context)."""

    lo: Any = None
    hi: Any = None

    def parse(self, raw: str) -> int:
        raw = raw.strip()
        if not re.fullmatch(r"[+-]?\d{1,12}", raw):
            raise ValueError(note("{name}={value} is not a whole number: ignored.", name=self.name, value=shown(raw)))
        return int(raw)

    def clamp(self, value, ctx):
        if value is None:
            return self.default_for(ctx), None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return self.default_for(ctx), note("{name}={value} is not a whole number: using the default.",
                                               name=self.name, value=repr(value))
        value = int(value)
        lo, hi = _resolve(self.lo, ctx), _resolve(self.hi, ctx)
        if lo is not None and hi is not None and hi < lo:     # nothing valid (e.g. no text): automatic
            return self.default_for(ctx), None
        clamped = value
        if lo is not None:
            clamped = max(lo, clamped)
        if hi is not None:
            clamped = min(hi, clamped)
        if clamped != value:
            return clamped, note("{name}={value} is outside {lo}–{hi}: using {used}.", name=self.name, value=value,
                                 lo=lo, hi=hi, used=clamped)
        return value, None


@dataclass(frozen=True)
class Float(Param):
    """A finite number in [lo, hi]."""

    lo: float | None = None
    hi: float | None = None

    def parse(self, raw: str) -> float:
        try:
            value = float(raw.strip()) if len(raw) <= 32 else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ValueError(note("{name}={value} is not a finite number: ignored.", name=self.name, value=shown(raw)))
        return value

    def clamp(self, value, ctx):
        if value is None:
            return self.default_for(ctx), None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return self.default_for(ctx), note("{name}={value} is not a finite number: using the default.",
                                               name=self.name, value=repr(value))
        value = float(value)
        lo, hi = _resolve(self.lo, ctx), _resolve(self.hi, ctx)
        clamped = min(hi, max(lo, value)) if lo is not None and hi is not None else value
        if clamped != value:
            return clamped, note("{name}={value} is outside {lo}–{hi}: using {used}.", name=self.name,
                                 value=f"{value:g}", lo=f"{lo:g}", hi=f"{hi:g}", used=f"{clamped:g}")
        return value, None

    def encode(self, value) -> str:
        return repr(float(value))              # the shortest text that reads back as the same float


@dataclass(frozen=True)
class Flag(Param):
    """On or off: 1/0 in the link (true/false, on/off, yes/no are read too)."""

    default: bool = False

    def parse(self, raw: str) -> bool:
        word = raw.strip().lower()
        if word in ("1", "true", "on", "yes"):
            return True
        if word in ("0", "false", "off", "no"):
            return False
        raise ValueError(note("{name}={value} is not on/off (1 or 0): ignored.", name=self.name, value=shown(raw)))

    def clamp(self, value, ctx):
        if isinstance(value, bool) or value is None:
            return (self.default if value is None else value), None
        return self.default, note("{name}={value} is not on/off: using the default.", name=self.name,
                                  value=repr(value))

    def encode(self, value) -> str:
        return "1" if value else "0"


@dataclass(frozen=True)
class Choice(Param):
    """One of a fixed set of names (options: the values kept in the state and written in the link)."""

    options: tuple = ()

    def parse(self, raw: str):
        for option in self.options:
            if raw.strip() == str(option):
                return option
        raise ValueError(note("{name}={value} is not one of {options}: ignored.", name=self.name, value=shown(raw),
                              options=", ".join(map(str, self.options))))

    def clamp(self, value, ctx):
        if value in self.options or value is None:
            return (self.default if value is None else value), None
        return self.default, note("{name}={value} is not one of the choices: using {used}.", name=self.name,
                                  value=repr(value), used=self.default)


@dataclass(frozen=True)
class Text(Param):
    """Free text, cut to max_chars; left out of the link when its URL-encoded form exceeds url_limit."""

    max_chars: int = 8_000
    url_limit: int = 16_000

    def parse(self, raw: str) -> str:
        return raw

    def clamp(self, value, ctx):
        if not isinstance(value, str):
            return self.default, note("{name} is not text: using the default.", name=self.name)
        if len(value) > self.max_chars:
            return value[: self.max_chars], note("The link's {name} has {n} characters: cut to the first {kept}.",
                                                 name=self.name, n=f"{len(value):,}", kept=f"{self.max_chars:,}")
        return value, None

    def fits_link(self, value: str) -> bool:
        from urllib.parse import quote

        return len(quote(value)) <= self.url_limit


@dataclass(frozen=True)
class ModelName(Param):
    """A model file's name without .gguf (None: the built-in model). Never a path: a value with a slash, a
    backslash, a colon (a URL, a drive) or a leading dot is refused; whether the server has it is the shell's check."""

    max_chars: int = 200

    def parse(self, raw: str) -> str | None:
        name = raw.strip()
        if not name:
            return None
        if (len(name) > self.max_chars or name.startswith(".") or any(c in name for c in "/\\:")
                or not name.isprintable()):
            raise ValueError(note("{name}={value} is not a model name (a link names a model of this server, never a "
                                  "path): using the default model.", name=self.name, value=shown(raw)))
        return name

    def clamp(self, value, ctx):
        if value is None or isinstance(value, str):
            return value, None
        return None, note("{name} is not a model name: using the default model.", name=self.name)


@dataclass(frozen=True)
class IntList(Param):
    """Whole numbers in [lo, hi], at most max_items, written '3,17,40' (kept sorted, without repeats)."""

    lo: Any = None
    hi: Any = None
    max_items: int = 16
    default: tuple = ()

    def parse(self, raw: str) -> tuple[int, ...]:
        parts = [p for p in raw.split(",") if p.strip()]
        if not all(re.fullmatch(r"\s*[+-]?\d{1,9}\s*", p) for p in parts):
            raise ValueError(note("{name}={value} is not a list of whole numbers: ignored.", name=self.name,
                                  value=shown(raw)))
        return tuple(int(p) for p in parts)

    def clamp(self, value, ctx):
        if value is None and self.default is None:
            return None, None
        if not isinstance(value, list | tuple) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                          for v in value):
            return self.default, note("{name} is not a list of whole numbers: using the default.", name=self.name)
        lo, hi = _resolve(self.lo, ctx), _resolve(self.hi, ctx)
        kept = tuple(sorted({v for v in value if (lo is None or v >= lo) and (hi is None or v <= hi)}))
        dropped = None
        if len(kept) < len(set(value)):
            dropped = note("{name}: values outside {lo}–{hi} were dropped.", name=self.name, lo=lo, hi=hi)
        if len(kept) > self.max_items:
            kept, dropped = kept[: self.max_items], note("{name}: only the first {n} values are kept.",
                                                         name=self.name, n=self.max_items)
        return (list(kept) if isinstance(value, list) else kept), dropped

    def is_default(self, value, ctx) -> bool:
        return value is None or (self.default is not None and tuple(value) == tuple(self.default))

    def encode(self, value) -> str:
        return ",".join(str(v) for v in value)


@dataclass(frozen=True)
class Schema:
    """The settings of one page, in the order they appear in its links."""

    page: str
    params: tuple[Param, ...]

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        keys = [p.key for p in self.params]
        if len(set(names)) != len(names) or len(set(keys)) != len(keys):
            raise ValueError(f"schema {self.page!r}: parameter names and keys must be unique")

    def by_name(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def by_key(self, key: str) -> Param | None:
        return next((p for p in self.params if p.key == key), None)

    def active(self, state: Mapping[str, Any]) -> list[Param]:
        """The settings that apply to what the page shows in this state (missing settings at their defaults). The
        state is looked up, not copied (a session's whole state is a few milliseconds to copy), each key once (a
        Streamlit session state's lookup is ~10 µs, and a page's settings ask ~90 times)."""
        filled = _LookedUpOnce(state, {p.key: p.default for p in self.params if not callable(p.default)})
        return [p for p in self.params if p.applies(filled)]


class _LookedUpOnce(Mapping):
    """state, then defaults, each key looked up once."""

    def __init__(self, state: Mapping[str, Any], defaults: Mapping[str, Any]):
        self._maps = (state, defaults)
        self._seen: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key not in self._seen:
            self._seen[key] = next((m[key] for m in self._maps if key in m), _MISSING)
        if self._seen[key] is _MISSING:
            raise KeyError(key)
        return self._seen[key]

    def __iter__(self):
        return iter(ChainMap(*self._maps))

    def __len__(self) -> int:
        return len(ChainMap(*self._maps))


_MISSING = object()


def decode(query: Mapping[str, str | Sequence[str]], schema: Schema, ctx: Context) -> tuple[dict, list[str]]:
    """Query params -> ({state key: valid value}, notes). Unknown names are dropped; repeats keep the last."""
    values: dict[str, Any] = {}
    notes: list[str] = []
    for param in schema.params:
        if param.name not in query:
            continue
        raw = query[param.name]
        if not isinstance(raw, str):
            raw = list(raw)
            if not raw:
                continue
            if len(set(raw)) > 1:
                notes.append(note("{name} is given {n} times: using the last, {value}.", name=param.name,
                                  n=len(raw), value=shown(raw[-1])))
            raw = raw[-1]
        try:
            value = param.parse(raw)
        except ValueError as err:
            notes.append(err.args[0])
            continue
        value, fixed = param.clamp(value, ctx)
        values[param.key] = value
        if fixed:
            notes.append(fixed)
    return values, notes


def moving_bounds(param: Param) -> bool:
    """Whether the setting's bounds or default follow the model or the text (they can change between runs)."""
    return any(callable(getattr(param, name, None)) for name in ("lo", "hi", "default"))


def clamp(state: Mapping[str, Any], schema: Schema, ctx: Context, moving_only: bool = False) -> tuple[dict, list[str]]:
    """({state key: fixed value} for the settings that are out of bounds now, notes). moving_only: only the
    settings whose bounds follow the model or the text (a widget keeps the others valid, or the page explains)."""
    fixed: dict[str, Any] = {}
    notes: list[str] = []
    for param in schema.params:
        if param.key not in state or (moving_only and not moving_bounds(param)):
            continue
        value, said = param.clamp(state[param.key], ctx)
        if value != state[param.key]:
            fixed[param.key] = value
        if said:
            notes.append(said)
    return fixed, notes


def encode(state: Mapping[str, Any], schema: Schema, ctx: Context) -> dict[str, str]:
    """The link's query params: every setting that applies now and differs from its default."""
    out: dict[str, str] = {}
    for param in schema.active(state):
        value = state.get(param.key)
        if param.is_default(value, ctx):
            continue
        if isinstance(param, Text) and not param.fits_link(value):
            continue
        out[param.name] = param.encode(value)
    return out
