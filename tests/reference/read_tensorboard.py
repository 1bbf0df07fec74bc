"""Reads a TensorBoard log directory with TensorBoard's own reader and prints it as JSON.

    python read_tensorboard.py LOG_DIR

tests/test_summary_writer.cpp runs this in the virtual environment scripts/tensorboard-venv.sh
creates, so what data::SummaryWriter writes is checked by the program users read it with, not by
a reader of our own. Output, one entry per run (a directory holding event files; "." is LOG_DIR):

    {"runs": {"<run>": {"event_files": N, "file_version": 2.0,
                        "scalars": {"<tag>": [[step, value], ...]},
                        "images": {"<tag>": [{"step", "width", "height",
                                              "png": {"width", "height", "channels", "pixels"}}]},
                        "texts": {"<tag>": [[step, "text"], ...]}}}}

The PNG is decoded here too (Python's zlib and the five PNG row filters), so the test can compare
pixels, not only the sizes the Summary claims.
"""
import json
import os
import struct
import sys
import zlib

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.util import tensor_util

# 0 keeps every event (the default samples the long series).
KEEP_ALL = {
    event_accumulator.SCALARS: 0,
    event_accumulator.IMAGES: 0,
    event_accumulator.TENSORS: 0,
}


def paeth(left, up, up_left):
    estimate = left + up - up_left
    distances = (abs(estimate - left), abs(estimate - up), abs(estimate - up_left))
    return (left, up, up_left)[distances.index(min(distances))]


def decode_png(data):
    """8-bit RGB or RGBA, not interlaced: what stb_image_write produces."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG signature")
    position, header, compressed = 8, None, b""
    while position < len(data):
        (length,) = struct.unpack(">I", data[position:position + 4])
        kind = data[position + 4:position + 8]
        body = data[position + 8:position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length:position + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise ValueError(f"bad CRC in the {kind!r} chunk")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed += body
        position += 12 + length
    width, height, depth, color_type, _, _, interlace = header
    if depth != 8 or color_type not in (2, 6) or interlace != 0:
        raise ValueError(f"unexpected PNG format: depth {depth}, color type {color_type}, interlace {interlace}")
    channels = 3 if color_type == 2 else 4
    raw = zlib.decompress(compressed)
    stride = width * channels
    pixels, previous = [], [0] * stride
    for y in range(height):
        row_start = y * (stride + 1)
        kind, row = raw[row_start], list(raw[row_start + 1:row_start + 1 + stride])
        for i in range(stride):
            left = row[i - channels] if i >= channels else 0
            up_left = previous[i - channels] if i >= channels else 0
            predictor = (0, left, previous[i], (left + previous[i]) // 2, paeth(left, previous[i], up_left))[kind]
            row[i] = (row[i] + predictor) & 0xFF
        pixels.extend(row)
        previous = row
    return {"width": width, "height": height, "channels": channels, "pixels": pixels}


def read_run(directory):
    accumulator = event_accumulator.EventAccumulator(directory, size_guidance=KEEP_ALL)
    accumulator.Reload()
    tags = accumulator.Tags()
    run = {
        "event_files": sum(1 for name in os.listdir(directory) if name.startswith("events.out.tfevents.")),
        "file_version": accumulator.file_version,
        "scalars": {tag: [[e.step, e.value] for e in accumulator.Scalars(tag)] for tag in tags["scalars"]},
        "images": {},
        "texts": {},
    }
    for tag in tags["images"]:
        run["images"][tag] = [
            {"step": e.step, "width": e.width, "height": e.height, "png": decode_png(e.encoded_image_string)}
            for e in accumulator.Images(tag)
        ]
    for tag in tags["tensors"]:
        if accumulator.SummaryMetadata(tag).plugin_data.plugin_name != "text":
            continue
        run["texts"][tag] = [
            [e.step, tensor_util.make_ndarray(e.tensor_proto).reshape(-1)[0].decode("utf-8")]
            for e in accumulator.Tensors(tag)
        ]
    return run


def main():
    log_dir = sys.argv[1]
    runs = {}
    for directory, _, files in sorted(os.walk(log_dir)):
        if any(name.startswith("events.out.tfevents.") for name in files):
            runs[os.path.relpath(directory, log_dir)] = read_run(directory)
    json.dump({"runs": runs}, sys.stdout)


if __name__ == "__main__":
    main()
