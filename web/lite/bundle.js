// bundle.js: fetch a webgrad.export bundle (model.json, weights.safetensors, kernels/N.wgsl)
// and check every field before anything runs, so a damaged or truncated file is refused
// with a message naming it (the format: core/lite/__init__.py; the Python reader it mirrors:
// core/lite/bundle.py read_bundle).

export const FORMAT = "webgrad-lite";
export const VERSION = 1;
const BUFFER_DTYPES = ["float32", "int32", "bool", "int8"];
const IO_DTYPES = ["float32", "int32", "bool"];
export const STEP_OPS = ["elementwise", "matmul", "conv2d", "max_pool2d", "softmax", "log_softmax", "layer_norm",
  "reduce", "take"];
// What each buffer dtype may be stored as in weights.safetensors (float16: a float32 weight halved).
const FILE_DTYPES = {float32: ["F32", "F16"], int32: ["I32"], bool: ["U32"], int8: ["I8"]};
const ITEM_BYTES = {F32: 4, F16: 2, I32: 4, U32: 4, I8: 1};

/** A failure of lite.js: message for people, .kind for code ("load", "input", "predict", "device"). */
export class LiteError extends Error {
  /** @param {"load" | "input" | "predict" | "device"} kind @param {string} message */
  constructor(kind, message) {
    super(`webgrad lite: ${message}`);
    this.name = "LiteError";
    this.kind = kind;
  }
}

/** @typedef {number | [number, number]} Dim  an int, or [scale, offset]: scale * batch + offset */

/** The number a DIM stands for at batch size `batch`. @param {Dim} n @param {number} batch */
export function at(n, batch) {
  return typeof n === "number" ? n : n[0] * batch + n[1];
}

/** The elements of a shape of DIMs at `batch`. @param {Dim[]} shape @param {number} batch */
export function count(shape, batch) {
  let total = 1;
  for (const n of shape) total *= at(n, batch);
  return total;
}

/** A shape for people: (batch, 64), as Python's run.py writes it. @param {Dim[]} shape */
export function shapeText(shape) {
  return `(${shape.map(dimText).join(", ")})`;
}

/** @param {Dim} n */
export function dimText(n) {
  if (typeof n === "number") return String(n);
  const scale = n[0] === 1 ? "batch" : `${n[0]}*batch`;
  return n[1] ? `${scale}${n[1] > 0 ? "+" : ""}${n[1]}` : scale;
}

async function fetchFile(url, what) {
  let response;
  try {
    response = await fetch(url);
  } catch (error) {
    throw new LiteError("load", `${url}: cannot be fetched (${error.message}); check the URL, that its server `
      + "allows this page's origin (CORS) and that the page's CSP allows connecting to it (connect-src)");
  }
  if (!response.ok) {
    throw new LiteError("load", `${url}: HTTP ${response.status} ${response.statusText} (the bundle's ${what})`);
  }
  return response;
}

const isInt = (v) => Number.isInteger(v);
const isDim = (n) => (isInt(n) && n >= 0) || (Array.isArray(n) && n.length === 2 && n.every(isInt));
// A path inside the bundle folder: no scheme, no "..", no absolute path (a bundle reads only its own files).
const isInsidePath = (p) => typeof p === "string" && /^[\w\-.]+(\/[\w\-.]+)*$/.test(p)
  && !p.split("/").some((part) => part === ".." || part === ".");

