-- Search reads full-width letters, digits and punctuation as their ASCII forms, and the
-- ideographic space as a space, in records, labels and metadata values, as the query does
-- (sdkfollow: "ＡＰＩ", "ＦＯＸ", "１２３", typed by Japanese and Chinese input methods, did
-- not find "API", "fox", "123", nor the reverse).
--
-- 1. `stello_search_text(text)`, the one normalisation of a searched text (0035, 0038),
--    first maps U+FF01-U+FF5E to U+0021-U+007E and U+3000 to a space (`translate`), then
--    removes the marks and makes ASCII punctuation spaces as before: "ＡＰＩ－４４１１" is
--    the words 'api' and '4411'. `normalise` in storage_service/search/query.py maps a
--    query so, and the highlighter (highlight.py) reads a hit's content so. Not full
--    NFKC: it changes lengths ("ﬁ" is "fi", "㍿" is "株式会社"), so a match in the
--    normalised text would be at other offsets than in the original, which the
--    highlighter marks in code points; a one-for-one mapping keeps every offset. The
--    full-width forms are what input methods type; the other compatibility forms are rare.
--    The half-width katakana (U+FF66-U+FF9F) stay CJK, as in 0019.
-- 2. Labels: `sessions_label_search` is built again, as 0038 built it. Metadata values:
--    `session_metadata.value_vector` is a STORED generated column, so the rows holding a
--    full-width character or U+3000 are written again (their value unchanged).
-- 3. Records: not rewritten here; the storage service's search backfill
--    (storage_service/search/backfill.py) walks every space that holds sessions
--    again from its first record, rewriting the rows whose vector changes.
--
-- The functions keep their names (stello/distribution_plan.py lists them for Citus).

CREATE OR REPLACE FUNCTION stello_search_text(content text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT regexp_replace(
    translate(
        translate(content,
                  E'\uff01\uff02\uff03\uff04\uff05\uff06\uff07\uff08\uff09\uff0a\uff0b\uff0c\uff0d\uff0e\uff0f\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19\uff1a\uff1b\uff1c\uff1d\uff1e\uff1f\uff20\uff21\uff22\uff23\uff24\uff25\uff26\uff27\uff28\uff29\uff2a\uff2b\uff2c\uff2d\uff2e\uff2f\uff30\uff31\uff32\uff33\uff34\uff35\uff36\uff37\uff38\uff39\uff3a\uff3b\uff3c\uff3d\uff3e\uff3f\uff40\uff41\uff42\uff43\uff44\uff45\uff46\uff47\uff48\uff49\uff4a\uff4b\uff4c\uff4d\uff4e\uff4f\uff50\uff51\uff52\uff53\uff54\uff55\uff56\uff57\uff58\uff59\uff5a\uff5b\uff5c\uff5d\uff5e\u3000',
                  '!"#$%&''()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\]^_`abcdefghijklmnopqrstuvwxyz{|}~ '),
        E'\u00ad\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2061\u2062\u2063\u2064\u2065\u2066\u2067\u2068\u2069\ufeff',
        ''),
    '[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]', ' ', 'g')
$$;

DROP INDEX sessions_label_search;
CREATE INDEX sessions_label_search ON sessions USING gin (space_id, stello_label_vector(label))
    WITH (fastupdate = off) WHERE provisional_until IS NULL OR provisional_until <> 'infinity';

UPDATE session_metadata SET value = value WHERE value ~ '[\uff01-\uff5e\u3000]';

-- Every space that holds sessions starts its pass again from its first record (on
-- Citus, one statement per shard, each reading its own sessions).
INSERT INTO search_backfill (space_id) SELECT DISTINCT space_id FROM sessions
ON CONFLICT (space_id) DO UPDATE
SET after_session = DEFAULT, after_seq = DEFAULT, finished_at = NULL;
