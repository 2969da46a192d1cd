// /lite.js: run a webgrad.export bundle in any page, with nothing but the browser (ES module).
//
//   import {load} from "http://HOST/lite.js";
//   const model = await load("https://example.org/digits-lite/", {device: "auto"});  // or "webgpu", "cpu"
//   const {outputs, shape, probabilities, label} = await model.predict(new Float32Array(64));
//   model.info   // {engine: "lite", device, name, inputs, outputs, labels, metadata, ops, bytes, kernels}
//   model.dispose()
//
// The same load/predict as /widget.js's (web/widget/model.js), so a page can swap one for the
// other; no Python here: the bundle's steps run on WebGPU (gpu.js, through the bundle's own
// WGSL) or in plain JavaScript (cpu.js) where the page has no adapter. The bundle format is in
// core/lite/__init__.py; core/lite/run.py is the native runner this one mirrors.
import {LiteError, at, count, dimText, fetchBundle, shapeText} from "./bundle.js";
import {CpuRunner} from "./cpu.js";
import {GpuRunner, findAdapter, softwareRenderer} from "./gpu.js";
import {imageDataOf, isImageLike, toPixels} from "../widget/image.js";

export {LiteError};

const TYPED = {float32: Float32Array, int32: Int32Array, bool: Uint32Array};

/** A shape of DIMs as people read it: ["batch", 64]. */
const described = (shape) => shape.map((n) => (typeof n === "number" ? n : dimText(n)));

/** Nested arrays and typed arrays -> their values in order, and the nested shape. */
function flatten(value, out, shape, depth, name) {
  if (Array.isArray(value) || (ArrayBuffer.isView(value) && !(value instanceof DataView))) {
    const length = /** @type {any} */ (value).length;
    if (shape.length === depth) shape.push(length);
    else if (shape[depth] !== length) throw new LiteError("input", `${name}: nested arrays are ragged: every row `
      + `must have the same length (found ${length} where ${shape[depth]} was expected)`);
    if (depth === 0 && ArrayBuffer.isView(value)) return value;  // a flat typed array: used as it is
    for (let i = 0; i < length; i++) flatten(value[i], out, shape, depth + 1, name);
    return out;
  }
  if (typeof value === "bigint") value = Number(value);
  if (typeof value === "boolean") value = Number(value);
  if (typeof value !== "number") {
    throw new LiteError("input", `${name}: found ${JSON.stringify(value) ?? typeof value} where a number belongs`);
  }
  out.push(value);
  return out;
}

/** The image layout {channels, height, width} an input takes, as the widget reads it, or null. */
function imageLayout(spec, metadata) {
  const shape = spec.shape.map((n) => at(n, 1));
  if (spec.dtype !== "float32") return null;
  const given = metadata?.image;
  if (given?.height && given?.width) return {channels: 1, ...given};
  if (shape.length === 4) return {channels: shape[1], height: shape[2], width: shape[3]};
  if (shape.length === 3) return {channels: 1, height: shape[1], width: shape[2]};
  const side = Math.round(Math.sqrt(shape[1]));
  if (shape.length === 2 && side > 1 && side * side === shape[1]) return {channels: 1, height: side, width: side};
  return null;
}

/** Check `value` (typed array, nested arrays, or an image for an image input) against `spec`. */
function toValues(value, spec, name, metadata, fit) {
  const expect = `expected shape ${shapeText(spec.shape)}`;
  if (isImageLike(value)) {
    const layout = imageLayout(spec, metadata);
    if (!layout) throw new LiteError("input", `${name} takes ${spec.dtype} values, not an image; ${expect}`);
    try {
      const values = toPixels(imageDataOf(value), {...layout, fit: fit || layout.fit || "full"});
      return {values, given: [values.length]};
    } catch (error) {
      throw new LiteError("input", `${name}: ${error.message.replace(/^webgrad widget: /, "")}`);
    }
  }
  if (!Array.isArray(value) && !ArrayBuffer.isView(value)) {
    throw new LiteError("input", `${name}: predict() takes a typed array, (nested) arrays of numbers or an image; `
      + `got ${value === null ? "null" : value?.constructor?.name || typeof value}; ${expect}`);
  }
  const given = [];
  const values = flatten(value, [], given, 0, `${name} (${expect})`);
  return {values, given};
}

