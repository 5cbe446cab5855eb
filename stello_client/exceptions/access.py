"""The key refused: UNAUTHENTICATED (missing, unknown or revoked) and PERMISSION_DENIED
(an admin RPC with a tenant key)."""

from __future__ import annotations

import grpc

from stello_client.exceptions.base import RpcError


class Unauthenticated(RpcError):
    """Raised when the key is missing, unknown or revoked."""

    code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(RpcError):
    """Raised when the key may not make the call (an admin RPC with a tenant key)."""

    code = grpc.StatusCode.PERMISSION_DENIED
