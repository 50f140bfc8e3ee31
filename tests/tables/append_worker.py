"""A separate process that races others to append to one table; run by test_store_processes.

Usage: ``python -m tests.tables.append_worker STORE_URL TABLE_ID NAME ATTEMPTS``.

The worker opens the store, prints ``ready`` and waits for a line on stdin, so that every
worker starts racing at once. Then, ATTEMPTS times, it reads the table's last seq and appends
one event whose payload is ``NAME:ATTEMPT`` after it, retrying on ``SeqConflict``; each time an
append is acknowledged it prints ``ack ATTEMPT SEQ``. At the end it prints ``conflicts N``.
"""

from __future__ import annotations

import asyncio
import sys
import time

from server.tables.errors import SeqConflict
from server.tables.store import NewEvent, open_store


def payload_of(name: str, attempt: int) -> bytes:
    """The payload of the event ``name`` appends at ``attempt``."""
    return f"{name}:{attempt}".encode()


async def race(url: str, table_id: str, name: str, attempts: int) -> None:
    """Append ``attempts`` events to ``table_id``, printing the seq each was acknowledged at."""
    store = await open_store(url)
    try:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        conflicts = 0
        for attempt in range(attempts):
            event = NewEvent(payload=payload_of(name, attempt), at=time.time())
            while True:
                last = await store.last_seq(table_id)
                try:
                    seq = await store.append(
                        table_id, last, [event], command_id=f"{name}-{attempt}"
                    )
                except SeqConflict:
                    conflicts += 1
                    continue
                print(f"ack {attempt} {seq}", flush=True)
                break
        print(f"conflicts {conflicts}", flush=True)
    finally:
        await store.close()


def main(argv: list[str]) -> None:
    """Run one worker from the command line."""
    url, table_id, name, attempts = argv
    asyncio.run(race(url, table_id, name, int(attempts)))


if __name__ == "__main__":
    main(sys.argv[1:])
