"""stello migrate sends a file's statements one at a time: the split is psql's (pglast's)."""

from __future__ import annotations

import pytest
from pglast import parse_sql, split
from pglast.parser import fingerprint

from stello.db.migrate import Migration, load_migrations
from stello.db.sql_script import split_statements


class TestSplit:
    @pytest.mark.parametrize("migration", load_migrations(), ids=lambda m: m.version)
    def test_every_migration_splits_as_postgres_parses_it(self, migration: Migration) -> None:
        """Each file yields the statements PostgreSQL's parser finds, one whole statement each."""
        mine = split_statements(migration.sql)
        assert [fingerprint(s) for s in mine] == [fingerprint(s) for s in split(migration.sql)]
        assert all(len(parse_sql(s)) == 1 for s in mine)

    def test_semicolons_that_end_nothing(self) -> None:
        """Semicolons in comments, strings, identifiers, dollar quotes and SQL bodies stay."""
        sql = """
        -- a comment; with a semicolon
        SELECT 'a;b', E'c\\';d', "e;f" FROM t; /* block; /* nested; */ still; */
        DO $body$ BEGIN PERFORM 1; END $body$;
        CREATE OR REPLACE FUNCTION f(x int) RETURNS int LANGUAGE sql
        BEGIN ATOMIC
            SELECT CASE WHEN x > 0 THEN 1 ELSE 2 END;
            SELECT $1;
        END;
        SELECT 1
        """
        statements = split_statements(sql)
        assert len(statements) == 4
        assert [fingerprint(s) for s in statements] == [fingerprint(s) for s in split(sql)]

    def test_blank_and_comment_only_parts_are_left_out(self) -> None:
        """Nothing but comments and blanks after the last semicolon is no statement."""
        assert split_statements("SELECT 1;\n-- the end\n;\n") == ["SELECT 1"]
