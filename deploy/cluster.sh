#!/usr/bin/env bash
# Launch an Ember cluster on several hosts over ssh, from an inventory (deploy/inventory.example.yaml
# documents every key: hosts, roles, devices, racks, the config, the credentials, ssh settings).
#
#   deploy/cluster.sh up INVENTORY.yaml       copy the binary, the config and the credentials to each host
#                                             (skipped where the remote sha256 matches), start the manager, wait
#                                             for it, start the nodes, then the gateways, wait until the manager
#                                             lists every node and every HTTP endpoint is ready. Again: starts what
#                                             died, restarts what changed, stops roles gone from the inventory,
#                                             else changes nothing and says so
#   deploy/cluster.sh down INVENTORY.yaml     stop gateways, nodes, then the manager (SIGTERM; SIGKILL after
#                                             stop_timeout) and remove their pid files; idempotent
#   deploy/cluster.sh status INVENTORY.yaml   a line per role: host, address, role, name, pid, running|stopped,
#                                             ready|not-ready; exit 0 when every role runs and is ready, else 3
#   deploy/cluster.sh logs INVENTORY.yaml [ROLE|HOST] [-n LINES]
#                                             the last LINES (50) lines of each role's log; ROLE: manager, node,
#                                             gateway, a node's or gateway's name, or a role id (node-NAME)
#
# Each host gets a directory of its own (`dir`, default ~/.ember/CLUSTER): ember, ember.yaml (the config,
# with "{dir}" replaced by the directory), credentials/ (mode 600), run/HOST/ROLE.pid and run/HOST/ROLE.spec
# (a hash of the role's command line and files: a change restarts it), log/HOST/ROLE.log (the previous
# run's in .log.1); run/ and log/ are per host so that a home directory shared by hosts (NFS) still works.
# Roles run detached (setsid nohup) and survive the ssh session. Remote hosts need only sshd, a POSIX sh,
# coreutils and setsid (util-linux); here: bash, python3 with PyYAML, ssh, scp and curl (readiness is
# checked from here: every HTTP endpoint must be reachable from this machine; nodes are checked with
# `ember console` on the manager's host). ssh runs with BatchMode=yes: keys or an agent, no passwords.
#
# mode: systemd installs the units of deploy/systemd instead (ember to /usr/local/bin, the config to
# /etc/ember/ember.yaml, credentials to /etc/ember/credentials/, role arguments to /etc/default/ember and
# /etc/default/ember-node-NAME, `systemctl enable --now`, or restart after a change); root or sudo -n on
# each host. Not exercised by integration.cluster_ssh (no systemd in its sandbox): only processes mode is.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
EMBER=${EMBER:-$ROOT/build/bin/ember}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
say() { echo "cluster.sh: $*"; }
die() { echo "cluster.sh: $*" >&2; exit 1; }
or_die() { local rc=$?; [ $rc -ne 255 ] || exit 1; die "$@"; }  # after `x=$(rsh ...) ||`: ssh said why already

# The inventory as shell assignments (every value quoted by shlex), after checking it whole: nothing
# touches a host before the inventory is known good.
read -r -d '' PARSER <<'PY' || true
import os, re, shlex, sys
try:
    import yaml
except ImportError:
    sys.exit("cluster.sh: needs PyYAML for python3 here (apt install python3-yaml)")

path, root, default_binary = sys.argv[1:4]
base = os.path.dirname(os.path.abspath(path))
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
ENDPOINT = re.compile(r"^([^:\s]+):([0-9]{1,5})$")


def fail(msg):
    sys.exit(f"cluster.sh: {path}: {msg}")


class Loader(yaml.SafeLoader):  # a repeated key is an error, as in Ember's config
    pass


def construct_mapping(loader, node):
    loader.flatten_mapping(node)
    seen = set()
    for k, _ in node.value:
        key = loader.construct_object(k, deep=True)
        if key in seen:
            raise yaml.MarkedYAMLError("while reading a mapping", node.start_mark, f"repeated key {key!r}", k.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)

try:
    with open(path) as f:
        inv = yaml.load(f, Loader=Loader)
except OSError as e:
    fail(f"cannot read it: {e.strerror}")
except yaml.YAMLError as e:
    fail(f"not valid YAML: {e}")
if not isinstance(inv, dict):
    fail("expected a mapping at the top (cluster:, hosts:, roles:, ...)")


def check_keys(d, allowed, where):
    if not isinstance(d, dict):
        fail(f"{where}: expected a mapping")
    for k in d:
        if k not in allowed:
            fail(f"{where}: unknown key '{k}' (known: {', '.join(allowed)})")


def string(d, key, where, default=None, required=False, pattern=None, hint="letters, digits, _ . -"):
    v = d.get(key, default)
    if v is None:
        if required:
            fail(f"{where}: missing '{key}'")
        return None
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        fail(f"{where}: '{key}' must be a string")
    v = str(v)
    if pattern is not None and not pattern.match(v):
        fail(f"{where}: '{key}: {v}' is not valid ({hint})")
    return v


def number(d, key, where, default, lo, hi):
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        fail(f"{where}: '{key}' must be a number in {lo}..{hi}")
    return v


def strings(d, key, where):
    v = d.get(key, [])
    if v is None:
        return []
    if not isinstance(v, list) or any(isinstance(x, (bool, dict, list)) or x is None for x in v):
        fail(f"{where}: '{key}' must be a list of strings")
    return [str(x) for x in v]


def local_file(p, what, executable=False):
    full = os.path.normpath(os.path.join(base, os.path.expanduser(p)))
    if not os.path.isfile(full):
        fail(f"{what} {p}: file not found ({full})")
    if executable and not os.access(full, os.X_OK):
        fail(f"{what} {full} is not executable")
    return full


