"""The Inside-a-block page in Streamlit's AppTest, on the real model: every view shows the model's own numbers,
checked against computations made here from the trace (its checkpointed residual stream, attention and logits),
the tokenizer and the weights: the BPE walk ends on tiktoken's tokens, the RMS and the norm's output are those of
the trace's residual stream, RoPE is the rotation by position x theta, SwiGLU multiplies SiLU(gate) by up, a block's
output is the next checkpoint, the pattern is the trace's attention row, the lens reads the stream through the final
norm and the LM head, the attribution adds up to the logit, and switching heads off changes the prediction."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch

from app_core import schemas as S
from app_core.tokenization import WINDOW_CHARS
from harness.apptest import array, example, open_page, rerun
from model.decoder.core import CHECKPOINT_EVERY
from viz.labels import plotly_escape

STEP_ANCHORS = ("in", "norm1", "qkv", "rope", "scores", "mask", "softmax", "mix", "wo", "add1", "norm2", "swiglu",
                "down", "add2")
TEXT = "The keys that the old man had left on the table were gone, so he looked everywhere for them."


def chart(at, key: str) -> dict:
    """The figure of the st.plotly_chart with this key."""
    found = [c for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}")]
    assert len(found) == 1, (key, [c.proto.id.rsplit("-", 1)[-1] for c in at.get("plotly_chart")])
    return json.loads(found[0].proto.spec)


def chart_keys(at) -> list[str]:
    return [c.proto.id.rsplit("-", 1)[-1] for c in at.get("plotly_chart")]


def rows_of(fig: dict) -> dict[str, np.ndarray]:
    """A vectors figure's bar rows by subplot title (the titles are annotations in row order)."""
    titles = [a["text"] for a in fig["layout"].get("annotations", [])]
    return {t: array(trace["y"]) for t, trace in zip(titles, fig["data"], strict=True)}


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption).replace("\\", "")


def labels(lm, ids) -> list[str]:
    return [plotly_escape(s) for s in lm.token_strings([int(i) for i in ids])]


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(np.asarray(x, dtype=np.float64) - np.max(x))
    return e / e.sum()


@pytest.fixture(scope="module")
def trace(lm):
    return lm.run(TEXT)


@pytest.fixture(scope="module")
def unembedding(lm) -> np.ndarray:
    """The LM head as one [vocab, d_model] float32 matrix."""
    return lm.lm_head.rows(torch.arange(lm.config.vocab_size)).numpy()


# ------------------------------------------------------------------------------------------------ tokenization
def test_tokens_view_walks_bpe_to_tiktokens_tokens(lm):
    words = "Tokenizers split unfamiliar words like photosynthesizing into pieces."
    at = open_page("inside", text=words)
    tok = lm.tokenizer
    pieces = tok.pieces(words)
    assert pieces[:2] == ["Tokenizers", " split"]
    chosen = at.pills(key="inside_piece_pick").value
    assert chosen == 0 and len(tok.encode(pieces[0])) == 2                  # automatic: the first piece that splits
    at.pills(key="inside_piece_pick").set_value(5)
    rerun(at)
    assert pieces[5] == " photosynthesizing" and at.query_params["piece"] == "5"
    table = at.dataframe[0].value
    window = sorted({int(k) for k in table["piece"]})                         # the piece and its neighbours
    assert 5 in window and window == list(range(window[0], window[-1] + 1))
    assert sum(len(pieces[k]) for k in window) <= WINDOW_CHARS
    final_ids = [int(i) for i in table["id"]]
    assert final_ids == [i for k in window for i in tok.encode(pieces[k])]             # tiktoken's own encoding
    fig = chart(at, "inside_bpe")
    cells = {trace["name"]: trace["customdata"] for trace in fig["data"] if trace["type"] == "bar"}
    chars = "".join(c[0] for c in cells["characters"]).replace("␣", " ")
    assert chars == "".join(pieces[k] for k in window)                                 # a column each
    assert [c[1] for c in cells["ids"]] == [f"{i:,}" for i in final_ids]               # the bottom row: the ids
    assert [c[2] for c in cells["ids"]] == [" ".join(f"{b:02X}" for b in tok.token_bytes(i)) for i in final_ids]
    at.pills(key="inside_piece_pick").set_value(0)                          # the automatic piece: not in the link
    rerun(at)
    assert "piece" not in at.query_params and at.session_state["inside_piece"] is None
    table = at.dataframe[0].value
    assert [int(i) for i, k in zip(table["id"], table["piece"], strict=True) if int(k) == 0] == tok.encode(pieces[0])


