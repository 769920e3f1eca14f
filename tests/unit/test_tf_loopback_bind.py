"""The address rewrite that keeps TensorFlow's gRPC server on loopback (the run itself is
tests/distributed/test_tf_loopback.py)."""

from __future__ import annotations

import socket
import struct

from trainscale.frameworks.tensorflow.loopback import loopback_address


def _ipv4(host: str, port: int) -> bytes:
    return struct.pack("=H", socket.AF_INET) + struct.pack(">H", port) + socket.inet_aton(host)


def _ipv6(host: str, port: int) -> bytes:
    head = struct.pack("=H", socket.AF_INET6) + struct.pack(">HI", port, 0)
    return head + socket.inet_pton(socket.AF_INET6, host) + bytes(4)


def test_wildcard_addresses_become_loopback_and_keep_their_port() -> None:
    assert loopback_address(_ipv4("0.0.0.0", 5000) + bytes(8)) == (
        _ipv4("127.0.0.1", 5000) + bytes(8)
    )
    # Dual-stack: IPv4's loopback as IPv6, where the peers' 127.0.0.1 connections arrive.
    assert loopback_address(_ipv6("::", 5000)) == _ipv6("::ffff:127.0.0.1", 5000)


def test_other_addresses_are_left_alone() -> None:
    for address in (_ipv4("10.1.2.3", 80), _ipv6("::1", 0), _ipv6("fe80::1", 9)):
        assert loopback_address(address) == address
