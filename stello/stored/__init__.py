"""What every service writes alike in the one schema: the space's event outbox, request_id
replies, and what erasure does to those replies."""
