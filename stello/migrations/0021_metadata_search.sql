-- SearchSessions matches session metadata values (issue #37), as it matches
-- labels (migration 0019).
--
-- 1. Each metadata row carries `value_vector`, a generated column computed in
--    the tree's statement that writes the row, so a value is found from the
--    commit of CreateSession or UpdateSessionMetadata on, and goes with the row
--    (a removed key, a deleted session's CASCADE). Keys are not searched: a key
--    names a kind of value that many sessions share (ListSessionDigests
--    filters by key and value).
-- 2. `stello_value_vector(value)`: the labels' definition (`stello_label_vector`:
--    words as written, CJK bigrams) over the value with its ASCII punctuation
--    made spaces. Values are often identifiers, and the text-search parser reads
--    "JIRA-4411" as 'jira' and the number '-4411', "v1.2.3" as one file name,
--    where SearchSessions' query (storage_service/search/query.py) splits every
--    punctuation: without the spaces "4411" or "v1" would find nothing.
-- 3. One GIN index leads with space_id (btree_gin), as every index of a tenant
--    table does (docs/scaling.md); fastupdate off, as records_search (0019):
--    no pending list that every search reads.
--
-- Adding the column rewrites `session_metadata` once.
CREATE FUNCTION stello_value_vector(value text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT public.stello_label_vector(regexp_replace(value, '[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]+', ' ', 'g'))
$$;

DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    PERFORM create_distributed_function('stello_value_vector(text)');
  END IF;
END $$;

ALTER TABLE session_metadata ADD COLUMN value_vector tsvector
    GENERATED ALWAYS AS (stello_value_vector(value)) STORED;

CREATE INDEX session_metadata_search ON session_metadata USING gin (space_id, value_vector)
    WITH (fastupdate = off);