def test_without_a_split_piece_the_longest_is_shown(lm):
    at = open_page("inside", text=TEXT)
    pieces = lm.tokenizer.pieces(TEXT)
    assert all(len(lm.tokenizer.encode(p)) == 1 for p in pieces)
    longest = max(len(p.encode()) for p in pieces)
    first_longest = next(i for i, p in enumerate(pieces) if len(p.encode()) == longest)
    assert at.pills(key="inside_piece_pick").value == first_longest


def test_control_tokens_are_one_piece_and_one_id(lm):
    chat = example("chat format")
    pieces = lm.tokenizer.pieces(chat)
    i = pieces.index("<|im_start|>")
    at = open_page("inside", text=chat, piece=str(i))
    table = at.dataframe[0].value
    assert [int(t) for t, k in zip(table["id"], table["piece"], strict=True) if int(k) == i] == \
        [lm.tokenizer.special_id("<|im_start|>")]
    rounds = next(trace["customdata"] for trace in chart(at, "inside_bpe")["data"] if trace["name"] == "rounds")
    special = [c for c in rounds if c[0] == "&lt;|im_start|&gt;"]                     # one cell: the whole token
    assert special and all(c[1] == f"{lm.tokenizer.special_id('<|im_start|>'):,}" for c in special)


def test_a_new_text_sends_the_piece_back_to_automatic(lm):
    at = open_page("inside", text=TEXT, piece="3")
    at.text_area(key="text").set_value("Another sentence entirely.")
    rerun(at)
    assert at.session_state["inside_piece"] is None and "piece" not in at.query_params


# ------------------------------------------------------------------------------------------------ one block
@pytest.mark.parametrize("layer", [CHECKPOINT_EVERY])
def test_block_input_and_rmsnorm_are_the_traces_own(lm, trace, layer):
    p = 9
    at = open_page("inside", text=TEXT, view="block", layer=str(layer), q=str(p))
    x = trace.checkpoints[layer][p].astype(np.float64)                        # the stream into `layer`, from the run
    np.testing.assert_allclose(array(chart(at, "inside_x")["data"][0]["y"]), x, rtol=1e-5, atol=1e-6)
    rows = rows_of(chart(at, "inside_norm1"))
    rms = math.sqrt(np.mean(x ** 2) + lm.config.norm_eps)
    shown = [t for t in rows if t.startswith("x / rms")][0]
    assert float(re.search(r"rms = ([\d.,]+)", shown).group(1).replace(",", "")) == pytest.approx(rms, rel=1e-3)
    np.testing.assert_allclose(rows[shown], x / rms, rtol=1e-4, atol=1e-5)
    weight = lm.blocks[layer].attn_norm.weight.numpy()
    np.testing.assert_allclose(rows["out = x / rms · g"], x / rms * weight, rtol=1e-4, atol=1e-5)


