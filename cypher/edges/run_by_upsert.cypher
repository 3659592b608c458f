// Upsert RUN_BY relationships (run)-[:RUN_BY]->(agent) between nodes given by element id;
// the relationship's properties are replaced by row.props.
:param rows => COLLECT { MATCH (a:Run {id: 'r1'}), (b:Agent {id: 'assistant'}) RETURN {src: elementId(a), dst: elementId(b), props: {}} };
UNWIND $rows AS row
MATCH (a) WHERE elementId(a) = row.src
MATCH (b) WHERE elementId(b) = row.dst
MERGE (a)-[r:RUN_BY]->(b)
SET r = row.props;