/** Check model.json's fields; throws LiteError naming `file` and the field. */
export function checkModel(meta, file) {
  const need = (ok, what) => {
    if (!ok) throw new LiteError("load", `${file}: ${what}`);
  };
  need(meta && typeof meta === "object" && !Array.isArray(meta), "expected a JSON object");
  need(meta.format === FORMAT, `field 'format' must be "${FORMAT}", got ${JSON.stringify(meta.format)}`);
  need(meta.version === VERSION, `field 'version' ${JSON.stringify(meta.version)} is not ${VERSION} (a bundle `
    + "from another webgrad; export it again, or use the /lite.js of that webgrad)");
  for (const key of ["inputs", "outputs", "buffers", "steps", "kernels"]) {
    need(Array.isArray(meta[key]), `field '${key}' must be a list`);
  }
  const buffers = meta.buffers;
  const total = buffers.length;
  buffers.forEach((b, i) => {
    need(b && typeof b === "object" && BUFFER_DTYPES.includes(b.dtype) && Array.isArray(b.shape)
      && b.shape.every(isDim) && ["input", "weight", "step"].includes(b.role), `buffers[${i}] is malformed`);
    if (b.role === "weight") {
      need(typeof b.weight === "string" && b.shape.every(isInt), `buffers[${i}] (a weight) is malformed`);
      need(b.dtype !== "int8" || (isInt(b.scale) && b.scale >= 0 && b.scale < total
        && buffers[b.scale]?.role === "weight" && buffers[b.scale]?.dtype === "float32"),
      `buffers[${i}] (an int8 weight) names no float32 scale buffer`);
    }
  });
  meta.kernels.forEach((k, i) => need(isInsidePath(k) && k.endsWith(".wgsl"), `kernels[${i}] must be a path `
    + `inside the bundle ending in .wgsl, got ${JSON.stringify(k)}`));
  meta.steps.forEach((s, i) => {
    need(s && typeof s === "object" && STEP_OPS.includes(s.op), `steps[${i}].op ${JSON.stringify(s?.op)} is unknown`);
    need(Array.isArray(s.inputs) && s.inputs.every((k) => isInt(k) && k >= 0 && k < total)
      && isInt(s.output) && s.output >= 0 && s.output < total, `steps[${i}] names a missing buffer`);
    need(buffers[s.output].role === "step", `steps[${i}] writes buffer ${s.output}, which is not a step's`);
    need(isInt(s.kernel) && s.kernel >= 0 && s.kernel < meta.kernels.length,
      `steps[${i}].kernel is not one of the kernels`);
    need(Array.isArray(s.params) && s.params.every(isDim) && isDim(s.grid), `steps[${i}].params or grid is malformed`);
    need(s.attrs && typeof s.attrs === "object", `steps[${i}].attrs must be an object`);
  });
  for (const key of ["inputs", "outputs"]) {
    meta[key].forEach((io, i) => {
      need(io && typeof io === "object" && isInt(io.buffer) && io.buffer >= 0 && io.buffer < total,
        `${key}[${i}] names a missing buffer`);
      need(typeof io.name === "string" && IO_DTYPES.includes(io.dtype) && Array.isArray(io.shape)
        && io.shape.every(isDim) && io.dtype === buffers[io.buffer].dtype, `${key}[${i}] is malformed`);
      need(io.index_rows === undefined || io.index_rows === null || isDim(io.index_rows),
        `${key}[${i}].index_rows is malformed`);
    });
  }
  need(meta.inputs.every((io) => buffers[io.buffer].role === "input"), "an input names a buffer that is not an input");
  need(meta.outputs.length > 0, "the bundle has no outputs");
  const batch = meta.batch;
  need(batch === null || batch === undefined || (isInt(batch.input) && batch.input >= 0
    && batch.input < meta.inputs.length && isInt(batch.dim) && batch.dim >= 0
    && batch.dim < meta.inputs[batch.input].shape.length), "field 'batch' is malformed");
  const weights = meta.weights;
  need(weights && isInsidePath(weights.file) && ["float32", "float16", "int8"].includes(weights.encoding),
    "field 'weights' is malformed");
  need(meta.labels === null || meta.labels === undefined || Array.isArray(meta.labels), "field 'labels' must be a list");
}