/** The batch size that `values` (of one input with `spec`) stands for, or an input error. */
function batchOf(values, given, spec, dim, name) {
  const n = spec.shape[dim];
  const others = spec.shape.filter((_, d) => d !== dim);
  const rest = count(others, 0);
  const expect = `expected shape ${shapeText(spec.shape)}`;
  if (others.some((m) => typeof m !== "number") || typeof n === "number") {
    throw new LiteError("input", `${name}: the bundle's batch dim is not the only one that follows the batch`);
  }
  // values.length = rest * (scale * batch + offset); nested input of the full rank gives the batch itself.
  const batch = given.length === spec.shape.length ? (given[dim] - n[1]) / n[0]
    : (values.length / rest - n[1]) / n[0];
  if (!Number.isInteger(batch) || batch < 0 || (batch === 0 && values.length === 0)) {
    throw new LiteError("input", `${name}: ${expect} (${rest} values per item), got ${values.length} values`
      + `${given.length > 1 ? ` of shape (${given.join(", ")})` : ""}`);
  }
  return batch;
}

/** `values` as the typed array the input buffer holds, after the checks of run.py's _check. */
function checked(values, given, spec, batch, name) {
  const shape = spec.shape.map((n) => at(n, batch));
  const expect = `expected shape ${shapeText(spec.shape)}${shapeText(spec.shape).includes("batch") ? ` `
    + `(here (${shape.join(", ")}))` : ""}`;
  const sameRank = given.length === shape.length;
  if (values.length !== count(shape, 1) || (sameRank && given.some((m, d) => m !== shape[d]))) {
    throw new LiteError("input", `${name}: ${expect}, got ${values.length} values`
      + `${given.length > 1 ? ` of shape (${given.join(", ")})` : ""}`);
  }
  if (spec.dtype === "int32") {
    const rows = spec.index_rows === undefined || spec.index_rows === null ? null : at(spec.index_rows, batch);
    for (let i = 0; i < values.length; i++) {
      const v = Number(values[i]);
      if (!Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 31) {
        throw new LiteError("input", `${name} holds indices: whole numbers, found ${values[i]}; ${expect}, `
          + "as an Int32Array or arrays of integers");
      }
      if (rows !== null && (v < 0 || v >= rows)) {
        throw new LiteError("input", `${name} indexes ${rows} rows: its values must lie in [0, ${rows}), `
          + `found ${v}; ${expect}`);
      }
    }
  }
  const Typed = TYPED[spec.dtype];
  if (spec.dtype === "bool") return Uint32Array.from(values, (v) => (Number(v) !== 0 ? 1 : 0));
  return values instanceof Typed ? values : Typed.from(values, Number);
}

function softmax(values) {
  let top = -Infinity;
  for (const v of values) top = Math.max(top, v);
  const exps = Array.from(values, (v) => Math.exp(v - top));
  const total = exps.reduce((a, b) => a + b, 0);
  return new Float32Array(exps.map((e) => e / total));
}

/** An output as the page gets it: float32 -> Float32Array, int32 -> Int32Array, bool -> Uint8Array of 0/1. */
function outputArray(raw, spec) {
  return spec.dtype === "bool" ? Uint8Array.from(raw) : raw;
}

class LiteModel {
  constructor(runner, meta, info) {
    this.runner = runner;
    this.meta = meta;
    this.info = info;
    this.disposed = false;
  }

  /**
   * Run the model on `input` (one per bundle input; an array of them when it takes several):
   * a typed array of one item or a batch, nested arrays, or an image for an image input.
   * Resolves {outputs, shape, outputsAll: [{name, dtype, outputs, shape}], probabilities?,
   * index?, label?}: for a classifier (output (N, K), K > 1) probabilities are the softmax of
   * the first item's outputs (kept if they already are probabilities), label its most likely class.
   * options.fit: how an image is cropped ("full", or "ink": the drawn part), as the widget's.
   */
  async predict(input, {fit = null} = {}) {
    if (this.disposed) throw new LiteError("predict", "this model was disposed; load() it again");
    const specs = this.meta.inputs;
    let given = [input];
    if (specs.length > 1) {
      if (!Array.isArray(input) || input.length !== specs.length) {
        throw new LiteError("input", `the bundle takes ${specs.length} inputs (${specs.map((s) => `${s.name} `
          + `${shapeText(s.shape)}`).join(", ")}): pass an array of ${specs.length}`);
      }
      given = input;
    }
    const read = specs.map((spec, k) => ({...toValues(given[k], spec, `input '${spec.name}'`, this.info.metadata,
      fit), spec}));
    const where = this.meta.batch;
    const batch = where ? batchOf(read[where.input].values, read[where.input].given, specs[where.input], where.dim,
      `input '${specs[where.input].name}'`) : 0;
    const arrays = read.map(({values, given: nested, spec}) => checked(values, nested, spec, batch,
      `input '${spec.name}'`));
    let raw;
    try {
      raw = await this.runner.run(batch, arrays);
    } catch (error) {
      throw error instanceof LiteError ? error : new LiteError("predict", error.message);
    }
    const outputsAll = this.meta.outputs.map((spec, k) => ({name: spec.name, dtype: spec.dtype,
      outputs: outputArray(raw[k], spec), shape: spec.shape.map((n) => at(n, batch))}));
    const {outputs, shape} = outputsAll[0];
    const result = {outputs, shape, outputsAll};
    const classes = shape.length === 2 && outputsAll[0].dtype === "float32" ? shape[1] : 0;
    if (classes > 1 && shape[0] > 0) {
      const first = outputs.subarray(0, classes);
      const sum = first.reduce((a, b) => a + b, 0);
      const already = first.every((v) => v >= 0 && v <= 1) && Math.abs(sum - 1) < 1e-3;
      const probabilities = already ? Float32Array.from(first) : softmax(first);
      let index = 0;
      for (let i = 1; i < classes; i++) if (probabilities[i] > probabilities[index]) index = i;
      const labels = this.info.labels;
      Object.assign(result, {probabilities, index, label: labels?.[index] !== undefined ? String(labels[index])
        : String(index)});
    }
    return result;
  }

