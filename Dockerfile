# One image for every Stello service; the command picks the service:
#   python -m storage_service | python -m tree_service | python -m agent_gateway | stello migrate
# No embedded PostgreSQL here (no `stello[local]`): set STELLO_DATABASE_URL.
# STELLO_STORAGE_WORKERS / STELLO_TREE_WORKERS / STELLO_GATEWAY_WORKERS (default 1): worker
# processes serving the container's port (the process started supervises them).
# The dependencies come from the pinned runtime lock (which includes the `tracing` extra,
# off until STELLO_OTEL=1, and the `console` extra: `python -m stello_console --host 0.0.0.0
# --gateway gateway:50063 --allowed-host NAME` serves the web console on 50064). CI runs
# these RUN and CMD lines in a fresh virtual environment (tests/deploy/test_image.py), since
# no Docker engine is available there.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

# uv (pinned, as scripts/test pins it) installs the lock: the same packages as pip, in
# seconds instead of minutes. --compile-bytecode: the image runs with
# PYTHONDONTWRITEBYTECODE=1 as a user who cannot write site-packages, so a module left
# uncompiled here would be compiled again in memory at every container start.
COPY requirements-runtime.lock ./
RUN pip install --no-cache-dir uv==0.13.8 \
    && uv pip install --system --no-cache --compile-bytecode -r requirements-runtime.lock

COPY pyproject.toml README.md ./
COPY stello ./stello
COPY storage_service ./storage_service
COPY tree_service ./tree_service
COPY agent_gateway ./agent_gateway
COPY stello_client ./stello_client
COPY stello_console ./stello_console
COPY stello_cli ./stello_cli
RUN uv pip install --system --no-cache --compile-bytecode --no-deps . && useradd --system --uid 10001 stello

USER stello
ENV STELLO_STORAGE_HOST=0.0.0.0 STELLO_TREE_HOST=0.0.0.0 STELLO_GATEWAY_HOST=0.0.0.0 \
    STELLO_LOG_FORMAT=json
EXPOSE 50061 50062 50063
CMD ["python", "-m", "agent_gateway"]
