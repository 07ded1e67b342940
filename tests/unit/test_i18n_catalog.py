"""The Chinese catalog against the code: every message the code marks (extracted with Babel, as babel.cfg says) has a
translation with the same placeholders, nothing is fuzzy or empty, and the compiled .mo the app reads is the .po.
Also the pure parts of the i18n layer: the browser-locale rule, viz words, counts in 亿 / 万."""
from __future__ import annotations

import gettext
import io
import re
from pathlib import Path

import pytest
from babel.messages.extract import extract, extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from app_pages.frame import i18n
from viz import attention as va
from viz.format import format_count_zh

ROOT = Path(__file__).resolve().parents[2]
PO = ROOT / "locale/zh_CN/LC_MESSAGES/messages.po"
MO = PO.with_suffix(".mo")
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2), "note": None}    # note: app_core.link's link notes
FIX = "the commands in babel.cfg: extract, update, translate in locale/zh_CN/LC_MESSAGES/messages.po, compile"
# {name} / {name:.2f} (str.format) and %{y:.3f} (plotly) placeholders; {{ }} are literal braces
PLACEHOLDER = re.compile(r"%\{[^}]*\}|(?<!\{)\{[A-Za-z_]\w*(?:[:!][^{}]*)?\}")


def code_messages() -> set[str | tuple[str, str]]:
    out = set()
    for where in ("app_core", "app_pages", "viz"):
        for _, _, message, _, _ in extract_from_dir(ROOT / where, [("**.py", "python")], keywords=KEYWORDS):
            out.add(message if isinstance(message, str) else tuple(message))
    with open(ROOT / "router.py", "rb") as fh:
        out |= {m if isinstance(m, str) else tuple(m) for _, m, _, _ in extract("python", fh, keywords=KEYWORDS)}
    return out


@pytest.fixture(scope="module")
def catalog():
    with PO.open("rb") as fh:
        return read_po(fh)


def placeholders(text: str) -> list[str]:
    return sorted(PLACEHOLDER.findall(text))


def test_every_message_in_the_code_has_a_chinese_translation(catalog):
    entries = {m: catalog.get(m if isinstance(m, str) else m[0]) for m in code_messages()}
    missing = [m for m, entry in entries.items() if entry is None or not entry.string]
    assert not missing, f"untranslated messages ({FIX}): {missing[:10]}"
    untranslated = [m.id for m in catalog if m.id and not (m.string if isinstance(m.string, str) else all(m.string))]
    assert not untranslated, untranslated[:10]
    assert not [m.id for m in catalog if m.id and m.fuzzy], "fuzzy entries"


def test_placeholders_match_between_english_and_chinese(catalog):
    wrong = []
    for m in catalog:
        if not m.id:
            continue
        ids = [m.id] if isinstance(m.id, str) else list(m.id)
        strings = [m.string] if isinstance(m.string, str) else list(m.string)
        for s in strings:
            if placeholders(s) != placeholders(ids[-1]):
                wrong.append((ids[-1], s))
    assert not wrong, wrong[:5]


def test_the_compiled_catalog_is_the_po(catalog):
    buffer = io.BytesIO()
    write_mo(buffer, catalog)
    buffer.seek(0)
    fresh, committed = gettext.GNUTranslations(buffer), gettext.GNUTranslations(MO.open("rb"))
    assert fresh._catalog == committed._catalog, "locale/*.mo is stale: pybabel compile -d locale"


def test_the_browser_locale_picks_chinese_only_for_chinese():
    assert [i18n.language_of_locale(x) for x in ("zh-CN", "zh", "zh-Hans-CN", "zh_TW", "en-US", "fr", None, "")] \
        == ["zh", "zh", "zh", "zh", "en", "en", "en", "en"]


def test_outside_a_session_messages_stay_english_and_chinese_is_one_lookup_away():
    assert i18n._("Layer") == "Layer" and i18n.ngettext("{n} token", "{n} tokens", 2) == "{n} tokens"
    zh = i18n.translations("zh")
    assert zh.gettext("Causal mask") == "因果掩码" and zh.gettext("Rotate nothing that is not a message") == \
        "Rotate nothing that is not a message"
    assert zh.ngettext("{n} token", "{n} tokens", 1) == zh.ngettext("{n} token", "{n} tokens", 5) == "{n} 个词元"
    assert i18n.translations("zh") is zh                              # read once per process


def test_viz_words_are_all_in_the_catalog(catalog):
    for field, value in vars(va.WORDS).items():
        assert catalog.get(value) is not None and catalog.get(value).string, field


@pytest.mark.parametrize("value, text", [
    (134_515_008, "1.35 亿"), (124_439_808, "1.24 亿"), (8_030_261_248, "80.3 亿"), (6_738_415_616, "67.4 亿"),
    (12_345, "1.23 万"), (9_999, "9,999"), (99_999_999, "1 亿"), (1.8e13, "18 万亿"), (0, "0"), (-50_000, "-5 万"),
])
def test_counts_in_chinese_units(value, text):
    assert format_count_zh(value) == text


def test_counts_in_chinese_units_keep_the_digits_asked_for():
    assert format_count_zh(134_515_008, digits=4) == "1.345 亿"
