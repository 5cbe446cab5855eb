-- The CJK bigrams of a text in time linear in its length (sdkexplore: a 90 KB
-- Chinese record took 10 s of the database's CPU to write, 180 KB 46 s).
--
-- 0019's `stello_search_grams` took `substr(run, i, 2)` for each position i of a
-- CJK run: substr counts characters from the run's start, so a run of n
-- characters cost n²/2 character steps, inside the INSERT of the record (its
-- `search_vector` is a STORED generated column that reads the grams), its locks
-- held: 30,000 characters 9.6 s, 60,000 characters 46 s, 300,000 (under the 1 MiB
-- record limit) many minutes. Now the run is split into its characters once
-- (`string_to_array(run, NULL)`) and each is joined to the next (`lead`): the same
-- text as before ("你好世界" -> 你好 好世 世界 界), so no stored vector changes and
-- nothing is rewritten; 300,000 characters take 0.3 s.
CREATE OR REPLACE FUNCTION stello_search_grams(content text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT coalesce(string_agg(g.gram, ' ' ORDER BY g.n, g.i), '')
FROM (
    SELECT r.n, c.i, c.ch || coalesce(lead(c.ch) OVER (PARTITION BY r.n ORDER BY c.i), '') AS gram
    FROM regexp_matches(content, '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]+', 'g')
         WITH ORDINALITY AS r(m, n)
    CROSS JOIN LATERAL unnest(string_to_array(r.m[1], NULL)) WITH ORDINALITY AS c(ch, i)
) AS g
$$;
