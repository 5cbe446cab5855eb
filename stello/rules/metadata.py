"""Session metadata limits (issue #37; documented on common.v1 SessionFilter).

One place for the rule every writer checks before writing: the gateway on the
request it was given, the tree on the request and again on the result it
would store (a merge, a fork copying its source's pairs). A violation names
the client's own field: `metadata["key"]`, `set["key"]`, `remove[2]`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

from stello.errors import Violations

MAX_PAIRS = 16
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 512
MAX_TOTAL_BYTES = 4096
KEY_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,63}")
KEY_RULE = "must match ^[A-Za-z][A-Za-z0-9_.:-]{0,63}$"


def key_problem(key: str) -> str | None:
    """Why `key` is not a valid metadata key, or None."""
    if KEY_PATTERN.fullmatch(key) is None:
        return f"{KEY_RULE}, got {key[:80]!r}"
    return None


def check_pairs(pairs: Mapping[str, str], violations: Violations, name: str) -> None:
    """Each key and value of `pairs` against the limits, and the pairs as a whole."""
    for key, value in pairs.items():
        problem = key_problem(key)
        if problem is not None:
            violations.add(field(name, key), f"key {problem}")
        elif len(value) > MAX_VALUE_CHARS:
            violations.add(
                field(name, key),
                f"value must be at most {MAX_VALUE_CHARS} characters, got {len(value)}",
            )
    check_size(pairs, violations, name)


def field(name: str, key: str) -> str:
    """The field path of one key of a map field: `metadata["owner"]`."""
    return f"{name}[{json.dumps(key[:80], ensure_ascii=False)}]"


def check_size(
    pairs: Mapping[str, str], violations: Violations, name: str, *, merged_with: str = ""
) -> None:
    """The count and total size of a session's pairs (what it would hold). `merged_with`
    names what `pairs` joined the request's with (the session's own pairs, the source's),
    so the message says the sum is over, not the request alone."""
    if merged_with:
        subject = f"with {merged_with} the session would hold"
        if len(pairs) > MAX_PAIRS:
            violations.add(name, f"{subject} {len(pairs)} pairs, over the {MAX_PAIRS} allowed")
        elif (size := total_bytes(pairs)) > MAX_TOTAL_BYTES:
            violations.add(name, f"{subject} {size} bytes, over the {MAX_TOTAL_BYTES} allowed")
        return
    if len(pairs) > MAX_PAIRS:
        violations.add(name, f"must hold at most {MAX_PAIRS} pairs, got {len(pairs)}")
        return
    size = total_bytes(pairs)
    if size > MAX_TOTAL_BYTES:
        violations.add(
            name, f"keys and values must be at most {MAX_TOTAL_BYTES} bytes in all, got {size}"
        )


def check_keys(keys: Iterable[str], violations: Violations, name: str) -> None:
    """Keys to remove: each must be a valid key."""
    for index, key in enumerate(keys):
        problem = key_problem(key)
        if problem is not None:
            violations.add(f"{name}[{index}]", f"key {problem}")


def total_bytes(pairs: Mapping[str, str]) -> int:
    """Keys plus values, in UTF-8 bytes."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in pairs.items())


def merged(
    current: Mapping[str, str], set_: Mapping[str, str], remove: Iterable[str]
) -> dict[str, str]:
    """What a session holds after `set_` is written and `remove` removed."""
    result = dict(current)
    result.update(set_)
    for key in remove:
        result.pop(key, None)
    return result
