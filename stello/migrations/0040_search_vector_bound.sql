-- A record's search vector is bounded to what a tsvector holds (sdkexplore: a 1 MB
-- ImportSession record of distinct words answered INTERNAL).
--
-- A tsvector holds at most 1 MB (1,048,575 bytes), and a record up to the record
-- limit (STELLO_MAX_RECORD_BYTES, 1 MiB) may make a larger one: each distinct word
-- costs its bytes and about eight more, and CJK text a bigram lexeme per character
-- (about 4.7 bytes of vector per byte of text). Such a record's write (its
-- `search_vector` is a STORED generated column) failed "string is too long for
-- tsvector", so the ImportSession, turn or tool result that held it was lost.
--
-- `stello_search_vector(content)` is 0035's vector of the whole text for a text up
-- to 128 KiB (at most about 620 KB of vector), as before. For a longer text it tries
-- the whole text and, while the vector is too large, a shorter start of it (three
-- quarters each time): the record is found by its words as far as the vector holds
-- them, from its start. The function keeps its name (stello.distribution lists it
-- for Citus) and becomes PL/pgSQL for the EXCEPTION block, a subtransaction entered
-- only for texts over 128 KiB; the block makes it PARALLEL UNSAFE, which no search
-- minds (a search reads the stored column: only writes and the search backfill call
-- the function).
--
-- Every vector stored so far fits, and is what the new function makes of its text:
-- nothing is rewritten.

CREATE OR REPLACE FUNCTION stello_search_vector(content text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE AS $$
DECLARE
    chars integer := length(content);
BEGIN
    IF octet_length(content) <= 131072 THEN
        RETURN to_tsvector('english'::regconfig, regexp_replace(public.stello_search_text(content), '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]+', ' ', 'g'))
            || to_tsvector('english'::regconfig, public.stello_search_grams(public.stello_search_text(content)));
    END IF;
    LOOP
        BEGIN
            RETURN to_tsvector('english'::regconfig, regexp_replace(public.stello_search_text(left(content, chars)), '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]+', ' ', 'g'))
                || to_tsvector('english'::regconfig, public.stello_search_grams(public.stello_search_text(left(content, chars))));
        EXCEPTION WHEN program_limit_exceeded THEN
            chars := chars * 3 / 4;
        END;
    END LOOP;
END
$$;
