"""Backends by device name. ``cpu`` is the numpy backend; ``webgpu`` registers
itself when its module is imported and a device can be made. What a backend implements
(eager kernels, and its passes, fusion rules and replay for ``webgrad.compile``) is
written down in protocol.py. (``webgrad.backends``, plural, is torch's ``torch.backends``
namespace for scripts that probe cuDNN or MPS; nothing runs there.)"""
from __future__ import annotations

# The registry (device name -> backend, the default device) lives in device_api.py, below
# every backend, so that backends and the random state can name devices without importing
# this package back.
from ..device_api import (  # noqa: F401
    _BACKENDS, default_device, get_backend, normalize_device, register, set_default_device,
)
from . import numpy  # noqa: E402

register("cpu", numpy.NumpyBackend())
