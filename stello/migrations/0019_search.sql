-- Text search over records (issue #37, SearchRecords).
--
-- 1. Every record carries `search_vector`, a generated column: it is computed
--    in the statement that writes the row, so a record is found from the
--    commit of its append on, and goes with the row when the row is erased
--    (no separate index to keep in step, nothing outlives erasure).
-- 2. `stello_search_vector(content)` is the one definition of what is
--    searchable, in three parts: the English words of the content (the
--    'english' configuration: stemmed, stop words dropped) with its CJK text
--    blanked out; then the character bigrams of each CJK run ("你好世界" ->
--    你好 好世 世界 界), so that Chinese and Japanese text, written without
--    spaces, is found by any two or more consecutive characters as a phrase
--    of bigrams, and one character by a prefix ('界':*). The bigrams are built by regular expressions over code
--    point ranges, not by pg_trgm: pg_trgm extracts no trigram from CJK text
--    under LC_CTYPE=C (the Citus test cluster's locale), and the words of a
--    CJK run are letters to the text-search parser under C and C.UTF-8 alike.
--    The functions are IMMUTABLE: they depend on nothing but their argument
--    and the built-in 'english' configuration.
-- 3. One GIN index leads with space_id (btree_gin), as every index of a tenant
--    table does (docs/scaling.md): a search is one index scan of one space (GIN's
--    fast scan skips through the space's long posting list by the query's rarer
--    words, so it reads about the matches, not the space).
--
-- Adding the column rewrites `records` once (the migration holds its lock for
-- as long as the rewrite takes).
-- btree_gin in a schema of its own: the public schema holds only Stello's
-- functions (stello.distribution places each of them on the Citus workers).
CREATE SCHEMA IF NOT EXISTS stello_extensions;
CREATE EXTENSION IF NOT EXISTS btree_gin SCHEMA stello_extensions;

-- The CJK runs of a text as space-separated character bigrams, each run's last
-- character alone after them ("你好世界" -> 你好 好世 世界 界): a character is
-- found by a prefix, the bigrams that start with it or the run's last.
CREATE FUNCTION stello_search_grams(content text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT coalesce(string_agg(substr(r.m[1], i, 2), ' ' ORDER BY r.n, i), '')
FROM regexp_matches(content, '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]+', 'g')
     WITH ORDINALITY AS r(m, n)
CROSS JOIN LATERAL generate_series(1, length(r.m[1])) AS i
$$;

-- What of a text is searchable (see 2. above). SearchRecords builds its
-- queries to match: the same configuration, the same CJK ranges.
CREATE FUNCTION stello_search_vector(content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT to_tsvector('english'::regconfig, regexp_replace(content, '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]+', ' ', 'g'))
    || to_tsvector('english'::regconfig, public.stello_search_grams(content))
$$;

-- What of a label SearchSessions matches: its words as written (the 'simple'
-- configuration: lower-cased, no stemming, no stop words, so every query word
-- is a prefix of a label's word), then its CJK bigrams.
CREATE FUNCTION stello_label_vector(label text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT to_tsvector('simple'::regconfig, regexp_replace(label, '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]+', ' ', 'g'))
    || to_tsvector('simple'::regconfig, public.stello_search_grams(label))
$$;

DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    PERFORM create_distributed_function('stello_search_grams(text)');
    PERFORM create_distributed_function('stello_search_vector(text)');
    PERFORM create_distributed_function('stello_label_vector(text)');
  END IF;
END $$;

ALTER TABLE records ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (stello_search_vector(content)) STORED;

-- fastupdate off: a GIN's pending list holds the newest rows of every space unsorted
-- (up to gin_pending_list_limit, 4 MB) and every search reads all of it until a vacuum
-- merges it, so one tenant's appends would slow another's searches; without it each
-- append updates the index in its own statement (measured by bench/bench_search.py).
CREATE INDEX records_search ON records USING gin (space_id, search_vector)
    WITH (fastupdate = off);

-- SearchSessions: a label's words and CJK text, by space.
CREATE INDEX sessions_label_search ON sessions USING gin (space_id, stello_label_vector(label))
    WITH (fastupdate = off);
