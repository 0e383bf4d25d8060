"""Reading an offline W&B run's records with wandb's own protos (no network, no ``wandb sync``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
import struct


def wandb_records(run_dir: Path, record_type: str) -> list[Any]:
    """The ``wandb_internal_pb2.Record`` protos of one type (``history``, ``config``, ...) in the
    ``run-*.wandb`` file of the offline run under ``run_dir``: a LevelDB-style log of 32 KiB blocks of
    records (crc32 4 bytes, length 2, type 1: full / first / middle / last), after a 7-byte header."""
    from wandb.proto import wandb_internal_pb2

    (path,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    raw = path.read_bytes()
    assert raw[:4] == b":W&B"
    block, pos, pending = 32768, 7, b""
    found: list[Any] = []
    while pos + 7 <= len(raw):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", raw[pos : pos + 7])
        pos += 7
        if kind == 0 and length == 0:
            pos += block - pos % block
            continue
        if pos + length > len(raw):  # still being written
            break
        pending += raw[pos : pos + length]
        pos += length
        if kind in (1, 4):  # full or last piece
            record = wandb_internal_pb2.Record.FromString(pending)
            pending = b""
            if record.WhichOneof("record_type") == record_type:
                found.append(record)
    return found
