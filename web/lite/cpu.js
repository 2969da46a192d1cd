// cpu.js: a bundle's steps in plain JavaScript, for pages without WebGPU. Each step op is a
// port of its WGSL kernel (wgsl_kernels/lite/), reading the same P params, so the two paths
// agree; float32 results are rounded with Math.fround after every operation, as the GPU
// computes in f32. No eval, no wasm: it runs under a CSP without 'unsafe-eval' or
// 'wasm-unsafe-eval'.
import {LiteError, at, count} from "./bundle.js";

const f = Math.fround;

// -- elementwise ops: name -> (input kind, output kind, attrs) -> function of the arguments ------------
// Kinds are bundle dtypes: float32, int32, bool (0/1). Semantics: numpy's, on the element dtype
// (int32 wraps like i32; NaN propagates through maximum/minimum; comparisons give bool).

/** The conversion of a value of kind `from` to kind `to` (cast; an empty program's copy). */
function converter(from, to) {
  if (from === to) return (a) => a;
  if (to === "bool") return (a) => (a !== 0 ? 1 : 0);  // NaN is true, as bool(x) in numpy
  if (to === "float32") return (a) => f(a);
  if (from === "float32") {  // float -> int32 truncates; saturates like WGSL's i32(); NaN -> 0
    return (a) => (a !== a ? 0 : a >= 2147483647 ? 2147483647 : a <= -2147483648 ? -2147483648 : Math.trunc(a));
  }
  return (a) => a | 0;
}

const float = (fn) => (kind) => (kind === "float32" ? fn : null);
const byKind = (forFloat, forInt, forBool = forInt) => (kind) =>
  (kind === "float32" ? forFloat : kind === "int32" ? forInt : forBool);
const compare = (fn) => () => (a, b) => (fn(a, b) ? 1 : 0);

function erf(x) {  // math.wgsl's wg_erf (|error| < 1.5e-7), so both paths agree
  const t = 1 / (1 + 0.3275911 * Math.abs(x));
  const y = 1 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
    + 0.254829592) * t * Math.exp(-x * x);
  return x >= 0 ? y : -y;
}

