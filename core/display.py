"""Rich display of a value, as Jupyter does it: a dict of MIME type -> content.

The playground's worker calls ``rich_repr`` on the value of a cell's last expression
and shows the richest entry it understands (``text/html``, ``image/png`` as base64,
else ``text/plain``).

Example:
    >>> webgrad.display.rich_repr(webgrad.eye(2))["text/html"][:30]
    '<table class="webgrad-tensor">'
    >>> webgrad.display.Image(webgrad.rand(8, 8))   # shows as a picture in the page
"""
from __future__ import annotations

import base64
import html
import struct
import sys
import zlib

import numpy as np
from .tensor import Tensor

MAX_TABLE_CELLS = 400  # tensors up to this size (and at most 2-D) also get an HTML table

# Filenames of interactive cells: code whose last expression's value a page shows (richly), as
# Jupyter does. The browser worker registers its cell ("<playground>"). Functions that print by
# default in a script, such as webgrad.summary, stay quiet when called from one, so the value is
# not shown twice (once printed, once displayed).
_interactive_cells: set[str] = set()


def register_interactive_cell(filename: str) -> None:
    """Treat code compiled under ``filename`` as an interactive cell (see ``called_interactively``)."""
    _interactive_cells.add(filename)


def called_interactively(frame) -> bool:
    """Whether ``frame`` (a caller's, e.g. ``sys._getframe(1)``) runs where values display themselves:
    a registered page cell, a native ``python`` prompt (``sys.ps1``) or IPython/Jupyter."""
    if frame is not None and frame.f_code.co_filename in _interactive_cells:
        return True
    if hasattr(sys, "ps1"):
        return True
    ipython = sys.modules.get("IPython")
    return bool(ipython is not None and getattr(ipython, "get_ipython", lambda: None)() is not None)


def rich_repr(obj) -> dict:
    """``{"text/plain": repr(obj), ...}`` plus ``"text/html"`` / ``"image/png"`` (base64) when the
    object offers them (``_repr_html_``, ``_repr_png_``), or a table for a small tensor. ``None`` gives ``{}``."""
    if obj is None:
        return {}
    bundle = {"text/plain": _safe(repr, obj)}
    for mime, method in (("text/html", "_repr_html_"), ("image/png", "_repr_png_")):
        function = getattr(obj, method, None)
        if callable(function) and not isinstance(obj, type):
            value = _safe(function)
            if isinstance(value, bytes):
                value = base64.b64encode(value).decode("ascii")
            if isinstance(value, str) and value:
                bundle[mime] = value
    if "text/html" not in bundle:
        table = _tensor_table(obj)
        if table is not None:
            bundle["text/html"] = table
    return bundle


def _safe(function, *args) -> str:
    try:
        return function(*args)
    except Exception as exc:  # a broken repr must not hide the value
        return f"<repr failed: {type(exc).__name__}: {exc}>"


def _tensor_table(obj) -> str | None:
    if isinstance(obj, Tensor):
        if obj.dim() > 2 or obj.numel() > MAX_TABLE_CELLS or obj.numel() == 0:
            return None
        array = obj.detach().numpy()
        caption = f"tensor {tuple(obj.shape)} {obj.dtype.name} on {obj.device}"
    else:
        return None
    array = np.atleast_2d(array)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(_number(v))}</td>" for v in row) + "</tr>" for row in array)
    return f'<table class="webgrad-tensor"><caption>{html.escape(caption)}</caption><tbody>{rows}</tbody></table>'


def _number(value) -> str:
    if isinstance(value, (np.floating, float)):
        return f"{float(value):.4g}"
    return str(value.item() if hasattr(value, "item") else value)


class Image:
    """Show a 2-D (H, W) or (H, W, 3|4) / (3|4, H, W) array or tensor as a picture.

    Values are scaled from ``[vmin, vmax]`` (default: the data's range) to 0..255; ``scale``
    enlarges each pixel (an 8x8 digit is easier to see at 16x).

    Example:
        >>> images, labels = webgrad.datasets.digits(flatten=False)
        >>> webgrad.display.Image(images[0, 0], scale=16)
    """

    def __init__(self, data, scale: int = 1, vmin: float | None = None, vmax: float | None = None):
        array = data.detach().numpy() if hasattr(data, "detach") else np.asarray(data)
        if array.ndim == 3 and array.shape[0] in (3, 4) and array.shape[-1] not in (3, 4):
            array = np.moveaxis(array, 0, -1)
        if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[-1] not in (3, 4)):
            raise ValueError(f"display.Image: expected (H, W), (H, W, 3|4) or (3|4, H, W), got shape {array.shape}")
        if not isinstance(scale, int) or scale < 1:
            raise ValueError(f"display.Image: scale must be a positive int, got {scale!r}")
        array = array.astype(np.float64)
        low = float(np.nanmin(array)) if vmin is None else vmin
        high = float(np.nanmax(array)) if vmax is None else vmax
        scaled = (array - low) / (high - low) if high > low else np.zeros_like(array)
        pixels = np.clip(np.nan_to_num(scaled) * 255 + 0.5, 0, 255).astype(np.uint8)
        self.pixels = pixels.repeat(scale, axis=0).repeat(scale, axis=1)

    def __repr__(self) -> str:
        return f"<webgrad.display.Image {self.pixels.shape[1]}x{self.pixels.shape[0]}>"

    def _repr_png_(self) -> bytes:
        return png_bytes(self.pixels)


def png_bytes(pixels: np.ndarray) -> bytes:
    """Encode uint8 (H, W) grey, (H, W, 3) RGB or (H, W, 4) RGBA pixels as a PNG file."""
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    height, width = pixels.shape[:2]
    channels = 1 if pixels.ndim == 2 else pixels.shape[2]
    colour_type = {1: 0, 3: 2, 4: 6}[channels]  # grey, RGB, RGBA
    raw = b"".join(b"\x00" + pixels[row].tobytes() for row in range(height))  # filter 0 on each row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
