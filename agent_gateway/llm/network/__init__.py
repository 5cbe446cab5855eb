"""The network providers: what talks HTTP to OpenAI-compatible and Anthropic servers.

- `openai_provider`, `anthropic_provider`: the requests, through each vendor's SDK;
- `openai_answers`, `anthropic_answers`: reading their answers (a body, a stream);
- `answers`: what an answer must be, whoever sent it (ids, stops, its size);
- `sdk`: what the two SDK-backed providers share;
- `sse`: a streamed answer's server-sent events, read of its bytes (no SDK's private decoder);
- `remote`: a provider's failure -> the kernel's errors, and the log line under an error id;
- `retries`: when a request is retried, a provider's Retry-After, the backoff;
- `error_bodies`: the body of a provider's error answer, read up to a bound.

`agent_gateway.llm.build_provider` imports them only when they are configured.
"""
