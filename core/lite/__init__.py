"""``webgrad.export``: a model's forward as a web bundle that runs with nothing but the browser.

    info = webgrad.export(model, (example,), "digits-lite", weights="int8")
    # in any page:  import {load} from "./lite.js";
    #               const model = await load("digits-lite/");  await model.predict(x)

The forward is traced once (the IR of ``webgrad.compile``), folded, fused and lowered by
``webgrad.backend.lite`` (the bundle as one more lowering target) to steps whose WGSL is in
the bundle; ``/lite.js`` runs them on WebGPU, or the same steps in plain JavaScript where the
page has no adapter. ``webgrad.lite.load`` runs a bundle natively through the same WGSL
(wgpu), so the kernels are checked in both worlds.

The bundle (a folder) holds:

- ``model.json``::

    {"format": "webgrad-lite", "version": 1, "name": "DigitsMLP",
     "batch": {"input": 0, "dim": 0} | null,   # where the batch size B is read at run time
     "inputs":  [{"name": "input", "buffer": 0, "dtype": "float32", "shape": [DIM...],
                  "index_rows": 10?,            # int inputs that index a table: valid [0, rows)
                  "causal": true?}],            # token rows: outputs at t depend on ids <= t only
     "outputs": [{"name": "output", "buffer": 9, "dtype": "float32", "shape": [DIM...]}],
     "buffers": [{"dtype": "float32" | "int32" | "bool" | "int8", "shape": [DIM...],
                  "role": "input" | "weight" | "step", "weight": "fc1.weight"?, "scale": 4?}],
     "weights": {"file": "weights.safetensors", "encoding": "float32" | "float16" | "int8"},
     "kernels": ["kernels/0.wgsl", ...],
     "steps": [{"op": "matmul", "inputs": [0, 3], "output": 5, "kernel": 0,
                "params": [DIM...], "grid": DIM, "attrs": {...}}],
     "labels": [...] | null, "metadata": {...}, "ops": [...], "created_by": "webgrad 0.1.0"}

  A DIM is an int, or ``[scale, offset]`` meaning ``scale * B + offset``. A weight buffer's
  values are the safetensors tensor named by ``weight`` (float32, or float16 to be widened at
  load); an ``int8`` weight holds per-row int8 values and ``scale`` names the float32 buffer
  of its rows' scales (row = axis 0, the output channel). bool buffers hold 0/1 as u32.
- ``weights.safetensors``: the weights, by name.
- ``kernels/N.wgsl``: one WGSL module per distinct kernel, entry point ``main``; its layout
  (binding 0 the params, then inputs, then output) is in ``backend/lite/kernels.py``.

Steps run in order; each writes its output buffer (``cat``'s parts write one buffer in turn).
"""
from __future__ import annotations

from .bundle import FORMAT, VERSION, BundleError, Exported, export, read_bundle
from .run import Bundle, load

__all__ = ["export", "Exported", "load", "Bundle", "BundleError", "read_bundle", "FORMAT", "VERSION"]
