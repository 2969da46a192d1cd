"""What ``python -m webgrad.browser`` (``core/browser/``) runs in the page, through ``runtime.call``.

The driver (``webgrad.browser.session``) calls these by name in the page's worker; each
takes and returns plain values (files travel as base64 of a zip: Playwright's channel is
JSON). Natively they work too, which is how they are unit-tested.

- ``put(encoded, target)``: unzip files into ``target`` (created), which joins ``sys.path``.
- ``enter(workdir, device)``: make ``workdir`` the working folder and ``device`` the default.
- ``snapshot(top)`` then ``changed(top)``: the files written under ``top`` in between, zipped.
- ``run_script(path, argv)``: run a script as ``__main__``; its exit status.
- ``install_pytest()``, ``run_pytest(args, junit)``: pytest from the site, then a session; its exit status.
- ``call_test(path, name)``: one ``@pytest.mark.in_browser`` test function; its failure or None.
- ``read_text(path)``: a file's text (pytest's JUnit report).
"""
from __future__ import annotations

import ast
import base64
import io
import os
import runpy
import sys
import traceback
import types
import zipfile

_before: dict[str, tuple[int, int]] = {}  # snapshot() of the working folder, for changed()
HOOKS = ("webgrad_progress", "WEBGRAD_DEVICE", "WEBGRAD_BASE_URL")  # what the runtime put in __main__


def put(encoded: str, target: str) -> None:
    """Unzip base64 ``encoded`` under ``target``, which goes first on ``sys.path`` (imports beside a script work)."""
    zipfile.ZipFile(io.BytesIO(base64.b64decode(encoded))).extractall(target)
    if target not in sys.path:
        sys.path.insert(0, target)


def _stamps(top: str) -> dict[str, tuple[int, int]]:
    seen = {}
    for folder, _, names in os.walk(top):
        for name in names:
            path = os.path.join(folder, name)
            info = os.stat(path)
            seen[os.path.relpath(path, top)] = (info.st_mtime_ns, info.st_size)
    return seen


def snapshot(top: str) -> None:
    global _before
    _before = _stamps(top)


def changed(top: str) -> str:
    """Base64 of a zip of the files under ``top`` that are new or changed since ``snapshot(top)``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, stamp in sorted(_stamps(top).items()):
            if _before.get(name) != stamp:
                archive.write(os.path.join(top, name), name)
    return base64.b64encode(buffer.getvalue()).decode()


def enter(workdir: str, device: str) -> None:
    os.makedirs(workdir, exist_ok=True)
    os.chdir(workdir)
    if workdir not in sys.path:
        sys.path.insert(0, workdir)
    from .. import set_default_device

    set_default_device(device)


def _print_from(path: str, error: BaseException) -> None:
    """The traceback from the script's own frames on (runpy's frames are noise)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb or error.__traceback__)


def run_script(path: str, argv: list[str]) -> int:
    """Run the script at ``path`` as ``__main__`` with ``sys.argv`` and the runtime's hooks; its exit status
    (an uncaught exception: 1, its traceback printed)."""
    import __main__

    path = os.path.abspath(path)
    sys.argv = [path, *argv]
    hooks = {k: v for k, v in __main__.__dict__.items() if k in HOOKS}
    try:
        runpy.run_path(path, init_globals=hooks, run_name="__main__")
        return 0
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            return exit.code or 0
        print(exit.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: B036 (the script's own failure, reported as a native run does)
        _print_from(path, error)
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


async def install_pytest(base_url: str | None = None) -> None:
    """pytest and its dependencies from the site's own /pyodide-extra/ (no network beyond it)."""
    import sysconfig
    from urllib.parse import urljoin

    try:
        import pytest  # noqa: F401
        return
    except ImportError:
        pass
    import __main__

    from pyodide.http import pyfetch

    index_url = urljoin(base_url or __main__.WEBGRAD_BASE_URL, "pyodide-extra/index.json")
    index = await (await pyfetch(index_url)).json()
    for package in index["packages"]:
        response = await pyfetch(urljoin(index_url, package["url"]))
        if not response.ok:
            raise RuntimeError(f"{package['url']}: HTTP {response.status}")
        await response.unpack_archive(extract_dir=sysconfig.get_paths()["purelib"], format="wheel")


def run_pytest(args: list[str], junit: str | None = None) -> int:
    """``pytest.main(args)`` in the page (a fresh collection each time); its exit status."""
    import pytest

    for name in [m for m in sys.modules if m == "conftest" or m.startswith(("test_", "conftest."))]:
        del sys.modules[name]  # a second session in the same page collects afresh
    # webgrad is imported before pytest starts (the runtime did), so pytest cannot rewrite its asserts: say nothing.
    quiet = ["-W", "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning"]
    report = ["--junitxml", junit] if junit else []  # only when asked for: pytest then names it
    code = pytest.main(list(args) + report + ["-p", "no:cacheprovider", "-p", "no:faulthandler"] + quiet)
    sys.stdout.flush()
    sys.stderr.flush()
    return int(code)


def call_test(path: str, name: str) -> str | None:
    """Load the test module at ``path`` under its own name, with pytest's assertion rewriting,
    and call ``name``; the formatted failure (from the test's own frame on), or None when it passed."""
    from _pytest.assertion.rewrite import rewrite_asserts

    with open(path, "rb") as file:
        source = file.read()
    tree = ast.parse(source, filename=path)
    rewrite_asserts(tree, source, path)
    module = types.ModuleType("webgrad_in_browser_" + path.rsplit("/", 1)[-1][:-3])
    module.__file__ = path
    sys.modules[module.__name__] = module
    exec(compile(tree, path, "exec"), module.__dict__)
    try:
        getattr(module, name)()
    except BaseException as error:  # noqa: B036 (a test's failure of any kind is reported, not raised)
        frames = error.__traceback__
        return "".join(traceback.format_exception(type(error), error, frames.tb_next if frames else None))
    return None


def read_text(path: str) -> str:
    with open(path) as file:
        return file.read()
