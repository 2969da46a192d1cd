"""The ``webgrad`` pytest plugin (entry point ``pytest11``): browser tests beside native ones.

- ``browser_runtime`` (session fixture): a booted runtime in headless Chromium;
  ``browser_runtime.run(code)`` returns the value of the code's last expression and
  raises ``BrowserError`` with the page's traceback; ``browser_runtime.device``.
- ``@pytest.mark.in_browser``: the marked test function runs in the page instead: its
  module's source is loaded there (so module-level imports and helpers work) and the
  function is called without arguments (``webgrad.web.runner.call_test``). Python files
  beside the test module are copied in too, so ``from model import Net`` works as natively.

Options: ``--webgrad-url`` (a running site; default: start one from this checkout),
``--webgrad-device`` (auto, cpu, webgpu), ``--webgrad-chromium``, ``--webgrad-headed``.
Inside the page (when ``python -m webgrad.browser pytest`` runs such a file) the marker
does nothing: the test already runs in the browser.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

IN_PAGE = sys.platform == "emscripten"

def pytest_addoption(parser):
    group = parser.getgroup("webgrad", "webgrad in headless Chromium")
    group.addoption("--webgrad-url", default=None, help="a running webgrad site for browser_runtime")
    group.addoption("--webgrad-device", default="auto", choices=("auto", "cpu", "webgpu"))
    group.addoption("--webgrad-chromium", default=None, help="the Chromium binary")
    group.addoption("--webgrad-headed", action="store_true", help="show the browser window")


def pytest_configure(config):
    config.addinivalue_line("markers", "in_browser: run this test function inside Pyodide in headless Chromium "
                                       "(webgrad.browser)")


class BrowserRuntime:
    """What ``browser_runtime`` yields: the page's runtime, from Python."""

    def __init__(self, session):
        self._session = session
        self.device = session.device
        self._copied: dict[Path, str] = {}  # folder of a test module -> where it is in the page

    def run(self, code: str):
        return self._session.ok(code)

    def _copy_folder_of(self, module_file: Path) -> str:
        """Put the Python files beside a test module into the page, once; where they are there."""
        from .session import WORKDIR

        folder = module_file.parent
        if folder not in self._copied:
            target = self._copied[folder] = f"{WORKDIR}/in_browser/{len(self._copied)}"
            self._session.put_files({p.name: p.read_bytes() for p in folder.glob("*.py")}, target)  # on sys.path
        return self._copied[folder]


@pytest.fixture(scope="session")
def browser_runtime(request):
    from .session import BrowserSession, Site

    option = request.config.getoption
    with Site(option("--webgrad-url")) as site, BrowserSession(
            str(site.url), option("--webgrad-device"), option("--webgrad-chromium"),
            option("--webgrad-headed")) as session:
        session.call_ok("install_pytest")
        yield BrowserRuntime(session)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if IN_PAGE or pyfuncitem.get_closest_marker("in_browser") is None:
        return None
    if getattr(pyfuncitem, "callspec", None) is not None:
        raise pytest.UsageError(f"{pyfuncitem.nodeid}: in_browser tests cannot be parametrized "
                                f"(fixtures and parameters stay on this side)")
    runtime = pyfuncitem._request.getfixturevalue("browser_runtime")
    module_file = Path(pyfuncitem.module.__file__)
    folder = runtime._copy_folder_of(module_file)
    failure = runtime._session.call_ok("call_test", f"{folder}/{module_file.name}", pyfuncitem.originalname)
    if failure:
        pytest.fail(f"in the browser ({runtime.device}):\n{failure}", pytrace=False)
    return True
