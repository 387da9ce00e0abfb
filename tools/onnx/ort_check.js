// Runs an mlstudio ONNX export in ONNX Runtime (onnxruntime-node) on the Fashion-MNIST test
// set and compares it with mlstudio's own outputs (`mlstudio export --save-outputs F.npy`).
//
//   node tools/onnx/ort_check.js mlp.onnx --reference mlp.npy [--tolerance 1e-4] [--limit N]
//   node tools/onnx/ort_check.js mlp-int8.onnx            # accuracy only
//
// Prints one JSON line: samples, ORT accuracy, mlstudio accuracy and the max |difference|
// of the outputs. Exits 1 when the difference passes the tolerance or the predicted classes
// give another accuracy; 2 on bad input.
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

function usage(msg) {
  process.stderr.write(`ort_check: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const o = {model: null, reference: null, tolerance: 1e-4, limit: 0,
             data: '/usr/share/datasets/fashion-mnist'};
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--reference') o.reference = argv[++i];
    else if (a === '--tolerance') o.tolerance = Number(argv[++i]);
    else if (a === '--limit') o.limit = Number(argv[++i]);
    else if (a === '--data') o.data = argv[++i];
    else if (!o.model) o.model = a;
    else usage(`unexpected argument '${a}'`);
  }
  if (!o.model) usage('give the ONNX file');
  return o;
}

function readIdx(file) {
  let buf = fs.readFileSync(file);
  if (file.endsWith('.gz')) buf = zlib.gunzipSync(buf);
  const dims = buf[3];
  const shape = [];
  for (let i = 0; i < dims; ++i) shape.push(buf.readUInt32BE(4 + 4 * i));
  return {shape, data: buf.subarray(4 + 4 * dims)};
}

function readNpyF32(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') usage(`${file}: not an NPY file`);
  const len = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + len);
  if (!header.includes("'<f4'")) usage(`${file}: expected float32 data`);
  const shape = header.match(/\(([^)]*)\)/)[1].split(',').filter(s => s.trim()).map(Number);
  const body = buf.subarray(10 + len);
  const data = new Float32Array(body.buffer.slice(body.byteOffset, body.byteOffset + body.length));
  return {shape, data};
}

function argmax(a, off, n) {
  let k = 0;
  for (let j = 1; j < n; ++j) if (a[off + j] > a[off + k]) k = j;
  return k;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    usage('onnxruntime-node is not installed (scripts/setup installs it under build/ort)');
  }
  const images = readIdx(path.join(o.data, 't10k-images-idx3-ubyte.gz'));
  const labels = readIdx(path.join(o.data, 't10k-labels-idx1-ubyte.gz'));
  let n = images.shape[0];
  if (o.limit > 0) n = Math.min(n, o.limit);
  const ref = o.reference ? readNpyF32(o.reference) : null;
  if (ref && ref.shape[0] < n) n = ref.shape[0];
  const session = await ort.InferenceSession.create(o.model);
  const inputName = session.inputNames[0], outputName = session.outputNames[0];
  const per = 28 * 28, batch = 500;
  let maxDiff = 0, ortRight = 0, refRight = 0, classes = 0;
  for (let start = 0; start < n; start += batch) {
    const m = Math.min(batch, n - start);
    const x = new ort.Tensor('uint8', Uint8Array.from(images.data.subarray(start * per, (start + m) * per)), [m, 1, 28, 28]);
    const out = (await session.run({[inputName]: x}))[outputName];
    classes = out.dims[1];
    for (let i = 0; i < m; ++i) {
      const label = labels.data[start + i];
      if (argmax(out.data, i * classes, classes) === label) ++ortRight;
      if (ref) {
        const base = (start + i) * classes;
        for (let j = 0; j < classes; ++j)
          maxDiff = Math.max(maxDiff, Math.abs(out.data[i * classes + j] - ref.data[base + j]));
        if (argmax(ref.data, base, classes) === label) ++refRight;
      }
    }
  }
  const result = {model: o.model, samples: n, ort_accuracy: ortRight / n};
  if (ref) Object.assign(result, {mlstudio_accuracy: refRight / n, max_abs_diff: maxDiff, tolerance: o.tolerance});
  process.stdout.write(JSON.stringify(result) + '\n');
  if (ref && (!(maxDiff <= o.tolerance) || ortRight !== refRight)) process.exit(1);
}

main().catch(e => usage(String(e && e.message || e)));
