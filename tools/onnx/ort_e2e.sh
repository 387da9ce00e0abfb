#!/bin/bash
# ONNX Runtime against mlstudio on the Fashion-MNIST test set (10,000 samples):
#   1. train the MLP and CNN examples for one epoch;
#   2. export each (--save-outputs keeps mlstudio's logits) and run the file in ONNX Runtime:
#      max |ORT - mlstudio| <= 1e-4 and the same accuracy (tools/onnx/ort_check.js);
#   3. export the CNN as int8: ORT's accuracy within 1 point of the f32 file's, the file at
#      most 30% of the f32 file's size.
#
#   tools/onnx/ort_e2e.sh build/app/mlstudio build/ort
set -euo pipefail
exe=$(realpath "$1")
ort=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
examples="$here/../../resources/examples"
if [ ! -d "$ort/node_modules/onnxruntime-node" ]; then
  echo "onnxruntime-node is missing under $ort (scripts/setup installs it: npm install --ignore-scripts onnxruntime-node)" >&2
  exit 1
fi
export NODE_PATH="$ort/node_modules"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
check() { node "$here/ort_check.js" "$@" 2>/dev/null; }
field() { sed -E "s/.*\"$1\":([0-9.e+-]+).*/\1/"; }

id=0
for model in mlp cnn; do  # a fresh database: the MLP is run 1, the CNN run 2
  "$exe" --run "$examples/fashion-mnist-$model.mls" --epochs 1 --db runs.db --quiet
  id=$((id + 1))
  "$exe" export "$examples/fashion-mnist-$model.mls" --run "$id" --db runs.db --onnx $model.onnx --save-outputs $model.npy
  echo "$model f32: $(check $model.onnx --reference $model.npy)"
done

"$exe" export "$examples/fashion-mnist-cnn.mls" --run 2 --db runs.db --onnx cnn-int8.onnx --int8
f32=$(check cnn.onnx | field ort_accuracy)
int8=$(check cnn-int8.onnx | field ort_accuracy)
size_f32=$(stat -c %s cnn.onnx)
size_int8=$(stat -c %s cnn-int8.onnx)
echo "cnn int8: ORT accuracy $int8 (f32 $f32), $size_int8 of $size_f32 bytes"
awk -v a="$f32" -v b="$int8" -v s="$size_int8" -v t="$size_f32" 'BEGIN {
  drop = (a - b) * 100; ratio = s / t;
  printf "accuracy drop %.2f points (limit 1), size %.1f%% (limit 30%%)\n", drop, ratio * 100;
  exit !(drop <= 1 && ratio <= 0.30) }'
