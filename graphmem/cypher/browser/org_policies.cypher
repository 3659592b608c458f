// Current organisational policies: the latest unretracted version of every org fact in the given
// categories, core policies first, with author and tags (table view).
:param categories => ['policy'];
MATCH (f:OrgFact)
WHERE f.category IN $categories AND f.status = 'active' AND f.retracted_at IS NULL
  AND NOT EXISTS { (:OrgFact)-[:SUPERSEDES]->(f) }
OPTIONAL MATCH (f)-[:TAGGED]->(t:Tag)
WITH f, collect(t.name) AS tags
RETURN f.fact_id AS fact_id, f.version AS version, f.category AS category, f.content AS content,
       f.author AS author, f.author_seniority AS author_seniority, f.created_at AS created_at,
       coalesce(f.core, false) AS core, tags
ORDER BY core DESC, created_at, fact_id;
