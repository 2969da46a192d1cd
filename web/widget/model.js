// model.js: load(url) -> Model, a stored webgrad model usable from any page's JavaScript.
//
// When the model has a web bundle (webgrad.store.push exports one beside it), it runs on
// /lite.js: WebGPU or plain JavaScript in the page, no Python (model.info.engine "lite").
// Otherwise it is rebuilt in Python (webgrad.store.pull in the runtime's worker, from the
// architecture record and safetensors weights stored with it; model.info.engine "python",
// model.info.lite_reason says why there is no bundle). Either way the host page needs no code
// but this. Every failure rejects with an Error whose message says what went wrong and what
// to do, within `timeoutMs`: nothing stays pending forever.
import {infoFromRecord, LiteEngine, PythonEngine, WidgetError} from "./engines.js";
import {imageDataOf, isImageLike, toPixels} from "./image.js";

export {WidgetError};

const ROOT = new URL("../", import.meta.url).href;  // the webgrad site this module came from
let counter = 0;

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new WidgetError("timeout", `${what} took longer than ${Math.round(ms / 1000)} s `
      + "(a slow connection or machine? pass a larger timeoutMs)")), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const INTEGER_DTYPES = new Set(["int64", "int32", "int16", "int8", "uint8"]);

// Typed arrays of integers (Int32Array, BigInt64Array, ...) keep the model's integer input integral.
function isIntegerArray(value) {
  return value instanceof Int8Array || value instanceof Uint8Array || value instanceof Int16Array
    || value instanceof Uint16Array || value instanceof Int32Array || value instanceof Uint32Array
    || value instanceof BigInt64Array || value instanceof BigUint64Array;
}

function flatten(value, out, shape, depth) {
  if (Array.isArray(value) || ArrayBuffer.isView(value)) {
    const length = /** @type {any} */ (value).length;
    if (shape.length === depth) shape.push(length);
    else if (shape[depth] !== length) throw new WidgetError("input", "nested arrays are ragged: every row must "
      + `have the same length (found ${length} where ${shape[depth]} was expected)`);
    for (let i = 0; i < length; i++) flatten(value[i], out, shape, depth + 1);
    return;
  }
  if (typeof value === "bigint") value = Number(value);
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new WidgetError("input", `inputs must be finite numbers, found ${JSON.stringify(value) ?? typeof value}`);
  }
  out.push(value);
}

function softmax(values) {
  const top = Math.max(...values);
  const exps = Array.from(values, (v) => Math.exp(v - top));
  const total = exps.reduce((a, b) => a + b, 0);
  return new Float32Array(exps.map((e) => e / total));
}

export class Model {
  /** `engine`: what runs it (engines.js); `info`: its info dict, with engine "lite" or "python". */
  constructor(url, info, engine, options) {
    this.url = url;
    this.info = info;
    this.engine = engine;
    this.options = options;
    this.disposed = false;
  }

  /**
   * What the model's input is: the record webgrad.store.push wrote ({kind: "image" | "vector" |
   * "points" | "tokens", ...}; see core/store.py), or, for a model pushed before there was one,
   * the same guess from its input shape and dtype. null when nothing is known.
   */
  get input() {
    if (this.info.input) return this.info.input;
    const shape = this.info.input_shape;
    if (this.takesIntegers()) return {kind: "tokens", vocab: null, vocab_size: null, context: null};
    if (!shape) return null;
    const layout = this.imageLayout();
    if (layout && (shape.length > 2 || layout.height >= 8)) return {kind: "image", ...layout};
    if (shape.length !== 2) return null;
    if (shape[1] <= 2) return {kind: "points", dims: shape[1], x_range: [-1, 1], y_range: shape[1] === 2 ? [-1, 1] : null};
    return {kind: "vector", size: shape[1], names: null};
  }

  /** True when the model takes integer ids (its recorded input dtype is an integer type). */
  takesIntegers() {
    return INTEGER_DTYPES.has(this.info.input_dtype);
  }

