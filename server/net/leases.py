"""Leases in PostgreSQL: which worker process serves which lobby shard and which table.

Theory of operation. Several ``ramino serve --worker NAME`` processes share one PostgreSQL
store and one broker. Ownership lives in the store's ``leases`` table, one row per thing owned:

    kind       'worker' (one per live worker: membership), 'shard', 'table' or 'parked'
    key        the worker's name, the shard number, the table id
    owner      the worker's name
    epoch      grows by one at every change of owner: the fencing token
    expires_at on the database's clock (so the workers' clocks do not matter)

A lease is taken with one statement, ``INSERT ... ON CONFLICT DO UPDATE ... WHERE
leases.expires_at <= now()``: it succeeds only for a new row or an expired one, and bumps the
epoch. The holder renews all its leases with one ``UPDATE`` every ``ttl / 3`` seconds
(matching owner and epoch); a lease that is not renewed is lost. Expired table leases are
adopted with ``UPDATE ... FOR UPDATE SKIP LOCKED``, so that two workers adopting at once take
disjoint tables. A stopping worker sets ``expires_at = now()`` on its leases and sends a
``NOTIFY``, which wakes the others at once; a killed one simply stops renewing.

Finished tables that left memory are **parked**: their ``table`` row becomes a ``parked`` row
(same key and epoch, ``expires_at`` infinity, never renewed) owned by the worker that unloaded
them, which stays subscribed to their command topics. A command to a parked table wakes it:
one statement turns the ``parked`` row back into a ``table`` lease of the same owner at the
next epoch. Parked rows of a worker whose membership lease expired (it died or stopped) are
taken over by the live workers, a chunk at a time, so that some worker always reads the
command topic of every table, as one server does.

Appends are fenced by the same rows (``server.tables.postgres_store``, "Fencing"): the store
refuses an append to a table whose lease row does not carry this worker's name and epoch.

Nothing here decides by itself who is alive: PostgreSQL is the source of truth.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import asyncpg

__all__ = ["CHANNEL", "Leases"]

CHANNEL = "ramino_leases"
"""The ``NOTIFY`` channel on which a worker that released leases wakes the others."""

_TAKE = """
INSERT INTO leases (kind, key, owner, epoch, expires_at)
VALUES ($1, $2, $3, 1, now() + make_interval(secs => $4))
ON CONFLICT (kind, key) DO UPDATE
    SET owner = excluded.owner, epoch = leases.epoch + 1, expires_at = excluded.expires_at
    WHERE leases.expires_at <= now()
RETURNING epoch
"""

# The rows of (kind $1, keys $2 at epochs $3, owner $4), locked in key order: every statement
# that changes several lease rows locks them in this order, as the store's appends read them
# (``FOR SHARE ... ORDER BY key``), so that an append and a renewal cannot deadlock.
_LOCKED = """
SELECT l.kind, l.key FROM leases AS l
JOIN unnest($2::text[], $3::bigint[]) AS h (key, epoch) ON l.key = h.key AND l.epoch = h.epoch
WHERE l.kind = $1 AND l.owner = $4
ORDER BY l.key FOR NO KEY UPDATE OF l
"""

_RENEW = f"""
UPDATE leases AS l SET expires_at = now() + make_interval(secs => $5)
FROM ({_LOCKED}) AS locked
WHERE l.kind = locked.kind AND l.key = locked.key
RETURNING l.key
"""

_RELEASE = f"""
UPDATE leases AS l SET expires_at = now()
FROM ({_LOCKED}) AS locked
WHERE l.kind = locked.kind AND l.key = locked.key
"""

# Tables whose lease expired (their worker died or let them go), up to $3 of them.
_ADOPT_EXPIRED = """
UPDATE leases AS l SET owner = $1, epoch = l.epoch + 1,
    expires_at = now() + make_interval(secs => $2)
FROM (
    SELECT kind, key FROM leases
    WHERE kind = 'table' AND expires_at <= now()
    ORDER BY key LIMIT $3 FOR UPDATE SKIP LOCKED
) AS free
WHERE l.kind = free.kind AND l.key = free.key
RETURNING l.key, l.epoch
"""

# Open tables that have no lease at all (written before the store had workers), up to $3.
_ADOPT_UNLEASED = """
INSERT INTO leases (kind, key, owner, epoch, expires_at)
SELECT 'table', t.table_id, $1, 1, now() + make_interval(secs => $2)
FROM tables AS t
WHERE t.status IN ('waiting', 'playing')
    AND NOT EXISTS (SELECT 1 FROM leases AS l WHERE l.kind = 'table' AND l.key = t.table_id)
