#!/bin/sh
# Writes the one user's password where pgbouncer.ini's auth_file says, then runs PgBouncer.
# PGBOUNCER_USER (default stello) and PGBOUNCER_PASSWORD come from docker-compose.yml.
set -eu
: "${PGBOUNCER_PASSWORD:?set PGBOUNCER_PASSWORD}"
umask 077
printf '"%s" "%s"\n' "${PGBOUNCER_USER:-stello}" "$PGBOUNCER_PASSWORD" > /tmp/pgbouncer-users.txt
exec pgbouncer "${PGBOUNCER_CONFIG:-/etc/pgbouncer/pgbouncer.ini}"
