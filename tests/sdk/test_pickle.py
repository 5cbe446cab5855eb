"""Every SDK exception survives pickling, as multiprocessing, process pools and task queues
pass it (explore12 F10: ConfigurationError's keyword-only `setting` broke it)."""

from __future__ import annotations

import inspect
import pickle

import pytest
from grpc.aio import AioRpcError, Metadata

from stello_client import AsyncClient, Client, exceptions
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


NOT_PICKLED = r"^cannot pickle a stello_client (Async)?Client: .*make the client in each process"


async def test_a_client_refuses_pickle_saying_what_to_do(client: AsyncClient) -> None:
    """A client holds its channel (and a sync one its loop's thread): pickled, as
    multiprocessing or a task queue passes arguments, it is a TypeError saying to make a
    client in each process, before and after its first call, sync or not. It was
    AttributeError "Can't pickle local object 'WeakSet.__init__.<locals>._remove'" once
    used (an unused AsyncClient pickled, its API key in the pickle) (sdk8)."""
    unused = AsyncClient("127.0.0.1:1", "stello_k_secret", plaintext=True)
    await client.who_am_i()
    for each in (unused, client, client.using(space=await client.space_id())):
        with pytest.raises(TypeError, match=NOT_PICKLED):
            pickle.dumps(each)
    with Client("127.0.0.1:1", "stello_k_secret", plaintext=True) as sync:
        with pytest.raises(TypeError, match=NOT_PICKLED):
            pickle.dumps(sync)
