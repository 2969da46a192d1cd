"""``webgrad.ao``: torch.ao's dynamic quantization (``webgrad.ao.quantization.quantize_dynamic``)."""
from . import nn, quantization  # noqa: F401
