"""Network failures in words a person can act on, instead of the transport's internals.

``ClientConnectorError: Cannot connect to host 127.0.0.1:9 ssl:default [Connect call failed …]`` says
less than "connection refused by 127.0.0.1:9 (nothing listens there)".
"""

from __future__ import annotations

import errno

import aiohttp

_CONNECT_ERRNO = {
    errno.ECONNREFUSED: "connection refused by {where} (nothing listens there)",
    errno.ETIMEDOUT: "connecting to {where} timed out",
    errno.EHOSTUNREACH: "{where} is unreachable (no route to the host)",
    errno.ENETUNREACH: "{where} is unreachable (no route to its network)",
    errno.ECONNRESET: "{where} reset the connection",
}


def describe(exc: BaseException) -> str:
    """One line naming what went wrong on the network, without the library's class names."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"TLS certificate of {exc.host}:{exc.port} not trusted ({exc.certificate_error})"
    if isinstance(exc, aiohttp.ClientConnectorSSLError):
        return f"TLS handshake with {exc.host}:{exc.port} failed"
    if isinstance(exc, aiohttp.ClientConnectorError):
        where = f"{exc.host}:{exc.port}"
        template = _CONNECT_ERRNO.get(exc.os_error.errno or 0)
        if template is not None:
            return template.format(where=where)
        return f"cannot connect to {where}: {exc.os_error.strerror or exc.os_error}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the server closed the connection before answering"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return f"the body arrived broken ({exc})"
    if isinstance(exc, ConnectionResetError):
        return "the server reset the connection"
    return f"{exc.__class__.__name__}: {exc}"