ORDER BY t.table_id LIMIT $3
ON CONFLICT (kind, key) DO NOTHING
RETURNING key, epoch
"""

_ORPHANS = """
SELECT
    (SELECT count(*) FROM leases WHERE kind = 'table' AND expires_at <= now())
  + (SELECT count(*) FROM tables AS t WHERE t.status IN ('waiting', 'playing')
        AND NOT EXISTS (SELECT 1 FROM leases AS l WHERE l.kind = 'table' AND l.key = t.table_id))
"""

# A finished table leaving memory: its table lease becomes a parked row (see the docstring).
_PARK = f"""
WITH gone AS (
    DELETE FROM leases AS l USING ({_LOCKED}) AS locked
    WHERE l.kind = locked.kind AND l.key = locked.key
    RETURNING l.key, l.epoch
)
INSERT INTO leases (kind, key, owner, epoch, expires_at)
SELECT 'parked', key, $4, epoch, 'infinity' FROM gone
ON CONFLICT (kind, key) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch
RETURNING key
"""

# A command to a parked table of ours: the parked row becomes a table lease again.
_WAKE = """
WITH woken AS (
    DELETE FROM leases WHERE kind = 'parked' AND key = $1 AND owner = $2 RETURNING key, epoch
)
INSERT INTO leases (kind, key, owner, epoch, expires_at)
SELECT 'table', key, $2, epoch + 1, now() + make_interval(secs => $3) FROM woken
ON CONFLICT (kind, key) DO UPDATE
    SET owner = excluded.owner, epoch = leases.epoch + 1, expires_at = excluded.expires_at
    WHERE leases.expires_at <= now()
RETURNING epoch
"""

_PARKED = "SELECT key FROM leases WHERE kind = 'parked' AND owner = $1"

# Parked tables of workers whose membership expired, up to $2 of them.
_ADOPT_PARKED = """
UPDATE leases AS l SET owner = $1
FROM (
    SELECT kind, key FROM leases
    WHERE kind = 'parked' AND owner IN (
        SELECT key FROM leases WHERE kind = 'worker' AND expires_at <= now()
    )
    LIMIT $2 FOR UPDATE SKIP LOCKED
) AS free
WHERE l.kind = free.kind AND l.key = free.key
RETURNING l.key
"""

# Membership rows of workers gone for over $1 seconds that hold nothing any more (their tables
# and parked tables adopted, their shards taken): without this every worker name ever used (a
# container's, say) stays for good. A worker that comes back under its name takes a new row.
_FORGET_DEPARTED = """
DELETE FROM leases AS w
WHERE w.kind = 'worker' AND w.expires_at < now() - make_interval(secs => $1)
AND NOT EXISTS (
    SELECT 1 FROM leases AS o WHERE o.kind IN ('table', 'parked', 'shard') AND o.owner = w.key
)
RETURNING w.key
"""
DEPARTED_SECONDS = 3600.0
"""How long a worker's membership row outlives it (:meth:`Leases.forget_departed`)."""

# Moving tables between live workers (see ``Worker`` in server.net.workers, "Rebalancing"):
# a request is a row of kind 'move' (key: the table; owner: the worker asking for it).
_TABLE_COUNTS = """
SELECT owner, count(*) FROM leases WHERE kind = 'table' AND expires_at > now() GROUP BY owner
"""

_MOVABLE = """
SELECT t.key FROM leases AS t
WHERE t.kind = 'table' AND t.owner = $1 AND t.expires_at > now()
    AND NOT EXISTS (
        SELECT 1 FROM leases AS m WHERE m.kind = 'move' AND m.key = t.key AND m.expires_at > now()
    )
ORDER BY t.key LIMIT $2
"""

_ASK = """
INSERT INTO leases (kind, key, owner, epoch, expires_at)
SELECT 'move', key, $2, 0, now() + make_interval(secs => $3) FROM unnest($1::text[]) AS key
ON CONFLICT (kind, key) DO UPDATE
    SET owner = excluded.owner, expires_at = excluded.expires_at
    WHERE leases.expires_at <= now()
RETURNING key
"""

# The requests for the tables of $1.
_ASKED = """
SELECT m.key, m.owner FROM leases AS m JOIN leases AS t ON t.kind = 'table' AND t.key = m.key
WHERE m.kind = 'move' AND m.expires_at > now() AND t.owner = $1 AND t.expires_at > now()
"""

