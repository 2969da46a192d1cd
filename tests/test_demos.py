"""The demos natively: each ``main()`` runs with a few steps and learns something, and the
server hands the demo pages the very same files (/demos/py/NAME.py)."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # `demos` and `server` are not installed

from demos import char_lm, classify_2d, curve_fit, digits  # noqa: E402

DEMOS = ["digits", "classify_2d", "curve_fit", "char_lm"]


def test_digits_main_learns(capsys):
    assert digits.main(["--steps", "150"]) > 0.85
    out = capsys.readouterr().out
    assert "test accuracy" in out and "predicted" in out


def test_digits_cnn_predicts_probabilities():
    demo = digits.DigitsDemo("cnn")
    demo.train(60)
    probabilities = demo.predict(demo.x_test[0].reshape(-1).tolist())
    assert len(probabilities) == 10 and math.isclose(sum(probabilities), 1, rel_tol=1e-4)
    with pytest.raises(ValueError, match="'mlp' or 'cnn'"):
        digits.make_model("rnn")


@pytest.mark.parametrize("dataset", classify_2d.DATASETS)
def test_classify_2d_every_dataset_learns(dataset):
    demo = classify_2d.Classify2D(dataset, layers=2, width=16, lr=0.05, side=10)
    events = []
    demo.train(200, events.append, every=50)
    assert [e["step"] for e in events] == [50, 100, 150, 200]
    assert events[-1]["loss"] < events[0]["loss"]
    assert len(events[-1]["boundary"]) == 100 and events[-1]["boundary"] != events[0]["boundary"]
    assert demo.accuracy() > (0.8 if dataset == "spirals" else 0.9)


def test_classify_2d_main_and_bad_controls(capsys):
    assert classify_2d.main(["--dataset", "gaussians", "--steps", "60"]) > 0.9
    assert "training accuracy" in capsys.readouterr().out
    with pytest.raises(ValueError, match="activation must be one of"):
        classify_2d.make_model(activation="swish")
    with pytest.raises(ValueError, match="dataset must be one of"):
        classify_2d.make_data("moons")


def test_curve_fit_main_and_added_points(capsys):
    assert curve_fit.main(["--steps", "300"]) < 0.05
    assert "fitted y" in capsys.readouterr().out
    demo = curve_fit.CurveFit([0.0], [0.5])
    demo.set_points([0.0, 0.5], [0.5, -0.5])  # the page adds a point with a click
    demo.train(300)
    curve = demo.curve()
    assert len(curve) == curve_fit.CURVE_POINTS
    assert abs(curve[50] - 0.5) < 0.1 and abs(curve[75] + 0.5) < 0.1  # x = 0 and x = 0.5
    with pytest.raises(ValueError, match="as many x as y"):
        demo.set_points([0.1], [])


def test_char_lm_main_learns_and_samples(capsys):
    loss = char_lm.main(["--steps", "40", "--sample-every", "20"])
    assert loss < math.log(57) - 0.8  # well below a uniform guess over the four sonnets' 57 characters
    out = capsys.readouterr().out
    assert "a sample at temperature" in out and "step 20, loss" in out  # it writes samples as it trains
    demo = char_lm.CharLM(text="abcabcabc" * 20, context=8, width=16, layers=1)
    events = []
    demo.train(20, events.append, every=10, sample_every=10, sample_length=12)
    assert [len(e["sample"]) for e in events] == [12, 12]
    assert set(demo.sample("ab", 30, temperature=0.5)) <= set("abc")
    with pytest.raises(ValueError, match="temperature must be > 0"):
        demo.sample(temperature=0)
    with pytest.raises(ValueError, match="needs more than the context"):
        char_lm.CharLM(text="too short", context=32)


def test_char_lm_corpus_ends_on_a_whole_sonnet():
    text = char_lm.corpus()
    assert len(text) <= char_lm.CORPUS_CHARS and len(set(text)) == 57
    assert text.endswith("Save breed, to brave him when he takes thee hence.\n")
    assert char_lm.corpus(0) == char_lm.webgrad.datasets.tiny_text()


def test_server_serves_the_demo_sources(tmp_path):
    from server.app import Settings, create_app
    from server.testing import running_server

    with running_server(create_app(Settings(data_dir=tmp_path))) as base:
        for name in DEMOS:
            response = httpx.get(f"{base}/demos/py/{name}.py")
            assert response.status_code == 200, name
            assert response.text == (REPO / "demos" / f"{name}.py").read_text()
        assert httpx.get(f"{base}/demos/py/data/digits.npz").status_code == 404  # .py files only
        assert httpx.get(f"{base}/demos/py/../pyproject.toml").status_code in (400, 404)


def test_widget_python_half_pulls_and_predicts_like_the_model(tmp_path):
    """webgrad.web.widget (what <webgrad-model> runs in the worker), natively against a live store."""
    from conftest import run_async

    import numpy as np

    from server.app import Settings, create_app
    from server.testing import running_server
    from webgrad.web import widget

    demo = digits.DigitsDemo("mlp")
    demo.train(30)
    image = demo.x_test[:2].numpy().astype("<f4")
    with running_server(create_app(Settings(data_dir=tmp_path))) as base:
        demo.push("w-digits", url=base)
        info = run_async(widget.load("k", f"{base}/api/models/w-digits"))
        assert info["input_shape"] == [1, 64] and info["labels"] == digits.LABELS
        assert info["metadata"]["image"] == {"height": 8, "width": 8, "channels": 1}
        out = widget.predict("k", image.tobytes(), [2, 64])
        got = np.asarray(out["outputs"], "<f4").reshape(out["shape"])
        assert out["shape"] == [2, 10]
        np.testing.assert_allclose(got, demo.model(demo.x_test[:2]).detach().numpy(), rtol=1e-5, atol=1e-6)
        with pytest.raises(widget.WidgetError, match="not the 64 float32 values of shape"):
            widget.predict("k", b"\0\0\0", [1, 64])
        import webgrad  # a weights-only push cannot be rebuilt: a clear error

        webgrad.store.push(demo.model.state_dict(), "w-weights", url=base)
        with pytest.raises(widget.WidgetError, match="holds weights only"):
            run_async(widget.load("k2", f"{base}/api/models/w-weights"))
        widget.dispose("k")
        with pytest.raises(widget.WidgetError, match="no model loaded"):
            widget.predict("k", image[:1].tobytes(), [1, 64])


def test_demos_push_records_their_input_for_the_widget(tmp_path):
    """Each demo's push tells the store (and so <webgrad-model>) what its input is."""
    import webgrad
    from server.app import Settings, create_app
    from server.testing import running_server

    lm = char_lm.CharLM(text="abcabcabc" * 20, context=8, width=16, layers=1)
    with running_server(create_app(Settings(data_dir=tmp_path))) as base:
        lm.push("lm", url=base)
        classify_2d.Classify2D("xor", side=4).push("plane", url=base)
        curve_fit.CurveFit().push("curve", url=base)
        inputs = {name: webgrad.store.info(name, url=base)["input"] for name in ("lm", "plane", "curve")}
    assert inputs["lm"]["kind"] == "tokens" and inputs["lm"]["vocab"] == ["a", "b", "c"]
    assert inputs["lm"]["context"] == 8
    assert inputs["plane"] == {"kind": "points", "dims": 2, "x_range": [-1.2, 1.2], "y_range": [-1.2, 1.2]}
    assert inputs["curve"] == {"kind": "points", "dims": 1, "x_range": [-1, 1], "y_range": [-1, 1]}


