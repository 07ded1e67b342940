"""The interface in Chinese and English (app_pages/frame/i18n.py): every page and view opened with ?lang=zh shows no
English sentence (texts, labels, help texts, options, tables, figure titles, axes, hovers: tests/app/i18n_check.py);
?lang=en stays English; the language is in the link, the header's switch changes it, presenter mode holds in both."""
from __future__ import annotations

import re

import pytest

from app_core import schemas as S
from app_pages.navigation import PAGES
from harness.apptest import example, figures, open_page, rerun, run_until
from tests.app.i18n_check import english_runs, figure_strings, page_strings

HAN = re.compile(r"[\u4e00-\u9fff]")


def page_names() -> list[str]:
    """The names of the app's pages (app_pages/navigation.py)."""
    return [spec.name for spec in PAGES]


def views(page: str) -> list[tuple[str | None, str | None]]:
    """(state key, slug) of each view of a page (its schema's 'view' choice), or [(None, None)] for one view."""
    view = S.schema(page).by_name("view")
    return [(view.key, slug) for slug in view.options] if view is not None else [(None, None)]


FINISHING = {"generate"}        # pages whose background work ends (a generation): checked once it has (Train keeps on)


def settled(at) -> bool:
    """Nothing is running in the background any more (a generation shows a progress bar until it is done)."""
    return not at.get("progress")


def opened(page: str, at):
    """The page once its background work (if it ends) has ended."""
    return run_until(at, settled) if page in FINISHING else at


def leftover_english(at) -> list[tuple[str, str]]:
    """(run, the text it is in) for every English run on the page and in its figures."""
    texts = page_strings(at) + [s for fig in figures(at) for s in figure_strings(fig)]
    return [(run, text[:120]) for text in texts for run in english_runs(text)]


def test_the_checker_finds_english_and_lets_names_formulas_and_tokens_pass():
    assert english_runs("Each head decides how much") == ["Each head decides how much"]
    assert english_runs("每个注意力头 (attention sink) 的分数") == []            # an allowed term in parentheses
    assert english_runs("旋转位置编码 (RoPE)：q_rot · k_rot，d_model 576，`W.reshape(n_heads, 32)`") == []
    assert english_runs("查询 %{y}<br>键 %{x}<br>权重 %{z:.4f}<extra></extra>") == []
    assert english_runs("熵 **{entropy} 比特** · Hugging Face 的 `rotate_half`") == []
    assert english_runs("第 0 层 · 30 layers") == []                 # one word alone is not a sentence
    assert english_runs("模型：**SmolLM2-135M-Instruct** · all heads on") == ["all heads on"]


@pytest.mark.parametrize("page", page_names())
def test_every_view_of_every_page_is_chinese(page):
    at = opened(page, open_page(page, lang="zh"))
    for key, slug in views(page):
        if key is not None:
            at.session_state[key] = slug
            at = opened(page, rerun(at))
        assert leftover_english(at) == [], (page, slug)
        assert HAN.search(" ".join(page_strings(at))), (page, slug)


def test_english_stays_english():
    at = open_page("attention", lang="en")
    shown = " ".join(page_strings(at) + [s for f in figures(at) for s in figure_strings(f)])
    assert "Each head decides" in shown and "key j (attended to)" in shown
    assert HAN.findall(shown) == ["中", "文"]                          # the switch's 中文 only


def test_the_link_carries_the_language_and_the_switch_changes_it():
    at = open_page("causal-mask", lang="zh", layer="3")
    assert at.query_params["lang"] == "zh" and at.button(key="w_lang").label == "English"
    assert "因果掩码" in at.markdown[0].value
    at.button(key="w_lang").click()
    rerun(at)
    assert at.query_params["lang"] == "en" and at.query_params["layer"] == "3"
    assert "Causal mask" in at.markdown[0].value
    fresh = open_page("causal-mask", **dict(at.query_params))
    assert "Causal mask" in fresh.markdown[0].value and fresh.slider(key="layer").value == 3
    plain = open_page("causal-mask")                                 # no lang: the browser's (here none: English)
    assert "lang" not in plain.query_params and "Causal mask" in plain.markdown[0].value


def test_presenter_mode_in_chinese():
    at = open_page("attention", lang="zh", present="1")
    row = " ".join(page_strings(at))
    assert "演示" in row and "分享链接" in row and "隐藏汇聚" in row
    assert leftover_english(at) == []
    assert at.query_params["present"] == "1" and at.query_params["lang"] == "zh"


def test_chinese_text_on_a_byte_level_model_says_so_and_counts_read_in_chinese_units():
    at = open_page("attention", lang="zh", text=example("Chinese: an everyday"))
    assert any("字节词元" in c.value and "Qwen" in c.value for c in at.sidebar.caption)
    english = open_page("attention", text=example("Chinese: an everyday"))
    assert any("byte tokens" in c.value and "Qwen" in c.value for c in english.sidebar.caption)
    plain = open_page("attention")                                                      # an English text: no note
    assert not any("byte tokens" in c.value for c in plain.sidebar.caption)
    params = open_page("parameters", lang="zh")
    assert params.metric[0].value == "1.345 亿"                      # SmolLM2-135M: 134,515,008 parameters