# Only the tables still asked for by $6 (the asker may have withdrawn meanwhile: then it no
# longer reads their commands, and they stay here).
_GIVE = f"""
WITH asked AS (
    DELETE FROM leases WHERE kind = 'move' AND key = ANY($2::text[]) AND owner = $6
    RETURNING key
), given AS (
    UPDATE leases AS l SET owner = $6, epoch = l.epoch + 1,
        expires_at = now() + make_interval(secs => $5)
    FROM ({_LOCKED}) AS locked
    WHERE l.kind = locked.kind AND l.key = locked.key AND l.key IN (SELECT key FROM asked)
    RETURNING l.key
)
SELECT key FROM given
"""

_HELD_AMONG = """
SELECT key, epoch FROM leases
WHERE kind = 'table' AND owner = $1 AND expires_at > now() AND key = ANY($2::text[])
"""

_WITHDRAW = """
DELETE FROM leases WHERE kind = 'move' AND key = ANY($1::text[]) AND owner = $2 RETURNING key
"""

_REFUSE = "DELETE FROM leases WHERE kind = 'move' AND key = ANY($1::text[])"

# Quotas shared by the workers (see ``Leases.claim_places``): the first key of the
# per-account advisory locks ("Ramq").
_QUOTA_LOCKS = 0x52616D71
CLAIM_SECONDS = 30.0
"""How long a quota claim counts at most (a worker that died in the middle of a command)."""

_LOCK_ACCOUNT = "SELECT pg_advisory_xact_lock($1, hashtext($2))"

_PURGE_CLAIMS = "DELETE FROM quota_claims WHERE account = $1 AND expires_at <= now()"

# The open tables where account $1 sits, and its claims of kind 'seat', but table $2.
_COUNT_SEATS = """
SELECT count(*) FROM (
    SELECT table_id FROM tables
    WHERE status IN ('waiting', 'playing') AND seats @> ARRAY[$1]::text[] AND table_id <> $2
    UNION
    SELECT table_id FROM quota_claims WHERE account = $1 AND kind = 'seat' AND table_id <> $2
) AS counted
"""

# The waiting tables account $1 created, and its claims of kind 'host', but table $2.
_COUNT_HOSTED = """
SELECT count(*) FROM (
    SELECT table_id FROM tables WHERE status = 'waiting' AND host = $1 AND table_id <> $2
    UNION
    SELECT table_id FROM quota_claims WHERE account = $1 AND kind = 'host' AND table_id <> $2
) AS counted
"""

_CLAIM = """
INSERT INTO quota_claims (account, kind, table_id, expires_at)
VALUES ($1, $2, $3, now() + make_interval(secs => $4))
ON CONFLICT (account, kind, table_id) DO UPDATE SET expires_at = excluded.expires_at
"""

_UNCLAIM = """
DELETE FROM quota_claims AS q USING unnest($1::text[], $2::text[]) AS c (account, kind)
WHERE q.account = c.account AND q.kind = c.kind AND q.table_id = $3
"""

_LIVE = """
SELECT key FROM leases WHERE kind = 'worker' AND expires_at > now() ORDER BY key
"""

_SHARD_OWNERS = """
SELECT key, owner FROM leases WHERE kind = 'shard' AND expires_at > now()
"""

_OPEN_TABLES = "SELECT count(*) FROM tables WHERE status IN ('waiting', 'playing')"

_STARTED = """
INSERT INTO meta (key, value) VALUES ('workers_started_at', $1)
ON CONFLICT (key) DO UPDATE SET value = meta.value
RETURNING value
"""


