// Wait until the eventually consistent full-text indexes hold every committed write (a handle
// with `fulltext_refresh="background"` runs it before a lexical search that follows its own
// writes, so that it still reads them).
// :param none -- this statement takes no parameters
CALL db.index.fulltext.awaitEventuallyConsistentIndexRefresh();
