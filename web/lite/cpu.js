// cpu.js: a bundle's steps in plain JavaScript, for pages without WebGPU. Each step op is a
// port of its WGSL kernel (wgsl_kernels/lite/), reading the same P params, so the two paths
// agree; float32 results are rounded with Math.fround after every operation, as the GPU
// computes in f32 (matmul and conv2d: once per sum, see there). No eval, no wasm: it runs under a CSP without 'unsafe-eval' or
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

// The float32 ops of the interpreter's fast path (FAST below), each also in OPS.
const fadd = (a, b) => f(a + b);
const fsub = (a, b) => f(a - b);
const fmul = (a, b) => f(a * b);
const fdiv = (a, b) => f(a / b);
const fneg = (a) => -a;
const fexp = (a) => f(Math.exp(a));
const flog = (a) => f(Math.log(a));
const fsqrt = (a) => f(Math.sqrt(a));
const frsqrt = (a) => f(1 / Math.sqrt(a));
const ftanh = (a) => f(Math.tanh(a));
const fsigmoid = (a) => f(0.5 * (1 + Math.tanh(0.5 * a)));
const frelu = (a) => (a > 0 || a !== a ? a : 0);
const fmax = (a, b) => (a !== a ? a : b !== b ? b : Math.max(a, b));
const fmin = (a, b) => (a !== a ? a : b !== b ? b : Math.min(a, b));

