# One image for every Stello service; the command picks the service:
#   python -m storage_service | python -m tree_service | python -m agent_gateway | stello migrate
# No embedded PostgreSQL here: set STELLO_DATABASE_URL.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

COPY requirements-runtime.lock ./
RUN pip install --no-cache-dir -r requirements-runtime.lock

COPY pyproject.toml README.md ./
COPY stello ./stello
COPY storage_service ./storage_service
COPY tree_service ./tree_service
COPY agent_gateway ./agent_gateway
RUN pip install --no-cache-dir --no-deps . && useradd --system --uid 10001 stello

USER stello
ENV STELLO_STORAGE_HOST=0.0.0.0 STELLO_TREE_HOST=0.0.0.0 STELLO_GATEWAY_HOST=0.0.0.0
EXPOSE 50061 50062 50063
CMD ["python", "-m", "agent_gateway"]
