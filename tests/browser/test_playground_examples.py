"""The playground's examples (web/playground/examples/*.py) run as is natively, on every
device, against a real model store: what the page runs is plain webgrad code. (No browser
here; the page runs the digits-MLP example in test_playground.py.)"""
from __future__ import annotations

import runpy

import pytest

import webgrad
from server.app import Settings, create_app
from server.testing import running_server

from conftest import DEVICES
from .conftest import REPO

EXAMPLES = REPO / "web" / "playground" / "examples"
# The order matters: store_predict pulls the model that digits_mlp pushes.
NAMES = ["regression", "digits_mlp", "store_predict", "digits_cnn", "classifier_2d", "char_transformer"]


def test_every_example_is_listed_in_the_menu():
    page = (REPO / "web" / "index.html").read_text()
    assert sorted(NAMES) == sorted(path.stem for path in EXAMPLES.glob("*.py"))
    for name in NAMES:
        assert f'<option value="{name}">' in page


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    if "webgpu" in DEVICES:
        # wgpu refuses to import once a "wgpu" logger exists, which starting uvicorn can leave behind.
        webgrad.webgpu.is_available()
    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("store")))
    with running_server(app) as url:
        yield url


@pytest.mark.parametrize("name", NAMES)
def test_example_runs_natively(name, device, store_url, monkeypatch, capsys):
    monkeypatch.setenv("WEBGRAD_STORE", store_url)
    if name == "store_predict" and not any(m["name"] == "digits-mlp" for m in webgrad.store.list()):
        runpy.run_path(str(EXAMPLES / "digits_mlp.py"), init_globals=_page_globals(device, []))
    events = []
    previous = webgrad.get_default_device()
    webgrad.set_default_device(device)
    try:
        scope = runpy.run_path(str(EXAMPLES / f"{name}.py"), init_globals=_page_globals(device, events))
    finally:
        webgrad.set_default_device(previous)
    printed = capsys.readouterr().out
    assert f"on {device}" in printed or name == "store_predict"
    if name != "store_predict":
        steps = [e["step"] for e in events]
        assert steps and steps == sorted(steps) and steps[-1] == events[-1]["total"]
        assert all(isinstance(v, float) for e in events for k, v in e.items() if k not in ("step", "total"))
    if name.startswith("digits"):
        assert scope["accuracy"] > 0.9, printed
    if name == "store_predict":
        assert scope["accuracy"] > 0.9, printed
    if name == "classifier_2d":
        assert scope["accuracy"] > 0.9, printed
    if name == "regression":
        assert events[-1]["loss"] < events[0]["loss"] / 5


def _page_globals(device: str, events: list) -> dict:
    """What the page's worker defines for every cell."""
    def progress(data=None, /, **fields):
        events.append(dict(data or {}, **fields))
    return {"webgrad_progress": progress, "WEBGRAD_DEVICE": device}