def endpoint(d, key, where, default=None):
    v = string(d, key, where, default)
    if v is not None and not ENDPOINT.match(v):
        fail(f"{where}: '{key}: {v}' is not HOST:PORT")
    return v


check_keys(inv, ["cluster", "mode", "binary", "config", "credentials", "console_args", "dir", "ssh", "ready_timeout",
                 "stop_timeout", "curl_args", "hosts", "roles"], "top level")
cluster = string(inv, "cluster", "top level", required=True, pattern=NAME)
mode = string(inv, "mode", "top level", "processes")
if mode not in ("processes", "systemd"):
    fail(f"mode: {mode}: expected processes or systemd")
systemd = mode == "systemd"
binary = local_file(string(inv, "binary", "top level", default_binary), "binary", executable=True)
config = string(inv, "config", "top level")
config = local_file(config, "config") if config else ""
if systemd and not config:
    config = os.path.join(root, "deploy", "ember.yaml")  # the units always pass --config
creds = [local_file(c, "credential") for c in strings(inv, "credentials", "top level")]
names = [os.path.basename(c) for c in creds]
for n in names:
    if names.count(n) > 1:
        fail(f"credentials: two files named {n} (they land side by side in credentials/)")
console_args = strings(inv, "console_args", "top level")
DIRPAT = re.compile(r"^(~|~/[A-Za-z0-9_./-]*|/[A-Za-z0-9_./-]*)$")
DIRHINT = "an absolute path or one under ~/, of letters, digits, _ . / -"
top_dir = string(inv, "dir", "top level", f"~/.ember/{cluster}", pattern=DIRPAT, hint=DIRHINT)
ready_timeout = number(inv, "ready_timeout", "top level", 60, 1, 3600)
stop_timeout = number(inv, "stop_timeout", "top level", 10, 1, 600)
curl_args = strings(inv, "curl_args", "top level")
ssh = inv.get("ssh") or {}
check_keys(ssh, ["user", "port", "identity_file", "options", "config_file"], "ssh")

hosts = inv.get("hosts")
if not isinstance(hosts, dict) or not hosts:
    fail("hosts: expected a mapping of host names to {address: ..., ...}, at least one")
out = {"H_ADDR": {}, "H_TARGET": {}, "H_OPTS": {}, "H_DIR": {}, "R_KIND": {}, "R_HOST": {}, "R_NAME": {},
       "R_ARGV": {}, "R_HEALTH": {}, "R_UNIT": {}, "R_REPO": {}}


def ssh_opts(d, where):
    o = []
    if d.get("port") is not None:
        o += ["-o", f"Port={int(number(d, 'port', where, 22, 1, 65535))}"]
    if d.get("identity_file"):
        o += ["-i", local_file(string(d, "identity_file", where), f"{where}: identity_file"), "-o", "IdentitiesOnly=yes"]
    for x in strings(d, "options" if where == "ssh" else "ssh_options", where):
        if "=" not in x or " " in x.split("=")[0]:
            fail(f"{where}: ssh option '{x}' is not Key=Value")
        o += ["-o", x]
    return o


common = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=10"]
if ssh.get("config_file"):
    common = ["-F", local_file(string(ssh, "config_file", "ssh"), "ssh: config_file")] + common
