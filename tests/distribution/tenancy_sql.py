"""Which tenant-table references of a SQL statement no ``space_id`` predicate pins.

The rule Citus needs to route a statement to one shard (docs/scaling.md): in
every SELECT, UPDATE and DELETE scope — each term of a recursive CTE, each
subquery — every reference to a distributed table is constrained by an
equality (``=``, ``= ANY``, ``IN``) on its ``space_id`` that is a top-level
conjunct of the scope's WHERE or of a JOIN's ON (an ``OR`` branch pins
nothing); an INSERT into one names the ``space_id`` column. Equality to
another table's ``space_id`` counts: that is a co-located join.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pglast import ast, parse_sql
from pglast.enums import A_Expr_Kind, BoolExprType

_EQUALITIES = {A_Expr_Kind.AEXPR_OP, A_Expr_Kind.AEXPR_OP_ANY, A_Expr_Kind.AEXPR_IN}


def unpinned(query: str, tables: frozenset[str]) -> list[str]:
    """The references (``table alias``) to `tables` in `query` that no space_id equality pins."""
    found: list[str] = []
    for raw in parse_sql(query):
        for node in _nodes(raw.stmt):
            found += _scope_gaps(node, tables)
    return found


def _nodes(node: Any) -> Iterator[ast.Node]:
    """`node` and every node below it."""
    if isinstance(node, ast.Node):
        yield node
        for name in node:
            yield from _nodes(getattr(node, name))
    elif isinstance(node, list | tuple):
        for item in node:
            yield from _nodes(item)


def _scope_gaps(node: ast.Node, tables: frozenset[str]) -> list[str]:
    """The unpinned references of one statement scope (nested scopes are visited on their own)."""
    if isinstance(node, ast.InsertStmt):
        target = node.relation
        columns = {c.name for c in node.cols or ()}
        if target is None or target.relname not in tables or "space_id" in columns:
            return []
        return [_name(target)]
    if isinstance(node, ast.SelectStmt):
        sources, where = list(node.fromClause or ()), node.whereClause
    elif isinstance(node, ast.UpdateStmt):
        sources, where = [node.relation, *(node.fromClause or ())], node.whereClause
    elif isinstance(node, ast.DeleteStmt):
        sources, where = [node.relation, *(node.usingClause or ())], node.whereClause
    else:
        return []
    refs: list[ast.RangeVar] = []
    conditions: list[Any] = [where]
    for source in sources:
        _flatten(source, refs, conditions)
    pinned = {q for condition in conditions for q in _pinned_qualifiers(condition)}
    return [
        _name(ref)
        for ref in refs
        if ref.relname in tables and _alias(ref) not in pinned and None not in pinned
    ]


def _flatten(source: Any, refs: list[ast.RangeVar], conditions: list[Any]) -> None:
    """Collect a FROM item's tables and its joins' ON conditions."""
    if isinstance(source, ast.RangeVar):
        refs.append(source)
    elif isinstance(source, ast.JoinExpr):
        _flatten(source.larg, refs, conditions)
        _flatten(source.rarg, refs, conditions)
        conditions.append(source.quals)


def _pinned_qualifiers(condition: Any) -> Iterator[str | None]:
    """Qualifiers (None = unqualified) of the space_id columns a condition's conjuncts equate."""
    if isinstance(condition, ast.BoolExpr):
        if condition.boolop == BoolExprType.AND_EXPR:
            for arg in condition.args or ():
                yield from _pinned_qualifiers(arg)
        return
    if isinstance(condition, ast.A_Expr) and condition.kind in _EQUALITIES:
        names = [n.sval for n in condition.name or () if isinstance(n, ast.String)]
        if names not in (["="], ["pg_catalog", "="]):  # OPERATOR(pg_catalog.=) in RI checks
            return
        for side in (condition.lexpr, condition.rexpr):
            if isinstance(side, ast.ColumnRef):
                fields = [f.sval for f in side.fields or () if isinstance(f, ast.String)]
                if fields and fields[-1] == "space_id":
                    yield fields[-2] if len(fields) > 1 else None


def _alias(ref: ast.RangeVar) -> str | None:
    return ref.alias.aliasname if ref.alias is not None else ref.relname


def _name(ref: ast.RangeVar) -> str:
    alias = ref.alias.aliasname if ref.alias is not None else None
    return f"{ref.relname}" if alias is None else f"{ref.relname} {alias}"
