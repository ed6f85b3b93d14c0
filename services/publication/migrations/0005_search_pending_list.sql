-- A version's words go straight into the search index (0003) instead of its pending list, which GIN keeps
-- until a vacuum merges it: a publication is written once per run, the list's pages held every new
-- version's entries unmerged, a larger share of the table than the words themselves on a young workspace.
ALTER INDEX publication_versions_search SET (fastupdate = off);
