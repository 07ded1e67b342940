"""Between links and a class: the view a teacher publishes, the join link, the QR code."""
from __future__ import annotations

import struct

from app_core import schemas as S
from app_core.classroom.store import View
from app_core.classroom.views import join_link, keys_to_reset, qr_png, read_question_key, teacher_view

LONG = "Count: 1, 2, 3 <b> 注意力 🙂 " * 600            # too long for a link (S.TEXT.url_limit)


def test_the_published_view_drops_personal_settings_and_keeps_a_long_text():
    view = teacher_view("attention", {"layer": "3", "present": "1", "lang": "zh"}, {S.TEXT.key: LONG}, None)
    assert view.params == {"layer": "3", "text": LONG}
    same = teacher_view("attention", {"layer": "3"}, {S.TEXT.key: S.TEXT.default}, "1-llm-basics/5")
    assert same.params == {"layer": "3"} and same.question == "1-llm-basics/5"
    assert S.PRESENT.key not in keys_to_reset("attention") and S.LANG.key not in keys_to_reset("attention")
    assert {S.LAYER.key, S.HEAD.key, S.TEXT.key, S.MODEL.key} <= set(keys_to_reset("attention"))


def test_a_predict_step_is_published_with_its_question_and_read_back():
    held = teacher_view("attention", {"layer": "3"}, {}, "2-attention-maths/1", predict=True)
    assert held.predict and held.question == "2-attention-maths/1"
    assert View.from_json(held.to_json()) == held
    assert not teacher_view("attention", {}, {}, None, predict=True).predict     # no question: nothing to hold
    assert View.from_json('{"page": "attention", "params": {}}') == View("attention")   # a view stored before


def test_question_keys_and_the_join_link():
    assert read_question_key("1-llm-basics/5") == ("1-llm-basics", 5)
    assert read_question_key("a/b/12") == ("a/b", 12)
    for bad in (None, "", "5", "x/", "/5", "x/-1"):
        assert read_question_key(bad) is None
    assert join_link("http://class.example:8080/softmax?layer=3", "K7QM3XPDH9TF") == \
        "http://class.example:8080/?join=K7QM3XPDH9TF"
    assert join_link(None, "K7QM3XPDH9TF") == "/?join=K7QM3XPDH9TF"


def test_the_qr_code_is_a_square_png():
    png = qr_png("http://class.example:8080/?join=K7QM3XPDH9TF")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])                 # the IHDR chunk
    assert width == height and width % 12 == 0 and width >= 12 * (25 + 4)   # version 2 at least, 2-module border