class Leases:
    """The lease statements of one worker ``owner`` on a few connections of its own (the
    renewals must not wait behind an adoption); see the module docstring. Build it with
    ``await Leases.open(url, owner, ttl)``."""

    def __init__(self, connection: Any, owner: str, ttl: float) -> None:
        self.connection = connection
        """An asyncpg pool."""
        self.owner = owner
        self.ttl = ttl

    @classmethod
    async def open(cls, url: str, owner: str, ttl: float) -> Leases:
        """Connect to the store's database (whose schema, ``leases`` included, the store
        created)."""
        pool = await asyncpg.create_pool(url, min_size=1, max_size=3)
        return cls(pool, owner, ttl)

    async def close(self) -> None:
        """Close the connections (leases not released expire by themselves)."""
        await self.connection.close()

    async def take(self, kind: str, key: str) -> int | None:
        """Take the lease ``(kind, key)`` if nobody holds it (or its holder's expired); its new
        epoch, or ``None`` when someone else holds it."""
        epoch = await self.connection.fetchval(_TAKE, kind, key, self.owner, self.ttl)
        return None if epoch is None else int(epoch)

    async def renew(self, kind: str, held: dict[str, int]) -> set[str]:
        """Renew the leases ``held`` (key -> epoch) of ``kind``; the keys renewed (the others
        were lost: another worker took them after they expired)."""
        if not held:
            return set()
        rows = await self.connection.fetch(
            _RENEW, kind, list(held), list(held.values()), self.owner, self.ttl
        )
        return {str(row[0]) for row in rows}

    async def release(self, kind: str, held: dict[str, int], notify: bool = True) -> None:
        """Let the leases ``held`` of ``kind`` expire now, and wake the other workers."""
        if held:
            await self.connection.execute(
                _RELEASE, kind, list(held), list(held.values()), self.owner
            )
        if notify:
            await self.notify()

    async def notify(self) -> None:
        """Wake the other workers (one joined or let leases go)."""
        await self.connection.execute(f"NOTIFY {CHANNEL}")

    async def park(self, held: dict[str, int]) -> set[str]:
        """Park the finished tables ``held`` (key -> epoch of their table lease); the keys
        parked (the others' leases were no longer ours)."""
        if not held:
            return set()
        rows = await self.connection.fetch(
            _PARK, "table", list(held), list(held.values()), self.owner
        )
        return {str(row[0]) for row in rows}

    async def wake(self, key: str) -> int | None:
        """Turn our parked row of table ``key`` into a table lease; its epoch, or ``None``
        when the table is not parked by us any more (another worker serves it)."""
        epoch = await self.connection.fetchval(_WAKE, key, self.owner, self.ttl)
        return None if epoch is None else int(epoch)

    async def parked(self) -> set[str]:
        """The tables parked by this worker."""
        return {str(row[0]) for row in await self.connection.fetch(_PARKED, self.owner)}

    async def adopt_parked(self, limit: int) -> set[str]:
        """Take up to ``limit`` tables parked by workers that are gone."""
        rows = await self.connection.fetch(_ADOPT_PARKED, self.owner, limit)
        return {str(row[0]) for row in rows}

    async def forget_departed(self, seconds: float = DEPARTED_SECONDS) -> set[str]:
        """Delete the membership rows of workers gone for over ``seconds`` that hold no
        table, parked table or shard any more; their names."""
        rows = await self.connection.fetch(_FORGET_DEPARTED, seconds)
        return {str(row["key"]) for row in rows}

    async def table_counts(self) -> dict[str, int]:
        """Worker -> the tables it holds a current lease for."""
        rows = await self.connection.fetch(_TABLE_COUNTS)
        return {str(owner): int(count) for owner, count in rows}

    async def ask(self, donor: str, count: int) -> list[str]:
        """Pick up to ``count`` tables of ``donor`` nobody asked for yet; their ids."""
        rows = await self.connection.fetch(_MOVABLE, donor, count)
        return [str(row[0]) for row in rows]

    async def request_moves(self, table_ids: list[str], seconds: float) -> set[str]:
        """Ask for the tables ``table_ids`` (after subscribing to their commands), for
        ``seconds``; the ids asked (a table another worker asks for is left out)."""
        if not table_ids:
            return set()
        rows = await self.connection.fetch(_ASK, table_ids, self.owner, seconds)
        return {str(row[0]) for row in rows}

    async def asked(self) -> dict[str, str]:
        """The tables of this worker other workers ask for: table id -> the asker."""
        rows = await self.connection.fetch(_ASKED, self.owner)
        return {str(key): str(owner) for key, owner in rows}

    async def give(self, held: dict[str, int], to: str) -> set[str]:
        """Hand the table leases ``held`` (key -> epoch) over to worker ``to`` (a new epoch,
        a fresh expiry) and drop their requests; the keys handed over."""
        if not held:
            return set()
        rows = await self.connection.fetch(
            _GIVE, "table", list(held), list(held.values()), self.owner, self.ttl, to
        )
        return {str(row[0]) for row in rows}

    async def held_among(self, table_ids: list[str]) -> dict[str, int]:
        """The tables of ``table_ids`` whose current lease is ours: key -> epoch."""
        if not table_ids:
            return {}
        rows = await self.connection.fetch(_HELD_AMONG, self.owner, table_ids)
        return {str(key): int(epoch) for key, epoch in rows}

    async def withdraw(self, table_ids: list[str]) -> set[str]:
        """Drop our requests for ``table_ids``; the ids withdrawn (the others were handed
        over, or refused, meanwhile)."""
        if not table_ids:
            return set()
        rows = await self.connection.fetch(_WITHDRAW, table_ids, self.owner)
        return {str(row[0]) for row in rows}

    async def refuse(self, table_ids: list[str]) -> None:
        """Drop the requests for our tables ``table_ids`` (they stay here)."""
        if table_ids:
            await self.connection.execute(_REFUSE, table_ids)

    async def claim_places(
        self, table_id: str, wanted: list[tuple[str, str, int]]
    ) -> tuple[str, str] | None:
        """Claim, for a command at ``table_id`` under way, a place in the quota of each
        ``(account, kind, limit)`` of ``wanted`` (kind "seat": the open tables where the
        account sits; "host": the waiting tables it created): ``None`` when every claim was
        taken, else the ``(account, kind)`` over its limit (no claim is kept then). The count
        is the store's tables plus the claims of commands under way on every worker, under a
        per-account advisory lock, so two workers cannot both let an account take its last
        place.
        ``release_places`` drops the claims once the command is done."""
        taken: list[tuple[str, str]] = []
        for account, kind, limit in wanted:
            async with self.connection.acquire() as connection, connection.transaction():
                await connection.execute(_LOCK_ACCOUNT, _QUOTA_LOCKS, account)
                await connection.execute(_PURGE_CLAIMS, account)
                count = _COUNT_SEATS if kind == "seat" else _COUNT_HOSTED
                if int(await connection.fetchval(count, account, table_id)) >= limit:
                    await self.release_places(table_id, taken)
                    return account, kind
                await connection.execute(_CLAIM, account, kind, table_id, CLAIM_SECONDS)
            taken.append((account, kind))
        return None

    async def release_places(self, table_id: str, claimed: list[tuple[str, str]]) -> None:
        """Drop the claims ``claimed`` (account, kind) at ``table_id``."""
        if claimed:
            accounts = [account for account, _ in claimed]
            kinds = [kind for _, kind in claimed]
            await self.connection.execute(_UNCLAIM, accounts, kinds, table_id)

    async def live_workers(self) -> list[str]:
        """The names of the workers whose membership lease is current."""
        return [str(row[0]) for row in await self.connection.fetch(_LIVE)]

    async def shard_owners(self) -> dict[int, str]:
        """Shard -> the worker holding its current lease."""
        rows = await self.connection.fetch(_SHARD_OWNERS)
        return {int(key): str(owner) for key, owner in rows}

    async def orphans(self) -> int:
        """Open tables nobody holds: an expired lease, or none at all."""
        return int(await self.connection.fetchval(_ORPHANS))

    async def adopt_tables(self, limit: int) -> dict[str, int]:
        """Take up to ``limit`` orphan tables; table id -> epoch."""
        taken: dict[str, int] = {}
        for statement in (_ADOPT_EXPIRED, _ADOPT_UNLEASED):
            if len(taken) >= limit:
                break
            rows = await self.connection.fetch(statement, self.owner, self.ttl, limit - len(taken))
            taken.update((str(key), int(epoch)) for key, epoch in rows)
        return taken

    async def open_tables(self) -> int:
        """Waiting or playing tables in the whole store."""
        return int(await self.connection.fetchval(_OPEN_TABLES))

    async def started_at(self, now: float) -> float:
        """When the first worker of this store started (``now`` if this is the first): the
        ``started_at`` every worker announces, so that clients see one server."""
        return float(await self.connection.fetchval(_STARTED, repr(now)))


def fair_share(total: int, workers: int) -> int:
    """How many of ``total`` things one of ``workers`` live workers should hold (rounded up).

    >>> fair_share(4, 2), fair_share(5, 2), fair_share(3, 0)
    (2, 3, 3)
    """
    return math.ceil(total / max(1, workers))


def pairs(held: dict[str, int], keys: Iterable[str]) -> dict[str, int]:
    """The entries of ``held`` for ``keys`` (those held)."""
    return {key: held[key] for key in keys if key in held}


def chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    """``items`` cut into runs of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
