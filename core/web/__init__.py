"""The Python half of webgrad's browser runtime.

``web/runtime/worker.js`` installs the wheel in Pyodide, then calls
``webgrad.web.worker.boot`` once, ``webgrad.web.worker.run_cell`` for every run of
source and ``webgrad.web.worker.call`` for every ``call`` message, which reaches the
modules here by name: ``widget`` (the ``<webgrad-model>`` element's model) and
``runner`` (what ``python -m webgrad.browser`` does in the page).
Natively only ``worker.progress`` is used (the demos report training progress through it;
it does nothing outside a page); ``js``/``pyodide`` are imported only when called there.
"""
