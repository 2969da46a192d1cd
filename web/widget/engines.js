// engines.js: what runs a widget's model. Both answer run(batch) -> {outputs: Float32Array, shape},
// generate(prompt, {length, temperature, seed}) -> {text, tokens} and dispose().
//
//   LiteEngine    the model's web bundle (webgrad.export, stored beside it by webgrad.store.push)
//                 run by /lite.js: WebGPU or plain JavaScript, no Python in the page.
//   PythonEngine  the model rebuilt in Python (webgrad.store.pull in the runtime's worker, from its
//                 architecture record and weights), for models the bundle cannot lower.
//
// Each module is imported only when a model needs it, so a page whose models all have a bundle
// never downloads Pyodide.

const runtimes = new Map();  // `${baseUrl} ${device}` -> Promise<Runtime>: models on one device share a worker
const PYTHON = "webgrad.web.widget";  // the Python half (core/web/widget.py), called by name

/** A failure of the widget: message for people, .kind for code ("load", "input", "predict", "boot"). */
export class WidgetError extends Error {
  constructor(kind, message) {
    super(`webgrad widget: ${message}`);
    this.name = "WidgetError";
    this.kind = kind;
  }
}

// Python errors come back as PythonError: show its last line, not Pyodide's traceback.
export function pythonMessage(error) {
  if (!error || !error.pythonType) return String(error?.message || error);
  const text = String(error.message).replace(/^[\w.]*\w(Error|Exception|Interrupt): /, "");  // no "pkg.mod.X: "
  return `${error.pythonType}: ${text}`;
}

function runtimeFor(device, baseUrl) {
  const key = `${baseUrl} ${device}`;
  if (!runtimes.has(key)) {
    // keepFiles: false: a widget has no working folder of its own to keep, and must not restore
    // (or overwrite) the files a playground on the same origin kept.
    const started = import("../runtime/webgrad.js")
      .then(({boot}) => boot({baseUrl, device, onInput: () => null, keepFiles: false}))
      .catch((error) => {
        runtimes.delete(key);  // a later load() may try again (e.g. after the page fixed its CSP)
        throw new WidgetError("boot", error.message);
      });
    runtimes.set(key, started);
  }
  return runtimes.get(key);
}

export class PythonEngine {
  /** Boot (or share) the runtime and pull the model into it under `key`; resolves the engine and its info. */
  static async load(key, url, {device, baseUrl, trustCode}) {
    const runtime = await runtimeFor(device, baseUrl);
    let info;
    try {
      info = await runtime.call(PYTHON, "load", [key, url, Boolean(trustCode)]);
    } catch (error) {
      throw new WidgetError("load", `${url}: ${pythonMessage(error)}`);
    }
    return {engine: new PythonEngine(key, runtime), info: {...info, engine: "python"}};
  }

  constructor(key, runtime) {
    this.key = key;
    this.runtime = runtime;
  }

  async run(batch) {  // batch.data is a fresh typed array: moved to the worker, not copied
    try {
      return await this.runtime.call(PYTHON, "predict", [this.key, batch.data, batch.shape, batch.dtype],
        {transfer: [batch.data.buffer]});
    } catch (error) {
      throw new WidgetError("predict", pythonMessage(error));
    }
  }

  async generate(prompt, {length, temperature, seed}) {
    try {
      return await this.runtime.call(PYTHON, "generate", [this.key, prompt, length, temperature, seed]);
    } catch (error) {
      throw new WidgetError("predict", pythonMessage(error));
    }
  }

  dispose() {
    return this.runtime.call(PYTHON, "dispose", [this.key]).catch(() => {});
  }
}

