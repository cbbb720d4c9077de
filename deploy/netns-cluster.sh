#!/usr/bin/env bash
# An emulated multi-host cluster on one machine (needs root): K+1 network namespaces ember-h0..ember-hK
# on a bridge, the manager (with the HTTP gateway) in ember-h0 and one `ember node` in each other one.
#
#   deploy/netns-cluster.sh up K [--rate 1gbit] [--repository-rate R] [--delay 0ms] [--mtu 1500] [--config FILE]
#                                [--host-args I "ARGS"]... [--repository DIR] [--dir STATE_DIR] [-- node args...]
#   deploy/netns-cluster.sh net K [--rate R] [--repository-rate R] [--delay D] [--mtu M]
#                                 only the network of `up` (namespaces, bridge, links), no ember: for
#                                 processes started otherwise (deploy/cluster.sh over sshd in each host)
#   deploy/netns-cluster.sh status [--dir STATE_DIR]
#   deploy/netns-cluster.sh pids [--dir STATE_DIR]     "name pid" lines: manager, h1 .. hK
#   deploy/netns-cluster.sh exec I CMD...              run CMD inside host I's namespace (ember-hI)
#   deploy/netns-cluster.sh down [--dir STATE_DIR]     stop everything and delete the network (idempotent)
#
# Network: bridge ember-br0 10.231.0.254/24 in the root namespace; host I has eth0 10.231.0.(I+1)/24.
# Manager 10.231.0.1:7070, HTTP http://10.231.0.1:8000 (reachable from the root namespace too).
# --rate limits every host link in both directions (tc tbf); --repository-rate gives the manager's
# host (the model repository) another rate, e.g. a storage service's aggregate bandwidth; --delay
# adds that much one-way delay to each direction of each host link (tc netem, which not every kernel
# has), so host to host it is twice that. --mtu sets every link's MTU (9000: jumbo frames, as data-center networks carry bulk data).
# --config FILE goes to the manager and every node (e.g. transfer.transport: ucx); --host-args adds
# ARGS (split on spaces) to host I's node only (fault seams in tests). Logs and pid
# files go under STATE_DIR (default ./netns-cluster, or $EMBER_NETNS_DIR). $EMBER is the binary
# (default build/bin/ember). Defaults: repository ./models; each node a simulated device of 4 GiB
# and a 4 GiB cache (--device-memory / --cache after `--` replace them). Default paths are in
# the repository, given ones relative to the current directory.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${EMBER_NETNS_DIR:-$ROOT/netns-cluster}
EMBER=${EMBER:-$ROOT/build/bin/ember}
NET=10.231.0 BRIDGE=ember-br0 MANAGER=10.231.0.1:7070 HTTP=10.231.0.1:8000

usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
die() { echo "netns-cluster: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, veth, bridge, tc): run with sudo"; }
namespaces() { ip netns list 2>/dev/null | awk '$1 ~ /^ember-h[0-9]+$/ {print $1}' | sort -V; }
alive() { local s; s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1); [ -n "$s" ] && [ "$s" != Z ]; }
has_opt() { local o; for o in "${@:2}"; do [[ "$o" == "$1" || "$o" == "$1="* ]] && return 0; done; return 1; }
is_ember() { [ "$(basename "$(readlink "/proc/$1/exe" 2>/dev/null)")" = "$(basename "$EMBER")" ]; }
ready() { curl -sf --noproxy '*' --max-time 2 "http://$HTTP/v2/health/ready" >/dev/null 2>&1; }
joined() { curl -sf --noproxy '*' --max-time 2 "http://$HTTP/metrics" 2>/dev/null | grep -c '^ember_replicas{node=' || true; }

# bit/s of a tc rate: 1gbit, 100mbit, 500kbit, 125mbps (bytes), 1000000 (bit/s).
rate_bits() {
  awk -v r="$1" 'BEGIN { if (!match(r, /^[0-9]+(\.[0-9]+)?/)) exit 1
    n = substr(r, 1, RLENGTH); u = tolower(substr(r, RLENGTH + 1))
    m["bit"] = 1; m[""] = 1; m["kbit"] = 1e3; m["mbit"] = 1e6; m["gbit"] = 1e9; m["tbit"] = 1e12
    m["bps"] = 8; m["kbps"] = 8e3; m["mbps"] = 8e6; m["gbps"] = 8e9
    if (!(u in m) || n * m[u] < 1e5) exit 1; printf "%.0f\n", n * m[u] }'
}

