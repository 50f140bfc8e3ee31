"""Player accounts in Mosquitto's ``password_file`` format, so Mosquitto reads the file we write.

One account a line, ``name:$7$iterations$salt$hash``: PBKDF2-HMAC-SHA512 over the UTF-8
password with a 12-byte random salt, ``salt`` and ``hash`` in standard base64 with padding. That
is byte for byte what ``mosquitto_passwd`` (Mosquitto 2) writes, with its default of 101
iterations, so ``mosquitto -c ...`` with ``password_file`` pointing here authenticates our users
and the embedded broker checks the same file. Lines of Mosquitto 1.x (``$6$salt$hash``:
SHA-512 over password then salt) are read and checked too; we never write them. Blank lines and
lines starting with ``#`` are skipped (and not kept by :meth:`Accounts.save`).

Names are MQTT usernames and must satisfy :func:`protocol.topics.valid_name`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import getpass
import hashlib
import hmac
import os
import secrets
import tempfile
from pathlib import Path

from protocol.topics import valid_name

__all__ = [
    "DEFAULT_ITERATIONS",
    "Accounts",
    "AccountsError",
    "hash_password",
    "local_mosquitto_config",
    "random_password",
    "verify_password",
    "write_private",
]

DEFAULT_ITERATIONS = 101
"""PBKDF2 iterations of a new hash: ``mosquitto_passwd``'s default (Mosquitto reads the count
from each line, so a larger one also works; it costs CPU on every connect)."""

_SALT_BYTES = 12
_PBKDF2_TAG = "7"
_SHA512_TAG = "6"


class AccountsError(ValueError):
    """A name that is not a valid client id, an empty password, or an accounts file that does
    not parse."""


def random_password() -> str:
    """A fresh random password: 24 URL-safe characters (about 144 bits), never starting with
    ``-``: it is meant to be pasted after ``--password`` on a command line, where a leading
    dash reads as an option (one password in 64 would)."""
    while True:
        password = secrets.token_urlsafe(18)
        if not password.startswith("-"):
            return password


def _pbkdf2_hash(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _encode_hash(password: str, iterations: int) -> str:
    salt = secrets.token_bytes(_SALT_BYTES)
    digest = _pbkdf2_hash(password, salt, iterations)
    return f"${_PBKDF2_TAG}${iterations}${_b64(salt)}${_b64(digest)}"


def _verify(password: str, encoded: str) -> bool:
    """Whether ``password`` matches the stored ``encoded`` hash; ``False`` for unknown formats."""
    fields = encoded.split("$")
    try:
        match fields:
            case ["", "7", iterations, salt, digest]:
                expected = base64.b64decode(digest, validate=True)
                actual = _pbkdf2_hash(
                    password, base64.b64decode(salt, validate=True), int(iterations)
                )
            case ["", "6", salt, digest]:
                expected = base64.b64decode(digest, validate=True)
                actual = hashlib.sha512(
                    password.encode() + base64.b64decode(salt, validate=True)
                ).digest()
            case _:
                return False
    except (ValueError, binascii.Error):
        return False
    return hmac.compare_digest(expected, actual)


def hash_password(password: str, iterations: int = DEFAULT_ITERATIONS) -> str:
    """A new ``$7$`` hash of ``password`` (a fresh salt each time)."""
    return _encode_hash(password, iterations)


def verify_password(password: str, encoded: str) -> bool:
    """Whether ``password`` matches ``encoded`` (``$7$`` or ``$6$``; other formats never do)."""
    return _verify(password, encoded)


def _check_name(name: str) -> None:
    if not valid_name(name):
        raise AccountsError(
            f"invalid account name {name!r}: use 1-64 letters, digits, '_', '.' or '-'"
        )


def _keep_owner(target: Path, temporary: str) -> None:
    try:
        status = target.stat()
    except FileNotFoundError:
        return
    # Not ours to give away (we are not root): the new file stays ours, as a fresh one would.
    with contextlib.suppress(PermissionError):
        os.chown(temporary, status.st_uid, status.st_gid)


class Accounts:
    """Accounts (name -> password hash) in Mosquitto's ``password_file`` format.

    >>> accounts = Accounts()
    >>> accounts.add("alice", "s3cret")
    >>> accounts.check("alice", "s3cret"), accounts.check("alice", "guess")
    (True, False)
    """

    __slots__ = ("_hashes",)

    def __init__(self, hashes: dict[str, str] | None = None) -> None:
        self._hashes: dict[str, str] = dict(hashes or {})

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Accounts:
        """Read an accounts file; a missing file gives no accounts.

        Raises:
            AccountsError: a line is not ``name:hash`` or the name is not a valid client id.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls()
        hashes: dict[str, str] = {}
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, separator, encoded = line.partition(":")
            if not separator or not encoded:
                raise AccountsError(
                    f"{os.fspath(path)}:{number}: expected 'name:hash', got {raw!r}"
                )
            if not valid_name(name):
                raise AccountsError(f"{os.fspath(path)}:{number}: invalid account name {name!r}")
            hashes[name] = encoded
        return cls(hashes)

    def add(self, name: str, password: str, *, iterations: int = DEFAULT_ITERATIONS) -> None:
        """Add ``name`` with ``password``, replacing its password if it exists.

        Raises:
            AccountsError: ``name`` is not a valid client id or ``password`` is empty.
        """
        _check_name(name)
        if not password:
            raise AccountsError(f"empty password for account {name!r}")
        self._hashes[name] = _encode_hash(password, iterations)

    def remove(self, name: str) -> bool:
        """Remove ``name``; whether it existed."""
        return self._hashes.pop(name, None) is not None

    def names(self) -> list[str]:
        """The account names, sorted."""
        return sorted(self._hashes)

    def __contains__(self, name: object) -> bool:
        return name in self._hashes

    def __len__(self) -> int:
        return len(self._hashes)

    def check(self, name: str, password: str) -> bool:
        """Whether ``name`` exists and ``password`` is its password."""
        encoded = self._hashes.get(name)
        return encoded is not None and _verify(password, encoded)

    def to_text(self) -> str:
        """The file's text: one ``name:hash`` line per account, in the order they were added."""
        return "".join(f"{name}:{encoded}\n" for name, encoded in self._hashes.items())

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the accounts to ``path`` atomically (a temporary file in the same folder, then a
        rename) with mode 0600: readers see the old file or the new one, never half of one.

        A file that exists keeps its owner and group where we may set them, so a file ``chown``ed
        to Mosquitto's user stays readable by Mosquitto; a new file belongs to us, and when
        Mosquitto runs as its own user it must be ``chown``ed to that user once.

        Raises:
            OSError: the folder is not writable.
        """
        write_private(path, self.to_text())


def write_private(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file in the same folder, then a rename)
    with mode 0600; a file that exists keeps its owner and group where we may set them.

    Raises:
        OSError: the folder is not writable.
    """
    target = Path(path)
    descriptor, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o600)
        _keep_owner(target, temporary)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def local_mosquitto_config(
    template: Path,
    port: int,
    host: str,
    password_file: Path,
    acl_file: Path,
    websockets_port: int | None = None,
    plugin: Path | None = None,
) -> str:
    """The Mosquitto config ``template`` (deploy/mosquitto/mosquitto.conf) for a broker of our
    own: the listener on ``host:port``, absolute paths for the password and ACL files, and the
    current user instead of the ``mosquitto`` user, which could not read our 0600 files.

    The ``plugin`` line loads ``plugin`` (the publish rate plugin built by
    :func:`server.net.mosquitto_plugin.build_plugin`); with ``None`` it and its
    ``plugin_opt_*`` lines are left out.

    A listener whose block (its line and the lines after it up to a blank line) holds
    ``protocol websockets`` listens on ``host:websockets_port``, or is left out, block and all,
    when ``websockets_port`` is ``None``.
    """
    blocks: list[list[str]] = [[]]
    for line in template.read_text().splitlines():
        if not line.strip():
            blocks.append([])
        blocks[-1].append(line)
    lines = []
    for block in blocks:
        keys = [line.split(" ", 1)[0] for line in block]
        websockets = "listener" in keys and "protocol websockets" in (
            line.strip() for line in block
        )
        if websockets and websockets_port is None:
            lines += [line for line in block if not line.strip()]
            continue
        for key, line in zip(keys, block):
            if key == "listener":
                line = f"listener {websockets_port if websockets else port} {host}"
            elif key == "password_file":
                line = f"password_file {password_file}"
            elif key == "acl_file":
                line = f"acl_file {acl_file}"
            elif key == "user":
                continue
            elif key == "plugin" or key.startswith("plugin_opt_"):
                if plugin is None:
                    continue
                if key == "plugin":
                    line = f"plugin {plugin}"
            lines.append(line)
    lines.append(f"user {getpass.getuser()}")
    return "\n".join(lines) + "\n"
