"""The Python half of webgrad's browser runtime.

``web/runtime/worker.js`` installs the wheel in Pyodide, then calls
``webgrad.web.worker.boot`` once and ``webgrad.web.worker.run_cell`` for every run.
Nothing here is needed natively; it imports ``js``/``pyodide`` only when called there.
"""
