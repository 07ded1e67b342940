"""viz.seq2seq (an encoder-decoder's attentions) and the encoders' patterns in viz.attention / viz.exports: nothing
masked in an encoder's, the future masked in a decoder's, non-square target x source matrices."""
import numpy as np
import pytest

from viz import attention as va
from viz import seq2seq as vs
from viz.exports import matrix_csv
from viz.theme import ACCENT


def rows_softmax(shape, seed=0):
    x = np.random.default_rng(seed).normal(size=shape)
    e = np.exp(x - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def test_a_cross_attention_matrix_is_target_by_source_with_nothing_masked():
    w = rows_softmax((3, 5))
    fig = vs.attention_heatmap(w, ["a", "b", "c"], ["v", "w", "x", "y", "z"], row_title="written",
                               column_title="source", highlight_row=1, title="cross")
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (3, 5) and np.isfinite(z).all() and np.allclose(z, w)
    assert (fig.data[0].zmin, fig.data[0].zmax) == (0.0, pytest.approx(w.max()))   # the colours span the weights
    assert list(fig.data[0].y) == ["0 a", "1 b", "2 c"] and len(fig.data[0].x) == 5
    assert fig.layout.yaxis.scaleanchor == "x" and fig.layout.yaxis.autorange == "reversed"
    (box,) = fig.layout.shapes
    assert (box.y0, box.y1, box.x1) == (0.5, 1.5, 4.5) and box.line.color == ACCENT
    assert fig.layout.height <= 460                                 # three rows: a strip, not a wall


def test_the_decoders_self_attention_masks_later_keys():
    w = np.tril(rows_softmax((4, 4)))
    z = np.asarray(vs.attention_heatmap(w, list("abcd"), list("abcd"), row_title="q", column_title="k",
                                        causal=True).data[0].z, dtype=float)
    assert np.isnan(z[np.triu_indices(4, 1)]).all() and np.isfinite(z[np.tril_indices(4)]).all()


def test_wrong_shapes_are_refused():
    with pytest.raises(ValueError, match=r"\[2, 3\]"):
        vs.attention_heatmap(np.zeros((3, 2)), ["a", "b"], ["x", "y", "z"], row_title="", column_title="")
    with pytest.raises(ValueError, match="one value per source token"):
        vs.source_row_figure(np.zeros(3), ["a", "b"])


def test_one_written_tokens_row_marks_its_strongest_source_token():
    fig = vs.source_row_figure(np.array([0.1, 0.7, 0.2]), ["x", "y", "z"])
    assert list(fig.data[0].marker.color).index(ACCENT) == 1 and list(fig.data[0].y) == [0.1, 0.7, 0.2]


def test_an_encoders_pattern_is_drawn_and_exported_whole():
    p = rows_softmax((4, 4))                                       # every key allowed: BERT, a T5's encoder
    tokens = ["[CLS]", "a", "b", "[SEP]"]
    for fig in (va.head_heatmap(p, tokens, causal=False), va.layer_grid(p[None], causal=False)):
        assert np.isfinite(np.asarray(fig.data[0].z, dtype=float)).all()
    assert np.isnan(np.asarray(va.head_heatmap(p, tokens).data[0].z, dtype=float)[0, 1])   # a decoder's: masked
    query = va.query_heads_heatmap(p[None, 1], tokens, 1, causal=False)
    assert np.asarray(query.data[0].z).shape == (1, 4) and query.layout.xaxis.title.text == va.WORDS.key_axis
    assert np.asarray(va.query_heads_heatmap(p[None, 1], tokens, 1).data[0].z).shape == (1, 2)
    tiles = va.thumbnail_tiles(p[None, None], causal=False)
    assert np.isfinite(tiles).all()
    overview = va.thumbnail_overview(tiles, causal=False)
    assert not [t for t in overview.data if t.name == "masked" and t.x]                 # no grey triangles
    csv = matrix_csv(p, tokens, causal=False)
    assert csv.splitlines()[1].count(",") == 4 and ",," not in csv
