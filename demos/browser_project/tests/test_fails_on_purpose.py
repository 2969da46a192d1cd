"""One test here fails on purpose: the example shows what a failure looks like."""
from model import make_model


def test_parameter_count():
    assert sum(p.numel() for p in make_model().parameters()) == 49


def test_wrong_parameter_count_fails_on_purpose():
    assert sum(p.numel() for p in make_model().parameters()) == 50
