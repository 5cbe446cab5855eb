"""What a running service tells its operator: logs with the request id on every line (`logs`,
`log_every`), Prometheus metrics (`metrics`) and OpenTelemetry traces (`tracing`)."""