for h, d in hosts.items():
    where = f"hosts: {h}"
    if not isinstance(h, str) or not NAME.match(h):
        fail(f"hosts: '{h}' is not a valid host name (letters, digits, _ . -)")
    if d is None:
        fail(f"{where}: missing 'address'")
    check_keys(d, ["address", "user", "port", "identity_file", "ssh_options", "dir"], where)
    addr = string(d, "address", where, required=True, pattern=re.compile(r"^[A-Za-z0-9_.:%-]+$"),
                  hint="an IP address or a DNS name")
    user = string(d, "user", where, ssh.get("user"), pattern=re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*$"))
    out["H_ADDR"][h] = addr
    out["H_TARGET"][h] = f"{user}@{addr}" if user else addr
    # ssh takes the first value of an option: the host's own settings go first.
    out["H_OPTS"][h] = " ".join(shlex.quote(x) for x in ssh_opts(d, where) + ssh_opts(ssh, "ssh") + common)
    out["H_DIR"][h] = string(d, "dir", where, top_dir, pattern=DIRPAT, hint=DIRHINT)

roles = inv.get("roles")
if not isinstance(roles, list) or not roles:
    fail("roles: expected a list of {role: manager|node|gateway, host: ..., ...}")
KEYS = {"manager": ["listen", "data_listen", "http", "repository"],
        "node": ["name", "listen", "data_listen", "rack", "devices", "device", "device_memory", "cache", "repository"],
        "gateway": ["name", "http", "grpc"]}
for i, r in enumerate(roles):
    if not isinstance(r, dict):
        fail(f"roles[{i}]: expected a mapping with role: and host:")
    if r.get("role") not in KEYS:
        fail(f"roles[{i}]: unknown role '{r.get('role')}' (expected manager, node or gateway)" if "role" in r
             else f"roles[{i}]: missing 'role' (manager, node or gateway)")
managers = [r for r in roles if r.get("role") == "manager"]
if not managers:
    fail("no manager: roles needs one entry with 'role: manager'")
if len(managers) > 1:
    fail("more than one manager (a cluster has one)")


def config_tls():
    if not config:
        return False
    try:
        with open(config) as f:
            c = yaml.safe_load(f) or {}
        return bool((c.get("gateway") or {}).get("tls_certificate"))
    except (OSError, yaml.YAMLError, AttributeError) as e:
        fail(f"config {config}: cannot read it: {e}")


tls = config_tls()
ordered, ports, seen = [], {}, {}
manager_addr = None
for i, r in sorted(enumerate(roles), key=lambda x: (["manager", "node", "gateway"].index(x[1]["role"]), x[0])):
    where = f"roles[{i}]"
    kind = r["role"]
    check_keys(r, ["role", "host", "args"] + KEYS[kind], f"{where} ({kind})")
    h = string(r, "host", where, required=True)
    if h not in hosts:
        fail(f"{where} ({kind}): host '{h}' is not in hosts ({', '.join(map(str, hosts))})")
    addr = out["H_ADDR"][h]
    name = string(r, "name", where, h, pattern=NAME) if kind != "manager" else "manager"
    rid = "manager" if kind == "manager" else f"{kind}-{name}"
    if rid in seen:
        fail(f"{where}: two {kind}s named '{name}' (on {seen[rid]} and {h}): give each a distinct 'name'")
    seen[rid] = h
    args = strings(r, "args", where)
    if systemd and any(re.search(r"[\s'\"\\$%]", a) for a in args):
        fail(f"{where}: in systemd mode args may not hold spaces, quotes, backslashes, $ or % "
             "(they pass through an EnvironmentFile)")
    if systemd and kind == "gateway" and any(out["R_KIND"].get(x) == "gateway" and out["R_HOST"][x] == h
                                             for x in ordered):
        fail(f"{where}: in systemd mode a host runs at most one gateway (ember-gateway.service)")

    def claim(ep, key):
        if ep is None:
            return
        port = int(ENDPOINT.match(ep).group(2))
        if port == 0:
            return
        if (h, port) in ports:
            fail(f"{where} ({kind}): {key} {ep} takes port {port} on {h}, already taken by {ports[(h, port)]}")
        ports[(h, port)] = f"{rid}'s {key}"

    def url(ep):
        host, port = ENDPOINT.match(ep).groups()
        host = addr if host in ("0.0.0.0", "::") else host
        https = tls or "--tls-certificate" in args
        return f"{'https' if https else 'http'}://{host}:{port}"

    argv, health = [], ""
    if kind == "manager":
        listen = endpoint(r, "listen", where, f"{addr}:7070")
        data = endpoint(r, "data_listen", where, f"{addr}:0")
        http = endpoint(r, "http", where)
        repo = string(r, "repository", where, "/var/lib/ember/models" if systemd else "{dir}/models")
        for ep, key in ((listen, "listen"), (data, "data_listen"), (http, "http")):
            claim(ep, key)
        host, port = ENDPOINT.match(listen).groups()
        manager_addr = f"{addr if host in ('0.0.0.0', '::') else host}:{port}"
        console = f"{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
        argv = ["--listen", listen, "--data-listen", data, "--repository", repo] + (["--http", http] if http else [])
        health = url(http) if http else ""
        out["R_REPO"][rid] = repo
        out["R_UNIT"][rid] = "ember-manager.service"
    elif kind == "node":
        listen = endpoint(r, "listen", where, f"{addr}:0")
        data = endpoint(r, "data_listen", where, f"{addr}:0")
        claim(listen, "listen")
        claim(data, "data_listen")
        argv = ["--manager", manager_addr] + ([] if systemd else ["--name", name]) + \
               ["--listen", listen, "--data-listen", data]
        for key, flag in (("rack", "--rack"), ("devices", "--devices"), ("device", "--device"),
                          ("device_memory", "--device-memory"), ("cache", "--cache"), ("repository", "--repository")):
            v = string(r, key, where)
            if v is not None:
                argv += [flag, v]
        if r.get("devices") is not None:
            number(r, "devices", where, 1, 1, 64)
        if r.get("device") not in (None, "auto", "sim", "cuda"):
            fail(f"{where}: device: {r.get('device')}: expected auto, sim or cuda")
        out["R_UNIT"][rid] = f"ember-node@{name}.service"
    else:
        http = endpoint(r, "http", where, f"{addr}:8000")
        grpc = endpoint(r, "grpc", where)
        claim(http, "http")
        claim(grpc, "grpc")
        argv = ["--manager", manager_addr, "--http", http] + (["--grpc", grpc] if grpc else [])
        health = url(http)
        out["R_UNIT"][rid] = "ember-gateway.service"
    if not systemd:
        argv = [kind] + argv + (["--config", "{dir}/ember.yaml"] if config else [])
    out["R_ARGV"][rid] = " ".join(shlex.quote(x) for x in argv + args)
    out["R_KIND"][rid], out["R_HOST"][rid], out["R_NAME"][rid], out["R_HEALTH"][rid] = kind, h, name, health
    ordered.append(rid)

q = shlex.quote
print(f"CLUSTER={q(cluster)} MODE={q(mode)} BINARY={q(binary)} CONFIG={q(config)}")
print(f"READY_TIMEOUT={int(ready_timeout)} STOP_TIMEOUT={int(stop_timeout)} CONSOLE={q(console)}")
print("CREDS=(" + " ".join(q(c) for c in creds) + ")")
print("CURL_ARGS=(" + " ".join(q(c) for c in curl_args) + ")")
print("CONSOLE_ARGS=(" + " ".join(q(c) for c in console_args) + ")")
print("HOSTS=(" + " ".join(q(h) for h in hosts) + ")")
print("ROLES=(" + " ".join(q(r) for r in ordered) + ")")
for var, m in out.items():
    for k, v in m.items():
        print(f"{var}[{q(k)}]={q(v)}")
PY

declare -A H_ADDR=() H_TARGET=() H_OPTS=() H_DIR=() R_KIND=() R_HOST=() R_NAME=() R_ARGV=() R_HEALTH=() R_UNIT=() R_REPO=()
declare -A P_DIR=() P_SHA=() P_PID=() P_STATE=() P_SPEC=() P_IDS=()
CLUSTER="" MODE="" BINARY="" CONFIG="" READY_TIMEOUT=60 STOP_TIMEOUT=10 CONSOLE="" TMP=""
CREDS=() CURL_ARGS=() CONSOLE_ARGS=() HOSTS=() ROLES=() SSH_O=()

load_inventory() {
  [ $# -eq 1 ] || usage
  command -v python3 >/dev/null || die "needs python3 here (to read the inventory)"
  local parsed
  parsed=$(python3 -c "$PARSER" "$1" "$ROOT" "$EMBER") || exit 1
  eval "$parsed"
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/ember-cluster.XXXXXX")
  trap cleanup EXIT
}

# One ssh connection per host for the whole run (ControlMaster), closed at exit.
cleanup() {
  local s
  for s in "$TMP"/cm-*; do [ ! -S "$s" ] || ssh -o ControlPath="$s" -O exit ember-cluster >/dev/null 2>&1 || true; done
  rm -rf "$TMP"
}
ssh_options() {  # HOST: SSH_O, for ssh and scp
  eval "SSH_O=(${H_OPTS[$1]})"
  SSH_O+=(-o ControlMaster=auto -o "ControlPath=$TMP/cm-%C" -o ControlPersist=300)
}

q() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }  # one word, quoted for the remote POSIX sh
qargs() { local a; for a in "$@"; do printf ' %s' "$(q "$a")"; done; }
where() {  # "node h1 on h1 (10.231.0.2)"
  local name=" ${R_NAME[$1]}"
  [ "${R_KIND[$1]}" != manager ] || name=""
  echo "${R_KIND[$1]}$name on ${R_HOST[$1]} (${H_ADDR[${R_HOST[$1]}]})"
}

# What "{dir}" stands for on HOST: its directory, or /etc/ember in systemd mode.
dir_of() { if [ "$MODE" = systemd ]; then echo /etc/ember; else echo "${P_DIR[$1]:-${H_DIR[$1]}}"; fi; }

# The role's ember arguments for its host, "{dir}" replaced (in array ARGV).
role_argv() {
  local d
  d=$(dir_of "${R_HOST[$1]}")
  eval "ARGV=(${R_ARGV[$1]})"
  ARGV=("${ARGV[@]//'{dir}'/"$d"}")
}

declare -A SHA_OF=()
sha_of() {  # sha256 of a local file, remembered for files not rendered under $TMP (the binary is large)
  if [ -z "${SHA_OF[$1]:-}" ] || [[ "$1" == "$TMP"/* ]]; then SHA_OF[$1]=$(sha256sum "$1" | cut -d' ' -f1); fi
  SHA=${SHA_OF[$1]}
}

# rsh HOST SCRIPT: runs SCRIPT (POSIX sh, after the common preamble) on HOST; its stdout on ours. An
# unreachable host (ssh's 255) ends everything (or the command substitution, status 255, see or_die) with
# ssh's message; otherwise the script's own status is returned, its stderr shown when it fails.
rsh() {
  local h=$1 rc=0
  ssh_options "$h"
  ssh "${SSH_O[@]}" "${H_TARGET[$h]}" sh -s <<<"$(preamble "$h")
$2" 2>"$TMP/ssh.err" || rc=$?
  if [ "$rc" -eq 255 ]; then
    echo "cluster.sh: cannot reach host $h (${H_TARGET[$h]}) over ssh: $(tail -3 "$TMP/ssh.err")" >&2
    exit 255
  fi
  [ "$rc" -eq 0 ] || cat "$TMP/ssh.err" >&2
  return "$rc"
}

# On every remote host: D (the directory, ~ expanded), RUN (sudo -n where systemd mode needs root and the
# ssh user is not), EXE, ours PID (the process runs this directory's ember, possibly replaced since).
preamble() {
  cat <<EOF
D=$(q "${P_DIR[$1]:-${H_DIR[$1]}}")
case \$D in "~") D=\$HOME ;; "~/"*) D=\$HOME/\${D#"~/"} ;; esac
[ ! -d "\$D" ] || D=\$(cd "\$D" && pwd -P)
RUN=; EXE=\$D/ember; RD=\$D/run/$1; LD=\$D/log/$1
if [ $(q "$MODE") = systemd ]; then EXE=/usr/local/bin/ember; [ "\$(id -u)" = 0 ] || RUN="sudo -n"; fi
ours() { case \$(readlink "/proc/\$1/exe" 2>/dev/null) in "\$D/ember"|"\$D/ember (deleted)") return 0 ;; esac; return 1; }
EOF
}

# The files a host gets, "LOCAL|TARGET|MODE|GROUP" in FILES (LOCAL rendered under $TMP where it has "{dir}"),
# TARGET relative to the host's directory (processes) or absolute (systemd).
host_files() {
  local h=$1 d c id rendered env
  d=$(dir_of "$h")
  FILES=("$BINARY|ember|755|")
  if [ "$MODE" = systemd ]; then FILES=("$BINARY|/usr/local/bin/ember|755|"); fi
  if [ -n "$CONFIG" ]; then
    rendered=$TMP/$h.ember.yaml
    c=$(cat "$CONFIG"; echo .); c=${c%.}
    printf '%s' "${c//'{dir}'/"$d"}" >"$rendered"
    if [ "$MODE" = systemd ]; then FILES+=("$rendered|/etc/ember/ember.yaml|644|"); else FILES+=("$rendered|ember.yaml|644|"); fi
  fi
  for c in "${CREDS[@]}"; do
    if [ "$MODE" = systemd ]; then FILES+=("$c|/etc/ember/credentials/$(basename "$c")|640|ember")
    else FILES+=("$c|credentials/$(basename "$c")|600|"); fi
  done
  [ "$MODE" = systemd ] || return 0
  env=$TMP/$h.default
  : >"$env"
  for id in "${ROLES[@]}"; do
    [ "${R_HOST[$id]}" = "$h" ] || continue
    role_argv "$id"
    case ${R_KIND[$id]} in
      manager) FILES+=("$ROOT/deploy/systemd/ember-manager.service|/etc/systemd/system/ember-manager.service|644|")
               echo "EMBER_MANAGER_ARGS=\"${ARGV[*]}\"" >>"$env" ;;
      gateway) FILES+=("$ROOT/deploy/systemd/ember-gateway.service|/etc/systemd/system/ember-gateway.service|644|")
               echo "EMBER_GATEWAY_ARGS=\"${ARGV[*]}\"" >>"$env" ;;
      node) FILES+=("$ROOT/deploy/systemd/ember-node@.service|/etc/systemd/system/ember-node@.service|644|")
            echo "EMBER_NODE_ARGS=\"${ARGV[*]}\"" >"$TMP/$h.node-${R_NAME[$id]}"
            FILES+=("$TMP/$h.node-${R_NAME[$id]}|/etc/default/ember-node-${R_NAME[$id]}|644|") ;;
    esac
  done
  FILES+=("$env|/etc/default/ember|644|")
  mapfile -t FILES < <(printf '%s\n' "${FILES[@]}" | awk -F'|' '!seen[$2]++')  # one unit file per host
}

# probe HOST CREATE: the host's directory (created with CREATE=1), the sha256 of each target it should
# have, and the state of each role recorded there (P_* arrays).
probe() {
  local h=$1 create=$2 f targets=() kind a b c e out
  host_files "$h"
  for f in "${FILES[@]}"; do IFS='|' read -r _ a _ _ <<<"$f"; targets+=("$a"); done
  out=$(rsh "$h" "
if [ $create = 1 ]; then
  mkdir -p \"\$D/run/$h\" \"\$D/log/$h\" \"\$D/incoming\" || exit 1
  [ $(q "$MODE") = systemd ] || { mkdir -p \"\$D/credentials\" && chmod 700 \"\$D/credentials\"; } || exit 1
  D=\$(cd \"\$D\" && pwd -P); RD=\$D/run/$h; LD=\$D/log/$h
fi
echo \"dir \$D\"
for t in$(qargs "${targets[@]}"); do
  case \$t in /*) f=\$t ;; *) f=\$D/\$t ;; esac
  [ -e \"\$f\" ] && echo \"sha \$t \$(\$RUN sha256sum \"\$f\" 2>/dev/null | cut -d' ' -f1)\"
done
if [ $(q "$MODE") = systemd ]; then
  for u in$(for id in "${ROLES[@]}"; do [ "${R_HOST[$id]}" != "$h" ] || printf ' %s' "$(q "$id=${R_UNIT[$id]}")"; done); do
    a=\$(systemctl is-active \"\${u#*=}\" 2>/dev/null); p=\$(systemctl show -p MainPID --value \"\${u#*=}\" 2>/dev/null)
    [ \"\$a\" = active ] && a=running || a=stopped
    echo \"role \${u%%=*} \${p:-0} \$a -\"
  done
else
  for p in \"\$RD\"/*.pid; do
    [ -f \"\$p\" ] || continue
    id=\${p##*/}; id=\${id%.pid}; pid=\$(cat \"\$p\" 2>/dev/null); st=stopped
    case \$(readlink \"/proc/\$pid/exe\" 2>/dev/null) in \"\$D/ember\") st=running ;; \"\$D/ember (deleted)\") st=replaced ;; esac
    spec=\$(cat \"\$RD/\$id.spec\" 2>/dev/null)
    echo \"role \$id \${pid:-0} \$st \${spec:--}\"
  done
fi") || or_die "could not look at host $h (${H_TARGET[$h]})"
  P_IDS[$h]=""
  while read -r kind a b c e; do
    case $kind in
      dir) P_DIR[$h]=$a ;;
      sha) P_SHA[$h/$a]=$b ;;
      role) P_PID[$h/$a]=$b; P_STATE[$h/$a]=$c; P_SPEC[$h/$a]=$e; P_IDS[$h]+=" $a" ;;
    esac
  done <<<"$out"
  host_files "$h"  # again: "{dir}" is now the host's absolute directory
}

# copy_files HOST: the files whose remote sha256 differs, in one scp, then installed in place (a new inode:
# a running ember keeps its old binary until restarted). Says what it copied; CHANGED[HOST]=1 if anything.
declare -A CHANGED=()
copy_files() {
  local h=$1 f src dst mode group n=0 stage=$TMP/stage-$1 installs="" copied=()
  host_files "$h"
  rm -rf "$stage"; mkdir -p "$stage"
  for f in "${FILES[@]}"; do
    IFS='|' read -r src dst mode group <<<"$f"
    sha_of "$src"
    [ "${P_SHA[$h/$dst]:-}" != "$SHA" ] || continue
    ln -s "$src" "$stage/$n"
    installs+="inst $n $(q "$dst") $mode $(q "$group") || exit 1"$'\n'
    copied+=("$dst"); n=$((n + 1))
  done
  CHANGED[$h]=0
  if [ "$n" -eq 0 ]; then say "$h (${H_ADDR[$h]}): files up to date"; return; fi
  ssh_options "$h"
  scp -q "${SSH_O[@]}" "$stage"/* "${H_TARGET[$h]}:${P_DIR[$h]}/incoming/" 2>"$TMP/scp.err" ||
    die "copying to host $h (${H_TARGET[$h]}:${P_DIR[$h]}/incoming/) failed: $(tail -3 "$TMP/scp.err")"
  rsh "$h" "
inst() {
  case \$2 in /*) t=\$2 ;; *) t=\$D/\$2 ;; esac
  \$RUN mkdir -p \"\${t%/*}\" && \$RUN install -m \"\$3\" \${4:+-g \"\$4\"} \"\$D/incoming/\$1\" \"\$t.new\" &&
    \$RUN mv -f \"\$t.new\" \"\$t\" && rm -f \"\$D/incoming/\$1\"
}
if [ $(q "$MODE") = systemd ]; then
  id ember >/dev/null 2>&1 || \$RUN useradd --system --user-group --home-dir /var/lib/ember --shell /usr/sbin/nologin ember || exit 1
  \$RUN install -d -m 755 /etc/ember && \$RUN install -d -m 750 -g ember /etc/ember/credentials || exit 1
fi
$installs
if [ $(q "$MODE") = systemd ]; then \$RUN systemctl daemon-reload || exit 1; fi" >/dev/null ||
    die "installing the files on host $h failed"
  CHANGED[$h]=1
  say "$h (${H_ADDR[$h]}): copied ${copied[*]}"
}

# A role's spec (in SPEC): a hash of its command line and of the files its host gets (FILES); a running
# role whose recorded spec differs is restarted.
role_spec() {
  local f src shas=()
  role_argv "$1"
  for f in "${FILES[@]}"; do IFS='|' read -r src _ <<<"$f"; sha_of "$src"; shas+=("$SHA"); done
  SPEC=$(printf '%s\n' "${ARGV[@]}" "${shas[@]}" | sha256sum | cut -c1-32)
}

# start_role ID: processes mode: a detached ember (its pid file written by the shell that execs it).
start_role() {
  local id=$1 h=${R_HOST[$1]} spec out mk=""
  host_files "$h"
  role_spec "$id"
  spec=$SPEC
  if [ "${R_KIND[$id]}" = manager ]; then mk="mkdir -p $(q "${R_REPO[$id]//'{dir}'/"${P_DIR[$h]}"}") || exit 1"; fi
  out=$(rsh "$h" "$mk
rm -f \"\$RD/$id.pid\"
[ ! -f \"\$LD/$id.log\" ] || mv -f \"\$LD/$id.log\" \"\$LD/$id.log.1\"
echo $spec >\"\$RD/$id.spec\"
cd \"\$D\" || exit 1
setsid nohup sh -c 'echo \$\$ >\"\$0\" && exec \"\$@\"' \"\$RD/$id.pid\" \"\$D/ember\"$(qargs "${ARGV[@]}") \\
  </dev/null >\"\$LD/$id.log\" 2>&1 &
i=0
while [ ! -s \"\$RD/$id.pid\" ] && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i + 1)); done
cat \"\$RD/$id.pid\"") || or_die "could not start $(where "$id")"
  P_PID[$h/$id]=$out P_STATE[$h/$id]=running P_SPEC[$h/$id]=$spec
}

# stop_roles HOST ID...: processes mode: SIGTERM to each, SIGKILL to those left after STOP_TIMEOUT, pid files
# removed. IDs may be globs (down stops whatever this directory ever started). Prints "stopped ID PID".
stop_roles() {
  local h=$1; shift
  rsh "$h" "
[ -d \"\$RD\" ] || exit 0
pids=; ids=
for id in$(qargs "$@"); do
  for p in \"\$RD\"/\$id.pid; do
    [ -f \"\$p\" ] || continue
    i=\${p##*/}; i=\${i%.pid}; pid=\$(cat \"\$p\" 2>/dev/null); ids=\"\$ids \$i\"
    if [ -n \"\$pid\" ] && ours \"\$pid\"; then kill -TERM \"\$pid\" 2>/dev/null; pids=\"\$pids \$pid\"; echo \"stopped \$i \$pid\"; fi
  done
done
i=0; left=\$pids
while [ -n \"\$left\" ] && [ \$i -lt $((STOP_TIMEOUT * 10)) ]; do
  sleep 0.1; i=\$((i + 1)); l=; for p in \$left; do ! ours \$p || l=\"\$l \$p\"; done; left=\$l
done
for p in \$left; do kill -KILL \$p 2>/dev/null; echo \"killed \$p (still running \${i}00 ms after SIGTERM)\" >&2; done
i=0; while [ -n \"\$left\" ] && [ \$i -lt 50 ]; do l=; for p in \$left; do ! ours \$p || l=\"\$l \$p\"; done; left=\$l; sleep 0.1; i=\$((i + 1)); done
for i in \$ids; do rm -f \"\$RD/\$i.pid\" \"\$RD/\$i.spec\"; done
[ -z \"\$left\" ] || { echo \"still running after SIGKILL:\$left\" >&2; exit 1; }"
}

# systemctl on HOST: ACTION UNIT...
sysctl() { local h=$1; shift; rsh "$h" "\$RUN systemctl$(qargs "$@")"; }

log_tail() {  # the last N lines of a role's log
  local id=$1 n=${2:-20} h=${R_HOST[$1]}
  if [ "$MODE" = systemd ]; then
    rsh "$h" "\$RUN journalctl --no-pager -n $n -u $(q "${R_UNIT[$id]}")" 2>&1 || true
  else
    rsh "$h" "tail -n $n \"\$LD/$id.log\" 2>/dev/null || echo '(no log at '\$LD/$id.log')'" 2>&1 || true
  fi
}

# "NAME DATA" for each node the manager lists (`ember console` on the manager's host; DATA: the node's
# data-plane address, which tells a restarted node from its predecessor still listed); fails when the
# manager does not answer.
joined_nodes() {
  local out d args
  d=$(dir_of "${R_HOST[manager]}")
  args=("${CONSOLE_ARGS[@]//'{dir}'/"$d"}")
  out=$(rsh "${R_HOST[manager]}" "timeout 5 \$RUN \"\$EXE\" --log-level error console --manager $(q "$CONSOLE") \
    --json$(qargs "${args[@]}") -c nodes" 2>/dev/null) || return 1
  python3 -c 'import json, sys; print("\n".join(n["name"] + " " + n["data"] for n in json.loads(sys.stdin.read() or "[]")))' \
    <<<"$out" 2>/dev/null
}

healthy() {  # ID: its HTTP endpoint answers ready
  [ -n "${R_HEALTH[$1]}" ] || return 0
  local extra=("${CURL_ARGS[@]}")
  [ ${#extra[@]} -gt 0 ] || [[ "${R_HEALTH[$1]}" != https* ]] || extra=(-k)
  curl -sf --noproxy '*' --max-time 2 "${extra[@]}" "${R_HEALTH[$1]}/v2/health/ready" >/dev/null 2>&1
}

# ready ID JOINED: the role is ready (the manager answers and serves; a node is listed, not as the
# predecessor `up` replaced, OLD_DATA; a gateway serves).
declare -A OLD_DATA=()
LAST_JOINED=""
ready() {
  case ${R_KIND[$1]} in
    manager) [ "$2" != down ] && healthy "$1" ;;
    node) awk -v n="${R_NAME[$1]}" -v old=" ${OLD_DATA[$1]:-} " '$1 == n && !index(old, " " $2 " ") { f = 1 }
                                                                 END { exit !f }' <<<"$2" ;;
    gateway) healthy "$1" ;;
  esac
}

# wait_ready ID...: until each is ready; a role that exits, or the timeout, ends `up` with its log's tail.
wait_ready() {
  local deadline=$((SECONDS + READY_TIMEOUT)) joined id pending next_probe=$((SECONDS + 2)) h
  while :; do
    joined=$(joined_nodes) || joined=down
    LAST_JOINED=$joined
    pending=()
    for id in "$@"; do ready "$id" "$joined" || pending+=("$id"); done
    [ ${#pending[@]} -gt 0 ] || return 0
    if [ $SECONDS -ge "$next_probe" ]; then
      next_probe=$((SECONDS + 2))
      for id in "${pending[@]}"; do
        h=${R_HOST[$id]}
        probe "$h" 0
        [ "${P_STATE[$h/$id]:-stopped}" = running ] ||
          die "$(where "$id") exited; the last lines of its log:"$'\n'"$(log_tail "$id")"
      done
    fi
    if [ $SECONDS -ge $deadline ]; then
      id=${pending[0]}
      die "$(where "$id") is not ready after $READY_TIMEOUT s ($([ "${R_KIND[$id]}" = node ] &&
        echo "the manager does not list it" || echo "no answer from ${R_HEALTH[$id]:-its console}/v2/health/ready")); \
the last lines of its log:"$'\n'"$(log_tail "$id")"
    fi
    sleep 0.5
  done
}

# bring_up ID: start, restart or keep one role. Sets ACTION.
bring_up() {
  local id=$1 h=${R_HOST[$1]} state
  state=${P_STATE[$h/$id]:-stopped}
  if [ "$MODE" = systemd ]; then
    if [ "${CHANGED[$h]}" = 1 ] && [ "$state" = running ]; then
      { sysctl "$h" enable --quiet "${R_UNIT[$id]}" && sysctl "$h" restart "${R_UNIT[$id]}"; } ||
        die "systemctl restart ${R_UNIT[$id]} on $h failed:"$'\n'"$(log_tail "$id")"
      ACTION=restarted
    elif [ "$state" != running ]; then
      [ "${R_KIND[$id]}" != manager ] ||
        rsh "$h" "[ -d $(q "${R_REPO[$id]}") ] || \$RUN install -d -o ember -g ember $(q "${R_REPO[$id]}")" ||
        die "could not create the repository ${R_REPO[$id]} on $h"
      sysctl "$h" enable --quiet --now "${R_UNIT[$id]}" ||
        die "systemctl enable --now ${R_UNIT[$id]} on $h failed:"$'\n'"$(log_tail "$id")"
      ACTION=started
    else
      ACTION=unchanged
    fi
    [ "$ACTION" = unchanged ] ||
      P_PID[$h/$id]=$(rsh "$h" "systemctl show -p MainPID --value $(q "${R_UNIT[$id]}")") || P_PID[$h/$id]=0
    return
  fi
  host_files "$h"
  role_spec "$id"
  if [ "$state" = running ] && [ "${P_SPEC[$h/$id]}" = "$SPEC" ]; then
    ACTION=unchanged
    return
  fi
  if [ "$state" != stopped ]; then
    stop_roles "$h" "$id" >/dev/null
    ACTION=restarted
  else
    ACTION=started
  fi
  start_role "$id"
}

cmd_up() {
  load_inventory "$@"
  local f h id started=() restarted=() stopped=() unchanged=() stale
  for f in ssh scp sha256sum curl; do command -v "$f" >/dev/null || die "needs $f here"; done
  for h in "${HOSTS[@]}"; do probe "$h" 1; done
  for h in "${HOSTS[@]}"; do copy_files "$h"; done
  if [ "$MODE" != systemd ]; then  # roles recorded on a host that the inventory no longer puts there
    for h in "${HOSTS[@]}"; do
      stale=()
      for id in ${P_IDS[$h]}; do
        [ "${R_HOST[$id]:-}" = "$h" ] || [ "${P_STATE[$h/$id]}" = stopped ] || stale+=("$id")
      done
      [ ${#stale[@]} -eq 0 ] || { stop_roles "$h" "${stale[@]}" >/dev/null; say "$h: stopped ${stale[*]} (not in the inventory)"; }
      stopped+=("${stale[@]}")
    done
  fi
  for id in "${ROLES[@]}"; do
    if [ "${R_KIND[$id]}" = node ]; then
      # the node as the manager listed it when it became ready, before this node's (re)start
      OLD_DATA[$id]=$(awk -v n="${R_NAME[$id]}" '$1 == n { printf " %s", $2 }' <<<"$LAST_JOINED")
    fi
    bring_up "$id"
    [ "$ACTION" != unchanged ] || OLD_DATA[$id]=""
    case $ACTION in
      started) started+=("$id") ;; restarted) restarted+=("$id") ;; *) unchanged+=("$id") ;;
    esac
    say "$(where "$id"): $ACTION${P_PID[${R_HOST[$id]}/$id]:+ (pid ${P_PID[${R_HOST[$id]}/$id]})}"
    if [ "$id" = manager ]; then wait_ready manager; say "manager ready${R_HEALTH[manager]:+ (${R_HEALTH[manager]})}"; fi
  done
  wait_ready "${ROLES[@]}"
  local files=0
  for h in "${HOSTS[@]}"; do [ "${CHANGED[$h]}" = 0 ] || files=1; done
  if [ $((${#started[@]} + ${#restarted[@]} + ${#stopped[@]} + files)) -eq 0 ]; then
    say "up: nothing changed; cluster $CLUSTER: ${#ROLES[@]} roles running and ready"
  else
    local msg="${#started[@]} started, ${#restarted[@]} restarted, ${#unchanged[@]} unchanged"
    [ ${#stopped[@]} -eq 0 ] || msg+=", ${#stopped[@]} stopped (not in the inventory)"
    say "up: $msg; cluster $CLUSTER: ${#ROLES[@]} roles running and ready"
  fi
}

cmd_down() {
  load_inventory "$@"
  local kind h id units out n=0 pattern
  for kind in gateway node manager; do
    for h in "${HOSTS[@]}"; do
      if [ "$MODE" = systemd ]; then
        units=()
        for id in "${ROLES[@]}"; do [ "${R_KIND[$id]}" != "$kind" ] || [ "${R_HOST[$id]}" != "$h" ] || units+=("${R_UNIT[$id]}"); done
        [ ${#units[@]} -eq 0 ] || { sysctl "$h" disable --quiet --now "${units[@]}" || die "systemctl disable --now on $h failed"; n=$((n + ${#units[@]})); }
        continue
      fi
      pattern=manager
      [ "$kind" = manager ] || pattern="$kind-*"
      out=$(stop_roles "$h" "$pattern") || or_die "stopping the ${kind}s on host $h failed"
      while read -r _ id pid; do [ -z "$id" ] || { say "$h (${H_ADDR[$h]}): stopped $id (pid $pid)"; n=$((n + 1)); }; done <<<"$out"
    done
  done
  if [ "$MODE" = systemd ]; then say "down: $n units disabled and stopped (systemctl disable --now)"
  elif [ $n -eq 0 ]; then say "down: nothing was running"
  else say "down: $n processes stopped"; fi
}

cmd_status() {
  load_inventory "$@"
  local h id joined rc=0 run rdy
  local -A unreachable=()
  for h in "${HOSTS[@]}"; do
    if (rsh "$h" :); then probe "$h" 0; else unreachable[$h]=1; fi  # ssh's message said why
  done
  joined=$(joined_nodes) || joined=down
  printf '%-12s %-16s %-8s %-16s %-8s %-8s %s\n' HOST ADDRESS ROLE NAME PID STATE READY
  for id in "${ROLES[@]}"; do
    h=${R_HOST[$id]}
    run=${P_STATE[$h/$id]:-stopped}
    [ -z "${unreachable[$h]:-}" ] || run=unknown
    [ "$run" != replaced ] || run=running  # runs, but an older binary: the next `up` restarts it
    rdy=not-ready
    [ "$run" != running ] || ! ready "$id" "$joined" || rdy=ready
    [ "$run" = running ] && [ $rdy = ready ] || rc=3
    printf '%-12s %-16s %-8s %-16s %-8s %-8s %s\n' "$h" "${H_ADDR[$h]}" "${R_KIND[$id]}" "${R_NAME[$id]}" \
      "$([ "$run" = running ] && echo "${P_PID[$h/$id]}" || echo -)" "$run" "$rdy"
  done
  return $rc
}

cmd_logs() {
  local inv=${1:-} which="" n=50 id h any=0
  [ -n "$inv" ] || usage
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      -n|--lines) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage; n=$2; shift 2 ;;
      -*) usage ;;
      *) [ -z "$which" ] || usage; which=$1; shift ;;
    esac
  done
  load_inventory "$inv"
  for id in "${ROLES[@]}"; do
    h=${R_HOST[$id]}
    [ -z "$which" ] || [ "$which" = "$id" ] || [ "$which" = "${R_KIND[$id]}" ] || [ "$which" = "${R_NAME[$id]}" ] ||
      [ "$which" = "$h" ] || continue
    any=1
    echo "==> $(where "$id") <=="
    log_tail "$id" "$n"
  done
  [ $any = 1 ] || die "no role or host '$which' in $inv"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) shift; cmd_down "$@" ;;
  status) shift; cmd_status "$@" ;;
  logs) shift; cmd_logs "$@" ;;
  -h|--help|help) usage ;;
  *) usage ;;
esac
