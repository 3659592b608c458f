// Count graphmem nodes per label and relationships per type (served from the count store).
// :param none -- this statement takes no parameters
CALL { MATCH (n:Memory) RETURN count(n) AS n_memory }
CALL { MATCH (n:Agent) RETURN count(n) AS n_agent }
CALL { MATCH (n:Run) RETURN count(n) AS n_run }
CALL { MATCH (n:Tag) RETURN count(n) AS n_tag }
CALL { MATCH (n:OrgFact) RETURN count(n) AS n_org_fact }
CALL { MATCH (n:OrgOperation) RETURN count(n) AS n_org_operation }
CALL { MATCH (n:LogEntry) RETURN count(n) AS n_log_entry }
CALL { MATCH (n:Payload) RETURN count(n) AS n_payload }
CALL { MATCH (n:Namespace) RETURN count(n) AS n_namespace }
CALL { MATCH ()-[r:SUPERSEDES]->() RETURN count(r) AS e_supersedes }
CALL { MATCH ()-[r:DERIVED_FROM]->() RETURN count(r) AS e_derived_from }
CALL { MATCH ()-[r:AUTHORED_BY]->() RETURN count(r) AS e_authored_by }
CALL { MATCH ()-[r:IN_RUN]->() RETURN count(r) AS e_in_run }
CALL { MATCH ()-[r:RUN_BY]->() RETURN count(r) AS e_run_by }
CALL { MATCH ()-[r:TAGGED]->() RETURN count(r) AS e_tagged }
CALL { MATCH ()-[r:NEXT]->() RETURN count(r) AS e_next }
CALL { MATCH ()-[r:RECORDS]->() RETURN count(r) AS e_records }
CALL { MATCH ()-[r:REFERENCES]->() RETURN count(r) AS e_references }
CALL { MATCH ()-[r:CHILD_OF]->() RETURN count(r) AS e_child_of }
RETURN {`Memory`: n_memory, `Agent`: n_agent, `Run`: n_run, `Tag`: n_tag, `OrgFact`: n_org_fact,
        `OrgOperation`: n_org_operation, `LogEntry`: n_log_entry, `Payload`: n_payload,
        `Namespace`: n_namespace} AS nodes,
       {`SUPERSEDES`: e_supersedes, `DERIVED_FROM`: e_derived_from, `AUTHORED_BY`: e_authored_by,
        `IN_RUN`: e_in_run, `RUN_BY`: e_run_by, `TAGGED`: e_tagged, `NEXT`: e_next, `RECORDS`: e_records,
        `REFERENCES`: e_references, `CHILD_OF`: e_child_of} AS edges;
