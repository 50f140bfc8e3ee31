"""The messages a load player received, kept for an offline secrecy check.

Kept apart from ``loadtest.player`` so that a test process can read recordings without
importing Locust (which patches the standard library with gevent as it is imported).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

__all__ = ["Recorder", "read_recording"]


class Recorder:
    """Appends every message a player receives to ``folder/NAME.msgpack``, each as a 4-byte
    big-endian length and a msgpack array ``[topic, payload]``."""

    def __init__(self, folder: Path, name: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._file = (folder / f"{name}.msgpack").open("ab")
        self._encoder = msgspec.msgpack.Encoder()

    def write(self, topic: str, payload: bytes) -> None:
        """Append one message."""
        frame = self._encoder.encode((topic, payload))
        self._file.write(len(frame).to_bytes(4, "big") + frame)

    def close(self) -> None:
        """Flush and close the file."""
        self._file.close()


def read_recording(path: Path) -> list[tuple[str, bytes]]:
    """The messages a ``Recorder`` wrote to ``path``, in order."""
    data = path.read_bytes()
    decoder = msgspec.msgpack.Decoder(tuple[str, bytes])
    messages = []
    offset = 0
    while offset < len(data):
        size = int.from_bytes(data[offset : offset + 4], "big")
        messages.append(decoder.decode(data[offset + 4 : offset + 4 + size]))
        offset += 4 + size
    return messages
