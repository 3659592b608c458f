// Range index on LogEntry.run_id (a run's orchestration log). Idempotent.
// :param none -- this statement takes no parameters
CREATE INDEX log_entry_run_id IF NOT EXISTS
FOR (n:LogEntry) ON (n.run_id);
