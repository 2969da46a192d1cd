"""Connection limits for uvicorn: a header-read timeout, a header size cap and a
connection cap that evicts idle sockets, so idle or slow clients cannot use up
the server's file descriptors and lock everyone else out.

uvicorn closes a kept-alive connection ``timeout_keep_alive`` seconds after its
last response, but it has no timer for a connection that has not sent a whole
request yet (a fresh socket that sends nothing, or headers trickling in), no
header size limit with httptools, and ``limit_concurrency`` only answers 503 to
requests: idle sockets still hold their descriptors. ``guarded_protocol`` wraps
uvicorn's HTTP protocol class to add, per connection:

- a header-read timeout: from the connection's start, and again after each
  response, the next request's headers must be complete within
  ``header_timeout_s``, else the socket is closed (nothing is being served on it);
- a header size cap: more than ``max_header_bytes`` without the end of the
  headers is answered 431 and closed;
- a connection cap: when a new connection would make more than
  ``max_connections``, the connection idle the longest (no request in flight) is
  closed to make room, so a client that sends its request at once is served.

``uvicorn_config`` builds the server configuration used by ``python -m server``
and by the tests, from ``server.app.Settings``.
"""
from __future__ import annotations

import importlib.util
import resource

DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_KEEP_ALIVE_S = 5.0
MAX_HEADER_BYTES = 64 * 1024



def default_max_connections() -> int:
    """Half the open-file limit (at most 1000): the rest is for the store, the listener and
    the sockets accepted in one burst before idle ones can be closed."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 4096
    return max(16, min(1000, soft // 2))


def guarded_protocol(base: type, header_timeout_s: float, max_connections: int,
                     max_header_bytes: int = MAX_HEADER_BYTES) -> type:
    """A subclass of uvicorn's ``base`` HTTP protocol with the limits above."""
    body = f"request headers larger than {max_header_bytes} bytes".encode()
    too_large = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
                 b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))

    class Guarded(base):
        def connection_made(self, transport):
            super().connection_made(transport)
            self._header_timer = None
            self._header_bytes = 0
            self._wait_for_headers()
            if len(self.connections) > max_connections:
                self._evict_idle()

        def data_received(self, data):
            # Bytes of a body still arriving after an early answer (a 413 sent before the
            # upload was read) are drained by the parser: they are not the next headers.
            waiting = self._waiting_for_headers() and not self._reading_body()
            super().data_received(data)
            if waiting and self._waiting_for_headers() and not self.transport.is_closing():
                self._header_bytes += len(data)
                if self._header_bytes > max_header_bytes:
                    self.transport.write(too_large)
                    self.transport.close()

        # httptools' parser calls these two; h11's state is read in _reading_body.
        def on_headers_complete(self):
            self._body_open = True
            super().on_headers_complete()

        def on_message_complete(self):
            self._body_open = False
            super().on_message_complete()

        def on_response_complete(self):
            super().on_response_complete()
            if not self.transport.is_closing():
                self._wait_for_headers()

        def connection_lost(self, exc):
            if self._header_timer is not None:
                self._header_timer.cancel()
            super().connection_lost(exc)

        # -- helpers
        def _wait_for_headers(self):
            """Arm the timer for the next request; a new cycle (headers parsed) disarms it."""
            if self._header_timer is not None:
                self._header_timer.cancel()
            self._awaited_after = self.cycle
            self._header_bytes = 0
            self._idle_since = self.loop.time()
            self._header_timer = self.loop.call_later(header_timeout_s, self._header_timeout)

        def _reading_body(self) -> bool:
            conn = getattr(self, "conn", None)  # h11's connection state machine
            if conn is not None:
                return conn.their_state is h11_send_body()
            return getattr(self, "_body_open", False)

        def _waiting_for_headers(self) -> bool:
            return self._header_timer is not None and self.cycle is self._awaited_after

        def _idle(self) -> bool:
            cycle = self.cycle
            return (cycle is None or cycle.response_complete) and not getattr(self, "pipeline", None)

        def _header_timeout(self):
            self._header_timer = None
            if self.cycle is self._awaited_after and self._idle() and not self.transport.is_closing():
                self.transport.close()

        def _evict_idle(self):
            others = [c for c in self.connections if c is not self and isinstance(c, Guarded)
                      and c._idle() and not c.transport.is_closing()]
            if others:  # else all are busy: uvicorn's limit_concurrency answers this one 503
                min(others, key=lambda c: c._idle_since).transport.close()

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded


def h11_send_body():
    import h11
    return h11.SEND_BODY


def http_protocol_class(name: str | None = None) -> type:
    """uvicorn's httptools protocol where installed (faster; drains an unread body after an
    early answer such as 413, so the client still reads it), else h11."""
    if name is None:
        name = "httptools" if importlib.util.find_spec("httptools") else "h11"
    if name == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
        return HttpToolsProtocol
    from uvicorn.protocols.http.h11_impl import H11Protocol
    return H11Protocol


def uvicorn_config(app, host: str, port: int, settings, **options):
    """The uvicorn ``Config`` for ``app`` with the limits in ``settings`` (``server.app.Settings``)."""
    import uvicorn

    protocol = guarded_protocol(http_protocol_class(options.pop("http", None)), settings.header_timeout_s,
                                settings.max_connections)
    # uvicorn answers 503 once its connection count reaches limit_concurrency; the
    # protocol keeps at most max_connections by evicting idle ones, so uvicorn's
    # limit sits one above, counting the connection being accepted.
    return uvicorn.Config(app, host=host, port=port, http=protocol,
                          timeout_keep_alive=settings.keep_alive_s,
                          limit_concurrency=settings.max_connections + 1, **options)
