#!/usr/bin/env bash
# A manager (with the HTTP gateway) and N nodes on loopback, for trying Ember as a cluster on one
# machine. Logs and pid files go under one folder ($EMBER_CLUSTER_DIR, default ./local-cluster).
#
#   deploy/local-cluster.sh start N [--repository DIR] [--http HOST:PORT] [--listen HOST:PORT] [-- node args...]
#   deploy/local-cluster.sh status
#   deploy/local-cluster.sh stop
#
# Defaults: repository ./models, HTTP 127.0.0.1:8000, manager 127.0.0.1:7070, each node a simulated
# device of 4 GiB and a 4 GiB cache. Extra arguments after `--` go to every `ember node`.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${EMBER_CLUSTER_DIR:-local-cluster}
EMBER=${EMBER:-build/bin/ember}

has_opt() { local o; for o in "${@:2}"; do [[ "$o" == "$1" || "$o" == "$1="* ]] && return 0; done; return 1; }

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

wait_ready() {  # url, seconds
  local deadline=$((SECONDS + $2))
  until curl -sf "$1/v2/health/ready" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then echo "local-cluster: $1 not ready after $2 s (see $DIR/manager.log)" >&2; return 1; fi
    sleep 0.2
  done
}

start() {
  local n=${1:-}; shift || true
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] || usage
  local repo=models http=127.0.0.1:8000 listen=127.0.0.1:7070 node_args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --repository) repo=$2; shift 2 ;;
      --http) http=$2; shift 2 ;;
      --listen) listen=$2; shift 2 ;;
      --) shift; node_args=("$@"); break ;;
      *) usage ;;
    esac
  done
  [ -x "$EMBER" ] || { echo "local-cluster: $EMBER not built (run deploy/build.sh)" >&2; exit 1; }
  if [ -f "$DIR/manager.pid" ] && kill -0 "$(cat "$DIR/manager.pid")" 2>/dev/null; then
    echo "local-cluster: already running (deploy/local-cluster.sh stop first)" >&2; exit 1
  fi
  mkdir -p "$DIR" "$repo"
  "$EMBER" manager --listen "$listen" --repository "$repo" --http "$http" >"$DIR/manager.log" 2>&1 &
  echo $! >"$DIR/manager.pid"
  wait_ready "http://$http" 20
  local defaults=()  # defaults only for what the node arguments leave out (CLI11 refuses an option twice)
  has_opt --device-memory "${node_args[@]}" || defaults+=(--device-memory 4GiB)
  has_opt --cache "${node_args[@]}" || defaults+=(--cache 4GiB)
  for i in $(seq 1 "$n"); do
    "$EMBER" node --manager "$listen" --name "node$i" "${defaults[@]}" "${node_args[@]}" \
      >"$DIR/node$i.log" 2>&1 &
    echo $! >"$DIR/node$i.pid"
  done
  # Returns once every node joined, so that a load right after `start` sees them all.
  local deadline=$((SECONDS + 60)) i
  for i in $(seq 1 "$n"); do
    until grep -q "joined the cluster" "$DIR/node$i.log" 2>/dev/null; do
      if [ $SECONDS -ge $deadline ] || ! kill -0 "$(cat "$DIR/node$i.pid")" 2>/dev/null; then
        echo "local-cluster: node$i did not join (see $DIR/node$i.log)" >&2; return 1
      fi
      sleep 0.2
    done
  done
  echo "local-cluster: manager $listen, HTTP http://$http, $n node(s); logs and pids in $DIR/"
}

status() {
  for f in "$DIR"/*.pid; do
    [ -e "$f" ] || { echo "local-cluster: not running"; return; }
    local name; name=$(basename "$f" .pid)
    if kill -0 "$(cat "$f")" 2>/dev/null; then echo "$name: running (pid $(cat "$f"))"; else echo "$name: stopped"; fi
  done
}

stop() {
  for f in "$DIR"/node*.pid "$DIR"/manager.pid; do
    [ -e "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true
  done
  sleep 1
  for f in "$DIR"/node*.pid "$DIR"/manager.pid; do
    [ -e "$f" ] || continue
    kill -9 "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
  echo "local-cluster: stopped"
}

case "${1:-}" in
  start) shift; start "$@" ;;
  status) status ;;
  stop) stop ;;
  *) usage ;;
esac
