"""``python -m webgrad.browser``: run a script or a pytest suite inside headless Chromium.

    python -m webgrad.browser run train.py [--device auto|cpu|webgpu] [--files PATH ...]
                                  [--out DIR] [--timeout S] [--url URL] [-- args...]
    python -m webgrad.browser pytest tests/ [-k EXPR] [--device ...] [--junitxml FILE]
                                  [--files PATH ...] [--timeout S] [-- pytest args...]

The script (and ``--files``) are copied into the page's working folder, keeping their
paths relative to the current folder; the script runs there with ``sys.argv`` set and
new tensors on the runtime's device. Output streams to this terminal as it is printed;
``webgrad_progress({...})`` calls show as ``webgrad_progress: {...}`` lines on stderr.

Exit status: the script's own (an uncaught exception: 1, with its traceback), pytest's
for ``pytest``, 124 when ``--timeout`` ran out (the run is interrupted first), and 2
when a file given does not exist (said before Chromium starts) or the browser side could
not be set up (no Chromium, no site, no WebGPU).
"""
from __future__ import annotations

import argparse
import os
import posixpath
import sys
from pathlib import Path

from .session import WORKDIR, BrowserError, BrowserSession, Site, collect

TIMED_OUT = 124
SETUP_FAILED = 2
JUNIT_IN_PAGE = "/home/pyodide/.webgrad-junit.xml"  # where the report goes when the path cannot be mirrored


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=("auto", "cpu", "webgpu"), default="auto",
                        help="the page's device: auto picks WebGPU where there is an adapter (default auto)")
    parser.add_argument("--files", nargs="+", default=[], metavar="PATH",
                        help="more files or folders to copy into the page's working folder")
    parser.add_argument("--timeout", type=float, default=None, metavar="S",
                        help="interrupt the run after S seconds and exit with 124")
    parser.add_argument("--url", default=None, help="a running webgrad site (default: start one from this checkout)")
    parser.add_argument("--chromium", default=None, help="the Chromium binary (default: $WEBGRAD_CHROMIUM, "
                        "Playwright's, or chromium on PATH)")
    parser.add_argument("--headed", action="store_true", help="show the browser window")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m webgrad.browser", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a Python script in the page")
    run.add_argument("script")
    run.add_argument("--out", default=None, metavar="DIR",
                     help="copy the files the script wrote under its working folder back into DIR")
    _common(run)
    test = commands.add_parser("pytest", help="run pytest in the page")
    test.add_argument("paths", nargs="*", default=["."], help="test files or folders (default: .)")
    test.add_argument("-k", dest="keyword", default=None, help="pytest's -k expression")
    test.add_argument("--junitxml", default=None, metavar="FILE", help="write pytest's JUnit XML report here")
    _common(test)
    return parser


def _page_path(path: str) -> str:
    resolved = Path(path).resolve()
    cwd = Path.cwd().resolve()
    relative = resolved.relative_to(cwd) if resolved.is_relative_to(cwd) else Path(resolved.name)
    return posixpath.join(WORKDIR, relative.as_posix())


def _files_for(args) -> dict[str, bytes]:
    """The files to copy into the page, read before Chromium starts (11 s), so that a missing
    one is said at once; raises ``BrowserError`` naming it."""
    if args.command == "run":
        if os.path.isdir(args.script):
            raise BrowserError(f"{args.script}: is a folder; `run` takes a Python script (copy folders "
                               "in with --files)")
        return collect([args.script, *args.files])
    config = [name for name in PYTEST_CONFIG if Path(name).is_file()]
    return collect([*args.paths, *args.files, *config])


def _junit_in_page(junitxml: str | None) -> str | None:
    """Where pytest in the page writes its JUnit report: the absolute path the user's file
    has here, in the page's own file system, so that pytest's "generated xml file: ..."
    line names the user's file (as a native run's does); copied back from there."""
    if junitxml is None:
        return None
    return Path(junitxml).resolve().as_posix() if os.name == "posix" else JUNIT_IN_PAGE


def _run_script(session: BrowserSession, args, extra: list[str], files: dict[str, bytes]) -> int:
    session.put_files(files)
    session.call_ok("enter", WORKDIR, session.device)
    session.snapshot()
    out = session.call("run_script", _page_path(args.script), extra, timeout_s=args.timeout)
    if out.get("timed_out"):
        print(f"webgrad.browser: {args.script} ran past --timeout {args.timeout:g} s and was interrupted",
              file=sys.stderr)
        return TIMED_OUT
    if "error" in out:  # the runner itself failed (the script's own errors are caught in the page)
        print(out["error"]["traceback"] or out["error"]["message"], file=sys.stderr)
        return 1
    if args.out:
        target = Path(args.out)
        for name, data in session.changed_files().items():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(data)
    return int(out["result"])


PYTEST_CONFIG = ("conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini")


def _run_pytest(session: BrowserSession, args, extra: list[str], files: dict[str, bytes]) -> int:
    # The current folder's conftest.py and pytest configuration come along (_files_for), as pytest reads them.
    session.put_files(files)
    session.call_ok("enter", WORKDIR, session.device)
    session.call_ok("install_pytest")
    pytest_args = [_page_path(p) for p in args.paths] + ["-v"]
    if args.keyword:
        pytest_args += ["-k", args.keyword]
    pytest_args += extra
    junit = _junit_in_page(args.junitxml)
    out = session.call("run_pytest", pytest_args, junit, timeout_s=args.timeout)
    if out.get("timed_out"):
        print(f"webgrad.browser: pytest ran past --timeout {args.timeout:g} s and was interrupted", file=sys.stderr)
        return TIMED_OUT
    if "error" in out:
        print(out["error"]["traceback"] or out["error"]["message"], file=sys.stderr)
        return 1
    if junit is not None:
        report = session.call_ok("read_text", junit)
        Path(args.junitxml).parent.mkdir(parents=True, exist_ok=True)
        Path(args.junitxml).write_text(report)
    return int(out["result"])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = build_parser().parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    try:
        files = _files_for(args)
        with Site(args.url) as site, BrowserSession(str(site.url), args.device, args.chromium,
                                                    args.headed) as session:
            print(f"webgrad.browser: runtime ready on {session.device} ({session.device_reason})", file=sys.stderr)
            return (_run_script if args.command == "run" else _run_pytest)(session, args, extra, files)
    except BrowserError as err:
        print(f"webgrad.browser: {err}", file=sys.stderr)
        return SETUP_FAILED


if __name__ == "__main__":
    sys.exit(main())
