// Record accesses of Memory nodes (recall defers them and sends them with the next write):
// access_count + row.count and last_accessed = row.at (the latest access).
:param rows => [{id: 'm1', count: 1, at: datetime()}];
UNWIND $rows AS row
MATCH (m:Memory {id: row.id})
SET m.access_count = coalesce(m.access_count, 0) + row.count, m.last_accessed = row.at;