# shape NS DEV RATE DELAY: egress qdiscs of one side of a link ("" NS = the root namespace).
# tbf: burst = 2 ms at the rate (at least 64 KiB, one TSO/GSO super-packet, so tbf never has to split
# one); queue (limit) = burst + 10 ms at the rate, the usual size of a switch port's buffer.
# netem holds the delayed packets first (a limit far above what the delay keeps in flight); tbf,
# its child, then paces them.
shape() {
  local ns=$1 dev=$2 rate=$3 delay=$4 parent=(root) bits burst limit err
  if [ -n "$delay" ]; then
    err=$(tc ${ns:+-n "$ns"} qdisc add dev "$dev" root handle 1: netem delay "$delay" limit 100000 2>&1) ||
      die "--delay needs the netem qdisc (CONFIG_NET_SCH_NETEM, module sch_netem); tc says: $err"
    parent=(parent 1:1)
  fi
  [ -n "$rate" ] || return 0
  bits=$(rate_bits "$rate")
  burst=$((bits / 8 / 500)); [ "$burst" -ge 65536 ] || burst=65536
  limit=$((burst + bits / 8 / 100))
  tc ${ns:+-n "$ns"} qdisc add dev "$dev" "${parent[@]}" handle 10: tbf rate "$rate" burst "$burst" limit "$limit"
}

# make_net K RATE REPOSITORY_RATE DELAY MTU: namespaces ember-h0..ember-hK on the bridge, links shaped.
make_net() {
  local k=$1 rate=$2 repo_rate=$3 delay=$4 mtu=$5 err
  err=$(ip netns add ember-h0 2>&1) || die "'ip netns add' is not permitted here ($err); network namespaces are needed"
  ip link add "$BRIDGE" type bridge
  ip addr add "$NET.254/24" dev "$BRIDGE"
  ip link set "$BRIDGE" mtu "$mtu" up
  for i in $(seq 0 "$k"); do
    local ns=ember-h$i
    [ "$i" -eq 0 ] || ip netns add "$ns"
    ip link add "ember-v$i" type veth peer name eth0 netns "$ns"
    ip link set "ember-v$i" mtu "$mtu" master "$BRIDGE" up
    ip -n "$ns" link set eth0 mtu "$mtu"
    ip -n "$ns" addr add "$NET.$((i + 1))/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    local link=$rate
    [ "$i" -ne 0 ] || [ -z "$repo_rate" ] || link=$repo_rate
    shape "$ns" eth0 "$link" "$delay"
    shape "" "ember-v$i" "$link" "$delay"
  done
  ip link set "$BRIDGE" mtu "$mtu"  # a bridge takes its ports' smallest MTU; say it explicitly
}