def test_each_page_calls_its_demo_by_name_with_data(tmp_path, monkeypatch, request):
    """What each demo page does, natively, through the worker's ``call`` (as the ``call`` message
    enters it): the file written into the working folder and imported once, then its functions
    named with data; the model lives in the module (``current``)."""
    import importlib
    import shutil

    import numpy as np

    from conftest import run_async
    from webgrad.web import worker

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    request.addfinalizer(lambda: [sys.modules.pop(name, None) for name in DEMOS])  # imported as the page does
    for name in DEMOS:
        shutil.copy(REPO / "demos" / f"{name}.py", tmp_path)
        importlib.import_module(name)

    def page(module, function, *args):
        out = run_async(worker.call(module, function, args))
        assert out["ok"], out.get("traceback")
        return out["result"]

    out = run_async(worker.call("digits", "train", [5]))
    assert out["ok"] is False and "no model yet; call start" in out["message"]
    page("digits", "start", "mlp", 0.01)
    assert page("digits", "train", 40, 20) > 0.5
    pixels = sys.modules["digits"].current.x_test[0].numpy().astype(np.float32)
    probabilities = page("digits", "predict", memoryview(pixels))  # a Float32Array arrives as a memoryview
    assert probabilities.dtype == np.float32 and probabilities.shape == (10,)
    assert abs(float(probabilities.sum()) - 1) < 1e-4

    plane = page("classify_2d", "start", "xor", 2, 8, "tanh", 0.05)
    assert len(plane["xs"]) == len(plane["labels"]) == 200 and len(plane["boundary"]) == 40 * 40
    assert page("classify_2d", "train", 20) < 1.0

    curve = page("curve_fit", "start", [], [])  # no points yet: the demo's default ones
    assert (curve["xs"], curve["ys"]) == tuple(map(list, curve_fit.default_points()))
    assert len(curve["curve"]) == curve_fit.CURVE_POINTS
    page("curve_fit", "set_points", [0.0, 0.5], [0.5, -0.5])
    assert sys.modules["curve_fit"].current.x.shape == (2, 1)
    page("curve_fit", "train", 5)

    page("char_lm", "start")
    page("char_lm", "train", 2, 1, 0.8)
    assert len(page("char_lm", "sample", "\n", 7, 0.5)) == 7
