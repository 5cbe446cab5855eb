"""Every SDK exception survives pickling, as multiprocessing, process pools and task queues
pass it (explore12 F10: ConfigurationError's keyword-only `setting` broke it)."""

from __future__ import annotations

import inspect
import pickle

from grpc.aio import AioRpcError, Metadata

from stello_client import exceptions
from stello_client.exceptions import ConfigurationError, RpcError, StelloClientError


def made_as_the_sdk_makes(cls: type[StelloClientError]) -> StelloClientError:
    """An error of `cls` as the SDK raises it (an RpcError with every attribute set)."""
    if cls is ConfigurationError:
        return ConfigurationError("no key anywhere", setting="key")
    if issubclass(cls, RpcError):
        cause = AioRpcError(cls.code, Metadata(), Metadata(), "the gateway's words")
        return cls(
            "the gateway's words",
            code=cls.code,
            reason="SOME_REASON",
            info={"session_id": "s"},
            retry_after_s=1.5,
            request_id="rid",
            method="Send",
            violations=[exceptions.FieldViolation("content", "empty")],
            cause=cause,
        )
    return cls("an error")


def test_every_sdk_exception_round_trips_through_pickle() -> None:
    """Each exception class the SDK defines comes back from pickle with its class, message
    and attributes (an RpcError came back with its message doubled, "ABORTED: ABORTED: ...")."""
    classes = [
        cls
        for _, cls in inspect.getmembers(exceptions, inspect.isclass)
        if issubclass(cls, StelloClientError)
    ]
    assert len(classes) > 40
    for cls in classes:
        error = made_as_the_sdk_makes(cls)
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is cls
        assert str(back) == str(error)
        kept = {k: v for k, v in vars(back).items() if k != "cause"}
        assert kept == {k: v for k, v in vars(error).items() if k != "cause"}
        if isinstance(error, RpcError):
            assert isinstance(back, RpcError) and back.cause is not None
            assert back.cause.code() == error.code
    assert pickle.loads(pickle.dumps(made_as_the_sdk_makes(ConfigurationError))).setting == "key"
