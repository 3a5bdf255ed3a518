"""The server's listening sockets: every address of a host, optionally shared with other processes."""
from __future__ import annotations

import socket


def listen(host: str, port: int, reuse_port: bool, backlog: int = 100) -> list[socket.socket]:
    """Bound, listening sockets for every address of `host` (the first one's port for the others, when
    `port` is 0); `reuse_port`: SO_REUSEPORT, so that other processes may listen on the same port."""
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                                  flags=socket.AI_PASSIVE):
            if sockets and port == 0:
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets
