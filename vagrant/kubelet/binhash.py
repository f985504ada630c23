"""sha256 of a Go binary, whole and with its Go build ID blanked.

    python3 binhash.py FILE      prints: <sha256> <sha256 with the build ID zeroed> <build ID>

Go 1.15 hashes the builder's GOROOT path into the link step's action ID, which is part of the
build ID the binary carries: two builds of the same source with the same toolchain and flags in
different directories differ only there. The second hash is the same for both (stdlib only).
"""

from __future__ import annotations

import hashlib
import struct
import sys
from pathlib import Path


def build_id(data: bytes) -> bytes:
    """The Go build ID of an ELF64 little-endian binary (its .note.go.buildid section)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not an ELF64 little-endian file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    header = "<IIQQQQIIQQ"
    sections = [struct.unpack_from(header, data, shoff + i * shentsize) for i in range(shnum)]
    names = sections[shstrndx][4]
    for sh_name, _, _, _, offset, *_ in sections:
        end = data.index(b"\0", names + sh_name)
        if data[names + sh_name : end] == b".note.go.buildid":
            namesz, descsz = struct.unpack_from("<II", data, offset)
            desc = offset + 12 + (namesz + 3) // 4 * 4
            return data[desc : desc + descsz]
    raise ValueError("no .note.go.buildid section")


def hashes(data: bytes) -> tuple[str, str, str]:
    bid = build_id(data)
    blanked = data.replace(bid, b"\0" * len(bid))
    return hashlib.sha256(data).hexdigest(), hashlib.sha256(blanked).hexdigest(), bid.decode()


if __name__ == "__main__":
    print(*hashes(Path(sys.argv[1]).read_bytes()))
