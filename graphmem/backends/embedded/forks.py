"""A process that forks while its store handles are in use: the fork waits for the writes
under way on other threads, and the child starts afresh what it has no copy of.

SQLite keeps a connection's locks and its view of the WAL index in process memory. A child
that copied them in the middle of a write cannot use the file, whatever handle it opens:
BEGIN waits forever for a lock held by a connection the child does not have, or a read
finds the file "malformed". So before a fork every open handle's lock is taken (each write,
reload and read holds it) and a running checkpoint is waited for, up to the handle's busy
timeout; the child inherits handles between two writes. There it starts commit and
checkpoint threads of its own (see ``commit``) and takes its own turns on the lock file:
the inherited descriptor shares its lock with the parent's, so a turn of the child would
end the parent's.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import TYPE_CHECKING

from graphmem.backends.embedded.commit import open_lock_file

if TYPE_CHECKING:
    from graphmem.backends.embedded.journal import EmbeddedJournal

log = logging.getLogger("graphmem.backends.embedded")

#: the handles open in this process
_OPEN: weakref.WeakSet[EmbeddedJournal] = weakref.WeakSet()
#: the handles held for the fork under way, each with whether its lock was taken
_FORKING: list[tuple[EmbeddedJournal, bool]] = []


def register(handle: EmbeddedJournal) -> None:
    """``handle`` has opened: a fork waits for its writes."""
    _OPEN.add(handle)


def forget(handle: EmbeddedJournal) -> None:
    """``handle`` has closed: nothing of it for a fork to wait for."""
    _OPEN.discard(handle)


def _hold(handle: EmbeddedJournal) -> bool:
    """Take ``handle``'s lock (and its checkpoints') for the fork; False when its busy
    timeout passed first (the fork goes ahead: see :func:`_let_go`)."""
    held = handle._lock.acquire(timeout=handle._busy_timeout)
    if held:
        handle._committer.before_fork(handle._busy_timeout)
    else:
        log.warning("%s forked while a write held the store for too long", handle._path)
    return held


def _let_go(handle: EmbeddedJournal, held: bool, *, child: bool) -> None:
    """After the fork, in the parent or the ``child``. In the child, a handle the fork did
    not wait for may have been copied mid-write: its lock was held by a thread the child
    does not have, and a copy of a connection inside a transaction cannot finish it, so
    the child's copy of that handle is closed."""
    handle._committer.after_fork(child=child)
    if child:
        if not held:
            handle._lock = threading.RLock()
            if handle._db.in_transaction:
                handle._closed = True
        inherited = handle._lock_fd
        if inherited is not None and handle._path is not None:
            handle._lock_fd = open_lock_file(handle._path)
            os.close(inherited)  # (the parent's lock stays: its descriptor is open)
    if held:
        handle._lock.release()


def _before() -> None:
    _FORKING[:] = [(handle, _hold(handle)) for handle in list(_OPEN)]


def _after(*, child: bool) -> None:
    forking, _FORKING[:] = list(_FORKING), []
    for handle, held in forking:
        _let_go(handle, held, child=child)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before,
        after_in_parent=lambda: _after(child=False),
        after_in_child=lambda: _after(child=True),
    )