  /** Free the model's GPU buffers and device (a later predict() is refused). */
  dispose() {
    if (this.disposed) return;
    this.disposed = true;
    this.runner.dispose?.();
  }
}

/**
 * Load the bundle in the folder at `url` (any origin that allows it by CORS; trailing slash
 * optional). options.device: "auto" (WebGPU on a hardware adapter; the CPU where the page has
 * none, or only a software one such as SwiftShader, which computes on that same CPU with more
 * cost per step), "webgpu" or "cpu". info.reason says why auto chose. Rejects with a LiteError
 * naming the file that is missing or damaged.
 * @param {string} url @param {{device?: "auto" | "webgpu" | "cpu"}} [options]
 */
export async function load(url, {device = "auto"} = {}) {
  if (typeof url !== "string" || !url) throw new LiteError("load", "load(url) needs the bundle folder's URL, "
    + "e.g. https://example.org/digits-lite/");
  if (!["auto", "webgpu", "cpu"].includes(device)) throw new LiteError("load", `device must be "auto", "webgpu" `
    + `or "cpu", got ${JSON.stringify(device)}`);
  const base = new URL(url.endsWith("/") ? url : `${url}/`, globalThis.document?.baseURI ?? globalThis.location?.href)
    .href;
  const found = device === "cpu" ? null : await findAdapter();
  if (device === "webgpu" && !found) throw new LiteError("device", "this browser gives the page no WebGPU "
    + "adapter (navigator.gpu is missing or found none); use device: \"cpu\" or \"auto\"");
  const software = found && softwareRenderer(found);
  const adapter = device === "auto" && software ? null : found;
  let reason = device === "auto" ? (software ? `the only WebGPU adapter is a software renderer (${software}): `
    + "the CPU path computes faster" : found ? "a hardware WebGPU adapter" : "no WebGPU adapter") : "asked for";
  const bundle = await fetchBundle(base, Boolean(adapter));
  const modelUrl = new URL("model.json", base).href;
  // The CPU runner checks every step (params, programs) even when WebGPU runs them: one set of checks.
  const cpu = new CpuRunner(bundle.meta, bundle.weights, modelUrl);
  let runner = null;
  if (adapter) {
    try {
      runner = await GpuRunner.create(adapter, bundle);
    } catch (error) {
      // A device WebGPU cannot give falls back to the CPU on "auto"; a damaged kernel never does.
      if (device === "webgpu" || !(error instanceof LiteError) || error.kind !== "device") throw error;
      reason = `WebGPU gave no device: ${error.message}`;
    }
  }
  if (!runner) runner = cpu;
  const meta = bundle.meta;
  const io = (spec) => ({name: spec.name, dtype: spec.dtype, shape: described(spec.shape),
    ...(spec.causal === undefined ? {} : {causal: spec.causal})});
  const info = {
    engine: "lite", device: runner instanceof GpuRunner ? "webgpu" : "cpu", reason, url: base, name: meta.name,
    inputs: meta.inputs.map(io), outputs: meta.outputs.map(io), labels: meta.labels ?? null,
    metadata: meta.metadata ?? {}, ops: meta.ops ?? [], bytes: bundle.bytes, kernels: meta.kernels.length,
    weights: meta.weights.encoding,
  };
  return new LiteModel(runner, meta, info);
}