function roundHalfEven(a) {
  const r = Math.round(a);  // halves go up; step back to the even neighbour
  return r - a === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

function powFloat(a, b) {  // numpy's pow: x ** 0 and 1 ** y are 1, even for NaN; (-1) ** inf is 1
  if (b === 0 || a === 1 || (a === -1 && (b === Infinity || b === -Infinity))) return 1;
  return f(Math.pow(a, b));
}

function powInt(a, b) {  // math.wgsl's wg_ipow: negative exponents give 0, products wrap
  if (b < 0) return 0;
  let result = 1;
  for (let base = a, e = b; e > 0; e >>>= 1) {
    if (e & 1) result = Math.imul(result, base);
    base = Math.imul(base, base);
  }
  return result;
}

const OPS = {
  add: byKind((a, b) => f(a + b), (a, b) => (a + b) | 0, (a, b) => a | b),
  sub: byKind((a, b) => f(a - b), (a, b) => (a - b) | 0),
  mul: byKind((a, b) => f(a * b), (a, b) => Math.imul(a, b), (a, b) => a & b),
  div: byKind((a, b) => f(a / b), (a, b) => (b === 0 ? a : Math.trunc(a / b) | 0)),
  neg: byKind((a) => -a, (a) => -a | 0),
  abs: byKind(Math.abs, (a) => Math.abs(a) | 0),
  exp: float((a) => f(Math.exp(a))),
  log: float((a) => f(Math.log(a))),
  log1p: float((a) => f(Math.log1p(a))),
  sqrt: float((a) => f(Math.sqrt(a))),
  rsqrt: float((a) => f(1 / Math.sqrt(a))),
  sin: float((a) => f(Math.sin(a))),
  cos: float((a) => f(Math.cos(a))),
  tanh: float((a) => f(Math.tanh(a))),
  sigmoid: float((a) => f(0.5 * (1 + Math.tanh(0.5 * a)))),
  erf: float((a) => f(erf(a))),
  relu: byKind((a) => (a > 0 || a !== a ? a : 0), (a) => (a > 0 ? a : 0)),
  reciprocal: float((a) => f(1 / a)),
  floor: byKind(Math.floor, (a) => a),
  ceil: byKind(Math.ceil, (a) => a),
  round: byKind(roundHalfEven, (a) => a),
  sign: byKind((a) => (a !== a ? a : Math.sign(a)), Math.sign),
  pow: byKind(powFloat, powInt),
  maximum: byKind((a, b) => (a !== a ? a : b !== b ? b : Math.max(a, b)), Math.max),
  minimum: byKind((a, b) => (a !== a ? a : b !== b ? b : Math.min(a, b)), Math.min),
  eq: compare((a, b) => a === b),
  ne: compare((a, b) => a !== b),  // NaN != anything
  lt: compare((a, b) => a < b),
  le: compare((a, b) => a <= b),
  gt: compare((a, b) => a > b),
  ge: compare((a, b) => a >= b),
  logical_not: () => (a) => (a === 0 ? 1 : 0),
  logical_and: () => (a, b) => (a !== 0 && b !== 0 ? 1 : 0),
  logical_or: () => (a, b) => (a !== 0 || b !== 0 ? 1 : 0),
  where: () => (c, a, b) => (c !== 0 ? a : b),
  cast: (kind, out) => converter(kind, out),
  copy: () => (a) => a,
  isnan: (kind) => (kind === "float32" ? (a) => (a !== a ? 1 : 0) : () => 0),
};

/** The known elementwise op names (model.json's programs may use only these). */
export const ELEMENTWISE_OPS = Object.keys(OPS);

/**
 * An elementwise step's program as one function of the input values (an array, also used as
 * scratch for the chain's intermediate results). Throws a message on a malformed program.
 */
function compileProgram(program, inKinds, outKind) {
  if (!Array.isArray(program)) throw new Error("attrs.program must be a list");
  const n = inKinds.length;
  if (program.length === 0) {  // a copy of input 0, converted to the output dtype
    const convert = converter(inKinds[0], outKind);
    return (vals) => convert(vals[0]);
  }
  const kinds = [...inKinds];
  const ops = program.map((entry, j) => {
    const [name, args, out, attrs] = Array.isArray(entry) ? entry : [];
    if (!Object.hasOwn(OPS, name)) throw new Error(`uses the elementwise op ${JSON.stringify(name)}, which this `
      + "lite.js does not know (a bundle from a newer webgrad? use its /lite.js)");
    if (!Array.isArray(args) || args.length < 1 || args.length > 3 || !["float32", "int32", "bool"].includes(out)) {
      throw new Error(`program step ${j} (${name}) is malformed`);
    }
    const slots = args.map((arg) => {
      const [where, k] = Array.isArray(arg) ? arg : [];
      if (where === "in" && Number.isInteger(k) && k >= 0 && k < n) return k;
      if (where === "t" && Number.isInteger(k) && k >= 0 && k < j) return n + k;
      throw new Error(`program step ${j} (${name}) reads ${JSON.stringify(arg)}, which is not there`);
    });
    const argKinds = slots.map((s) => kinds[s]);
    const fn = OPS[name](argKinds.length === 3 ? argKinds[1] : argKinds[0], out, attrs || {});
    if (!fn) throw new Error(`program step ${j}: ${name} takes no ${argKinds[0]} values`);
    kinds.push(out);
    return {fn, a: slots[0], b: slots[1] ?? 0, c: slots[2] ?? 0};
  });
  const last = n + ops.length - 1;
  const convert = converter(kinds[last], outKind);
  return (vals) => {
    for (let j = 0; j < ops.length; j++) {
      const op = ops[j];
      vals[n + j] = op.fn(vals[op.a], vals[op.b], vals[op.c]);
    }
    return convert(vals[last]);
  };
}

// -- the step ops: (P, inputs, output, step) -> void, one loop iteration per GPU thread -------------------

function elementwise(P, ins, out, step) {
  const R = step.rank;
  const n = ins.length;
  const calc = step.calc;
  const vals = new Array(n + step.programLength);
  const base = ins.map((_, k) => 2 + 2 * R + k * (R + 1));
  const spots = new Array(n);
  for (let i = 0; i < P[0]; i++) {
    let o = P[1];
    for (let k = 0; k < n; k++) spots[k] = P[base[k]];
    let rest = i;
    for (let axis = R - 1; axis >= 0; axis--) {
      const size = P[2 + R + axis];
      const c = rest % size;
      rest = (rest - c) / size;
      o += c * P[2 + axis];
      for (let k = 0; k < n; k++) spots[k] += c * P[base[k] + 1 + axis];
    }
    for (let k = 0; k < n; k++) vals[k] = ins[k][spots[k]];
    out[o] = calc(vals);
  }
}

/** How matmul and conv2d read b: float32, or int8 times its row's scale (the row: offset / P's last). */
function weightReader(P, ins) {
  const b = ins[1];
  if (ins.length < 3) return (spot) => b[spot];
  const scale = ins[2];
  const perRow = P[P.length - 1];
  return (spot) => f(b[spot] * scale[Math.floor(spot / perRow)]);
}

function matmul(P, ins, out, step) {
  const RB = step.rank;
  const A = 4 + RB;
  const B = 7 + 2 * RB;
  const [m, n, k] = [P[1], P[2], P[3]];
  const a = ins[0];
  const loadB = weightReader(P, ins);
  const aStep = P[A + 2 + RB];
  const bStep = P[B + 1 + RB];
  for (let i = 0; i < P[0]; i++) {
    const col = i % n;
    const row = Math.floor(i / n) % m;
    let rest = Math.floor(i / (n * m));
    let aAt = P[A];
    let bAt = P[B];
    for (let axis = RB - 1; axis >= 0; axis--) {
      const c = rest % P[4 + axis];
      rest = Math.floor(rest / P[4 + axis]);
      aAt += c * P[A + 1 + axis];
      bAt += c * P[B + 1 + axis];
    }
    aAt += row * P[A + 1 + RB];
    bAt += col * P[B + 2 + RB];
    let acc = 0;
    for (let t = 0; t < k; t++) acc = f(acc + f(a[aAt + t * aStep] * loadB(bAt + t * bStep)));
    out[i] = acc;
  }
}

function conv2d(P, ins, out) {
  const [C, H, W, O, Ho, Wo, kh, kw, sh, sw, top, left, dh, dw] = P.slice(2, 16);
  const perGroupIn = Math.floor(C / P[16]);
  const perGroupOut = Math.floor(O / P[16]);
  const x = ins[0];
  const loadB = weightReader(P, ins);
  for (let i = 0; i < P[0]; i++) {
    const ox = i % Wo;
    const oy = Math.floor(i / Wo) % Ho;
    const oc = Math.floor(i / (Wo * Ho)) % O;
    const nb = Math.floor(i / (Wo * Ho * O));
    const first = Math.floor(oc / perGroupOut) * perGroupIn;
    let acc = 0;
    for (let ci = 0; ci < perGroupIn; ci++) {
      const plane = P[17] + (nb * C + first + ci) * H * W;
      const taps = P[18] + (oc * perGroupIn + ci) * kh * kw;
      for (let ky = 0; ky < kh; ky++) {
        const iy = oy * sh + ky * dh - top;
        if (iy < 0 || iy >= H) continue;
        for (let kx = 0; kx < kw; kx++) {
          const ix = ox * sw + kx * dw - left;
          if (ix < 0 || ix >= W) continue;
          acc = f(acc + f(x[plane + iy * W + ix] * loadB(taps + ky * kw + kx)));
        }
      }
    }
    out[i] = acc;
  }
}

function maxPool2d(P, [x], out) {
  const [H, W, Ho, Wo, kh, kw, sh, sw, top, left, dh, dw] = P.slice(2, 14);
  for (let i = 0; i < P[0]; i++) {
    const ox = i % Wo;
    const oy = Math.floor(i / Wo) % Ho;
    const plane = P[14] + Math.floor(i / (Wo * Ho)) * H * W;
    let best = 0;
    let found = false;
    for (let ky = 0; ky < kh; ky++) {
      const iy = oy * sh + ky * dh - top;
      if (iy < 0 || iy >= H) continue;
      for (let kx = 0; kx < kw; kx++) {
        const ix = ox * sw + kx * dw - left;
        if (ix < 0 || ix >= W) continue;
        const v = x[plane + iy * W + ix];
        if (!found || (best === best && (v !== v || v > best))) {  // a NaN wins, and stays
          best = v;
          found = true;
        }
      }
    }
    out[i] = best;
  }
}

function softmax(P, [x], out, step) {
  const [n, inner, offset] = [P[1], P[2], P[3]];
  const log = step.op === "log_softmax";
  for (let i = 0; i < P[0]; i++) {
    const first = Math.floor(i / inner) * n * inner + (i % inner);
    let peak = x[offset + first];
    for (let j = 1; j < n; j++) {
      const v = x[offset + first + j * inner];
      if (v !== v || v > peak) peak = v;
    }
    let total = 0;
    for (let j = 0; j < n; j++) total = f(total + f(Math.exp(f(x[offset + first + j * inner] - peak))));
    for (let j = 0; j < n; j++) {
      const v = f(x[offset + first + j * inner] - peak);
      out[first + j * inner] = log ? f(v - f(Math.log(total))) : f(f(Math.exp(v)) / total);
    }
  }
}

function layerNorm(P, [x], out) {
  const n = P[1];
  const eps = new Float32Array(new Uint32Array([P[2]]).buffer)[0];  // P holds eps's f32 bits
  for (let i = 0; i < P[0]; i++) {
    const first = P[3] + i * n;
    let total = 0;
    for (let j = 0; j < n; j++) total = f(total + x[first + j]);
    const mean = f(total / n);
    let spread = 0;
    for (let j = 0; j < n; j++) {
      const c = f(x[first + j] - mean);
      spread = f(spread + f(c * c));
    }
    const scale = f(1 / f(Math.sqrt(f(f(spread / n) + eps))));
    for (let j = 0; j < n; j++) out[i * n + j] = f(f(x[first + j] - mean) * scale);
  }
}

/** A reduction's (init, update(acc, v, j) -> acc, keeps the index) per kernels.py's _reduction. */
function reduction(op, inKind, outKind) {
  if (op === "sum" || op === "prod") {
    const convert = converter(inKind, outKind);
    const combine = op === "sum" ? OPS.add(outKind) : OPS.mul(outKind);
    return {init: op === "prod" ? 1 : 0, update: (acc, v) => combine(acc, convert(v))};
  }
  const greater = op === "amax" || op === "argmax";
  const better = inKind === "float32"  // a NaN wins, and stays
    ? (v, acc) => acc === acc && (v !== v || (greater ? v > acc : v < acc))
    : (v, acc) => (greater ? v > acc : v < acc);
  return {init: 0, better, index: op === "argmax" || op === "argmin"};
}

function reduce(P, [x], out, step) {
  const {kept: RK, reduced: RR, rule} = step;
  const sizes = 2 + 2 * RK;
  let total = 1;
  for (let d = 0; d < RR; d++) total *= P[sizes + d];
  for (let i = 0; i < P[0]; i++) {
    let base = P[1];
    let rest = i;
    for (let axis = RK - 1; axis >= 0; axis--) {
      base += (rest % P[2 + axis]) * P[2 + RK + axis];
      rest = Math.floor(rest / P[2 + axis]);
    }
    let acc = rule.init;
    let index = 0;
    for (let j = 0; j < total; j++) {
      let spot = base;
      let left = j;
      for (let axis = RR - 1; axis >= 0; axis--) {
        spot += (left % P[sizes + axis]) * P[sizes + RR + axis];
        left = Math.floor(left / P[sizes + axis]);
      }
      const v = x[spot];
      if (rule.update) acc = rule.update(acc, v);
      else if (j === 0 || rule.better(v, acc)) {
        acc = v;
        index = j;
      }
    }
    out[i] = rule.index ? index : acc;
  }
}

function take(P, [table, index], out) {
  const [rows, inner, tableAt, indexAt] = [P[1], P[2], P[3], P[4]];
  for (let i = 0; i < P[0]; i++) {
    let row = index[indexAt + Math.floor(i / inner)];
    if (row < 0) row += rows;
    out[i] = table[tableAt + row * inner + (i % inner)];
  }
}

const STEPS = {
  elementwise, matmul, conv2d, max_pool2d: maxPool2d, softmax, log_softmax: softmax, layer_norm: layerNorm,
  reduce, take,
};

/** How many params a step op's kernel reads (checked at load, so a bad bundle never runs). */
function paramCount(step, inputs) {
  switch (step.op) {
    case "elementwise": return 2 + 2 * step.rank + inputs * (step.rank + 1);
    case "matmul": return 10 + 3 * step.rank + (inputs === 3 ? 1 : 0);
    case "conv2d": return 19 + (inputs === 3 ? 1 : 0);
    case "max_pool2d": return 15;
    case "reduce": return 2 + 2 * step.kept + 2 * step.reduced;
    case "take": return 5;
    default: return 4;  // softmax, log_softmax, layer_norm
  }
}

const INPUTS = {elementwise: [1, 6], matmul: [2, 3], conv2d: [2, 3], take: [2, 2], reduce: [1, 1]};

/** A list of the attrs entry `key` (a rank comes from its length). */
function listAttr(attrs, key) {
  if (!Array.isArray(attrs[key])) throw new Error(`attrs.${key} must be a list`);
  return attrs[key];
}

/** Runs a checked bundle's steps in JavaScript. */
export class CpuRunner {
  /** @param {any} meta  model.json, checked @param {Record<number, any>} weights  buffer id -> typed array */
  constructor(meta, weights, file) {
    this.meta = meta;
    this.weights = weights;
    this.steps = meta.steps.map((s, i) => {
      try {
        return this.prepare(s);
      } catch (error) {
        throw new LiteError("load", `${file}: steps[${i}] (${s.op}): ${error.message}`);
      }
    });
    this.planned = null;  // {batch, arrays}: one batch size's buffers at a time, as run.py keeps
  }

  prepare(s) {
    const buffers = this.meta.buffers;
    const step = {op: s.op, run: STEPS[s.op], rank: 0, kept: 0, reduced: 0, calc: null, programLength: 0, rule: null};
    const [least, most] = INPUTS[s.op] || [1, 1];
    if (s.inputs.length < least || s.inputs.length > most) {
      throw new Error(`takes ${least === most ? least : `${least} to ${most}`} inputs, got ${s.inputs.length}`);
    }
    const inKinds = s.inputs.map((k) => buffers[k].dtype);
    const outKind = buffers[s.output].dtype;
    if (s.op === "elementwise") {
      step.rank = listAttr(s.attrs, "shape").length;
      step.calc = compileProgram(s.attrs.program, inKinds, outKind);
      step.programLength = s.attrs.program.length;
    } else if (s.op === "matmul") {
      step.rank = listAttr(s.attrs, "batch").length;
    } else if (s.op === "reduce") {
      step.kept = listAttr(s.attrs, "kept").length;
      step.reduced = listAttr(s.attrs, "reduced").length;
      if (!["sum", "prod", "amax", "amin", "argmax", "argmin"].includes(s.attrs.op)) {
        throw new Error(`reduction ${JSON.stringify(s.attrs.op)} is unknown`);
      }
      step.rule = reduction(s.attrs.op, inKinds[0], outKind);
    }
    const needed = paramCount(step, s.inputs.length);
    if (s.params.length !== needed) throw new Error(`has ${s.params.length} params, its kernel reads ${needed}`);
    return step;
  }

  /** The arrays of every buffer at `batch` (weights shared, the rest made once per batch size). */
  arrays(batch) {
    if (this.planned?.batch === batch) return this.planned.arrays;
    const arrays = this.meta.buffers.map((b, i) => {
      if (b.role === "weight") return this.weights[i];
      const n = count(b.shape, batch);
      return b.dtype === "float32" ? new Float32Array(n) : b.dtype === "int32" ? new Int32Array(n) : new Uint32Array(n);
    });
    this.planned = {batch, arrays};
    return arrays;
  }

  /** The outputs (typed arrays) for `inputs` (typed arrays in the input buffers' dtypes). */
  run(batch, inputs) {
    const arrays = this.arrays(batch);
    this.meta.inputs.forEach((spec, k) => arrays[spec.buffer].set(inputs[k]));
    this.meta.steps.forEach((s, i) => {
      if (at(s.grid, batch) === 0) return;
      const P = new Uint32Array(s.params.length ? s.params.map((n) => at(n, batch)) : [0]);
      this.steps[i].run(P, s.inputs.map((k) => arrays[k]), arrays[s.output], this.steps[i]);
    });
    return this.meta.outputs.map((spec) => arrays[spec.buffer].slice(0, count(spec.shape, batch)));
  }
}
