// Tag co-occurrence: pairs of tags used together on the same active memories, most frequent first.
:param min_count => 2;
MATCH (t1:Tag)<-[:TAGGED]-(m:Memory)-[:TAGGED]->(t2:Tag)
WHERE t1.name < t2.name AND m.status = 'active'
WITH t1.name AS tag, t2.name AS other_tag, count(m) AS memories
WHERE memories >= $min_count
RETURN tag, other_tag, memories
ORDER BY memories DESC, tag, other_tag
LIMIT 100;
