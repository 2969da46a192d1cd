"""``webgrad.stft`` and ``webgrad.istft``: short-time Fourier transforms as torch 2.x has
them, built on ``webgrad.fft``.

Framing is one gather with a precomputed index (the padding of ``center`` folded into it for
'reflect', 'replicate' and 'circular'), so it runs on the signal's device and differentiates
as indexing does; the transforms take webgrad.fft's path (complex results on the cpu).
The inverse overlap-adds the frames with ``scatter_add`` and divides by the summed squared
window, as torch does.

Example:
    >>> x = webgrad.randn(2, 1000)
    >>> spec = webgrad.stft(x, 256, window=webgrad.ones(256), return_complex=True)  # (2, 129, 16)
    >>> webgrad.istft(spec, 256, window=webgrad.ones(256), length=1000)            # back to x
"""
from __future__ import annotations

import numpy as np

from . import fft as _fft
from .complex_ops import on_cpu, view_as_real
from .creation import ones, tensor, zeros
from .ops import pad
from .ops.registry import OpError
from .tensor import Tensor

_NUMPY_PAD = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _window(name, window, win_length, n_fft, like):
    if win_length > n_fft or win_length <= 0:
        raise OpError(f"{name}: expected 0 < win_length <= n_fft, but got win_length={win_length}, n_fft={n_fft}")
    if window is None:
        window = ones(win_length, dtype=like.dtype if like.dtype.is_floating_point else None, device=like.device)
    if window.ndim != 1 or window.shape[0] != win_length:
        raise OpError(f"{name}: expected a 1D window tensor of size equal to win_length={win_length}, "
                      f"but got window with size {tuple(window.shape)}")
    left = (n_fft - win_length) // 2
    if left or n_fft - win_length - left:
        window = pad(window, (left, n_fft - win_length - left))
    return window


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,  # noqa: A002
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None):
    """Short-time Fourier transform of a signal (L,) or batch (B, L): (B, n_fft // 2 + 1, frames)
    complex (``onesided``, the default for real input) or (B, n_fft, frames).

    Args:
        n_fft: frame size; hop_length: frame step (n_fft // 4); win_length: window size (n_fft),
        window: 1-D window (default: ones, i.e. rectangular), zero-padded to n_fft in the middle;
        center: pad n_fft // 2 on both sides with ``pad_mode`` ('reflect', 'constant',
        'replicate', 'circular'); normalized: scale by n_fft ** -0.5;
        return_complex: must be given, as in torch 2.x (False gives view_as_real's (..., 2)).
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"stft: expected a Tensor, got {type(input).__name__}")
    if return_complex is None:
        raise OpError("stft requires the return_complex parameter be given for real inputs, and will further "
                      "require that return_complex=True in a future PyTorch release.")
    if input.ndim not in (1, 2):
        raise OpError(f"stft: expected a 1D or 2D tensor, but got a tensor of shape {tuple(input.shape)}")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    if hop_length <= 0:
        raise OpError(f"stft: expected hop_length > 0, but got hop_length={hop_length}")
    x = input.unsqueeze(0) if input.ndim == 1 else input
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.float()
    length = x.shape[-1]
    positions = np.arange(length)
    if center:
        half = n_fft // 2
        if pad_mode == "constant":
            x = pad(x, (half, half)) if not x.dtype.is_complex else pad(on_cpu(x), (half, half))
            positions = np.arange(length + 2 * half)
        elif pad_mode in _NUMPY_PAD:
            if pad_mode == "reflect" and half >= length:
                raise OpError(f"stft: reflect padding of {half} needs a signal longer than that, got length {length}")
            positions = np.pad(positions, half, mode=_NUMPY_PAD[pad_mode])
        else:
            raise OpError(f"stft: pad_mode must be 'reflect', 'constant', 'replicate' or 'circular', "
                          f"got {pad_mode!r}")
    if len(positions) < n_fft:
        raise OpError(f"stft: expected 0 < n_fft <= {len(positions)} (the padded signal's length), "
                      f"but got n_fft={n_fft}")
    n_frames = 1 + (len(positions) - n_fft) // hop_length
    starts = np.arange(n_frames)[:, None] * hop_length
    index = tensor(positions[starts + np.arange(n_fft)[None, :]], device=x.device)
    frames = x[:, index] * _window("stft", window, win_length, n_fft, x).to(x.device)  # (B, frames, n_fft)
    if onesided is None:
        onesided = not x.dtype.is_complex and (window is None or not window.dtype.is_complex)
    norm = "ortho" if normalized else "backward"
    spectrum = (_fft.rfft if onesided else _fft.fft)(frames, None, -1, norm).transpose(-1, -2)
    if input.ndim == 1:
        spectrum = spectrum.squeeze(0)
    return spectrum if return_complex else view_as_real(spectrum)


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,  # noqa: A002
          normalized=False, onesided=None, length=None, return_complex=False):
    """The inverse of ``stft``: overlap-adds the inverse transforms of the frames of a complex
    (B, freqs, frames) or (freqs, frames) spectrum and divides by the summed squared window."""
    if not isinstance(input, Tensor) or not input.dtype.is_complex:
        raise OpError(f"istft requires a complex-valued input tensor, got "
                      f"{getattr(input, 'dtype', type(input).__name__)}")
    if input.ndim not in (2, 3):
        raise OpError(f"istft: expected a tensor of 2 or 3 dims, got shape {tuple(input.shape)}")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    spec = input.unsqueeze(0) if input.ndim == 2 else input
    if onesided is None:
        onesided = spec.shape[-2] != n_fft
    expected_freqs = n_fft // 2 + 1 if onesided else n_fft
    if spec.shape[-2] != expected_freqs:
        raise OpError(f"istft: expected the frequency dimension (3rd to the last) of the input tensor to match "
                      f"n_fft / 2 + 1 when onesided=True, but got {spec.shape[-2]}")
    norm = "ortho" if normalized else "backward"
    columns = spec.transpose(-1, -2)  # (B, frames, freqs)
    if onesided:
        frames = _fft.irfft(columns, n_fft, -1, norm)
    else:
        frames = _fft.ifft(columns, n_fft, -1, norm)
        frames = frames if return_complex else frames.real
    window = on_cpu(_window("istft", window, win_length, n_fft, frames))
    batch, n_frames = frames.shape[0], frames.shape[1]
    total = n_fft + hop_length * (n_frames - 1)
    places = (np.arange(n_frames)[:, None] * hop_length + np.arange(n_fft)[None, :]).reshape(-1)
    index = tensor(np.broadcast_to(places, (batch, places.size)).copy())
    signal = zeros(batch, total, dtype=frames.dtype).scatter_add(1, index, (frames * window).reshape(batch, -1))
    envelope = zeros(total, dtype=window.dtype).scatter_add(0, tensor(places), (window * window).expand(n_frames, n_fft)
                                                            .reshape(-1))
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0) if length is None else min(start + length, total)
    signal, envelope = signal[:, start:end], envelope[start:end]
    if float(envelope.detach().abs().amin()) < 1e-11:
        raise OpError("istft: window overlap add min: the sum of squared windows is (almost) zero somewhere; "
                      "choose a window and hop_length that overlap everywhere (NOLA)")
    signal = signal / envelope
    if length is not None and signal.shape[-1] < length:
        signal = pad(signal, (0, length - signal.shape[-1]))
    return signal.squeeze(0) if input.ndim == 2 else signal
