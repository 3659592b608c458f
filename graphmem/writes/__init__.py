"""The write path: every change to the store goes through :class:`Writes`.

One write is: **validate** (models validate on construction; ids, shapes and scope fields
are checked here) → **authorise** (a shared memory's author must be a member of its
namespace) → **embed** (memories without a vector get one from the embedder, or from the
background vectorizer after the commit) → **one backend transaction with preconditions**
(:class:`Expect`) → **hooks** (after the commit: lifecycle counters, the knowledge layer).

The memory operations that change versions are defined here once:

- *supersede* — ``old`` becomes ``superseded`` with ``valid_to`` from :func:`retire_time`,
  and ``(new)-[:SUPERSEDES {reason, at}]->(old)``; the write expects ``old`` still active,
  so two writers can never both replace the same version (the loser gets ``Conflict``);
- *derive* — a new node with ``(new)-[:DERIVED_FROM {pass, at}]->(source)``; the write
  expects every source to still exist, so a forget that committed first is never undone;
- *archive* / *restore* — a status change that expects the status it read;
- *forget* — a delete whose plan (the versions and what was derived from them) is checked
  in the same transaction: if anything was derived from or superseded a doomed node since
  the plan was made, the transaction is refused and the plan is made again.

Nothing outside this module and the backends calls ``upsert``, ``delete`` or ``write``.
"""

from graphmem.writes.chain import CHAIN_ATTEMPTS
from graphmem.writes.forget import FORGET_ATTEMPTS, ForgetPlan, Writes
from graphmem.writes.path import (
    Committed,
    Embed,
    Hook,
    Replacement,
    check_new,
    retire_time,
)

__all__ = [
    "CHAIN_ATTEMPTS",
    "FORGET_ATTEMPTS",
    "Committed",
    "Embed",
    "ForgetPlan",
    "Hook",
    "Replacement",
    "Writes",
    "check_new",
    "retire_time",
]
