"""Keep TensorFlow's gRPC server on the loopback interface in a single-node run.

TensorFlow gives its workers' gRPC server no bind address: `GrpcServer::Init` listens on
"0.0.0.0:PORT" whatever host TF_CONFIG names (gRPC then binds the wildcard, `*:PORT`),
and that server is unauthenticated and runs the ops it is sent. There is no option, no
environment variable and no ServerDef field to change it (TensorFlow 2.x, checked up to
2.21). So, in a run whose workers are all on this machine, the worker catches the bind
itself while TensorFlow creates its server: the `bind` entries of TensorFlow's libraries'
symbol tables (their GOT slots) briefly point at a function that turns a wildcard address
into the loopback one and calls the C library's bind. The slots are put back as soon as
the server listens, so nothing else in the process is affected.

The IPv6 wildcard becomes ::ffff:127.0.0.1, not ::1: gRPC listens on a dual-stack socket
and the peers connect to 127.0.0.1 (TF_CONFIG), which ::1 would refuse.

Where the libraries cannot be patched (not Linux, not 64-bit little-endian ELF, a
TensorFlow build without those slots), `loopback_bind` says so and the caller warns that
the server listens on every interface.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import socket
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass

_BIND = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32)
_IPV4_ANY = bytes(4)
_IPV6_ANY = bytes(16)
_IPV4_LOOPBACK = socket.inet_aton("127.0.0.1")
# IPv4's loopback as an IPv6 address: a dual-stack socket bound to it takes the peers'
# connections to 127.0.0.1 and nothing else.
_IPV6_MAPPED_LOOPBACK = socket.inet_pton(socket.AF_INET6, "::ffff:127.0.0.1")
_PROT_BY_FLAGS = {"r": mmap.PROT_READ, "w": mmap.PROT_WRITE, "x": mmap.PROT_EXEC}


@dataclass(frozen=True)
class _Slot:
    """One GOT slot of a loaded library that holds the address of `bind`."""

    address: int
    page: int
    protection: int
    """The page's protection as loaded (restored after the write)."""


def loopback_address(address: bytes) -> bytes:
    """`address` (a struct sockaddr_in or sockaddr_in6, as bytes) with a wildcard host
    turned into the loopback one; any other address unchanged."""
    family = int.from_bytes(address[:2], sys.byteorder)
    if family == socket.AF_INET and address[4:8] == _IPV4_ANY:
        return address[:4] + _IPV4_LOOPBACK + address[8:]
    if family == socket.AF_INET6 and address[8:24] == _IPV6_ANY:
        return address[:8] + _IPV6_MAPPED_LOOPBACK + address[24:]
    return address


def bind_slots(path: str) -> list[int]:
    """Offsets (from the load address) of the GOT slots through which the shared library
    at `path` calls `bind`; empty where it is not a 64-bit little-endian ELF file."""
    with open(path, "rb") as elf:
        header = elf.read(64)
        if header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
            return []
        (section_offset,) = struct.unpack_from("<Q", header, 0x28)
        entry_size, count, names_index = struct.unpack_from("<HHH", header, 0x3A)
        elf.seek(section_offset)
        table = elf.read(entry_size * count)
        # (name, type, flags, address, offset, size, ...) of each section header.
        sections = [struct.unpack_from("<IIQQQQ", table, i * entry_size) for i in range(count)]

        def contents(section: tuple[int, ...]) -> bytes:
            elf.seek(section[4])
            return elf.read(section[5])

        names = contents(sections[names_index])
        by_name = {names[s[0] : names.index(b"\0", s[0])].decode(): s for s in sections}
        if ".dynsym" not in by_name or ".dynstr" not in by_name:
            return []
        symbols, strings = contents(by_name[".dynsym"]), contents(by_name[".dynstr"])
        slots = []
        for table_name in (".rela.plt", ".rela.dyn"):
            if table_name not in by_name:
                continue
            relocations = contents(by_name[table_name])
            for start in range(0, len(relocations) - 23, 24):
                offset, info = struct.unpack_from("<QQ", relocations, start)
                symbol = info >> 32
                if symbol == 0:
                    continue
                (name,) = struct.unpack_from("<I", symbols, symbol * 24)
                if strings[name : strings.index(b"\0", name)] == b"bind":
                    slots.append(offset)
        return slots


def _tensorflow_slots() -> list[_Slot]:
    """The `bind` slots of every TensorFlow library loaded in this process."""
    bases: dict[str, int] = {}
    mappings: list[tuple[int, int, int]] = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            start, end = (int(value, 16) for value in fields[0].split("-"))
            protection = sum(_PROT_BY_FLAGS.get(flag, 0) for flag in fields[1])
            mappings.append((start, end, protection))
            if len(fields) >= 6 and fields[2] == "00000000" and "tensorflow" in fields[5]:
                bases.setdefault(fields[5], start)
    slots = []
    for path, base in bases.items():
        for offset in bind_slots(path):
            address = base + offset
            page = address & ~(mmap.PAGESIZE - 1)
            loaded = next((p for s, e, p in mappings if s <= address < e), None)
            if loaded is not None:
                slots.append(_Slot(address, page, loaded))
    return slots


@contextlib.contextmanager
def loopback_bind() -> Iterator[bool]:
    """While inside: TensorFlow's libraries bind wildcard addresses to loopback instead.

    Yields whether that holds (False: the libraries could not be patched, and a server
    created inside listens on every interface).
    """
    if not sys.platform.startswith("linux"):
        yield False
        return
    libc = ctypes.CDLL(None, use_errno=True)
    real_bind = libc.bind
    real_bind.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32]
    real_bind.restype = ctypes.c_int
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.mprotect.restype = ctypes.c_int

    def bind(fd: int, address: int, length: int) -> int:
        moved = loopback_address(ctypes.string_at(address, length))
        return int(real_bind(fd, ctypes.create_string_buffer(moved, length), length))

    # The callback must outlive every call through the slots: held here until they are
    # restored.
    callback = _BIND(bind)
    pointer = ctypes.cast(callback, ctypes.c_void_p).value
    try:
        slots = _tensorflow_slots()
    except (OSError, ValueError, struct.error):
        slots = []
    patched: list[tuple[_Slot, int | None]] = []
    try:
        for slot in slots:
            writable = slot.protection | mmap.PROT_READ | mmap.PROT_WRITE
            if libc.mprotect(slot.page, mmap.PAGESIZE, writable) != 0:
                continue
            cell = ctypes.c_void_p.from_address(slot.address)
            patched.append((slot, cell.value))
            cell.value = pointer
        yield bool(patched)
    finally:
        for slot, original in reversed(patched):
            ctypes.c_void_p.from_address(slot.address).value = original
            libc.mprotect(slot.page, mmap.PAGESIZE, slot.protection)
        del callback