# Checks (and normalizes) up's and net's $rate, $repo_rate, $delay and $mtu.
check_net_options() {
  [ -z "$rate" ] || rate_bits "$rate" >/dev/null || die "--rate $rate: expected e.g. 1gbit, 100mbit (at least 100kbit)"
  [ -z "$repo_rate" ] || rate_bits "$repo_rate" >/dev/null || die "--repository-rate $repo_rate: expected e.g. 10gbit"
  [[ -z "$delay" || "$delay" =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] || die "--delay $delay: expected e.g. 5ms"
  [[ "$delay" =~ ^0+(\.0+)?(us|ms|s)$ ]] && delay=""
  [[ "$mtu" =~ ^[0-9]+$ ]] && [ "$mtu" -ge 576 ] && [ "$mtu" -le 65535 ] || die "--mtu $mtu: expected 576..65535"
}

up_exit() {  # the EXIT trap while `up` runs: undo everything when it fails
  local rc=$?
  trap - EXIT
  if [ $rc -ne 0 ]; then
    echo "netns-cluster: up failed; tearing down (logs in $DIR/)" >&2
    down >/dev/null 2>&1 || true
  fi
  exit $rc
}

up() {
  local k=${1:-}; shift || true
  [[ "$k" =~ ^[0-9]+$ ]] && [ "$k" -ge 1 ] && [ "$k" -le 200 ] || usage
  local rate="" repo_rate="" delay="" mtu=1500 repo=$ROOT/models node_args=() defaults=() common=() f extra
  local -A host_args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --rate) rate=${2:?}; shift 2 ;;
      --repository-rate) repo_rate=${2:?}; shift 2 ;;
      --delay) delay=${2:?}; shift 2 ;;
      --mtu) mtu=${2:?}; shift 2 ;;
      --config) common=(--config "$(readlink -f "${2:?}")"); shift 2 ;;
      --host-args) [[ "${2:?}" =~ ^[0-9]+$ ]] || usage; host_args[$2]=${3?}; shift 3 ;;
      --repository) repo=${2:?}; shift 2 ;;
      --dir) DIR=${2:?}; shift 2 ;;
      --) shift; node_args=("$@"); break ;;
      *) usage ;;
    esac
  done
  need_root
  for f in ip tc curl; do command -v "$f" >/dev/null || die "needs $f (apt install iproute2 curl)"; done
  check_net_options
  [ -x "$EMBER" ] || die "$EMBER not built (run deploy/build.sh, or set EMBER)"
  EMBER=$(readlink -f "$EMBER")
  [ -z "$(namespaces)" ] && ! ip link show "$BRIDGE" >/dev/null 2>&1 ||
    die "a cluster is already up (deploy/netns-cluster.sh down first)"
  has_opt --device-memory "${node_args[@]}" || defaults+=(--device-memory 4GiB)
  has_opt --cache "${node_args[@]}" || defaults+=(--cache 4GiB)
  mkdir -p "$DIR" "$repo"; DIR=$(cd "$DIR" && pwd); repo=$(cd "$repo" && pwd)
  rm -f "$DIR"/*.pid

  trap up_exit EXIT
  trap 'exit 130' INT TERM
  make_net "$k" "$rate" "$repo_rate" "$delay" "$mtu"

  # `ip netns exec` execs the command in place, so $! is the pid of ember itself (checked below).
  start() {  # name, namespace, ember args...
    local name=$1 ns=$2; shift 2
    ip netns exec "$ns" "$EMBER" "$@" </dev/null >"$DIR/$name.log" 2>&1 &
    echo $! >"$DIR/$name.pid"
  }
  start manager ember-h0 manager --listen "$MANAGER" --data-listen "$NET.1:0" --http "$HTTP" --repository "$repo" \
    "${common[@]}"
  for i in $(seq 1 "$k"); do
    read -r -a extra <<<"${host_args[$i]:-}"
    start "h$i" "ember-h$i" node --manager "$MANAGER" --name "h$i" --listen "$NET.$((i + 1)):0" \
      --data-listen "$NET.$((i + 1)):0" "${defaults[@]}" "${common[@]}" "${node_args[@]}" "${extra[@]}"
  done

  local deadline=$((SECONDS + 30))
  until ready && [ "$(joined)" -ge "$k" ]; do
    for f in "$DIR"/*.pid; do
      alive "$(cat "$f")" || die "$(basename "$f" .pid) exited; last lines of its log:"$'\n'"$(tail -5 "${f%.pid}.log")"
    done
    [ $SECONDS -lt $deadline ] || die "the manager is not ready with $k node(s) after 30 s (see $DIR/manager.log)"
    sleep 0.2
  done
  for f in "$DIR"/*.pid; do is_ember "$(cat "$f")" || die "pid $(cat "$f") in $f is not $EMBER"; done
  trap - EXIT INT TERM
  echo "netns-cluster: bridge $BRIDGE $NET.254/24; hosts ember-h0..ember-h$k = $NET.1..$NET.$((k + 1))"
  echo "netns-cluster: links ${rate:-unlimited}${repo_rate:+ (manager: $repo_rate)}, delay ${delay:-none} per direction, MTU $mtu"
  echo "netns-cluster: manager $MANAGER, HTTP http://$HTTP, $k node(s) joined; logs and pids in $DIR/"
}

net() {  # the network of `up` alone
  local k=${1:-}; shift || true
  [[ "$k" =~ ^[0-9]+$ ]] && [ "$k" -ge 1 ] && [ "$k" -le 200 ] || usage
  local rate="" repo_rate="" delay="" mtu=1500 f
  while [ $# -gt 0 ]; do
    case "$1" in
      --rate) rate=${2:?}; shift 2 ;;
      --repository-rate) repo_rate=${2:?}; shift 2 ;;
      --delay) delay=${2:?}; shift 2 ;;
      --mtu) mtu=${2:?}; shift 2 ;;
      *) usage ;;
    esac
  done
  need_root
  for f in ip tc; do command -v "$f" >/dev/null || die "needs $f (apt install iproute2)"; done
  check_net_options
  [ -z "$(namespaces)" ] && ! ip link show "$BRIDGE" >/dev/null 2>&1 ||
    die "a cluster is already up (deploy/netns-cluster.sh down first)"
  trap up_exit EXIT
  trap 'exit 130' INT TERM
  make_net "$k" "$rate" "$repo_rate" "$delay" "$mtu"
  trap - EXIT INT TERM
  echo "netns-cluster: bridge $BRIDGE $NET.254/24; hosts ember-h0..ember-h$k = $NET.1..$NET.$((k + 1)), nothing started"
}

down() {
  local pids=() more ns f p deadline
  for ns in $(namespaces); do mapfile -t more < <(ip netns pids "$ns" 2>/dev/null); pids+=("${more[@]}"); done
  for f in "$DIR"/*.pid; do  # processes whose namespace is already gone
    [ -e "$f" ] || continue
    p=$(cat "$f"); ! { alive "$p" && is_ember "$p"; } || pids+=("$p")
  done
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    deadline=$((SECONDS + 5))
    for p in "${pids[@]}"; do while alive "$p" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done; done
    kill -KILL "${pids[@]}" 2>/dev/null || true
    for p in "${pids[@]}"; do for _ in $(seq 50); do alive "$p" || break; sleep 0.1; done; done
  fi
  for ns in $(namespaces); do ip netns del "$ns" 2>/dev/null || true; done
  ip link del "$BRIDGE" 2>/dev/null || true
  for f in $(ip -o link show 2>/dev/null | awk -F': ' '$2 ~ /^ember-v[0-9]+@/ {sub(/@.*/, "", $2); print $2}'); do
    ip link del "$f" 2>/dev/null || true
  done
  rm -f "$DIR"/*.pid "$DIR/netns.err"
  echo "netns-cluster: down"
}

status() {
  local ns f
  [ -n "$(namespaces)" ] || echo "netns-cluster: no namespaces"
  for ns in $(namespaces); do
    echo "$ns: $(ip -n "$ns" -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}'), pids $(ip netns pids "$ns" | xargs)"
  done
  for f in "$DIR"/*.pid; do
    [ -e "$f" ] || { echo "netns-cluster: no processes recorded in $DIR"; return; }
    if alive "$(cat "$f")"; then echo "$(basename "$f" .pid): running (pid $(cat "$f"))"; else echo "$(basename "$f" .pid): stopped"; fi
  done
}

pids() {
  local i=1
  [ ! -e "$DIR/manager.pid" ] || echo "manager $(cat "$DIR/manager.pid")"
  while [ -e "$DIR/h$i.pid" ]; do echo "h$i $(cat "$DIR/h$i.pid")"; i=$((i + 1)); done
}

dir_arg() {  # the only option of status, pids and down
  [ $# -eq 0 ] && return; [ $# -eq 2 ] && [ "$1" = --dir ] || usage; DIR=$2
}

case "${1:-}" in
  up) shift; up "$@" ;;
  net) shift; net "$@" ;;
  down) shift; dir_arg "$@"; need_root; down ;;
  status) shift; dir_arg "$@"; status ;;
  pids) shift; dir_arg "$@"; pids ;;
  exec) [ $# -ge 3 ] && [[ "$2" =~ ^[0-9]+$ ]] || usage; need_root
        ip netns list | grep -q "^ember-h$2\b" || die "no namespace ember-h$2 (is the cluster up?)"
        ns=ember-h$2; shift 2; exec ip netns exec "$ns" "$@" ;;
  *) usage ;;
esac
