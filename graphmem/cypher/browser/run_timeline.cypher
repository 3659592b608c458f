// A run's event timeline: its memories (episodic events) and orchestration log entries in time
// order, with the event type, the agent and the start of the content (table view).
:param run_id => 'r1';
MATCH (r:Run {id: $run_id})<-[:IN_RUN]-(e)
WHERE e:Memory OR e:LogEntry
RETURN coalesce(e.created_at, e.at) AS at, labels(e)[0] AS kind, e.event_type AS event_type,
       e.agent_id AS agent_id, e.id AS id, left(coalesce(e.content, e.payload, ''), 160) AS summary
ORDER BY at, id;
