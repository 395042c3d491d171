"""Host and Origin names, for the two web front ends' DNS-rebinding guards.

A web page the user visits can make its own host name resolve to 127.0.0.1 (DNS
rebinding) and then read whatever a local server answers: the browser believes the
page and the server share an origin. What it cannot change is the ``Host`` header,
which still names the page's host. So the server (``server/middleware.py``) and the
dashboard (``dashboard/host_guard.py``) answer only to the loopback names, the address
they listen on, and any names given with ``--allowed-hosts``; and a state-changing
request whose ``Origin`` names another site is refused. This module is the one place
those names are parsed.
"""
from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", ""})


def host_name(value: str) -> str:
    """The host of a ``Host`` header (``[::1]:8000`` -> ``::1``), lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def is_loopback(host: str) -> bool:
    """Does listening on ``host`` keep a server to this machine?"""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def allowed_hosts(listen_host: str, given: str | None) -> frozenset[str]:
    """The ``Host`` names a server listening on ``listen_host`` answers to: ``given``
    (``--allowed-hosts``, comma-separated) when set, else the loopback names and the
    address it listens on (unless that is a wildcard, which names no host)."""
    if given:
        return frozenset(h.strip().lower() for h in given.split(",") if h.strip())
    hosts = set(LOOPBACK_HOSTS)
    if listen_host not in WILDCARD_ADDRESSES:
        hosts.add(listen_host.lower())
    return frozenset(hosts)


def same_origin(origin: str, host: str) -> bool:
    """Does an ``Origin`` header name the site the ``Host`` header names (scheme aside)?"""
    try:
        netloc = urlsplit(origin).netloc.lower()
    except ValueError:
        return False
    return bool(netloc) and netloc == host.strip().lower()
