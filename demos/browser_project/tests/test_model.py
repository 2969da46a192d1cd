import webgrad
from model import fit, make_data, make_model


def test_output_shape():
    x, _ = make_data(8)
    assert tuple(make_model()(x).shape) == (8, 1)


def test_training_lowers_the_loss():
    x, y = make_data()
    losses = fit(make_model(), x, y, steps=60)
    assert losses[-1] < 0.2 * losses[0]


def test_runs_on_the_default_device():
    x, _ = make_data(4)
    assert x.device == webgrad.get_default_device()
