"""The database: the pool and transactions (`pool`), what its failures mean (`failures`), the
schema's migrations (`migrate`, `sql_script`), the embedded PostgreSQL (`embedded`), and work
that runs against it in rounds or must not be cut half-way (`maintenance`, `periodic`, `tasks`)."""
