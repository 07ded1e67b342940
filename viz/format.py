"""Numbers for people: one formatter for counts, bytes and FLOPs, and one for probabilities.

format_si(8_030_261_248) -> '8.03 B' (parameters: k, M, B, T), format_si(1.1e15, 'B', prefixes=SI) -> '1.1 PB',
beyond the largest prefix a mantissa and exponent ('1.8e5 TFLOPs'), never '1,143,513 TB'. percent_labels gives every
bar of one chart the same number of decimals.
"""
from __future__ import annotations

import math

COUNT = (("", 1), ("k", 1e3), ("M", 1e6), ("B", 1e9), ("T", 1e12))            # parameter counts, model cards
SI = (("", 1), ("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12), ("P", 1e15))  # bytes (decimal), FLOPs


def format_si(value: float, unit: str = "", digits: int = 3, prefixes=COUNT) -> str:
    """value with a prefix and `digits` significant digits: 134515008 -> '135 M', 2.69e8 with 'B' -> '269 MB'.

    Numbers beyond 999 of the largest prefix keep that prefix with a power of ten: 1.8e17 FLOPs -> '1.8e5 TFLOPs'.
    Below 1000 the plain number is shown (integers without decimals).
    """
    if not math.isfinite(value):
        return f"{value} {unit}".strip()
    sign = "-" if value < 0 else ""
    x = abs(value)
    name, scale = prefixes[0]
    for name_i, scale_i in prefixes:
        if x >= scale_i:
            name, scale = name_i, scale_i
    mantissa = x / scale
    if mantissa >= 1000 and scale == prefixes[-1][1]:
        exponent = int(math.floor(math.log10(mantissa)))
        lead = mantissa / 10**exponent
        text = f"{lead:.{digits}g}e{exponent}"
    elif scale == 1 and float(x).is_integer():
        text = f"{int(x):,}"
    else:
        text = f"{mantissa:.{digits}g}"
        if "e" in text:                      # e.g. 999.7 at 3 digits rounds to '1e+03': one more digit
            text = f"{mantissa:.{digits + 1}g}"
    gap = " " if (name or unit) else ""
    return f"{sign}{text}{gap}{name}{unit}"


CHINESE_UNITS = (("万亿", 1e12), ("亿", 1e8), ("万", 1e4))   # largest first: 10^12, 10^8, 10^4


def format_count_zh(value: float, digits: int = 3) -> str:
    """A count as Chinese readers say it, `digits` significant digits: 134515008 -> '1.35 亿', 12_345 -> '1.23 万',
    8_030_261_248 -> '80.3 亿'; below 10,000 the plain number ('9,999')."""
    sign, x = ("-" if value < 0 else ""), abs(float(value))
    for i, (name, size) in enumerate(CHINESE_UNITS):
        if x >= size:
            mantissa = float(f"{x / size:.{digits}g}")
            if mantissa >= 1e4 and i > 0:                       # rounded up into the next unit: 9999.6 万 -> 1 亿
                name, mantissa = CHINESE_UNITS[i - 1][0], float(f"{x / CHINESE_UNITS[i - 1][1]:.{digits}g}")
            return f"{sign}{mantissa:,.{digits}g} {name}"
    return f"{sign}{round(x):,}"


def format_bytes(n: float) -> str:
    """Decimal bytes as model cards quote them: 269030016 -> '269 MB', 1.1e15 -> '1.1 PB'."""
    return format_si(n, "B", prefixes=SI)


def percent_decimals(values, significant: int = 2, max_decimals: int = 4) -> int:
    """Decimals for percentages so that the smallest non-zero value keeps `significant` digits (at most
    max_decimals): [0.456, 0.0049] -> 2 ('45.60%', '0.49%')."""
    nonzero = [abs(float(v)) for v in values if float(v) > 0]
    if not nonzero:
        return 0
    smallest = min(nonzero) * 100
    decimals = significant - 1 - int(math.floor(math.log10(smallest)))
    return int(min(max_decimals, max(0, decimals)))


def percent_labels(values, significant: int = 2, max_decimals: int = 4) -> list[str]:
    """The same format for every value of one chart: [0.456, 0.0049] -> ['45.60%', '0.49%']; values too small for
    max_decimals read '<0.0001%' rather than a rounded 0."""
    decimals = percent_decimals(values, significant, max_decimals)
    floor = 10.0**-decimals
    out = []
    for v in values:
        p = 100 * float(v)
        out.append(f"<{floor:.{decimals}f}%" if 0 < p < floor / 2 else f"{p:.{decimals}f}%")
    return out


def percent_tickformat(top: float) -> str:
    """A d3 tick format for a probability axis from 0 to `top` whose ticks do not all read '0%'."""
    if top <= 0:
        return ".0%"
    return f".{percent_decimals([top / 5], significant=1, max_decimals=6)}%"


PROBABILITY_TICKS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def probability_axis(end: float) -> dict:
    """Range and tick format of a probability axis drawn from 0 to `end` (the longest bar times some room for the
    value written past its end). A bar near 100% needs the axis to pass 100%, or its value is cut off at the
    figure's edge; the ticks then stop at 100%."""
    end = end if end > 0 else 1.0
    axis = dict(range=[0, end], tickformat=percent_tickformat(min(end, 1.0)))
    if end > 1.0:
        axis["tickvals"] = PROBABILITY_TICKS
    return axis
