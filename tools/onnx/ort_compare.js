// Runs an ONNX file in ONNX Runtime (onnxruntime-node) on one f32 input and compares its
// first output with mlstudio's, both given as raw little-endian f32 files.
//
//   node tools/onnx/ort_compare.js model.onnx --input x.f32 --shape 3,1,12,12 --reference y.f32 [--tolerance 1e-4]
//
// Prints one JSON line: the output's dims, its element count and the max |ORT - mlstudio|.
// Exits 1 when the difference passes the tolerance or the sizes differ; 2 on bad input
// (onnxruntime-node missing included).
'use strict';
const fs = require('fs');

function usage(msg) {
  process.stderr.write(`ort_compare: ${msg}\n`);
  process.exit(2);
}

function readF32(file) {
  const buf = fs.readFileSync(file);
  return new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
}

async function main() {
  const o = {model: null, input: null, shape: null, reference: null, tolerance: 1e-4};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--input') o.input = argv[++i];
    else if (a === '--shape') o.shape = argv[++i].split(',').map(Number);
    else if (a === '--reference') o.reference = argv[++i];
    else if (a === '--tolerance') o.tolerance = Number(argv[++i]);
    else if (!o.model) o.model = a;
    else usage(`unexpected argument '${a}'`);
  }
  if (!o.model || !o.input || !o.shape || !o.reference) usage('give the model, --input, --shape and --reference');
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    usage('onnxruntime-node is not installed (scripts/setup installs it under build/ort)');
  }
  const x = readF32(o.input), ref = readF32(o.reference);
  if (x.length !== o.shape.reduce((a, b) => a * b, 1)) usage(`${o.input}: ${x.length} values for shape ${o.shape}`);
  const session = await ort.InferenceSession.create(o.model);
  const out = (await session.run({[session.inputNames[0]]: new ort.Tensor('float32', x, o.shape)}))[session.outputNames[0]];
  let maxDiff = out.data.length === ref.length ? 0 : Infinity;
  for (let i = 0; i < out.data.length && i < ref.length; ++i) maxDiff = Math.max(maxDiff, Math.abs(out.data[i] - ref[i]));
  process.stdout.write(JSON.stringify({model: o.model, dims: out.dims, values: out.data.length,
                                       max_abs_diff: maxDiff, tolerance: o.tolerance}) + '\n');
  if (!(maxDiff <= o.tolerance)) process.exit(1);
}

main().catch(e => usage(String(e && e.message || e)));
