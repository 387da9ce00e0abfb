// Runs ONNX files in ONNX Runtime (onnxruntime-node) on f32 inputs and compares each file's
// first output with mlstudio's, all given as raw little-endian f32 files.
//
//   node tools/onnx/ort_compare.js model.onnx --input x.f32 --shape 3,1,12,12 --reference y.f32 [--tolerance 1e-4]
//   node tools/onnx/ort_compare.js --manifest cases.json
//       cases.json: [{"model": "a.onnx", "inputs": [{"file": "x.f32", "shape": [2, 3]}, ...],
//                     "reference": "y.f32", "tolerance": 1e-5}, ...]  (inputs in the model's order)
//
// Prints one JSON line per model: the output's dims, its element count, the max |ORT - mlstudio|
// and the max of |ORT - mlstudio| / max(1, |mlstudio|), which the tolerance bounds. Exits 1
// when a difference passes its tolerance, a size differs or ORT refuses a file; 2 on bad input
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

async function compare(ort, c) {
  const feeds = {};
  let session;
  try {
    session = await ort.InferenceSession.create(c.model);
  } catch (e) {
    return {model: c.model, error: String(e && e.message || e), ok: false};
  }
  if (session.inputNames.length !== c.inputs.length)
    return {model: c.model, error: `the model takes ${session.inputNames.length} inputs, ${c.inputs.length} given`, ok: false};
  c.inputs.forEach((inp, i) => {
    const x = readF32(inp.file);
    if (x.length !== inp.shape.reduce((a, b) => a * b, 1)) usage(`${inp.file}: ${x.length} values for shape ${inp.shape}`);
    feeds[session.inputNames[i]] = new ort.Tensor('float32', x, inp.shape);
  });
  let out;
  try {
    out = (await session.run(feeds))[session.outputNames[0]];
  } catch (e) {
    return {model: c.model, error: String(e && e.message || e), ok: false};
  }
  const ref = readF32(c.reference);
  let maxAbs = out.data.length === ref.length ? 0 : Infinity, maxRel = maxAbs;
  for (let i = 0; i < out.data.length && i < ref.length; ++i) {
    const d = Math.abs(out.data[i] - ref[i]);
    maxAbs = Math.max(maxAbs, d);
    maxRel = Math.max(maxRel, d / Math.max(1, Math.abs(ref[i])));
  }
  const tolerance = c.tolerance === undefined ? 1e-4 : c.tolerance;
  return {model: c.model, dims: out.dims, values: out.data.length, max_abs_diff: maxAbs, max_rel_diff: maxRel,
          tolerance, ok: maxRel <= tolerance};
}

async function main() {
  const argv = process.argv.slice(2);
  let cases = [];
  const one = {model: null, inputs: [], reference: null, tolerance: 1e-4};
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--manifest') cases = JSON.parse(fs.readFileSync(argv[++i], 'utf8'));
    else if (a === '--input') one.inputs.push({file: argv[++i], shape: null});
    else if (a === '--shape') {
      if (!one.inputs.length) usage('--shape follows its --input');
      one.inputs[one.inputs.length - 1].shape = argv[++i].split(',').map(Number);
    } else if (a === '--reference') one.reference = argv[++i];
    else if (a === '--tolerance') one.tolerance = Number(argv[++i]);
    else if (!one.model) one.model = a;
    else usage(`unexpected argument '${a}'`);
  }
  if (one.model) {
    if (!one.inputs.length || one.inputs.some(x => !x.shape) || !one.reference)
      usage('give the model, --input with --shape, and --reference');
    cases.push(one);
  }
  if (!cases.length) usage('give a model or --manifest');
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    usage('onnxruntime-node is not installed (scripts/setup installs it under build/ort)');
  }
  let failed = 0;
  for (const c of cases) {
    const r = await compare(ort, c);
    if (!r.ok) ++failed;
    process.stdout.write(JSON.stringify(r) + '\n');
  }
  if (failed) process.exit(1);
}

main().catch(e => usage(String(e && e.message || e)));
