// Range index on OrgFact.fact_id (all versions of one org fact). Idempotent.
// :param none -- this statement takes no parameters
CREATE INDEX org_fact_fact_id IF NOT EXISTS
FOR (n:OrgFact) ON (n.fact_id);
