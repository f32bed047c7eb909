#!/usr/bin/env bash
# A private PostgreSQL cluster for the tests: Debian's postgresql-15 server binaries, a data
# directory of its own, a superuser `tmcra` with a password (scram-sha-256 on every connection,
# local or TCP), listening on 127.0.0.1 at a free port and on a Unix socket in DIR/sock.
# The server refuses to run as root, so as root the cluster belongs to `nobody`.
#
#   pg_cluster.sh start DIR     initdb into DIR/data (afresh), start, write DIR/env
#   pg_cluster.sh stop DIR      stop it (fast shutdown); nothing else is removed
#   pg_cluster.sh restart DIR   pg_ctl restart (the tests' "PostgreSQL restarted under memd")
#
# DIR/env holds shell assignments the tests read: TMCRA_PG_PORT, TMCRA_PG_SOCKET (the socket
# directory), TMCRA_PG_USER, TMCRA_PG_PASSWORD_FILE (0600, the password alone) and
# TMCRA_PG_BIN (the server's bin directory, for pg_ctl).
set -euo pipefail

mode="${1:-}"
dir="${2:-}"
if [ -z "$mode" ] || [ -z "$dir" ]; then
  echo "usage: pg_cluster.sh start|stop|restart DIR" >&2
  exit 2
fi

bin=""
for candidate in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
  if [ -x "$candidate/initdb" ]; then bin="$candidate"; break; fi
done
if [ -z "$bin" ]; then
  echo "pg_cluster: no PostgreSQL server binaries (install postgresql-15)" >&2
  exit 1
fi

# Runs a server binary as the cluster's owner.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u nobody -- "$@"
  else
    "$@"
  fi
}

port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
  as_owner "$bin/pg_ctl" -D "$dir/data" stop -m immediate >/dev/null 2>&1 || true
  rm -rf "$dir"
  mkdir -p "$dir/sock"
  chmod 0755 "$dir"   # the socket directory must be reachable; the password files are not
  # The superuser's password: readable by the cluster's owner for initdb, then only by the user
  # running the tests (password.client); the owner's copy is removed after initdb.
  (umask 077 && openssl rand -hex 16 > "$dir/password")
  if [ "$(id -u)" -eq 0 ]; then chown -R nobody:nogroup "$dir"; fi
  as_owner "$bin/initdb" -D "$dir/data" -U tmcra --pwfile="$dir/password" \
    --auth=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  local port
  for port in $(seq $((25432 + RANDOM % 2000)) 1 29999); do
    port_free "$port" && break
  done
  cat >> "$dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir/sock'
max_connections = 200
fsync = on
shared_buffers = 128MB
log_min_messages = warning
EOF
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
  # The tests read the password from a file of their own user's, 0600.
  (umask 077 && cp "$dir/password" "$dir/password.client")
  chown "$(id -u):$(id -g)" "$dir/password.client"
  chmod 0600 "$dir/password.client"
  rm -f "$dir/password"
  cat > "$dir/env" <<EOF
TMCRA_PG_PORT=$port
TMCRA_PG_SOCKET=$dir/sock
TMCRA_PG_USER=tmcra
TMCRA_PG_PASSWORD_FILE=$dir/password.client
TMCRA_PG_BIN=$bin
EOF
  echo "pg_cluster: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port and $dir/sock"
}

case "$mode" in
  start) start ;;
  stop) as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true ;;
  restart) as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m fast -w restart >/dev/null ;;
  *) echo "usage: pg_cluster.sh start|stop|restart DIR" >&2; exit 2 ;;
esac
