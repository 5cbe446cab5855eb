-- Search finds the words inside `<...>` and the words joined to invisible marks (explore8 F4).
--
-- PostgreSQL's text-search parser reads `<thinking>`, `</div>` or
-- `<div class="x">` as one XML tag token, which the configurations drop: the
-- tag names and attribute words of LLM conversations (`<thinking>`, HTML, XML
-- tool output) were not searchable. The zero-width and bidi marks (U+200B..U+200F,
-- U+202A..U+202E, U+2060..U+2069, U+FEFF) and the soft hyphen (U+00AD) split a
-- word in two under one locale (C.UTF-8 on Debian's PostgreSQL 15: 'pass',
-- 'word') and glue it to the mark under another (PostgreSQL 18's C.UTF-8, C:
-- 'pass<U+200B>word'); either way `password` did not find `pass<U+200B>word`.
--
-- 1. `stello_search_text(text)` is the one normalisation of a searched text:
--    `</`, `<` and `>` become spaces (so `</thinking>` is the word 'thinking',
--    not the file name '/thinking' the parser would make of it) and the marks
--    are removed. `stello_search_vector` (records) and `stello_label_vector`
--    (labels, and session metadata values through `stello_value_vector`) read
--    their text through it; their parts are otherwise as 0019 made them (the
--    CJK bigrams of `stello_search_grams`, unchanged, now read the same text,
--    so a mark inside a CJK run no longer splits it). SearchRecords' and
--    SearchSessions' queries are normalised the same way
--    (storage_service/search/query.py `normalise`).
-- 2. Labels: `sessions_label_search` indexes `stello_label_vector(label)`, so
--    the index is built again here, as 0025 built it (an expression index whose
--    function changed would hold the old vectors of old rows: wrong answers, not
--    only missing ones). Dropping the index locks `sessions` (ACCESS EXCLUSIVE)
--    until the migration commits, so reads and writes of sessions wait for the
--    build: one GIN over every label, about 1.3 s per 100,000 sessions here
--    (PostgreSQL 18, 2 cores; sessions are one row per session, records many
--    per session).
-- 3. Session metadata: `value_vector` is a stored generated column, so the
--    values that hold a mark are written again here (`value` itself unchanged;
--    the tags' `<` and `>` were punctuation made spaces already by 0021): one
--    scan of `session_metadata` that updates those rows only.
-- 4. Records: `search_vector` is a stored generated column too, and `records`
--    the largest table: rewriting it here would hold the migration (and its
--    lock) for minutes. Rows written from this migration on are searchable by
--    their tag words at once; older ones become so once the storage service's
--    background job has recomputed them (`storage_service/search/backfill.py`):
--    `search_backfill` holds one row per space that existed now, with where the
--    space's pass stands (the last (session_id, seq) done), and the job walks
--    each space's records in primary-key order, a bounded batch per transaction
--    (`STELLO_STORAGE_SEARCH_BACKFILL_BATCH`), rewriting (`content = content`,
--    which recomputes the column) only the rows whose vector changes. A
--    finished space has `finished_at` set; once every space has, the job's
--    round is one read of this small table.

CREATE FUNCTION stello_search_text(content text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT translate(replace(content, '</', '  '),
                 E'<>\u00ad\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2061\u2062\u2063\u2064\u2065\u2066\u2067\u2068\u2069\ufeff',
                 '  ')
$$;

DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    PERFORM create_distributed_function('stello_search_text(text)');
  END IF;
END $$;

CREATE OR REPLACE FUNCTION stello_search_vector(content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT to_tsvector('english'::regconfig, regexp_replace(public.stello_search_text(content), '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]+', ' ', 'g'))
    || to_tsvector('english'::regconfig, public.stello_search_grams(public.stello_search_text(content)))
$$;

CREATE OR REPLACE FUNCTION stello_label_vector(label text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT to_tsvector('simple'::regconfig, regexp_replace(public.stello_search_text(label), '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]+', ' ', 'g'))
    || to_tsvector('simple'::regconfig, public.stello_search_grams(public.stello_search_text(label)))
$$;

DROP INDEX sessions_label_search;
CREATE INDEX sessions_label_search ON sessions USING gin (space_id, stello_label_vector(label))
    WITH (fastupdate = off) WHERE provisional_until IS NULL OR provisional_until <> 'infinity';

UPDATE session_metadata SET value = value
WHERE value ~ '[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]';

CREATE TABLE search_backfill (
    space_id        uuid PRIMARY KEY REFERENCES spaces (id) ON DELETE CASCADE,
    after_session   uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    after_seq       bigint NOT NULL DEFAULT -9223372036854775808,
    rows_read       bigint NOT NULL DEFAULT 0,
    rows_rewritten  bigint NOT NULL DEFAULT 0,
    finished_at     timestamptz
);

-- The job's look for work (across spaces): empty once every pass is finished.
CREATE INDEX search_backfill_pending ON search_backfill (space_id) WHERE finished_at IS NULL;

-- Where the schema is already distributed (stello.distribution), the new
-- tenant table joins it at once; elsewhere it waits for `distribute`.
DO $$ BEGIN
  IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
      PERFORM create_distributed_table('search_backfill', 'space_id',
                                       colocate_with => 'sessions');
    END IF;
  END IF;
END $$;

-- Every space that holds sessions now (on Citus, one statement per shard, each reading
-- its own sessions); a space created later writes only searchable rows.
INSERT INTO search_backfill (space_id) SELECT DISTINCT space_id FROM sessions;
