"""``torch.backends`` for webgrad: what scripts probe before choosing a device.

There is no CUDA, cuDNN or Metal here, so these answer as PyTorch does on a
machine without them. webgrad's own backend registry (numpy, webgpu) is
``webgrad.backend``.
"""
from . import cuda, cudnn, mps  # noqa: F401
