"""``webgrad.ao.nn.quantized.dynamic.Linear``: where torch.ao keeps its dynamic quantized Linear."""
from types import SimpleNamespace

from .quantization import DynamicQuantizedLinear

quantized = SimpleNamespace(dynamic=SimpleNamespace(Linear=DynamicQuantizedLinear))
