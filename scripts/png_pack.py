"""Re-deflates a PNG's image data at zlib's level 9: the same pixels, the same chunks, fewer bytes
(matplotlib writes level 6; the committed figures are 13% smaller this way). Every script that
writes a figure into the tree calls repack() after saving it.

    python3 scripts/png_pack.py FILE.png ...     # repack files in place
"""
import struct
import sys
import zlib


def _chunks(data):
    i = 8
    while i < len(data):
        (n,) = struct.unpack(">I", data[i : i + 4])
        yield data[i + 4 : i + 8], data[i + 8 : i + 8 + n]
        i += 12 + n


def _chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def repack(path):
    """Rewrites `path` with its IDAT data in one chunk at level 9 where that is smaller; returns
    the bytes saved. The decompressed image data is checked to be unchanged before writing."""
    with open(path, "rb") as f:
        data = f.read()
    chunks = list(_chunks(data))
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    packed = zlib.compress(raw, 9)
    out, wrote = bytearray(data[:8]), False
    for kind, body in chunks:
        if kind != b"IDAT":
            out += _chunk(kind, body)
        elif not wrote:
            out += _chunk(kind, packed)
            wrote = True
    check = b"".join(body for kind, body in _chunks(bytes(out)) if kind == b"IDAT")
    if len(out) >= len(data) or zlib.decompress(check) != raw:
        return 0
    with open(path, "wb") as f:
        f.write(out)
    return len(data) - len(out)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{name}: {repack(name)} bytes saved")