/** mulberry32: a small seeded generator of numbers in [0, 1), for generate({seed}). */
function seeded(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6D2B79F5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** (encode, decode) for a tokens input record, as core/web/widget.py's _tokenizer. */
function tokenizer(record) {
  const vocab = record.vocab;
  if (!Array.isArray(vocab)) {
    return [(text) => text.split(/\s+/).filter(Boolean).map((part) => {
      if (!/^[+-]?\d+$/.test(part)) throw new WidgetError("input", "this model has no recorded vocabulary, so the "
        + `prompt must be token ids separated by spaces (e.g. '3 14 15'), not ${JSON.stringify(text.slice(0, 40))}`);
      return Number(part);
    }), (ids) => ids.join(" ")];
  }
  const index = new Map(vocab.map((token, i) => [token, i]));
  if (vocab.every((token) => [...token].length === 1)) {
    return [(text) => [...text].filter((c) => index.has(c)).map((c) => index.get(c)),
      (ids) => ids.map((i) => vocab[i]).join("")];
  }
  return [(text) => text.split(/\s+/).filter((w) => index.has(w)).map((w) => index.get(w)),
    (ids) => ids.map((i) => vocab[i]).join(" ")];
}

export class LiteEngine {
  /** Load the bundle at `bundleUrl` with /lite.js; `record` is the model's record (GET /api/models/NAME). */
  static async load(bundleUrl, info, {device}) {
    let bundle;
    try {
      const lite = await import("../lite/main.js");
      bundle = await lite.load(bundleUrl, {device});
    } catch (error) {
      throw new WidgetError("load", `the model's web bundle at ${bundleUrl} did not load: ${error?.message || error}`);
    }
    const engine = new LiteEngine(bundle, info);
    return {engine, info: {...info, engine: "lite", device: bundle.info?.device ?? device}};
  }

  constructor(bundle, info) {
    this.bundle = bundle;
    this.info = info;
    // The bundle was exported for the recorded input: a token model's sequence length is fixed. A
    // shorter row is padded on the right only where the export found the model causal.
    const shape = info.input_shape;
    this.length = info.input?.kind === "tokens" && shape?.length === 2 ? shape[1] : null;
    this.causal = bundle.info?.inputs?.[0]?.causal === true;
  }

  async run(batch) {
    let {data, shape} = batch;
    const given = shape[1];
    if (this.length !== null && shape.length === 2 && given !== this.length) {
      // Token ids: pad each row on the right to the bundle's length (with a causal mask the
      // outputs at positions < given depend only on the ids there), then keep those positions.
      if (given > this.length) throw new WidgetError("input", `this model's web bundle takes at most `
        + `${this.length} tokens per row, got ${given}`);
      if (!this.causal) throw new WidgetError("input", `this model's web bundle takes rows of exactly `
        + `${this.length} tokens (its outputs depend on later tokens, so a shorter row cannot be padded), got ${given}`);
      const padded = new Int32Array(shape[0] * this.length);
      for (let row = 0; row < shape[0]; row++) padded.set(data.subarray(row * given, (row + 1) * given), row * this.length);
      data = padded;
      shape = [shape[0], this.length];
    }
    let answer;
    try {
      answer = await this.bundle.predict(data);
    } catch (error) {
      throw new WidgetError("predict", error?.message || String(error));
    }
    let outputs = answer.outputs instanceof Float32Array ? answer.outputs : Float32Array.from(answer.outputs);
    let outShape = Array.from(answer.shape);
    if (shape[1] !== given && outShape.length >= 2 && outShape[1] === this.length) {
      const inner = outShape.slice(2).reduce((a, b) => a * b, 1);
      const kept = new Float32Array(outShape[0] * given * inner);
      for (let row = 0; row < outShape[0]; row++) {
        kept.set(outputs.subarray(row * this.length * inner, (row * this.length + given) * inner), row * given * inner);
      }
      outputs = kept;
      outShape = [outShape[0], given, ...outShape.slice(2)];
    }
    return {outputs, shape: outShape};
  }

  /** As core/web/widget.py's generate, with the bundle run on the last window of tokens. */
  async generate(prompt, {length, temperature, seed}) {
    const record = this.info.input || {};
    if (record.kind !== "tokens") throw new WidgetError("predict", `this model's input is ${record.kind || "unknown"}, `
      + "not tokens; generate() is for language models (push them with dtypes=[webgrad.int64])");
    if (!(length > 0 && length <= 10_000)) throw new WidgetError("input", `length must be between 1 and 10000 `
      + `tokens, got ${length}`);
    const [encode, decode] = tokenizer(record);
    const tokens = encode(prompt);
    if (!tokens.length) tokens.push(Array.isArray(record.vocab) && record.vocab.includes("\n") ? record.vocab.indexOf("\n") : 0);
    const size = record.vocab_size;
    if (size != null && tokens.some((t) => t < 0 || t >= size)) {
      throw new WidgetError("input", `token ids must be in 0..${size - 1}, got ${tokens.slice(0, 10)}`);
    }
    const random = Number.isInteger(seed) ? seeded(seed) : Math.random;
    const window = Math.min(record.context || this.length || Infinity, this.length || Infinity);
    const start = tokens.length;
    for (let step = 0; step < length; step++) {
      const ids = Number.isFinite(window) ? tokens.slice(-window) : tokens;
      const {outputs, shape} = await this.run({data: new Int32Array(ids), shape: [1, ids.length], dtype: "int32"});
      if (shape.length !== 3) throw new WidgetError("predict", "a language model gives (batch, length, vocab) logits; "
        + `this one gave shape [${shape}]`);
      const vocab = shape[2];
      const last = outputs.subarray((ids.length - 1) * vocab, ids.length * vocab);
      let top = -Infinity;
      for (const v of last) top = Math.max(top, v / temperature);
      const weights = Array.from(last, (v) => Math.exp(v / temperature - top));
      let left = random() * weights.reduce((a, b) => a + b, 0);
      let pick = 0;
      while (pick < vocab - 1 && (left -= weights[pick]) >= 0) pick++;
      tokens.push(pick);
    }
    const made = tokens.slice(start);
    return {text: decode(made), tokens: made};
  }

  dispose() {
    this.bundle.dispose?.();
  }
}

/**
 * The flat info dict of a stored model (what webgrad.store.info gives, see core/store.py's
 * info_from_record) from its record, GET /api/models/NAME at `url`.
 */
export function infoFromRecord(record, url) {
  const metadata = {...(record.metadata || {})};
  const own = metadata.webgrad && typeof metadata.webgrad === "object" ? metadata.webgrad : {};
  delete metadata.webgrad;
  const architecture = own.architecture ?? null;
  return {
    name: record.name ?? null, url,
    weights_url: record.weights_url ? new URL(record.weights_url, url).href : null,
    size: record.size ?? null, sha256: record.sha256 ?? null, revision: record.revision ?? null,
    created: record.created ?? null, updated: record.updated ?? null,
    metadata,
    labels: own.labels ?? metadata.labels ?? null,
    input_shape: own.input_shape ?? null, input_dtype: own.input_dtype ?? "float32",
    output_shape: own.output_shape ?? null, input: own.input ?? null,
    has_architecture: architecture !== null,
    code: (architecture?.code || []).filter((e) => e?.kind === "class").map((e) => e.name),
    lite: record.lite ?? null, lite_reason: record.lite_reason ?? null,
  };
}
