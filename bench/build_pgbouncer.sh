#!/usr/bin/env bash
# Build a PgBouncer 1.21+ (Debian 13's source package) for bench_pgbouncer.py on a
# machine whose Debian ships an older one (Debian 12: 1.18, no max_prepared_statements).
#   bash bench/build_pgbouncer.sh [PREFIX]   -> PREFIX/bin/pgbouncer (default /tmp/stello-pgbouncer)
# Needs root for the build dependencies; uses a private apt list, not the system's sources.
set -euo pipefail
PREFIX="${1:-/tmp/stello-pgbouncer}"
[ -x "$PREFIX/bin/pgbouncer" ] && { echo "$PREFIX/bin/pgbouncer"; exit 0; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends \
  gcc make pkgconf libevent-dev libssl-dev libc-ares-dev dpkg-dev >/dev/null 2>&1
mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/parts"
cat > "$WORK/apt/parts/trixie-src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
APT=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$WORK/apt/parts"
     -o "Dir::State::Lists=$WORK/apt/lists")
apt-get "${APT[@]}" update -qq >/dev/null 2>&1
(cd "$WORK" && apt-get "${APT[@]}" source -qq pgbouncer >/dev/null 2>&1)
SRC_DIR="$(find "$WORK" -maxdepth 1 -type d -name 'pgbouncer-*' | head -1)"
(cd "$SRC_DIR" && ./configure -q --prefix="$PREFIX" --without-systemd --without-pam >/dev/null \
  && make -s -j"$(nproc)" >/dev/null 2>&1 && make -s install >/dev/null 2>&1) || true
[ -x "$PREFIX/bin/pgbouncer" ] || { echo "build failed in $SRC_DIR" >&2; exit 1; }
echo "$PREFIX/bin/pgbouncer"
