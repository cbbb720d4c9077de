#!/usr/bin/env node
// ONNX Runtime (onnxruntime-node, CPU provider) as the reference for .onnx files no framework here
// made, and as the baseline of bench/onnx_models.py. A test-time tool: `ember` never loads it.
//
//   node tools/ort_reference.js MODEL.onnx [--input NAME=FILE]... [--out DIR]
//                               [--threads N] [--repeat N] [--warmup N]
//
//   --input NAME=FILE  a graph input from a .npy file (little-endian, C order; f4 f8 f2 i8 i4 i1 u1
//                      b1), or from raw little-endian bytes as NAME=FILE:DTYPE:D0,D1,... with DTYPE
//                      an ORT type name (float32, int64, ...). Every graph input must be given.
//   --out DIR          writes each output as DIR/<output name>.npy (characters outside
//                      [A-Za-z0-9_.-] become '_'), and prints one line per output: name, dtype, shape.
//   --threads N        intra-op threads (default 1); inter-op 1, sequential execution, all graph
//                      optimisations (ORT's defaults otherwise).
//   --repeat N         timing: N timed runs after --warmup runs (default 3); prints one JSON line
//                      {"runs": N, "threads": T, "ms": [...], "median_ms": M, "min_ms": m}.
//
// Where onnxruntime-node comes from: $EMBER_NPM_DIR/node_modules (default ~/.cache/ember-npm),
// installed by deploy/setup.sh at the version pinned there. Exit status: 0 done, 2 bad arguments or
// files, 77 onnxruntime-node not installed (a test reports SKIP), 1 ONNX Runtime failed.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');

const NPM_DIR = process.env.EMBER_NPM_DIR || path.join(os.homedir(), '.cache', 'ember-npm');

// numpy descr <-> ORT tensor type and typed array.
const NPY = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<f2': ['float16', Uint16Array],
  '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array], '|i1': ['int8', Int8Array],
  '|u1': ['uint8', Uint8Array], '|b1': ['bool', Uint8Array],
};
const BY_TYPE = Object.fromEntries(Object.entries(NPY).map(([descr, [type, array]]) => [type, [descr, array]]));

function fail(message, code = 2) {
  process.stderr.write(`ort_reference: ${message}\n`);
  process.exit(code);
}

function typed(type, bytes) {
  if (!BY_TYPE[type]) fail(`unsupported dtype ${type} (one of ${Object.keys(BY_TYPE).join(' ')})`);
  const Array_ = BY_TYPE[type][1];
  const copy = new Uint8Array(bytes);  // aligned copy
  if (copy.byteLength % Array_.BYTES_PER_ELEMENT) fail(`${bytes.length} bytes is not a whole number of ${type}`);
  return new Array_(copy.buffer, 0, copy.byteLength / Array_.BYTES_PER_ELEMENT);
}

function readNpy(file) {
  const b = fs.readFileSync(file);
  if (b.length < 10 || b.toString('latin1', 0, 6) !== '\x93NUMPY') fail(`${file}: not a .npy file`);
  const major = b[6];
  const headerLen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = b.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !shape || /'fortran_order':\s*True/.test(header)) fail(`${file}: unsupported .npy header ${header}`);
  if (!NPY[descr[1]]) fail(`${file}: unsupported dtype ${descr[1]}`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const type = NPY[descr[1]][0];
  return { type, dims, data: typed(type, b.subarray(start + headerLen)) };
}

function writeNpy(file, type, dims, data) {
  const descr = BY_TYPE[type] && BY_TYPE[type][0];
  if (!descr) fail(`output dtype ${type} cannot be written as .npy`, 1);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';  // 64-byte aligned, ends in '\n'
  const pre = Buffer.alloc(10);
  Buffer.from('\x93NUMPY', 'latin1').copy(pre);
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const body = type === 'bool' ? Buffer.from(Uint8Array.from(data, (v) => (v ? 1 : 0)))
                               : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

function readInput(spec) {
  const eq = spec.indexOf('=');
  if (eq <= 0) fail(`--input ${spec}: want NAME=FILE`);
  const name = spec.slice(0, eq);
  const rest = spec.slice(eq + 1);
  const raw = /^(.*):([a-z0-9]+):([0-9,]*)$/.exec(rest);
  if (raw && !rest.endsWith('.npy')) {
    const dims = raw[3].split(',').filter((s) => s).map(Number);
    return [name, { type: raw[2], dims, data: typed(raw[2], fs.readFileSync(raw[1])) }];
  }
  return [name, readNpy(rest)];
}

function parseArgs(argv) {
  const a = { model: null, inputs: [], out: null, threads: 1, repeat: 0, warmup: 3 };
  for (let i = 0; i < argv.length; ++i) {
    const flag = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : fail(`${flag} needs a value`));
    if (flag === '--input') a.inputs.push(value());
    else if (flag === '--out') a.out = value();
    else if (flag === '--threads') a.threads = Number(value());
    else if (flag === '--repeat') a.repeat = Number(value());
    else if (flag === '--warmup') a.warmup = Number(value());
    else if (flag.startsWith('--') || a.model) fail(`unexpected argument ${flag}`);
    else a.model = flag;
  }
  if (!a.model) fail('usage: ort_reference.js MODEL.onnx [--input NAME=FILE]... [--out DIR] [--threads N] [--repeat N]');
  if (!(a.threads >= 1) || !(a.repeat >= 0) || !(a.warmup >= 0)) fail('--threads, --repeat, --warmup: numbers');
  return a;
}

function loadOrt() {
  try {
    return require(path.join(NPM_DIR, 'node_modules', 'onnxruntime-node'));
  } catch (e) {
    fail(`onnxruntime-node not found under ${NPM_DIR} (deploy/setup.sh installs it): ${e.message}`, 77);
  }
  return null;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(a.model)) fail(`${a.model}: no such file`);
  const ort = loadOrt();
  const session = await ort.InferenceSession.create(a.model, {
    executionProviders: ['cpu'], intraOpNumThreads: a.threads, interOpNumThreads: 1,
    executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const spec of a.inputs) {
    const [name, t] = readInput(spec);
    if (!session.inputNames.includes(name)) fail(`--input ${name}: the graph's inputs are ${session.inputNames.join(', ')}`);
    feeds[name] = new ort.Tensor(t.type, t.data, t.dims);
  }
  const missing = session.inputNames.filter((n) => !(n in feeds));
  if (missing.length) fail(`no --input for ${missing.join(', ')}`);

  let results = await session.run(feeds);
  if (a.out) {
    fs.mkdirSync(a.out, { recursive: true });
    for (const name of session.outputNames) {
      const t = results[name];
      writeNpy(path.join(a.out, `${name.replace(/[^A-Za-z0-9_.-]/g, '_')}.npy`), t.type, t.dims, t.data);
      console.log(`${name}: ${t.type} [${t.dims.join(', ')}]`);
    }
  }
  if (a.repeat > 0) {
    for (let i = 0; i < a.warmup; ++i) results = await session.run(feeds);
    const ms = [];
    for (let i = 0; i < a.repeat; ++i) {
      const t0 = process.hrtime.bigint();
      results = await session.run(feeds);
      ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    const sorted = [...ms].sort((x, y) => x - y);
    console.log(JSON.stringify({ runs: a.repeat, threads: a.threads, ms, median_ms: sorted[sorted.length >> 1],
                                 min_ms: sorted[0] }));
  }
}

main().catch((e) => fail(`ONNX Runtime: ${e && e.message ? e.message : e}`, 1));
