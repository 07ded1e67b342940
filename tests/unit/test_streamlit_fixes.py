"""The mended Streamlit slow path (server/streamlit_fixes.py) gives Streamlit's own answers."""
from __future__ import annotations

import random

from streamlit import string_util
from streamlit.emojis import ALL_EMOJIS

from server import streamlit_fixes as fixes


def test_the_leading_emoji_is_streamlits_for_every_kind_of_label():
    rng = random.Random(0)
    emojis = sorted(ALL_EMOJIS)
    labels = ["", "Layer 3", "第 3 层", "␣the", "注意力 🙂", "🚨 Error occurred", "🚨Error", "🚨 - note", "🚨: note",
              "<b>", "Count: 1, 2, 3", "\u200b", "🫶🏽 hands", ":material/warning: Caution", "é", "🙂"]
    labels += [f"{e} {rng.choice(['x', '层', ''])}" for e in rng.sample(emojis, 300)]
    labels += [f"x{e}" for e in rng.sample(emojis, 50)]
    for label in labels:
        assert fixes.extract_leading_emoji(label) == fixes.STREAMLITS(label), label


def test_mend_puts_it_where_widget_labels_go():
    fixes.mend()
    assert string_util.extract_leading_icon("🚨 Error") == ("🚨", "Error")
    assert string_util.extract_leading_emoji is fixes.extract_leading_emoji
    assert fixes.STREAMLITS is not fixes.extract_leading_emoji
