// Upsert TAGGED relationships (memory or org fact)-[:TAGGED]->(tag) between nodes given by element id;
// the relationship's properties are replaced by row.props.
:param rows => COLLECT { MATCH (a:Memory {id: 'm1'}), (b:Tag {id: 'prefs'}) RETURN {src: elementId(a), dst: elementId(b), props: {}} };
UNWIND $rows AS row
MATCH (a) WHERE elementId(a) = row.src
MATCH (b) WHERE elementId(b) = row.dst
MERGE (a)-[r:TAGGED]->(b)
SET r = row.props;
