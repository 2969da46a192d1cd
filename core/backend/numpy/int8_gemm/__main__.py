"""``python -m webgrad.backend.numpy.int8_gemm``: build qgemm.c for this machine (see __init__)."""
from . import build

print(build())