/** float16 bits -> the float32 value (weights exported with weights="float16" are widened at load). */
function halfToFloat(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const fraction = h & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;  // zero and subnormals
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

/**
 * The tensors of a safetensors file, checked: {name: {dtype, shape, bytes (a copy, aligned)}}.
 * @param {ArrayBuffer} data @param {string} file
 */
export function readSafetensors(data, file) {
  const fail = (what) => {
    throw new LiteError("load", `${file}: ${what}`);
  };
  if (data.byteLength < 8) fail(`${data.byteLength} bytes is too short for a safetensors file; it is truncated`);
  const view = new DataView(data);
  const length = view.getUint32(0, true) + view.getUint32(4, true) * 2 ** 32;
  if (length > data.byteLength - 8) fail(`its header says ${length} bytes of JSON but the file has `
    + `${data.byteLength} bytes; it is truncated or damaged`);
  let header;
  try {
    header = JSON.parse(new TextDecoder("utf-8", {fatal: true}).decode(new Uint8Array(data, 8, length)));
  } catch (error) {
    fail(`its header is not valid JSON (${error.message}); the file is damaged`);
  }
  if (!header || typeof header !== "object" || Array.isArray(header)) fail("its header is not a JSON object");
  const start = 8 + length;
  const available = data.byteLength - start;
  const tensors = {};
  for (const [name, entry] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const offsets = entry?.data_offsets;
    if (!(entry?.dtype in ITEM_BYTES) || !Array.isArray(entry.shape) || !entry.shape.every((n) => isInt(n) && n >= 0)
      || !Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((n) => isInt(n) && n >= 0)
      || offsets[0] > offsets[1]) fail(`tensor '${name}' has a malformed header entry`);
    const elements = entry.shape.reduce((a, b) => a * b, 1);
    if (offsets[1] - offsets[0] !== elements * ITEM_BYTES[entry.dtype]) {
      fail(`tensor '${name}' holds ${offsets[1] - offsets[0]} bytes, its shape [${entry.shape}] needs `
        + `${elements * ITEM_BYTES[entry.dtype]}; the file is damaged`);
    }
    if (offsets[1] > available) fail(`tensor '${name}' lies at bytes ${offsets[0]}..${offsets[1]} of the data, `
      + `but the file has only ${available}; it is truncated`);
    tensors[name] = {dtype: entry.dtype, shape: entry.shape, bytes: data.slice(start + offsets[0], start + offsets[1])};
  }
  return tensors;
}

/** The values of a weight buffer as the typed array its dtype runs as (float16 widened). */
function weightArray(tensor, dtype) {
  if (tensor.dtype === "F16") {
    const halves = new Uint16Array(tensor.bytes);
    const out = new Float32Array(halves.length);
    for (let i = 0; i < halves.length; i++) out[i] = halfToFloat(halves[i]);
    return out;
  }
  if (dtype === "float32") return new Float32Array(tensor.bytes);
  if (dtype === "int32") return new Int32Array(tensor.bytes);
  if (dtype === "bool") return new Uint32Array(tensor.bytes);
  return new Int8Array(tensor.bytes);
}

/**
 * Fetch and check the bundle at `base` (a folder URL ending in "/"). `kernels`: also fetch the
 * WGSL (the WebGPU path needs it; the CPU path runs the same steps without it).
 * Resolves {meta, weights: {buffer id: typed array}, kernels: [text], bytes}.
 * @param {string} base @param {boolean} withKernels
 */
export async function fetchBundle(base, withKernels) {
  const modelUrl = new URL("model.json", base).href;
  const modelResponse = await fetchFile(modelUrl, "model.json");
  const raw = await modelResponse.arrayBuffer();
  let meta;
  try {
    meta = JSON.parse(new TextDecoder("utf-8", {fatal: true}).decode(raw));
  } catch (error) {
    throw new LiteError("load", `${modelUrl}: not valid JSON (${error.message}); the file is truncated or damaged`);
  }
  checkModel(meta, modelUrl);
  let bytes = raw.byteLength;
  const weightsUrl = new URL(meta.weights.file, base).href;
  const kernelUrls = withKernels ? meta.kernels.map((k) => new URL(k, base).href) : [];
  const [data, kernels] = await Promise.all([
    fetchFile(weightsUrl, "weights").then((r) => r.arrayBuffer()),
    Promise.all(kernelUrls.map((url) => fetchFile(url, "kernel").then((r) => r.text()))),
  ]);
  bytes += data.byteLength + kernels.reduce((a, k) => a + k.length, 0);
  kernels.forEach((source, i) => {
    if (!source.includes("fn main(")) {
      throw new LiteError("load", `${kernelUrls[i]}: not a bundle kernel (no entry point main); the file is damaged`);
    }
  });
  const tensors = readSafetensors(data, weightsUrl);
  const weights = {};
  meta.buffers.forEach((b, i) => {
    if (b.role !== "weight") return;
    const tensor = tensors[b.weight];
    const where = `${weightsUrl}: tensor '${b.weight}' (buffer ${i} of model.json)`;
    if (!tensor) throw new LiteError("load", `${where} is missing`);
    if (tensor.shape.length !== b.shape.length || tensor.shape.some((n, d) => n !== b.shape[d])) {
      throw new LiteError("load", `${where} has shape [${tensor.shape}], model.json says [${b.shape}]`);
    }
    if (!FILE_DTYPES[b.dtype].includes(tensor.dtype)) {
      throw new LiteError("load", `${where} is ${tensor.dtype}, model.json says ${b.dtype}`);
    }
    weights[i] = weightArray(tensor, b.dtype);
  });
  return {meta, weights, kernels, kernelUrls, bytes};
}
