"""Where a destination may point (SSRF): a team's URL must not reach this service's own
network -- loopback, private, link-local (cloud metadata at 169.254.169.254), CGNAT, multicast,
reserved or unspecified addresses -- unless a network of TRACEDOC_ALERT_ALLOWED_NETWORKS
holds the address.

Checked twice: when a destination is saved (`check_url`: the literal address, or every address
the name resolves to now) and when an alert is sent (`GuardedSession`: the address the socket
actually connected to, so a name re-pointed after the check -- DNS rebinding -- is refused too;
redirects are never followed, proxies from the environment never used)."""
from __future__ import annotations

import ipaddress
import socket
from functools import lru_cache
from urllib.parse import urlsplit

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Names of metadata services that some resolvers answer with a routable address.
METADATA_NAMES = frozenset({"metadata", "metadata.google.internal", "metadata.goog", "instance-data",
                            "instance-data.ec2.internal"})


class UnsafeDestination(ValueError):
    """A destination URL that would reach an internal address."""


@lru_cache(maxsize=16)
def _networks(entries: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(e, strict=False) for e in entries)


def allowed_networks():
    return _networks(tuple(settings.TRACEDOC_ALERT_ALLOWED_NETWORKS))


NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))  # RFC 6052, 8215


def check_address(ip: IPAddress, host: str) -> None:
    """Raise UnsafeDestination unless `ip` is a public address or in the allow-list. An IPv6
    address that carries an IPv4 one (mapped, compatible, NAT64, 6to4, Teredo) is judged by
    that IPv4 address too: `64:ff9b::a00:1` reaches 10.0.0.1 through a NAT64 gateway."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:  # ::ffff:127.0.0.1 is 127.0.0.1
        ip = ip.ipv4_mapped
    if any(ip in net for net in allowed_networks()):
        return
    for candidate in (ip, *_embedded_ipv4(ip)):
        if not candidate.is_global or candidate.is_multicast:
            raise UnsafeDestination(
                f"{host} is {ip}, an internal address (loopback, private, link-local or metadata); "
                "only an address in TRACEDOC_ALERT_ALLOWED_NETWORKS may be one")


def _embedded_ipv4(ip: IPAddress) -> list[ipaddress.IPv4Address]:
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    found = []
    compatible = int(ip) >> 32 == 0 and int(ip) > 1  # ::a.b.c.d (IPv4-compatible, deprecated)
    if compatible or any(ip in net for net in NAT64):  # both carry it in the last 32 bits
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)  # (server, client)
    return found


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def check_url(url: str, resolve: bool = True) -> None:
    """Raise UnsafeDestination for a URL whose host is, or resolves to, an internal address.
    A name that does not resolve now passes (the send-time check still holds)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeDestination(f"{url!r} is not an http(s) URL with a host")
    host = parts.hostname.rstrip(".").lower()
    if host in METADATA_NAMES:
        raise UnsafeDestination(f"{host} is a cloud metadata endpoint")
    # "localhost" and its sub-names are loopback whatever a resolver says (RFC 6761)
    ip = _literal("127.0.0.1") if host == "localhost" or host.endswith(".localhost") else _literal(host)
    if ip is not None:
        check_address(ip, host)
        return
    if not resolve:
        return
    try:
        infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80),
                                   proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return
    for info in infos:
        check_address(ipaddress.ip_address(info[4][0].split("%")[0]), host)


class _GuardedConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        try:
            check_address(ipaddress.ip_address(sock.getpeername()[0].split("%")[0]), self.host)
        except UnsafeDestination:
            sock.close()
            raise
        return sock


class _GuardedHTTPSConnection(_GuardedConnection, HTTPSConnection):
    pass


class _GuardedPool(HTTPConnectionPool):
    ConnectionCls = _GuardedConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


class _GuardedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _GuardedPool, "https": _GuardedHTTPSPool}


def guarded_session() -> requests.Session:
    """A session that refuses to connect to an internal address and ignores proxy settings of
    the environment (through a proxy the connected address says nothing)."""
    session = requests.Session()
    session.trust_env = False
    session.mount("http://", _GuardedAdapter())
    session.mount("https://", _GuardedAdapter())
    return session
