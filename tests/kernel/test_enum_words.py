"""`stello.enum_words`: the one wording of a value outside an enum, the services' and the
SDK's, in a module the SDK can import without grpc."""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

import stello.enum_words
from stello.common.v1 import common_pb2
from stello.validation import not_one_of
from stello_client import types


class TestOneWording:
    def test_the_module_imports_only_the_standard_library(self) -> None:
        """Nothing but the standard library: the SDK imports it, and `stello --help` loads
        the SDK's modules without grpc (tests/cli/test_startup.py)."""
        tree = ast.parse(Path(stello.enum_words.__file__).read_text())
        imported = {
            alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        } | {
            (node.module or "").split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
        }
        assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)

    @pytest.mark.parametrize(
        ("check", "enum", "what"),
        [
            pytest.param(types.fork_context, common_pb2.ForkContext, "context", id="context"),
            pytest.param(types.session_status, common_pb2.SessionStatus, "status", id="status"),
            pytest.param(types.record_role, common_pb2.RecordRole, "role", id="role"),
            pytest.param(types.search_order, common_pb2.SearchOrder, "order", id="order"),
            pytest.param(types.busy_policy, common_pb2.BusyPolicy, "busy", id="busy"),
            pytest.param(types.event_kind, common_pb2.EventKind, "kind", id="kind"),
        ],
    )
    def test_the_sdk_refuses_in_the_services_words(
        self, check: Callable[[Any], object], enum: EnumTypeWrapper, what: str
    ) -> None:
        """The SDK's refusal of a name or number an enum lacks is the gateway's sentence,
        the value shown as given ("got 'bogus'", "got 99")."""
        for value in ("bogus", 99):
            with pytest.raises(ValueError) as refused:
                check(value)
            assert str(refused.value) == f"{what}: {not_one_of(enum, repr(value))}"
