// Set where a run's chain now ends (its event count and last memory) on Run nodes that exist,
// without rewriting their other properties: a run another writer ended stays ended. The write
// that sends it expects each run as it read it (a run that does not exist is skipped).
:param rows => [{id: 'r1', event_count: 2, last_event_id: 'm2'}];
UNWIND $rows AS row
MATCH (r:Run {id: row.id})
SET r.event_count = row.event_count, r.last_event_id = row.last_event_id;
