// Record an access of Memory nodes: access_count + 1 and last_accessed = $at.
:param ids => ['m1'];
:param at => datetime();
UNWIND $ids AS id
MATCH (m:Memory {id: id})
SET m.access_count = coalesce(m.access_count, 0) + 1, m.last_accessed = $at;
