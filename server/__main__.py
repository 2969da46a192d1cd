"""Run the site: ``python -m server [--host 127.0.0.1] [--port 8000] [--data DIR]``.

The port defaults to $PORT, else 8000; the data folder to $WEBGRAD_DATA, else
./data. Run ``python -m server.assets`` first (``make serve`` does both).

Requests must name an allowed host (loopback names, the --host address, and
--allowed-host / $WEBGRAD_ALLOWED_HOSTS); served on 0.0.0.0, reach it by a name
you allow. Limits: --header-timeout, --max-connections, --max-tensors (see
server/limits.py and server/api.py).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import uvicorn

from .app import Settings, create_app
from .assets import assets_ready
from .guard import hosts_from_env, origins_from_env
from .limits import DEFAULT_HEADER_TIMEOUT_S, default_max_connections, uvicorn_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server", description="Serve the webgrad site.")
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("WEBGRAD_DATA", "data")),
                        help="model store folder (default: $WEBGRAD_DATA or ./data)")
    parser.add_argument("--allowed-host", action="append", default=list(hosts_from_env()), metavar="NAME",
                        help="a Host name to serve besides loopback ones ('*': any); repeatable; "
                             "default $WEBGRAD_ALLOWED_HOSTS (comma-separated)")
    parser.add_argument("--allowed-origin", action="append", default=list(origins_from_env()), metavar="ORIGIN",
                        help="an origin (https://host[:port]) whose pages may write models; repeatable; "
                             "default $WEBGRAD_ALLOWED_ORIGINS")
    parser.add_argument("--header-timeout", type=float, default=DEFAULT_HEADER_TIMEOUT_S, metavar="SECONDS",
                        help="close a connection whose request headers are not complete by then")
    parser.add_argument("--max-connections", type=int, default=default_max_connections(),
                        help="open connections at most; idle ones are closed to make room")
    parser.add_argument("--max-tensors", type=int, default=None,
                        help="tensors per uploaded file at most (default $WEBGRAD_MAX_TENSORS or 10000)")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)

    for problem in assets_ready():
        print(f"server: warning: {problem}; run `python -m server.assets` (or `make serve`)",
              file=sys.stderr)
    settings = Settings(data_dir=args.data, allowed_hosts=tuple(args.allowed_host),
                        allowed_origins=tuple(args.allowed_origin), bound_host=args.host,
                        header_timeout_s=args.header_timeout, max_connections=args.max_connections)
    if args.max_tensors is not None:
        settings.max_tensors = args.max_tensors
    app = create_app(settings)
    print(f"server: http://{args.host}:{args.port}/  (models in {args.data.resolve()})", file=sys.stderr)
    config = uvicorn_config(app, args.host, args.port, settings, log_level=args.log_level,
                            timeout_graceful_shutdown=5)
    uvicorn.Server(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
