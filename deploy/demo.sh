#!/usr/bin/env bash
# The main job: `ember serve` on a model repository, a demo model loaded, one inference request
# answered over the KServe v2 HTTP API; then the server keeps serving until Ctrl-C.
#
#   deploy/demo.sh [--repository DIR] [--http HOST:PORT] [--once]
#
# Creates DIR/resnet50/1 (ResNet-50, random weights) and DIR/mlp/1 when they are missing.
# --once stops the server after the first answer (for scripts).
set -euo pipefail
cd "$(dirname "$0")/.."
EMBER=${EMBER:-build/bin/ember}
REPO=models
HTTP=127.0.0.1:8000
ONCE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --repository) REPO=$2; shift 2 ;;
    --http) HTTP=$2; shift 2 ;;
    --once) ONCE=1; shift ;;
    *) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done

[ -f "$REPO/resnet50/1/model.json" ] || "$EMBER" model new --arch resnet50 --seed 1 --out "$REPO/resnet50/1"
[ -f "$REPO/mlp/1/model.json" ] || "$EMBER" model new --arch mlp --seed 1 --out "$REPO/mlp/1"

"$EMBER" serve --repository "$REPO" --http "$HTTP" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -sf "http://$HTTP/v2/health/ready" >/dev/null && break
  sleep 0.1
done

echo "== POST /v2/repository/models/resnet50/load"
curl -sf -X POST "http://$HTTP/v2/repository/models/resnet50/load" -d '{}' && echo
echo "== POST /v2/models/resnet50/infer (one 224x224 image)"
"$EMBER" infer --url "http://$HTTP" --model resnet50 --print 5
echo "== GET /v2/models/resnet50"
curl -sf "http://$HTTP/v2/models/resnet50" && echo
if [ "$ONCE" = 1 ]; then exit 0; fi
echo "== serving on http://$HTTP (Ctrl-C stops); try: curl http://$HTTP/metrics"
wait $SERVER
