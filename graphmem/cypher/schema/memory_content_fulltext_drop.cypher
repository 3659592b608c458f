// The full-text index of stores made before the scope fields were indexed (content only): it
// is dropped once memory_fulltext is online, so that a write updates one Lucene index.
// :param none -- this statement takes no parameters
DROP INDEX memory_content_fulltext IF EXISTS;
