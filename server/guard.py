"""Who may talk to the server: the Host allow-list and the rule for writes.

DNS rebinding: a page on ``evil.example`` can make its own name resolve to
127.0.0.1 and then talk to a server on loopback as if it were same-origin; only
the ``Host`` header still says ``evil.example``. So every request's Host must be
on the allow-list: loopback names and addresses (``localhost``, ``*.localhost``,
127.0.0.0/8, ``::1``), the address the server is bound to, and the names in
``WEBGRAD_ALLOWED_HOSTS`` / ``--allowed-host`` (``*`` turns the check off).
Anything else gets 421.

Writes (every method but GET, HEAD and OPTIONS) must carry ``X-Webgrad-Client: 1``.
A browser sends such a header to another origin only after a CORS preflight,
which this server grants only to the origins in ``WEBGRAD_ALLOWED_ORIGINS`` /
``--allowed-origin``; an HTML form or a ``no-cors`` fetch cannot set it at all.
A write whose ``Origin`` header is present must also come from this server's own
origin or an allow-listed one. Anything else gets 403.
"""
from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

CLIENT_HEADER = "X-Webgrad-Client"
READ_METHODS = ("GET", "HEAD", "OPTIONS")
WILDCARD_BINDS = ("0.0.0.0", "::", "")


def _env_list(name: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in os.environ.get(name, "").split(",") if item.strip())


def hosts_from_env() -> tuple[str, ...]:
    return _env_list("WEBGRAD_ALLOWED_HOSTS")


def origins_from_env() -> tuple[str, ...]:
    return _env_list("WEBGRAD_ALLOWED_ORIGINS")


def split_host(value: str) -> tuple[str, str]:
    """``'[::1]:8000'`` -> ``('::1', '8000')``; names lower-cased, a trailing dot dropped."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        name, _, port = value.partition(":")
    else:  # a bare IPv6 address, or no port
        name, port = value, ""
    return name.rstrip("."), port


def is_loopback(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):  # browsers pin these to loopback
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _origin_key(scheme: str, host: str, port: str) -> tuple[str, str, str]:
    default = {"http": "80", "https": "443"}.get(scheme, "")
    return scheme, host, "" if port == default else port


def normalize_origin(origin: str) -> tuple[str, str, str] | None:
    """``'http://LOCALHOST:80'`` -> ``('http', 'localhost', '')``; None for ``null`` or junk."""
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        return None
    host, port = split_host(parts.netloc)
    return _origin_key(parts.scheme, host, port)


@dataclass(frozen=True)
class AccessPolicy:
    """The Host allow-list and the allow-listed origins (see the module docstring)."""

    hosts: frozenset[str] = frozenset()
    origins: frozenset[tuple[str, str, str]] = frozenset()
    any_host: bool = False

    @classmethod
    def build(cls, hosts=(), origins=(), bound_host: str | None = None) -> AccessPolicy:
        names = {split_host(h)[0] for h in hosts if h != "*"}
        if bound_host in WILDCARD_BINDS:
            names.add(socket.gethostname().lower())  # reached by name from the network
        elif bound_host:
            names.add(split_host(bound_host)[0])
        parsed = set()
        for origin in origins:
            key = normalize_origin(origin)
            if key is None:
                raise ValueError(f"allowed origin {origin!r} is not like 'https://example.org[:port]' "
                                 "(WEBGRAD_ALLOWED_ORIGINS / --allowed-origin)")
            parsed.add(key)
        return cls(frozenset(names), frozenset(parsed), "*" in hosts)

    def host_allowed(self, host_header: str | None) -> bool:
        if host_header is None:  # HTTP/1.0 without Host: not a browser, so no rebinding
            return True
        name, _ = split_host(host_header)
        return self.any_host or is_loopback(name) or name in self.hosts

    def origin_listed(self, origin: str | None) -> bool:
        return origin is not None and normalize_origin(origin) in self.origins

    def same_origin(self, origin: str, scheme: str, host_header: str | None) -> bool:
        if host_header is None:
            return False
        return normalize_origin(origin) == _origin_key(scheme, *split_host(host_header))

    def refusal(self, method: str, scheme: str, headers: dict[str, str]) -> tuple[int, str] | None:
        """``(status, message)`` when the request must be refused, else None."""
        host = headers.get("host")
        if not self.host_allowed(host):
            return 421, (f"Misdirected Request: host {host!r} is not served here (a DNS-rebinding guard); "
                         "allow it with WEBGRAD_ALLOWED_HOSTS or --allowed-host")
        if method in READ_METHODS:
            return None
        origin = headers.get("origin")
        if origin is not None and not (self.same_origin(origin, scheme, host) or self.origin_listed(origin)):
            return 403, (f"Forbidden: a {method} from origin {origin!r} is refused; only this server's own "
                         "pages or origins in WEBGRAD_ALLOWED_ORIGINS / --allowed-origin may write")
        if headers.get(CLIENT_HEADER.lower()) != "1":
            return 403, (f"Forbidden: a {method} request must carry the header '{CLIENT_HEADER}: 1' "
                         "(sent by webgrad.store and the site's pages; a cross-site form cannot send it)")
        return None
