"""The web bundle as a lowering target (``webgrad.export``; the format and API: ``webgrad.lite``).

``lower.py`` turns a traced forward into buffers and steps under this target's rules,
``kernels.py`` writes each step's WGSL from the templates in ``wgsl_kernels/lite/``, and
``dims.py`` is the arithmetic of sizes that follow the dynamic batch.
"""
