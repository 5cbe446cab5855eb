"""OpenTelemetry tracing of every RPC, across gateway → storage/tree (extra `stello[tracing]`).

Off unless ``STELLO_OTEL=1`` or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set. When on, `setup_tracing` installs
a tracer provider exporting over OTLP/gRPC (the standard ``OTEL_EXPORTER_OTLP_*``
variables configure it) and instruments ``grpc.aio``: every server created
afterwards opens a span per call, and every channel created afterwards (the
gateway's channels to storage and tree included) carries the trace context, so
one Send shows as one trace over the three services. Call it before building
the apps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from stello.errors import FailedPrecondition

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter


class TracingSettings(BaseSettings):
    """Whether and how to trace (``STELLO_OTEL``, ``OTEL_*``)."""

    model_config = SettingsConfigDict(
        allow_inf_nan=False,  # inf seconds would hang a shutdown or a loop: a bound is finite
        env_prefix="STELLO_",
        env_ignore_empty=True,
        extra="ignore",
    )

    otel: bool = Field(
        default=False, description="1 = trace every RPC with OpenTelemetry (stello[tracing])."
    )
    otlp_endpoint: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"
        ),
        description="OTLP/gRPC collector, e.g. http://collector:4317; set = tracing on.",
    )
    service_name: str | None = Field(
        default=None,
        validation_alias="OTEL_SERVICE_NAME",
        description="service.name of the spans (default: stello-<service>).",
    )

    @property
    def enabled(self) -> bool:
        """True when tracing was asked for."""
        return self.otel or bool(self.otlp_endpoint)


_installed = False


def installed() -> bool:
    """Whether `setup_tracing` instrumented grpc in this process (`stello up` then sends the
    gateway's calls over loopback gRPC, so every hop is a span)."""
    return _installed


def setup_tracing(
    settings: TracingSettings, service: str, exporter: SpanExporter | None = None
) -> TracerProvider | None:
    """Install tracing when enabled (or when an `exporter` is given, as tests do).

    Args:
        settings: the tracing settings.
        service: the default ``service.name`` (``OTEL_SERVICE_NAME`` wins).
        exporter: where spans go; default OTLP over gRPC, batched. A given one
            gets every span as soon as it ends.

    Returns:
        The installed provider (flush it with ``force_flush``), or None when off.

    Raises:
        FailedPrecondition: tracing is on but the `tracing` extra is not installed.
    """
    if not settings.enabled and exporter is None:
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.instrumentation.grpc import (
            GrpcAioInstrumentorClient,
            GrpcAioInstrumentorServer,
        )
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError as exc:
        raise FailedPrecondition(
            "tracing is on (STELLO_OTEL or OTEL_EXPORTER_OTLP_ENDPOINT) but OpenTelemetry is "
            "not installed: pip install 'stello[tracing]'"
        ) from exc
    provider = TracerProvider(
        resource=Resource.create({"service.name": settings.service_name or service})
    )
    processor: Any
    if exporter is None:
        processor = BatchSpanProcessor(_otlp_exporter())
    else:
        processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    server: Any = GrpcAioInstrumentorServer()  # type: ignore[no-untyped-call]
    client: Any = GrpcAioInstrumentorClient()  # type: ignore[no-untyped-call]
    server.instrument(tracer_provider=provider)
    client.instrument(tracer_provider=provider)
    global _installed
    _installed = True
    return provider


def _otlp_exporter() -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    exporter: SpanExporter = OTLPSpanExporter()  # reads OTEL_EXPORTER_OTLP_* itself
    return exporter