  /** The image layout {channels, height, width} the model takes, or null if it takes no image. */
  imageLayout() {
    const recorded = this.info.input;
    if (recorded?.kind === "image") return {channels: recorded.channels || 1, height: recorded.height,
      width: recorded.width};
    const given = this.info.metadata?.image;
    if (given && given.height && given.width) return {channels: 1, ...given};
    const shape = this.info.input_shape || [];
    if (shape.length === 4) return {channels: shape[1], height: shape[2], width: shape[3]};
    if (shape.length === 3) return {channels: 1, height: shape[1], width: shape[2]};
    const side = Math.round(Math.sqrt(shape[1]));
    if (shape.length === 2 && side * side === shape[1] && side > 1) return {channels: 1, height: side, width: side};
    return null;
  }

  /**
   * input -> {data: Float32Array | Int32Array, shape, dtype}: the batch the model gets (batch size
   * 1 unless given). Token ids stay integers (an embedding refuses floats); any length goes.
   */
  toBatch(input, fit) {
    const expected = this.info.input_shape;
    const integers = this.takesIntegers();
    let values, given;
    if (isImageLike(input)) {
      const layout = this.imageLayout();
      if (!layout) throw new WidgetError("input", `this model takes input of shape [${expected}], not an image`);
      if (integers) throw new WidgetError("input", `this model takes token ids (${this.info.input_dtype}), not an image`);
      values = toPixels(imageDataOf(input), {...layout, fit: fit || layout.fit || "full"});
      given = [values.length];
    } else if (input instanceof Float32Array || Array.isArray(input) || ArrayBuffer.isView(input)) {
      const flat = [];
      given = [];
      flatten(input, flat, given, 0);
      if (integers) {
        const bad = flat.find((v) => !Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 31);
        if (bad !== undefined) throw new WidgetError("input", `this model takes token ids `
          + `(${this.info.input_dtype}): whole numbers, found ${bad}${isIntegerArray(input) ? "" : " (pass an "
          + "Int32Array or arrays of integers)"}`);
        values = new Int32Array(flat);
        return {data: values, shape: given.length === 1 ? [1, given[0]] : given, dtype: "int32"};
      }
      values = new Float32Array(flat);
    } else {
      throw new WidgetError("input", `predict() takes a Float32Array, (nested) arrays of numbers, ImageData, `
        + `a <canvas> or an <img>; got ${input === null ? "null" : input?.constructor?.name || typeof input}`);
    }
    if (!expected) return {data: values, shape: given.length === 1 ? [1, given[0]] : given, dtype: "float32"};
    const perItem = expected.slice(1).reduce((a, b) => a * b, 1);
    if (values.length === 0 || values.length % perItem !== 0) {
      throw new WidgetError("input", `this model takes input of shape [${expected}] (${perItem} values per item); `
        + `got ${values.length} values${given.length > 1 ? ` of shape [${given}]` : ""}`);
    }
    return {data: values, shape: [values.length / perItem, ...expected.slice(1)], dtype: "float32"};
  }

  /**
   * Run the model. Resolves {outputs: Float32Array, shape, probabilities?, label?, index?}:
   * for a classifier (output [N, K], K > 1) probabilities are the softmax of the first item's
   * outputs (kept as they are if they already are probabilities), label its most likely class.
   */
  async predict(input, {fit = null} = {}) {
    if (this.disposed) throw new WidgetError("predict", "this model was disposed; load() it again");
    const batch = this.toBatch(input, fit);  // its values are a fresh typed array, the engine's to keep
    const answer = await withTimeout(this.engine.run(batch), this.options.timeoutMs, "predict()");
    const outputs = answer.outputs;  // a Float32Array
    const result = {outputs, shape: answer.shape};
    const classes = answer.shape.length === 2 ? answer.shape[1] : 0;
    if (classes > 1) {
      const first = outputs.subarray(0, classes);
      const sum = first.reduce((a, b) => a + b, 0);
      const already = first.every((v) => v >= 0 && v <= 1) && Math.abs(sum - 1) < 1e-3;
      result.probabilities = already ? Float32Array.from(first) : softmax(first);
      let index = 0;
      for (let i = 1; i < classes; i++) if (result.probabilities[i] > result.probabilities[index]) index = i;
      result.index = index;
      result.label = this.info.labels?.[index] !== undefined ? String(this.info.labels[index]) : String(index);
    }
    return result;
  }

