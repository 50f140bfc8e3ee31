"""Guest names of the embedded broker: the first password a name logs in with binds it.

Without an accounts file the embedded broker takes guests: any valid name that is not bound
yet gets in with any non-empty password, and that password then binds the name. Later logins
with the name need the same password, so nobody else can take a name that is in use. Hashes
are those of :mod:`server.net.accounts` (PBKDF2-SHA512, Mosquitto's ``$7$`` format).

Bounds. At most ``limit`` names are bound (10,000 by default); a binding nobody has logged in
with for ``idle_seconds`` (30 days by default) expires and the name is free again. When every
slot holds a live binding a new name is refused (the broker answers "server unavailable")
until one expires; known names still log in.

The file (one ``name:hash:last_login`` line per name, ``last_login`` in Unix seconds) is
written atomically (a temporary file renamed over it, mode 0600) within
:data:`SAVE_DELAY` seconds of a change, in a worker thread, and once more by :meth:`close`. A
login refreshes ``last_login`` on disk at most once an hour. Without a path the bindings live
in memory and end with the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from protocol.topics import valid_name
from server.net.accounts import AccountsError, hash_password, verify_password, write_private

__all__ = [
    "DEFAULT_IDLE_SECONDS",
    "DEFAULT_LIMIT",
    "SAVE_DELAY",
    "Admission",
    "Guests",
]

_log = logging.getLogger(__name__)

DEFAULT_LIMIT = 10_000
"""Most names bound at once."""
DEFAULT_IDLE_SECONDS = 30 * 24 * 3600.0
"""A binding unused (no login) this long expires."""
SAVE_DELAY = 1.0
"""Seconds between a change and the write of the file (changes meanwhile go in that write)."""
_SEEN_RESOLUTION = 3600.0
"""A login moves ``last_login`` on disk only when the stored one is older than this."""
_SWEEP_SECONDS = 60.0
"""A full list looks for expired bindings at most this often."""


class Admission(enum.Enum):
    """What :meth:`Guests.admit` decided."""

    ACCEPTED = "accepted"
    REFUSED = "refused"
    """A wrong password for a bound name, an empty password or an invalid name."""
    FULL = "full"
    """A new name, and every slot holds a live binding."""


@dataclass(slots=True)
class _Binding:
    encoded: str
    last_login: float
    stored_login: float


class Guests:
    """Bound guest names (name -> password hash, last login); see the module docstring.

    >>> guests = Guests()
    >>> guests.admit("alice", "first"), guests.admit("alice", "other")
    (<Admission.ACCEPTED: 'accepted'>, <Admission.REFUSED: 'refused'>)
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        limit: int = DEFAULT_LIMIT,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Bindings kept in ``path`` (``None``: in memory); :meth:`load` reads an existing file."""
        self.path = Path(path) if path is not None else None
        self.limit = limit
        self.idle_seconds = idle_seconds
        self._clock = clock
        self._bindings: dict[str, _Binding] = {}
        self._dirty = False
        self._timer: asyncio.TimerHandle | None = None
        self._writing: asyncio.Future[None] | None = None
        self._next_sweep = 0.0

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        limit: int = DEFAULT_LIMIT,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> Guests:
        """The bindings of the file at ``path`` (none if it does not exist), expired ones left
        out.

        Raises:
            AccountsError: a line is not ``name:hash:seconds`` or its name is invalid.
        """
        guests = cls(path, limit=limit, idle_seconds=idle_seconds, clock=clock)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            return guests
        now = clock()
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split(":")
            try:
                name, encoded, seconds = fields
                last_login = float(seconds)
            except ValueError:
                raise AccountsError(
                    f"{os.fspath(path)}:{number}: expected 'name:hash:seconds', got {raw!r}"
                ) from None
            if not valid_name(name) or not encoded:
                raise AccountsError(f"{os.fspath(path)}:{number}: invalid guest {name!r}")
            if now - last_login <= idle_seconds:
                guests._bindings[name] = _Binding(encoded, last_login, last_login)
        return guests

    def __contains__(self, name: object) -> bool:
        return name in self._bindings

    def __len__(self) -> int:
        return len(self._bindings)

    def names(self) -> list[str]:
        """The bound names, sorted."""
        return sorted(self._bindings)

    def admit(self, name: str, password: str) -> Admission:
        """Whether ``name`` may log in with ``password``; a new name is bound to it."""
        if not password or not valid_name(name):
            return Admission.REFUSED
        now = self._clock()
        binding = self._bindings.get(name)
        if binding is not None and now - binding.last_login > self.idle_seconds:
            del self._bindings[name]
            self._changed()
            binding = None
        if binding is not None:
            if not verify_password(password, binding.encoded):
                return Admission.REFUSED
            binding.last_login = now
            if now - binding.stored_login >= _SEEN_RESOLUTION:
                binding.stored_login = now
                self._changed()
            return Admission.ACCEPTED
        if len(self._bindings) >= self.limit and not self._sweep(now):
            return Admission.FULL
        self._bindings[name] = _Binding(hash_password(password), now, now)
        self._changed()
        return Admission.ACCEPTED

    def _sweep(self, now: float) -> bool:
        """Drop expired bindings (at most once a :data:`_SWEEP_SECONDS`); whether a slot is
        free."""
        if now >= self._next_sweep:
            self._next_sweep = now + _SWEEP_SECONDS
            expired = [
                name
                for name, binding in self._bindings.items()
                if now - binding.last_login > self.idle_seconds
            ]
            for name in expired:
                del self._bindings[name]
            if expired:
                self._changed()
        return len(self._bindings) < self.limit

    def to_text(self) -> str:
        """The file's text: one ``name:hash:last_login`` line per binding."""
        return "".join(
            f"{name}:{binding.encoded}:{binding.stored_login:.0f}\n"
            for name, binding in self._bindings.items()
        )

    def save(self) -> None:
        """Write the file now (nothing without a path).

        Raises:
            OSError: the folder is not writable.
        """
        if self.path is not None:
            self._dirty = False
            write_private(self.path, self.to_text())

    def _changed(self) -> None:
        if self.path is None:
            return
        self._dirty = True
        if self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.save()
                return
            self._timer = loop.call_later(SAVE_DELAY, self._flush)

    def _flush(self) -> None:
        self._timer = None
        if not self._dirty or self.path is None:
            return
        loop = asyncio.get_running_loop()
        if self._writing is not None and not self._writing.done():
            self._timer = loop.call_later(SAVE_DELAY, self._flush)  # one write at a time
            return
        self._dirty = False
        self._writing = asyncio.ensure_future(self._write(self.path, self.to_text()))

    async def _write(self, path: Path, text: str) -> None:
        try:
            await asyncio.to_thread(write_private, path, text)
        except OSError as error:
            _log.warning(
                "cannot save the guest names", extra={"path": str(path), "error": str(error)}
            )
            self._changed()  # try again later

    async def close(self) -> None:
        """Write what is not written yet; later changes are written again as they come."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._writing is not None:
            with contextlib.suppress(Exception):
                await self._writing
            self._writing = None
        if self._dirty:
            try:
                self.save()
            except OSError as error:
                _log.warning(
                    "cannot save the guest names",
                    extra={"path": str(self.path), "error": str(error)},
                )