const OPS = {
  add: byKind(fadd, (a, b) => (a + b) | 0, (a, b) => a | b),
  sub: byKind(fsub, (a, b) => (a - b) | 0),
  mul: byKind(fmul, (a, b) => Math.imul(a, b), (a, b) => a & b),
  div: byKind(fdiv, (a, b) => (b === 0 ? a : Math.trunc(a / b) | 0)),
  neg: byKind(fneg, (a) => -a | 0),
  abs: byKind(Math.abs, (a) => Math.abs(a) | 0),
  exp: float(fexp),
  expm1: float((a) => f(Math.expm1(a))),
  log: float(flog),
  log1p: float((a) => f(Math.log1p(a))),
  sqrt: float(fsqrt),
  rsqrt: float(frsqrt),
  sin: float((a) => f(Math.sin(a))),
  cos: float((a) => f(Math.cos(a))),
  tanh: float(ftanh),
  sigmoid: float(fsigmoid),
  erf: float((a) => f(erf(a))),
  relu: byKind(frelu, (a) => (a > 0 ? a : 0)),
  reciprocal: float((a) => f(1 / a)),
  floor: byKind(Math.floor, (a) => a),
  ceil: byKind(Math.ceil, (a) => a),
  round: byKind(roundHalfEven, (a) => a),
  sign: byKind((a) => (a !== a ? 0 : Math.sign(a)), Math.sign),  // sign(NaN) is 0, as torch
  pow: byKind(powFloat, powInt),
  maximum: byKind(fmax, Math.max),
  minimum: byKind(fmin, Math.min),
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

// A program of float32 ops only runs in `interpret`, one switch per op: a call of a different
// closure per op costs several times more once a page has run a few programs.
const FAST = ["add", "sub", "mul", "div", "neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "maximum",
  "minimum", "copy"];

/** Runs the fast program `code` (op, argument slot, argument slot per step) over `vals`, whose first
 * `first` slots hold the inputs; returns the last step's value (a program of no step: input 0). */
function interpret(vals, code, steps, first) {
  for (let j = 0; j < steps; j++) {
    const a = vals[code[3 * j + 1]];
    const b = vals[code[3 * j + 2]];
    let r;
    switch (code[3 * j]) {
      case 0: r = fadd(a, b); break;
      case 1: r = fsub(a, b); break;
      case 2: r = fmul(a, b); break;
      case 3: r = fdiv(a, b); break;
      case 4: r = fneg(a); break;
      case 5: r = fexp(a); break;
      case 6: r = flog(a); break;
      case 7: r = fsqrt(a); break;
      case 8: r = frsqrt(a); break;
      case 9: r = ftanh(a); break;
      case 10: r = fsigmoid(a); break;
      case 11: r = frelu(a); break;
      case 12: r = fmax(a, b); break;
      case 13: r = fmin(a, b); break;
      default: r = a;  // copy
    }
    vals[first + j] = r;
  }
  return steps ? vals[first + steps - 1] : vals[0];
}

/** The fast form of a checked program, or null when one of its values is not float32. */
function fastProgram(program, inKinds, outKind) {
  if (outKind !== "float32" || inKinds.some((k) => k !== "float32")) return null;
  if (program.some(([name, args, out]) => out !== "float32" || !FAST.includes(name) || args.length > 2)) return null;
  const n = inKinds.length;
  const slot = ([where, k]) => (where === "in" ? k : n + k);
  return Int32Array.from(program.flatMap(([name, args]) => [FAST.indexOf(name), slot(args[0]), slot(args[1] || args[0])]));
}

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

// The multi-index walks like an odometer (the last axis in the inner loop, a carry into the
// others), so no element pays a division per axis.
function elementwise(P, ins, out, step) {
  const R = step.rank;
  const n = ins.length;
  const calc = step.calc;
  const total = P[0];
  const code = step.fast;
  const steps = step.programLength;
  const vals = code ? new Float64Array(n + steps) : new Array(n + steps);
  const base = ins.map((_, k) => 2 + 2 * R + k * (R + 1));
  const shape = (axis) => P[2 + R + axis];
  const spots = base.map((b) => P[b]);
  const at = new Array(n);
  const counter = new Array(R).fill(0);
  const inner = R ? shape(R - 1) : 1;
  const innerOut = R ? P[2 + R - 1] : 0;
  const innerIn = base.map((b) => (R ? P[b + R] : 0));
  let o = P[1];
  for (let done = 0; done < total; done += inner) {
    let to = o;
    for (let k = 0; k < n; k++) at[k] = spots[k];
    for (let j = 0; j < inner; j++) {
      for (let k = 0; k < n; k++) {
        vals[k] = ins[k][at[k]];
        at[k] += innerIn[k];
      }
      out[to] = code ? interpret(vals, code, steps, n) : calc(vals);
      to += innerOut;
    }
    for (let axis = R - 2; axis >= 0; axis--) {  // carry into the outer axes
      const size = shape(axis);
      counter[axis]++;
      o += P[2 + axis];
      for (let k = 0; k < n; k++) spots[k] += P[base[k] + 1 + axis];
      if (counter[axis] < size) break;
      counter[axis] = 0;
      o -= size * P[2 + axis];
      for (let k = 0; k < n; k++) spots[k] -= size * P[base[k] + 1 + axis];
    }
  }
}

const dequantized = new WeakMap();  // an int8 weight -> its float32 values (w * its row's scale), made once

/** The values matmul and conv2d read as b: the float32 weight, or an int8 one dequantized once (the
 * kernel's q * scale[spot / perRow], per element; the row: offset / P's last param). */
function weightValues(P, ins) {
  if (ins.length < 3) return ins[1];
  const [q, scale] = [ins[1], ins[2]];
  let values = dequantized.get(q);
  if (!values) {
    const perRow = P[P.length - 1];
    values = new Float32Array(q.length);
    for (let spot = 0; spot < q.length; spot++) values[spot] = q[spot] * scale[Math.floor(spot / perRow)];
    dequantized.set(q, values);
  }
  return values;
}

// matmul and conv2d sum their products in float64 and round once: at least as accurate as the
// GPU's float32 sums, which round after every addition (the two agree well within 1e-6 relative).
function matmul(P, ins, out, step) {
  const RB = step.rank;
  const A = 4 + RB;
  const B = 7 + 2 * RB;
  const [m, n, k] = [P[1], P[2], P[3]];
  const a = ins[0];
  const b = weightValues(P, ins);
  const [aRow, aStep] = [P[A + 1 + RB], P[A + 2 + RB]];
  const [bStep, bCol] = [P[B + 1 + RB], P[B + 2 + RB]];
  const batches = P[0] / (m * n);
  for (let batch = 0; batch < batches; batch++) {
    let rest = batch;
    let aBase = P[A];
    let bBase = P[B];
    for (let axis = RB - 1; axis >= 0; axis--) {
      const c = rest % P[4 + axis];
      rest = Math.floor(rest / P[4 + axis]);
      aBase += c * P[A + 1 + axis];
      bBase += c * P[B + 1 + axis];
    }
    for (let row = 0; row < m; row++) {
      const aAt = aBase + row * aRow;
      const first = (batch * m + row) * n;
      for (let col = 0; col < n; col++) {
        const bAt = bBase + col * bCol;
        let acc = 0;
        for (let t = 0; t < k; t++) acc += a[aAt + t * aStep] * b[bAt + t * bStep];
        out[first + col] = acc;
      }
    }
  }
}

const convScratch = new WeakMap();  // a conv2d step's params -> its padded plane and tap offsets

// Each image is copied once into a zero-padded scratch plane, so that every window is a dot
// product of the weights' row with x at fixed offsets (`taps`), with no bounds checks.
function conv2d(P, ins, out) {
  const [N, C, H, W, O, Ho, Wo, kh, kw, sh, sw, top, left, dh, dw, groups] = P.slice(1, 17);
  const x = ins[0];
  const w = weightValues(P, ins);
  const perGroupIn = C / groups;
  const perGroupOut = O / groups;
  const K = perGroupIn * kh * kw;
  const Hp = (Ho - 1) * sh + (kh - 1) * dh + 1;  // the rows and columns the windows reach
  const Wp = (Wo - 1) * sw + (kw - 1) * dw + 1;
  let scratch = convScratch.get(P);  // P is made once per batch size: so is this
  if (!scratch) {
    const taps = new Int32Array(K);
    for (let ci = 0, t = 0; ci < perGroupIn; ci++) {
      for (let ky = 0; ky < kh; ky++) for (let kx = 0; kx < kw; kx++) taps[t++] = (ci * Hp + ky * dh) * Wp + kx * dw;
    }
    scratch = {padded: new Float32Array(C * Hp * Wp), taps};
    convScratch.set(P, scratch);
  }
  const {padded, taps} = scratch;
  const rows = Math.min(H, Hp - top);
  const cols = Math.min(W, Wp - left);
  for (let nb = 0; nb < N; nb++) {
    for (let c = 0; c < C; c++) {
      for (let y = 0; y < rows; y++) {
        const from = P[17] + ((nb * C + c) * H + y) * W;
        padded.set(x.subarray(from, from + cols), (c * Hp + y + top) * Wp + left);
      }
    }
    for (let oc = 0; oc < O; oc++) {
      const group = Math.floor(oc / perGroupOut) * perGroupIn * Hp * Wp;
      const row = P[18] + oc * K;
      let o = (nb * O + oc) * Ho * Wo;
      for (let oy = 0; oy < Ho; oy++) {
        for (let ox = 0; ox < Wo; ox++) {
          const origin = group + oy * sh * Wp + ox * sw;
          let acc = 0;
          for (let t = 0; t < K; t++) acc += padded[origin + taps[t]] * w[row + t];
          out[o++] = acc;
        }
      }
    }
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
    const step = {op: s.op, run: STEPS[s.op], rank: 0, kept: 0, reduced: 0, calc: null, programLength: 0, rule: null,
      fast: null};
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
      step.fast = fastProgram(s.attrs.program, inKinds, outKind);
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

  /** The arrays of every buffer and each step's params at `batch` (weights shared, the rest made
   * once per batch size). */
  plan(batch) {
    if (this.planned?.batch === batch) return this.planned;
    const arrays = this.meta.buffers.map((b, i) => {
      if (b.role === "weight") return this.weights[i];
      const n = count(b.shape, batch);
      return b.dtype === "float32" ? new Float32Array(n) : b.dtype === "int32" ? new Int32Array(n) : new Uint32Array(n);
    });
    const params = this.meta.steps.map((s) => new Uint32Array(s.params.length ? s.params.map((n) => at(n, batch)) : [0]));
    this.planned = {batch, arrays, params};
    return this.planned;
  }

  /** The outputs (typed arrays) for `inputs` (typed arrays in the input buffers' dtypes). */
  run(batch, inputs) {
    const {arrays, params} = this.plan(batch);
    this.meta.inputs.forEach((spec, k) => arrays[spec.buffer].set(inputs[k]));
    this.meta.steps.forEach((s, i) => {
      if (params[i][0] === 0) return;  // P[0]: the step's threads (its grid)
      this.steps[i].run(params[i], s.inputs.map((k) => arrays[k]), arrays[s.output], this.steps[i]);
    });
    return this.meta.outputs.map((spec) => arrays[spec.buffer].slice(0, count(spec.shape, batch)));
  }
}
