// Count graphmem nodes per label and relationships per type (COUNT subqueries, served from the
// count store; they run on every Neo4j 5.x without CALL subquery scope clauses).
// :param none -- this statement takes no parameters
RETURN {`Memory`: COUNT { (:Memory) }, `Agent`: COUNT { (:Agent) }, `Run`: COUNT { (:Run) },
        `Tag`: COUNT { (:Tag) }, `OrgFact`: COUNT { (:OrgFact) },
        `OrgOperation`: COUNT { (:OrgOperation) }, `LogEntry`: COUNT { (:LogEntry) },
        `Payload`: COUNT { (:Payload) }, `Namespace`: COUNT { (:Namespace) }, `Entity`: COUNT { (:Entity) }} AS nodes,
       {`SUPERSEDES`: COUNT { ()-[:SUPERSEDES]->() }, `DERIVED_FROM`: COUNT { ()-[:DERIVED_FROM]->() },
        `AUTHORED_BY`: COUNT { ()-[:AUTHORED_BY]->() }, `IN_RUN`: COUNT { ()-[:IN_RUN]->() },
        `RUN_BY`: COUNT { ()-[:RUN_BY]->() }, `TAGGED`: COUNT { ()-[:TAGGED]->() },
        `NEXT`: COUNT { ()-[:NEXT]->() }, `RECORDS`: COUNT { ()-[:RECORDS]->() },
        `REFERENCES`: COUNT { ()-[:REFERENCES]->() }, `CHILD_OF`: COUNT { ()-[:CHILD_OF]->() },
        `MENTIONS`: COUNT { ()-[:MENTIONS]->() }, `RELATES`: COUNT { ()-[:RELATES]->() }} AS edges;
