"""NullMemory: the face of a memory for stateless agents — every call is accepted and
nothing is stored.

Writes validate their input (bad input still raises InvalidInput, as with a real store) and
return the value that would have been stored; reads return nothing (empty lists, empty
text, zero counts); looking up one specific thing (a memory, a run, an agent, an org fact)
is a NotFound, because there is none. NullMemory implements
:class:`~graphmem.protocol.MemoryAPI` explicitly, sub-objects included: a name GraphMemory
does not have is an AttributeError here too.

>>> from graphmem.null import NullMemory
>>> mem = NullMemory()
>>> m = mem.remember("Alice prefers tea", agent_id="assistant")
>>> mem.recall("tea"), mem.count(), mem.runs.conversation_context("r1")
([], 0, '')
"""

from graphmem.null.lifecycle import NullKnowledge, NullLifecycle
from graphmem.null.log import NullLog, NullTransfer, NullVectors, NullWrites
from graphmem.null.memory import NullMemory
from graphmem.null.org import NullNamespaces, NullOrg
from graphmem.null.runs import NullAgents, NullRuns

__all__ = [
    "NullAgents",
    "NullKnowledge",
    "NullLifecycle",
    "NullLog",
    "NullMemory",
    "NullNamespaces",
    "NullOrg",
    "NullRuns",
    "NullTransfer",
    "NullVectors",
    "NullWrites",
]
