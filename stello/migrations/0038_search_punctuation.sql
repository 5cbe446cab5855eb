-- Search splits words at ASCII punctuation in records and labels, as the query does
-- (sdkexplore: "4411", "JIRA-4411", "example.com", "v2.0" found nothing).
--
-- PostgreSQL's text-search parser reads "JIRA-4411" as 'jira' and the number
-- '-4411', "example.com" and "node.js" as one host name, "v2.0" and "3.14" as one
-- version, an e-mail address, a URL or "src/query.py" as one token, while
-- SearchRecords' and SearchSessions' query (storage_service/search/query.py) splits
-- every punctuation: a record or label holding such a text was found neither by its
-- words nor by the text pasted as the query. Metadata values were spared since 0021
-- (`stello_value_vector` makes their ASCII punctuation spaces first).
--
-- 1. `stello_search_text(text)`, the one normalisation of a searched text (0035),
--    makes every ASCII punctuation character a space (`<` and `>` were already) and
--    still removes the marks; `normalise` in query.py does the same to a query.
--    A metadata value's vector is unchanged (its punctuation was spaces already).
-- 2. Labels: `sessions_label_search` is built again, as 0035 built it (`sessions`
--    waits for the build: about 1.3 s per 100,000 sessions here).
-- 3. Records: not rewritten here; the storage service's search backfill
--    (storage_service/search/backfill.py) walks every space that holds sessions
--    again from its first record, rewriting the rows whose vector changes.

CREATE OR REPLACE FUNCTION stello_search_text(content text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT regexp_replace(
    translate(content,
              E'\u00ad\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2061\u2062\u2063\u2064\u2065\u2066\u2067\u2068\u2069\ufeff',
              ''),
    '[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]', ' ', 'g')
$$;

DROP INDEX sessions_label_search;
CREATE INDEX sessions_label_search ON sessions USING gin (space_id, stello_label_vector(label))
    WITH (fastupdate = off) WHERE provisional_until IS NULL OR provisional_until <> 'infinity';

-- Every space that holds sessions starts its pass again from its first record (on
-- Citus, one statement per shard, each reading its own sessions).
INSERT INTO search_backfill (space_id) SELECT DISTINCT space_id FROM sessions
ON CONFLICT (space_id) DO UPDATE
SET after_session = DEFAULT, after_seq = DEFAULT, finished_at = NULL;
