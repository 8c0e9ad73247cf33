"""Engram's exceptions: one hierarchy under :class:`Error`, following the engine's error kinds.

Every exception carries ``code`` (the ``error_code`` string of the HTTP API, for example ``memory_not_found``),
``status`` (the HTTP status the daemon would answer), ``retryable`` (whether the same call may succeed later) and
``errors`` (the validation errors, each a dict with ``loc``, ``msg``, ``type``, ``input`` and ``ctx``).
Classes also derive from the matching built-in exception where one exists, so ``except ValueError`` and
``except LookupError`` work as a Python programmer expects.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

__all__ = [
    "Error",
    "InvalidInput",
    "NotFound",
    "Conflict",
    "Forbidden",
    "Locked",
    "StorageError",
    "StorageFull",
    "Corrupt",
    "WrongKey",
    "Unavailable",
    "Unsupported",
    "Timeout",
    "Unreachable",
    "InternalError",
]


class Error(Exception):
    """Base class of every error Engram raises."""

    code: str
    status: int
    retryable: bool
    errors: List[Dict[str, Any]]

    def __init__(
        self,
        message: str,
        *,
        code: str = "error",
        status: int = 500,
        retryable: bool = False,
        errors: Optional[List[Dict[str, Any]]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.retryable = retryable
        self.errors = list(errors or [])

    def __reduce__(self) -> Any:  # picklable across processes, keyword fields included
        return (_rebuild, (type(self), self.message, self.code, self.status, self.retryable, self.errors))


def _rebuild(cls: Any, message: str, code: str, status: int, retryable: bool, errors: List[Dict[str, Any]]) -> Error:
    err: Error = cls(message, code=code, status=status, retryable=retryable, errors=errors)
    return err


class InvalidInput(Error, ValueError):
    """An argument failed validation; nothing was stored. ``field`` names the first bad argument as a dotted
    path (``embedding``, ``memories.3.embedding``, ``filters.labels``); ``errors`` lists every one."""

    @property
    def field(self) -> Optional[str]:
        for e in self.errors:
            loc = [str(p) for p in e.get("loc") or []]
            if len(loc) > 1 and loc[0] in ("body", "query", "path"):
                loc = loc[1:]  # the HTTP layer's transport prefix
            if loc:
                return ".".join(loc)
        return None


class NotFound(Error, LookupError):
    """No record with that id (memory, thread, label, space, source, ...)."""


class Conflict(Error):
    """The write contradicts stored state (an id that exists, an export file that exists, ...)."""


class Forbidden(Error, PermissionError):
    """A path outside the data directory and ``allowed_paths``."""


class Locked(Error):
    """Another process (a daemon) has the store open; only one process can open a redb store."""


class StorageError(Error, OSError):
    """Reading or writing the store failed; nothing was changed; retrying may succeed."""


class StorageFull(StorageError):
    """The disk is full; nothing was written."""


class Corrupt(Error):
    """The store file is damaged or of an unknown format version."""


class WrongKey(Error, PermissionError):
    """The passphrase, key file or keychain key does not open the encrypted store (or archive), or the store is
    encrypted and no key was given (``code`` ``key_required``). Nothing was changed."""


class Unavailable(Error):
    """A component is missing: the embedding model or the ONNX Runtime library (the message says which)."""


class Unsupported(Error, NotImplementedError):
    """A feature that is designed but not built in this release."""


class Timeout(Error, TimeoutError):
    """Fetching a URL timed out; nothing was stored."""


class Unreachable(Error, ConnectionError):
    """A URL or database server cannot be reached; nothing was stored."""


class InternalError(Error):
    """A bug or an unexpected state; please report it."""
