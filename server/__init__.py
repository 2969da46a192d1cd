"""The webgrad web server: the site, the browser runtime's assets and the model store.

``make serve`` (or ``python -m server.assets && python -m server``) serves
http://127.0.0.1:8000. Modules: ``app`` (routes and headers), ``static`` (safe
file serving), ``api`` and ``store`` (the model store), ``assets`` (the step
that assembles server/assets/), ``wheel`` (the webgrad wheel for Pyodide),
``testing`` (helpers for the tests).
"""