def test_block_steps_follow_the_formulas(lm, trace):
    cfg = lm.config
    layer, head, p = CHECKPOINT_EVERY - 1, 4, 12          # the block just before a checkpoint: its output is known
    at = open_page("inside", text=TEXT, view="block", layer=str(layer), head=str(head), q=str(p))
    assert len(re.findall(r"\(#step-[a-z0-9]+\)", at.markdown[1].value)) == 14          # the map of the steps
    assert [s.proto.anchor for s in at.subheader][:14] == [f"step-{a}" for a in STEP_ANCHORS]

    rope = chart(at, "inside_rope")
    before, after = array(rope["data"][0]["z"])                                      # [2, hd]: head's q, q_rot
    half = cfg.head_dim // 2
    angle = p * cfg.rope_theta ** (-2 * np.arange(half) / cfg.head_dim)              # RoPE by hand, pairs (i, i + hd/2)
    rotated = np.concatenate([before[:half] * np.cos(angle) - before[half:] * np.sin(angle),
                              before[:half] * np.sin(angle) + before[half:] * np.cos(angle)])
    np.testing.assert_allclose(after, rotated, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(array(rope["data"][1]["y"]), np.degrees(np.mod(angle, 2 * np.pi)), atol=1e-6)

    scores = array(chart(at, "inside_scores")["data"][0]["y"])                       # [T] before the mask
    pattern = array(chart(at, "inside_softmax")["data"][0]["z"])                     # [H, p + 1]
    expected = np.asarray(trace.attention[layer][:, p, : p + 1], dtype=np.float64)
    np.testing.assert_allclose(pattern, expected, atol=1e-6)                         # the trace's own attention row
    np.testing.assert_allclose(softmax(scores[: p + 1]), expected[head], atol=1e-5)  # softmax of the shown scores

    mlp = rows_of(chart(at, "inside_mlp"))
    gate, act, up, product = (mlp[k] for k in ("gate = W_g x̂'", "SiLU(gate)", "up = W_u x̂'", "h = SiLU(gate) · up"))
    np.testing.assert_allclose(act, gate / (1 + np.exp(-gate)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(product, act * up, rtol=1e-4, atol=1e-5)
    share = np.mean(np.abs(act) < 0.05)
    assert chart(at, "inside_silu")["layout"]["title"]["text"] == f"{cfg.d_ff:,} gates: {share:.0%} nearly closed"

    add1, add2 = rows_of(chart(at, "inside_add1")), rows_of(chart(at, "inside_add2"))
    np.testing.assert_allclose(add1["= x'"], add1["x (stream in)"] + add1["+ attn"], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(add2["= stream out"], trace.checkpoints[layer + 1][p], rtol=1e-4, atol=1e-3)
    head_out = array(chart(at, "inside_wo")["data"][0]["z"])                          # [H, D]
    np.testing.assert_allclose(head_out.sum(axis=0), add1["+ attn"], rtol=1e-3, atol=1e-3)
    assert {link.proto.page for link in at.get("page_link")} == {"positional", "causal-mask", "softmax"}


def test_layer_0_starts_from_the_embedding_row(lm, trace, unembedding):
    at = open_page("inside", text=TEXT, view="block", layer="0", q="3")
    assert lm.config.tied_embeddings                                                 # the LM head is the table
    np.testing.assert_allclose(array(chart(at, "inside_x")["data"][0]["y"]), unembedding[trace.token_ids[3]],
                               rtol=1e-6)
    assert at.subheader[0].value == "1. Embedding row"


def test_hidden_sink_and_the_last_token(lm, trace):
    at = open_page("inside", text=TEXT, view="block", layer="20", sink="1")
    p = trace.n_tokens - 1
    rows = np.asarray(trace.attention[20][:, p, 1:], dtype=np.float64)
    z = array(chart(at, "inside_softmax")["data"][0]["z"])
    assert np.isnan(z[:, 0]).all()
    np.testing.assert_allclose(z[:, 1:], rows / rows.sum(axis=1, keepdims=True), atol=1e-5)
    assert any("the mask removes nothing here" in m.value for m in at.markdown)


def test_a_one_token_text_says_so_instead_of_empty_charts(lm):
    at = open_page("inside", text="Hello", view="block", layer="3")
    assert "inside_scores" not in chart_keys(at) and "inside_softmax" not in chart_keys(at)
    infos = " ".join(i.value for i in at.info)
    assert "no other keys" in infos and "no earlier keys" in infos


# ------------------------------------------------------------------------------------------ stream and lens
def test_residual_norms_are_the_checkpoints_norms(lm, trace):
    at = open_page("inside", text=TEXT, view="stream", q="5")
    z = array(chart(at, "inside_norms")["data"][0]["z"])                             # log10 norms [L + 1, T]
    for layer in (0, CHECKPOINT_EVERY, 2 * CHECKPOINT_EVERY):                        # row l: into layer l
        np.testing.assert_allclose(10 ** z[layer], np.linalg.norm(trace.checkpoints[layer], axis=-1), rtol=1e-4)
    lines = chart(at, "inside_norm_lines")["data"]
    np.testing.assert_allclose(array(lines[0]["y"]), 10 ** z[:, 0], rtol=1e-4)       # position 0
    np.testing.assert_allclose(array(lines[1]["y"]), 10 ** z[:, 5], rtol=1e-4)       # the chosen position
    assert 10 ** z[2 * CHECKPOINT_EVERY:, 0].max() > 50 * np.median(10 ** z[2 * CHECKPOINT_EVERY:, 1:])  # the blow-up


def test_logit_lens_reads_the_stream_through_the_final_norm_and_head(lm, trace, unembedding):
    cfg = lm.config
    p = trace.n_tokens - 1
    at = open_page("inside", text=TEXT, view="lens")
    top = chart(at, "inside_lens_top")["data"][0]
    probs = array(top["z"])                                                          # [L + 1, 5]
    names = np.array(top["customdata"], dtype=object)[..., 0]                        # escaped token labels
    final = softmax(trace.next_token_logits)
    best = np.argsort(-final)[:5]
    assert list(names[-1]) == labels(lm, best)                                       # the last row: the real output
    np.testing.assert_allclose(probs[-1], final[best], rtol=1e-3)
    out_norm = lm.out_norm.weight.numpy().astype(np.float64)
    for row in (CHECKPOINT_EVERY, 2 * CHECKPOINT_EVERY):                             # after layer row - 1
        x = trace.checkpoints[row][p].astype(np.float64)
        logits = unembedding @ (x / np.sqrt(np.mean(x ** 2) + cfg.norm_eps) * out_norm)
        lens = softmax(logits)
        ids = np.argsort(-lens)[:5]
        assert list(names[row]) == labels(lm, ids)
        np.testing.assert_allclose(probs[row], lens[ids], rtol=1e-3, atol=1e-6)
    grid = chart(at, "inside_lens_grid")
    top1 = np.array(grid["data"][0]["customdata"], dtype=object)[..., 0]
    assert top1.shape[1] == 16 and top1[-1, -1] == names[-1, 0]                      # the chosen column is the last
    assert grid["layout"]["shapes"][0]["x0"] == top1.shape[1] - 1.5


def test_lens_window_moves_with_the_position(lm, trace):
    at = open_page("inside", text=TEXT, view="lens", q="2")
    grid = chart(at, "inside_lens_grid")
    assert grid["layout"]["shapes"][0]["x0"] == 1.5                                  # column 2 of the window 0-15
    assert "positions 0-15" in grid["layout"]["title"]["text"]


# ------------------------------------------------------------------------------------------- which heads matter
def test_attribution_adds_up_to_the_models_logit(lm, trace):
    cfg = lm.config
    at = open_page("inside", text=TEXT, view="heads")
    target = int(np.argmax(trace.next_token_logits))
    heads = array(chart(at, "inside_attribution")["data"][0]["z"]).T                 # [L, H]
    layers = chart(at, "inside_attr_layers")["data"]
    np.testing.assert_allclose(array(layers[0]["y"]), heads.sum(axis=1), rtol=1e-6, atol=1e-9)
    embedding = float(re.search(r"embedding ([+-][\d.]+)", captions(at)).group(1))
    total = embedding + heads.sum() + array(layers[1]["y"]).sum()
    assert total == pytest.approx(float(trace.next_token_logits[target]), abs=0.02)  # the parts add up to the logit
    assert heads.shape == (cfg.n_layers, cfg.n_heads)
    assert at.selectbox(key="inside_target_pick").value == -1                        # automatic: the top prediction


def test_another_target_token(lm, trace):
    at = open_page("inside", text=TEXT, view="heads")
    second = int(np.argsort(-trace.next_token_logits)[1])
    at.selectbox(key="inside_target_pick").set_value(second)
    rerun(at)
    assert at.query_params["target"] == str(second)
    heads = array(chart(at, "inside_attribution")["data"][0]["z"]).T
    layers = chart(at, "inside_attr_layers")["data"]
    embedding = float(re.search(r"embedding ([+-][\d.]+)", captions(at)).group(1))
    assert embedding + heads.sum() + array(layers[1]["y"]).sum() == \
        pytest.approx(float(trace.next_token_logits[second]), abs=0.02)


def test_switching_heads_off_changes_the_prediction_and_nothing_off_does_not(lm, trace):
    at = open_page("inside", text=TEXT, view="heads")
    bars = chart(at, "inside_ablation")["data"]
    before, after = array(bars[0]["x"]), array(bars[1]["x"])
    np.testing.assert_allclose(before, np.sort(softmax(trace.next_token_logits))[::-1][:10], rtol=1e-5)
    np.testing.assert_array_equal(before, after)                                    # nothing switched off
    off = [(28, 8), (24, 8)]                                                         # flat: layer * n_heads + head
    flat = sorted(layer * lm.config.n_heads + head for layer, head in off)
    at.multiselect(key="inside_off_pick").set_value(flat)
    rerun(at)
    assert at.query_params["off"] == ",".join(map(str, flat))
    bars = chart(at, "inside_ablation")["data"]
    after = array(bars[1]["x"])
    assert np.abs(after - array(bars[0]["x"])[: after.size]).max() > 1e-3            # the prediction moved
    ablated = softmax(lm.ablate_heads(trace, off))
    shown = [int(i) for i in np.argsort(-trace.next_token_logits)[:10]]
    np.testing.assert_allclose(after[:10], ablated[shown], rtol=1e-4)
    marks = [t for t in chart(at, "inside_attribution")["data"] if t.get("name") == "switched off"]
    assert sorted(zip(marks[0]["x"], marks[0]["y"], strict=True)) == sorted(off)


def test_ablation_list_is_bounded_and_clamped_from_a_link(lm):
    cfg = lm.config
    too_many = ",".join(str(i) for i in range(S.MAX_ABLATED + 4)) + f",{cfg.n_layers * cfg.n_heads + 7}"
    at = open_page("inside", text=TEXT, view="heads", off=too_many)
    assert list(at.session_state["inside_off"]) == list(range(S.MAX_ABLATED))
