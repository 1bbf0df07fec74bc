#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets into corpus/<target>/ (plain python3, no packages).

Seeds are small valid inputs, so the fuzzer starts from the well-formed paths and mutates outward.
Regression inputs for fixed findings live beside them, named regression-*; this script leaves those.
Run from anywhere: python3 tests/fuzz/make_seed_corpus.py
"""
import gzip
import io
import json
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    directory = os.path.join(HERE, "corpus", target)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None):
    """tensors: name -> (dtype, shape, bytes). The layout of core/safetensors.h."""
    header, data = {}, b""
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


write("fuzz_safetensors", "f32_2x3", safetensors({"w": ("F32", [2, 3], struct.pack("<6f", *range(6)))}))
write("fuzz_safetensors", "mixed_with_metadata", safetensors({
    "a": ("F16", [2], b"\x00\x3c\x00\x40"),
    "b": ("I64", [], struct.pack("<q", 7)),
    "c": ("BOOL", [3], b"\x01\x00\x01"),
    "d": ("BF16", [0, 4], b""),
}, {"epoch": "3", "format": "pt"}))
write("fuzz_safetensors", "empty", safetensors({}))


def idx(ndim_byte, sizes, payload):
    """The fuzz_idx input: one byte choosing the expected dims, then the file."""
    header = struct.pack(">I", 0x0800 | len(sizes)) + b"".join(struct.pack(">I", n) for n in sizes)
    return bytes([ndim_byte]) + header + payload


write("fuzz_idx", "labels_raw", idx(0, [5], bytes([1, 2, 3, 4, 9])))
write("fuzz_idx", "images_raw", idx(2, [2, 3, 2], bytes(range(12))))
labels = idx(0, [4], bytes([0, 1, 2, 3]))
write("fuzz_idx", "labels_gz", labels[:1] + gzip.compress(labels[1:], mtime=0))
images = idx(2, [1, 4, 4], bytes(range(16)))
write("fuzz_idx", "images_gz", images[:1] + gzip.compress(images[1:], mtime=0))

def png(width, height, color_type, channels, bit_depth=8):
    """A PNG of a gradient, no filter; color_type 0 grey, 2 RGB, 4 grey + alpha, 6 RGBA."""
    def chunk(kind, payload):
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))
    rows = b"".join(b"\x00" + bytes((x * 37 + y * 11 + c * 5) % 256 for x in range(width) for c in range(channels))
                    for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def bmp(width, height):
    """A 24-bit BMP, rows bottom-up and padded to 4 bytes."""
    row = (3 * width + 3) // 4 * 4
    pixels = b"".join(bytes((x * 13 + y * 7 + c) % 256 for x in range(width) for c in range(3)).ljust(row, b"\x00")
                      for y in range(height))
    header = struct.pack("<2sIHHI", b"BM", 54 + len(pixels), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    return header + info + pixels


write("fuzz_image", "rgb.png", png(5, 4, 2, 3))
write("fuzz_image", "grey.png", png(3, 3, 0, 1))
write("fuzz_image", "grey_alpha.png", png(4, 2, 4, 2))
write("fuzz_image", "rgba.png", png(2, 3, 6, 4))
write("fuzz_image", "rgb.bmp", bmp(3, 2))
try:  # JPEG and GIF need an encoder; with Pillow absent the checked-in ones stay as they are
    from PIL import Image
    picture = Image.frombytes("RGB", (6, 5), bytes((i * 29) % 256 for i in range(90)))
    for name, options in {"baseline.jpg": {}, "progressive.jpg": {"progressive": True}, "frame.gif": {}}.items():
        out = io.BytesIO()
        picture.save(out, format="JPEG" if name.endswith("jpg") else "GIF", **options)
        write("fuzz_image", name, out.getvalue())
    for name, mode in {"grey.jpg": "L", "cmyk.jpg": "CMYK"}.items():  # the other JPEG colour conversions
        out = io.BytesIO()
        picture.convert(mode).save(out, format="JPEG")
        write("fuzz_image", name, out.getvalue())
except ImportError:
    pass

# fuzz_store: first byte even = say HELLO first; then requests (Note [The store's wire format]).
SET, GET, ADD, CHECK, RANK, HELLO = 1, 2, 3, 4, 5, 6


def key(command, name):
    return bytes([command]) + struct.pack("=I", len(name)) + name


def value(payload):
    return struct.pack("=I", len(payload)) + payload


write("fuzz_store", "set_get", b"\x00" + key(SET, b"k") + value(b"hello") + key(GET, b"k") + struct.pack("=q", 10))
write("fuzz_store", "add_check", b"\x00" + key(ADD, b"n") + struct.pack("=q", 5) + key(ADD, b"n")
      + struct.pack("=q", -2) + key(CHECK, b"n") + key(CHECK, b"absent"))
write("fuzz_store", "rank_then_get_missing", b"\x00" + key(RANK, b"1") + key(GET, b"missing") + struct.pack("=q", 1))
write("fuzz_store", "no_hello", b"\x01" + key(SET, b"k") + value(b"v"))
write("fuzz_store", "wrong_token", b"\x01" + key(HELLO, b"not-the-token"))
