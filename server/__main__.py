"""Run the site: ``python -m server [--host 127.0.0.1] [--port 8000] [--data DIR]``.

The port defaults to $PORT, else 8000; the data folder to $WEBGRAD_DATA, else
./data. Run ``python -m server.assets`` first (``make serve`` does both).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

import uvicorn

from .app import Settings, create_app
from .assets import assets_ready


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server", description="Serve the webgrad site.")
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("WEBGRAD_DATA", "data")),
                        help="model store folder (default: $WEBGRAD_DATA or ./data)")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)

    for problem in assets_ready():
        print(f"server: warning: {problem}; run `python -m server.assets` (or `make serve`)",
              file=sys.stderr)
    app = create_app(Settings(data_dir=args.data))
    print(f"server: http://{args.host}:{args.port}/  (models in {args.data.resolve()})", file=sys.stderr)
    # httptools parses faster than h11 and drains an unread request body after
    # an early answer (e.g. 413), so the client still reads that answer.
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    uvicorn.run(app, host=args.host, port=args.port, http=http, log_level=args.log_level,
                timeout_graceful_shutdown=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
