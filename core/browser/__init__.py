"""``webgrad.browser``: run your own scripts and tests inside headless Chromium.

The same code that runs natively runs in the page: Pyodide in a Web Worker, on numpy
(``--device cpu``) or the browser's WebGPU (``--device webgpu``). Two commands::

    python -m webgrad.browser run train.py [--device auto|cpu|webgpu] [--files DIR ...]
                                  [--out DIR] [--timeout S] [-- args...]
    python -m webgrad.browser pytest tests/ [-k EXPR] [--device ...] [--junitxml FILE]

and a pytest plugin (``browser_runtime`` fixture, ``@pytest.mark.in_browser``). See
``session.py`` for the pieces: the site (a running server, or one started from a
webgrad checkout), Chromium through Playwright, and the runtime in the page.
"""
from .session import BrowserError, BrowserSession, Site, find_chromium  # noqa: F401
