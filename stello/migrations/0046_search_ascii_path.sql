-- Search vectors cost what their text needs (CI's costs, and every append's, every
-- session's and every label's and metadata value's write).
--
-- 1. A text of ASCII characters only skips the passes that cannot change it.
--    `stello_search_vector` (a record's content, its generated `search_vector`) and
--    `stello_label_vector` (labels, and metadata values through `stello_value_vector`)
--    read a text through `stello_search_text` (0035, 0038, 0041-0045: full-width forms,
--    Latin letters with diacritics, marks, capitals past ASCII, ASCII punctuation) and
--    add the CJK bigrams (`stello_search_grams`) and the symbols' terms
--    (`stello_search_symbols`). Of these, only the punctuation's replacement by spaces
--    reads an ASCII character: every other pass maps or matches characters past U+007F
--    only, and the bigrams and symbols of an ASCII text are '' (an empty vector, which
--    `||` adds nothing to). A text whose characters are all ASCII (`^[\x01-\x7f]*$`, one
--    scan) now gets that one replacement and its configuration's vector: the same
--    vector, with none of the passes. The bound of a record's text (0040: past 128 KiB
--    the vector is made of a prefix that fits) keeps its loop: an ASCII text past it
--    takes the passes.
-- 2. `stello_label_vector` is PL/pgSQL, as `stello_search_vector` is. As a SQL function
--    whose body reads a subquery it is never inlined, and before PostgreSQL 18 each call
--    started its body's query again, which planned `stello_search_text`'s body (0045's
--    lists of capitals) anew: 1.3 ms a label on PostgreSQL 15 (the Citus nodes', CI's
--    second target), 50,000 labels in 66 s; PL/pgSQL keeps its expressions' plans for
--    the transaction. Measured on PostgreSQL 15, 5,000 labels: "kid number N" 6.6 s ->
--    0.02 s, "kid numbér N" 4.9 s -> 0.22 s; on the embedded PostgreSQL 18 the tests'
--    seeded trees spent 7.5 s of `tests/tree`'s 65 s of statements making labels' vectors.
--
-- Each function gives every text the vector it gave
-- (tests/storage/search/test_search_ascii.py compares them with the passes over random
-- texts and counts the passes' calls), so nothing stored changes: no index is built
-- again and no backfill runs. The functions keep their names (stello/distribution_plan.py:
-- the new bodies reach every node on Citus).

CREATE OR REPLACE FUNCTION stello_search_vector(content text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE AS $$
DECLARE
    chars integer := length(content);
    searched text;
BEGIN
    IF octet_length(content) <= 131072 AND content ~ '^[\x01-\x7f]*$' THEN
        RETURN to_tsvector('english'::regconfig, regexp_replace(content, '[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]', ' ', 'g'));
    END IF;
    IF octet_length(content) <= 131072 THEN
        searched := public.stello_search_text(content);
        RETURN to_tsvector('english'::regconfig, regexp_replace(searched, '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f\u00a2-\u00a7\u00a9\u00ac\u00ae\u00b0-\u00b1\u00b6\u00d7\u00f7\u203c\u2049\u20a0-\u20cf\u2122\u2190-\u2bff\U0001f000-\U0001faff]+', ' ', 'g'))
            || to_tsvector('english'::regconfig, public.stello_search_grams(searched))
            || to_tsvector('english'::regconfig, public.stello_search_symbols(searched));
    END IF;
    LOOP
        BEGIN
            searched := public.stello_search_text(left(content, chars));
            RETURN to_tsvector('english'::regconfig, regexp_replace(searched, '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f\u00a2-\u00a7\u00a9\u00ac\u00ae\u00b0-\u00b1\u00b6\u00d7\u00f7\u203c\u2049\u20a0-\u20cf\u2122\u2190-\u2bff\U0001f000-\U0001faff]+', ' ', 'g'))
                || to_tsvector('english'::regconfig, public.stello_search_grams(searched))
                || to_tsvector('english'::regconfig, public.stello_search_symbols(searched));
        EXCEPTION WHEN program_limit_exceeded THEN
            chars := chars * 3 / 4;
        END;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION stello_label_vector(label text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    searched text;
BEGIN
    IF label ~ '^[\x01-\x7f]*$' THEN
        RETURN to_tsvector('simple'::regconfig, regexp_replace(label, '[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]', ' ', 'g'));
    END IF;
    searched := public.stello_search_text(label);
    RETURN to_tsvector('simple'::regconfig, regexp_replace(searched, '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f\u00a2-\u00a7\u00a9\u00ac\u00ae\u00b0-\u00b1\u00b6\u00d7\u00f7\u203c\u2049\u20a0-\u20cf\u2122\u2190-\u2bff\U0001f000-\U0001faff]+', ' ', 'g'))
        || to_tsvector('simple'::regconfig, public.stello_search_grams(searched))
        || to_tsvector('simple'::regconfig, public.stello_search_symbols(searched));
END
$$;
