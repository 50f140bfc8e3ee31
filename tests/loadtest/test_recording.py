"""The recordings of received messages read back as written."""

from __future__ import annotations

from pathlib import Path

from loadtest.recording import Recorder, read_recording


def test_a_recording_reads_back_every_message_in_order(tmp_path: Path) -> None:
    # Payloads of the three msgpack bin sizes (8-, 16- and 32-bit lengths) and an empty one.
    messages = [
        ("ramino/v1/inbox/load0-1", b"\x81\xa4type\xa5reply"),
        ("ramino/v1/table/t1/chat", bytes(range(256)) * 2),
        ("ramino/v1/inbox/load0-1", b"x" * 70_000),
        ("ramino/v1/tables/t1", b""),
    ]
    recorder = Recorder(tmp_path / "received", "load0-1")
    for topic, payload in messages[:2]:
        recorder.write(topic, payload)
    recorder.close()
    again = Recorder(tmp_path / "received", "load0-1")  # a reconnection appends
    for topic, payload in messages[2:]:
        again.write(topic, payload)
    again.close()

    assert messages == read_recording(tmp_path / "received" / "load0-1.msgpack")
