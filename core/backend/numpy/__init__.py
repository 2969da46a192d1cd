"""The numpy backend (device ``"cpu"``), the reference every other backend is tested against:
its eager kernels (backend.py), its replay of compiled plans (replay.py), the arrays a plan
writes into (arrays.py), the threads products run on (blas.py), malloc keeping freed arrays' pages
(heap.py) and, in Pyodide, the wasm matmul it uses instead of numpy's (wasm_gemm/)."""
from .backend import NumpyBackend, stored_result, takes_out, use_wasm_gemm, writes_out  # noqa: F401