  /**
   * Continue `prompt` with a language model (input kind "tokens"): `length` tokens sampled one
   * at a time from the last position's logits divided by `temperature` (in the page on the lite
   * engine, in the worker on Python's: core/web/widget.py). Resolves {text, tokens}: the new
   * text only, and its token ids.
   */
  async generate(prompt, {length = 100, temperature = 0.8, seed = null} = {}) {
    if (this.disposed) throw new WidgetError("predict", "this model was disposed; load() it again");
    if (typeof prompt !== "string") throw new WidgetError("input", `generate() takes the prompt as a string, `
      + `got ${prompt === null ? "null" : typeof prompt}`);
    if (!Number.isInteger(length) || length < 1) throw new WidgetError("input", `length must be a whole number `
      + `of tokens >= 1, got ${length}`);
    if (!(temperature > 0)) throw new WidgetError("input", `temperature must be > 0, got ${temperature}`);
    const options = {length, temperature: Number(temperature), seed: Number.isInteger(seed) ? seed : null};
    return withTimeout(this.engine.generate(prompt, options), this.options.timeoutMs, "generate()");
  }

  /** Free the model (in the worker on the Python engine; the runtime stays up for other models). */
  async dispose() {
    if (this.disposed) return;
    this.disposed = true;
    await this.engine.dispose();
  }
}

// The model's record, fetched first: it says whether the model has a web bundle, and a 404 or
// a file that is not a stored model fails in milliseconds, before anything else loads.
async function fetchRecord(url) {
  let response;
  try {
    response = await fetch(url, {headers: {Accept: "application/json"}});
  } catch (error) {
    throw new WidgetError("load", `cannot fetch ${url} (${error.message}): is the webgrad server running and `
      + "does the host page's CSP allow connecting to it (connect-src)?");
  }
  if (response.status === 404) throw new WidgetError("load", `no model at ${url} (404 Not Found): check the `
    + "name; stored models are listed at /api/models");
  if (!response.ok) throw new WidgetError("load", `${url} answered ${response.status} ${response.statusText}`);
  let record;
  try {
    record = await response.json();
  } catch {
    throw new WidgetError("load", `${url} is not a stored model (its answer is not JSON); the src should look `
      + "like http://HOST/api/models/NAME");
  }
  if (!record || typeof record !== "object" || typeof record.weights_url !== "string") {
    throw new WidgetError("load", `${url} is not a stored model (no weights_url in its record); the src should `
      + "look like http://HOST/api/models/NAME");
  }
  return record;
}

/**
 * Load a stored model. options: {device: "auto"|"webgpu"|"cpu" (default "cpu": small models
 * answer fastest there), trustCode (run a model's own class source; only the Python engine
 * runs any: a web bundle holds no code), timeoutMs (120000)}.
 */
export async function load(url, {device = "cpu", trustCode = false, timeoutMs = 120_000, baseUrl = ROOT} = {}) {
  if (typeof url !== "string" || !url) throw new WidgetError("load", "load(url) needs the model's URL, "
    + "e.g. http://HOST/api/models/digits-mlp");
  const absolute = new URL(url, document.baseURI).href;
  const options = {timeoutMs};
  const work = (async () => {
    const record = await fetchRecord(absolute);
    const {engine, info} = record.lite?.url
      ? await LiteEngine.load(new URL(record.lite.url, absolute).href, infoFromRecord(record, absolute), {device})
      : await PythonEngine.load(`m${++counter}`, absolute, {device, baseUrl, trustCode});
    return new Model(absolute, info, engine, options);
  })();
  return withTimeout(work, timeoutMs, `loading ${absolute}`);
}
