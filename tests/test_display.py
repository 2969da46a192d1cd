"""webgrad.display: the MIME bundle the page shows for a cell's value, and PNG images."""
from __future__ import annotations

import base64
import struct
import zlib

import numpy as np
import pytest

import webgrad
from webgrad import nn
from webgrad.display import Image, png_bytes, rich_repr


def decode_png(data: bytes) -> np.ndarray:
    """A minimal PNG reader for what png_bytes writes (8-bit, filter 0 rows)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks = 8, {}
    while position < len(data):
        (length,), kind = struct.unpack(">I", data[position:position + 4]), data[position + 4:position + 8]
        body = data[position + 8:position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length:position + 12 + length])
        assert crc == zlib.crc32(kind + body)
        chunks[kind] = chunks.get(kind, b"") + body
        position += 12 + length
    width, height, depth, colour, *_ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    channels = {0: 1, 2: 3, 6: 4}[colour]
    raw = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, 1 + width * channels)
    assert depth == 8 and not raw[:, 0].any()
    pixels = raw[:, 1:].reshape(height, width, channels)
    return pixels[..., 0] if channels == 1 else pixels


def test_plain_values_and_none():
    assert rich_repr(None) == {}
    assert rich_repr(3) == {"text/plain": "3"}
    assert rich_repr("hi") == {"text/plain": "'hi'"}


def test_small_tensor_gets_a_table_large_one_only_text():
    bundle = rich_repr(webgrad.tensor([[1.5, 2.0], [3.0, 4.25]]))
    assert bundle["text/plain"].startswith("tensor(")
    page = bundle["text/html"]
    assert page.startswith('<table class="webgrad-tensor">') and page.count("<tr>") == 2 and "4.25" in page
    assert "(2, 2) float32" in page
    assert rich_repr(webgrad.arange(3))["text/html"].count("<td>") == 3
    assert "text/html" not in rich_repr(webgrad.zeros(30, 30))
    assert "text/html" not in rich_repr(webgrad.zeros(2, 2, 2))


def test_objects_with_repr_html_and_png():
    summary = webgrad.summary(nn.Linear(2, 3), input_size=(1, 2))
    bundle = rich_repr(summary)
    assert bundle["text/html"] == summary._repr_html_() and bundle["text/plain"] == str(summary)
    assert "text/html" not in rich_repr(type(summary))  # a class is not rendered through its methods

    class Broken:
        def __repr__(self):
            raise RuntimeError("no repr")

        def _repr_html_(self):
            return "<b>fine</b>"

    bundle = rich_repr(Broken())
    assert bundle["text/plain"] == "<repr failed: RuntimeError: no repr>" and bundle["text/html"] == "<b>fine</b>"


def test_image_from_tensor_round_trips_through_png():
    ramp = webgrad.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    bundle = rich_repr(Image(ramp, scale=2))
    pixels = decode_png(base64.b64decode(bundle["image/png"]))
    expected = np.round(np.arange(12).reshape(3, 4) / 11 * 255).astype(np.uint8).repeat(2, 0).repeat(2, 1)
    np.testing.assert_array_equal(pixels, expected)
    rgb = np.zeros((3, 2, 2))
    rgb[0] = 1.0  # channels first: red everywhere
    np.testing.assert_array_equal(decode_png(png_bytes(Image(rgb, vmin=0, vmax=1).pixels)), [[[255, 0, 0]] * 2] * 2)


def test_image_bad_input():
    with pytest.raises(ValueError, match=r"display.Image: expected .* got shape \(2, 2, 2, 2\)"):
        Image(np.zeros((2, 2, 2, 2)))
    with pytest.raises(ValueError, match="scale"):
        Image(np.zeros((2, 2)), scale=0)


def test_called_interactively_knows_registered_cells_and_the_python_prompt(monkeypatch):
    import sys

    from webgrad import display

    monkeypatch.delattr(sys, "ps1", raising=False)
    monkeypatch.setitem(sys.modules, "IPython", None)  # as if IPython were not imported
    scope: dict = {"sys": sys}
    frame = eval(compile("sys._getframe(0)", "<display-test-cell>", "eval"), scope)
    assert not display.called_interactively(frame)
    display.register_interactive_cell("<display-test-cell>")
    assert display.called_interactively(frame)
    assert not display.called_interactively(sys._getframe(0))  # this file is a script
    monkeypatch.setattr(sys, "ps1", ">>> ", raising=False)
    assert display.called_interactively(sys._getframe(0))  # a python prompt shows values itself
