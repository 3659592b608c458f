// The Run nodes named by $ids, each with whether its last memory (last_event_id) still exists,
// in any status: what a write that appends memories to these runs reads first (one round trip
// instead of reading the runs, then counting their last memories).
:param ids => ['r1'];
UNWIND $ids AS id
MATCH (n:Run {id: id})
OPTIONAL MATCH (last:Memory {id: n.last_event_id})
RETURN n.id AS id, properties(n) AS props, last IS NOT NULL AS alive;
