"""The status an error travels as stays within gRPC's trailer limits whatever it quotes."""

from __future__ import annotations

import inspect

import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

import stello.error_tree
import stello.errors
from stello.common.v1 import common_pb2
from stello.errors import (
    MAX_DETAIL_BYTES,
    MAX_MESSAGE_BYTES,
    MAX_VIOLATIONS,
    Aborted,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    PreconditionViolation,
    Violations,
    cut,
    to_rpc_status,
)
from stello.validation import not_one_of

TRAILERS_MOST = 7 * 1024
"""Below gRPC's 8 KiB soft limit on a call's metadata, past which clients may drop it."""


def trailer_bytes(error: InvalidArgument | FailedPrecondition | Aborted) -> int:
    """What the status adds to the trailers as gRPC counts them against the limit (the
    values decoded): grpc-message and grpc-status-details-bin. A 5,000-character profile
    name made the latter 20,062 bytes ("value length 20062 vs. 16384")."""
    status = rpc_status.to_status(to_rpc_status(error))
    details = dict(status.trailing_metadata)["grpc-status-details-bin"]
    return len(status.details.encode()) + len(details)


class TestCut:
    def test_short_text_is_kept(self) -> None:
        assert cut("abc", 3) == "abc"

    def test_long_text_ends_in_an_ellipsis_within_the_bytes(self) -> None:
        """Cut at a character boundary: a three-byte character is never split."""
        cut_text = cut("日本語" * 100, 64)
        assert cut_text.endswith("…")
        assert len(cut_text.encode()) <= 64
        assert set(cut_text[:-1]) <= set("日本語")


class TestBounds:
    def test_many_long_violations(self) -> None:
        """1,000 violations with 10,000-character non-ASCII fields and descriptions: the
        first MAX_VIOLATIONS listed, cut, then how many more; the message cut too."""
        violations = [FieldViolation("字" * 10_000, "説" * 10_000) for _ in range(1_000)]
        error = InvalidArgument("invalid request: " + "説" * 100_000, violations)
        status = to_rpc_status(error)
        assert len(status.message.encode()) <= MAX_MESSAGE_BYTES
        assert trailer_bytes(error) < TRAILERS_MOST

    def test_a_long_subject_and_metadata(self) -> None:
        error = FailedPrecondition(
            "fork profile " + "p" * 50_000,
            reason="PROFILE_NOT_FOUND",
            metadata={"subject": "profile/" + "p" * 50_000, "other": "é" * 50_000},
        )
        assert trailer_bytes(error) < TRAILERS_MOST

    def test_many_aborted_violations(self) -> None:
        violations = [PreconditionViolation("T", "s" * 5_000, "d" * 5_000)] * 500
        assert trailer_bytes(Aborted("busy", violations=violations)) < TRAILERS_MOST

    def test_a_lone_violation_lists_every_value_its_field_may_hold(self) -> None:
        """One violation's description may take the bytes ten would share: WatchSpace's
        list of the event kinds (362 bytes) reaches the client whole, "got 99" included
        (it was cut at 200 bytes, mid-word, before most kinds and what was given)."""
        description = not_one_of(common_pb2.EventKind, 99)
        assert len(description.encode()) > MAX_DETAIL_BYTES
        status = to_rpc_status(InvalidArgument.field("kinds[0]", description))
        request = error_details_pb2.BadRequest()
        assert status.details[0].Unpack(request)
        assert [(v.field, v.description) for v in request.field_violations] == [
            ("kinds[0]", description)
        ]

    def test_many_violations_share_the_bytes(self) -> None:
        """Ten long descriptions are each cut to MAX_DETAIL_BYTES, as before; five to twice."""
        for count, most in ((MAX_VIOLATIONS, MAX_DETAIL_BYTES), (5, 2 * MAX_DETAIL_BYTES)):
            violations = [FieldViolation(f"f{i}", "d" * 5_000) for i in range(count)]
            request = error_details_pb2.BadRequest()
            assert to_rpc_status(InvalidArgument.of(violations)).details[0].Unpack(request)
            assert [len(v.description.encode()) for v in request.field_violations] == [most] * count

    def test_short_descriptions_leave_their_bytes_to_a_long_one(self) -> None:
        """Nine short violations beside the list of the event kinds leave it whole: the
        bytes are shared out, the short ones kept, the rest to the long one."""
        kinds = not_one_of(common_pb2.EventKind, 99)
        violations = [FieldViolation(f"f{i}", "is required") for i in range(9)]
        violations.append(FieldViolation("kinds[0]", kinds))
        request = error_details_pb2.BadRequest()
        assert to_rpc_status(InvalidArgument.of(violations)).details[0].Unpack(request)
        assert [v.description for v in request.field_violations] == ["is required"] * 9 + [kinds]

    def test_violations_past_the_bound_are_counted(self) -> None:
        violations = [FieldViolation(f"f{i}", "bad") for i in range(MAX_VIOLATIONS + 5)]
        status = to_rpc_status(InvalidArgument("invalid request", violations))
        assert status.message == "invalid request"
        assert "and 5 more violations not listed" in str(status.details[0].value, "utf-8")


class TestOneForm:
    def test_every_refusal_of_fields_says_field_colon_description(self) -> None:
        """One violation or many, collected or parsed, the message is `field: why; ...`
        (collected ones began "invalid request: ", the others did not: explore6 F10)."""
        collected = Violations()
        collected.add("label", "too long")
        collected.add("limit", "must be at most 1000")
        with pytest.raises(InvalidArgument) as caught:
            collected.raise_if_any()
        assert str(caught.value) == "label: too long; limit: must be at most 1000"
        assert str(InvalidArgument.field("label", "too long")) == "label: too long"
        listed = InvalidArgument.fields([("label", "too long"), ("limit", "must be at most 1000")])
        assert str(listed) == str(caught.value)


class TestOneImport:
    def test_errors_re_exports_the_tree(self) -> None:
        """`stello.errors` names every public class and function `stello.error_tree` defines,
        so `from stello.errors import X` stays the one import the code base uses."""
        tree = stello.error_tree
        for member, value in inspect.getmembers(tree):
            if getattr(value, "__module__", None) == tree.__name__ and not member.startswith("_"):
                assert member in stello.errors.__all__, member
                assert getattr(stello.errors, member) is value
