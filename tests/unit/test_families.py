"""The families' support table (app_core/families.py): every page and view it names exists, every view a note links
to works with that family, and a guarded view says what it needs."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from app_core import families as F
from app_core import schemas as S

PAGES = [name for name in S.SCHEMAS]


def test_the_table_names_real_pages_views_and_view_settings():
    for page, views in F.SUPPORT.items():
        assert page in S.SCHEMAS, page
        if views.param is None:
            assert set(views.support) == {None}, page
            continue
        param = S.schema(page).by_name(views.param)
        assert param is not None and set(views.support) <= set(param.options), page
        assert set(param.options) == set(S.VIEW_LABELS[page]), page
        for families in views.support.values():
            assert families and set(families) <= set(F.FAMILIES), page


@pytest.mark.parametrize("family", F.FAMILIES)
def test_what_a_family_can_show_instead_is_what_it_supports(family):
    for page in PAGES:
        offered = F.instead(family, page)
        assert offered, (family, page)
        for other, view in offered:
            assert F.supports(other, view, family), (family, page, other, view)
            assert view in S.VIEW_LABELS[other], (other, view)


def test_which_views_each_family_shows():
    decoder, encoder, seq2seq = F.FAMILIES
    assert all(F.supports(page, None, decoder) for page in ("efficient", "circuits", "parameters", "train", "lessons"))
    assert not F.supports("efficient", None, encoder) and not F.supports("circuits", None, seq2seq)
    assert F.supports("attention", "head", encoder) and F.supports("attention", "head", seq2seq)
    assert not F.supports("attention", "next", encoder) and not F.supports("attention", "cross", decoder)
    assert F.supports("attention", "cross", seq2seq) and not F.supports("attention", "cross", encoder)
    assert F.supports("causal-mask", "compare", encoder) and not F.supports("causal-mask", "steps", seq2seq)
    assert F.supports("generate", "write", seq2seq) and not F.supports("generate", "write", encoder)
    assert F.supports("inside", "tokens", encoder) and not F.supports("inside", "lens", encoder)
    assert F.needs("attention", "cross") == seq2seq and F.needs("inside", "lens") == decoder
    assert F.needs("efficient", "flash") == decoder


def test_the_family_of_a_model_is_its_configs_and_a_decoders_has_none():
    assert F.family_of(SimpleNamespace(config=SimpleNamespace(family="encoder"))) == "encoder"
    assert F.family_of(SimpleNamespace(config=SimpleNamespace(n_layers=2))) == "decoder"
