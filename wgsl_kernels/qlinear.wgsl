// qlinear.wgsl: a dynamic-quantized Linear (webgrad.ao.quantization), torch's arithmetic with
// integer products.
//
// Maths. x (m rows of k float32) is quantized by its own range, as torch's dynamic layers do:
//   lo = min(min(x), 0), hi = max(max(x), 0), scale = (hi - lo) / 127 (1 where that is 0),
//   zp = clamp(round(-lo / scale), 0, 127), q = clamp(round(x / scale) + zp, 0, 127) - zp,
// so q is in -127..127 and fits an int8. With the int8 weight w (n rows of k) and its scale
// ws (one, or one per row),
//   out[r, c] = f32(sum_j q[r, j] * w[c, j]) * (scale * ws[c]) + bias[c],
// the sum exact in i32 (|q w| <= 127 * 128, so any k below 2^17 fits).
//
// Layout. Both operands are rows of packed words, four int8 to a u32 (element j in bits
// 8 (j % 4) .. 8 (j % 4) + 7, webgrad's packed i8 layout), each row k16 vec4<u32> long
// (16 elements a vec4, zeros past k): the launcher pads a weight whose rows do not start on
// a vec4. The quantized x has one more vec4 at its end whose first word is scale's bits.
//
// Entries. ``quantize``: one thread per vec4 of the quantized x, its range from the reductions;
// ``quantize_small``: one workgroup that finds the range and packs (a small x, one dispatch
// instead of five). ``qmatmul``: one thread per
// TM x TN block of out, its sums in registers (no workgroup memory: CPU adapters run barriers
// slowly); workgroup w (linear over the folded grid) takes tile w of tiles_n x tiles_m.
// wg_dot4_i8(a, b), the sum of the four products of two words' int8s, is prepended by the
// launcher: dot4I8Packed where the WGSL language feature packed_4x8_integer_dot_product exists,
// the same sum unpacked by hand where it does not.

struct Params {
  m: u32,             // rows of x (every dim but the last)
  n: u32,             // out features (rows of w)
  k: u32,             // in features
  k16: u32,           // vec4<u32> per packed row: ceil(k / 16)
  x_offset: u32,      // elements, for quantize (x contiguous from there)
  lo_offset: u32,     // min(x)'s element
  hi_offset: u32,     // max(x)'s element
  w_offset: u32,      // vec4s, for qmatmul
  scale_offset: u32,  // ws's first element
  scale_step: u32,    // 1 per row, 0 one for all
  bias_offset: u32,
  has_bias: u32,
  tiles_n: u32,
  tiles: u32,         // tiles_n * tiles_m: workgroups with work
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

override WG_X: u32 = 8;
override WG_Y: u32 = 2;
const TM: u32 = 8u;  // rows of out per thread (a const: private arrays cannot be override-sized)
const TN: u32 = 8u;  // columns of out per thread
const QMAX: f32 = 127.0;

// -- quantize: x (float32) to packed int8 rows, and scale --------------------------------------
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> packed: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> lo_in: array<f32>;
@group(0) @binding(4) var<storage, read> hi_in: array<f32>;

fn quantized(r: u32, j: u32, scale: f32, zp: f32) -> u32 {
  if (j >= p.k) {
    return 0u;
  }
  let q = clamp(round(x[p.x_offset + r * p.k + j] / scale) + zp, 0.0, QMAX) - zp;
  return bitcast<u32>(i32(q)) & 0xffu;
}

// Vec4 t of the packed rows (t < m * k16), from x's range (lo <= 0 <= hi).
fn pack16(t: u32, lo: f32, hi: f32) {
  let raw = (hi - lo) / QMAX;
  let scale = select(1.0, raw, raw > 0.0);
  let zp = clamp(round(-lo / scale), 0.0, QMAX);
  let r = t / p.k16;
  let j0 = (t % p.k16) * 16u;
  var words = vec4<u32>();
  for (var w = 0u; w < 4u; w++) {
    let j = j0 + 4u * w;
    words[w] = quantized(r, j, scale, zp) | (quantized(r, j + 1u, scale, zp) << 8u)
             | (quantized(r, j + 2u, scale, zp) << 16u) | (quantized(r, j + 3u, scale, zp) << 24u);
  }
  packed[t] = words;
  if (t == 0u) {
    packed[p.m * p.k16] = vec4<u32>(bitcast<u32>(scale), 0u, 0u, 0u);
  }
}

// One thread per vec4, x's min and max from the reductions.
@compute @workgroup_size(64)
fn quantize(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let t = gid.x + gid.y * nwg.x * 64u;
  if (t < p.m * p.k16) {
    pack16(t, min(lo_in[p.lo_offset], 0.0), max(hi_in[p.hi_offset], 0.0));
  }
}

// A small x in one dispatch: one workgroup finds its range, then packs every vec4.
const RANGE_WG: u32 = 256u;
var<workgroup> lows: array<f32, RANGE_WG>;
var<workgroup> highs: array<f32, RANGE_WG>;

@compute @workgroup_size(RANGE_WG)
fn quantize_small(@builtin(local_invocation_index) l: u32) {
  var lo = 0.0;
  var hi = 0.0;
  for (var i = l; i < p.m * p.k; i += RANGE_WG) {
    let v = x[p.x_offset + i];
    lo = min(lo, v);
    hi = max(hi, v);
  }
  lows[l] = lo;
  highs[l] = hi;
  for (var half = RANGE_WG / 2u; half > 0u; half >>= 1u) {
    workgroupBarrier();
    if (l < half) {
      lows[l] = min(lows[l], lows[l + half]);
      highs[l] = max(highs[l], highs[l + half]);
    }
  }
  workgroupBarrier();
  lo = lows[0];
  hi = highs[0];
  for (var t = l; t < p.m * p.k16; t += RANGE_WG) {
    pack16(t, lo, hi);
  }
}

// -- qmatmul: the int8 product, scaled back to float32 ---------------------------------------
@group(0) @binding(1) var<storage, read> qx: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> qw: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> ws: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

fn dot16(a: vec4<u32>, b: vec4<u32>) -> i32 {
  return wg_dot4_i8(a.x, b.x) + wg_dot4_i8(a.y, b.y) + wg_dot4_i8(a.z, b.z) + wg_dot4_i8(a.w, b.w);
}

@compute @workgroup_size(WG_X, WG_Y)
fn qmatmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_id) lid: vec3<u32>) {
  let tile = wid.x + wid.y * nwg.x;
  if (tile >= p.tiles) {
    return;
  }
  let row0 = ((tile / p.tiles_n) * WG_Y + lid.y) * TM;
  let col0 = ((tile % p.tiles_n) * WG_X + lid.x) * TN;
  var acc: array<array<i32, TN>, TM>;
  for (var s = 0u; s < p.k16; s++) {
    var a: array<vec4<u32>, TM>;
    var b: array<vec4<u32>, TN>;
    for (var i = 0u; i < TM; i++) {
      a[i] = qx[min(row0 + i, p.m - 1u) * p.k16 + s];  // rows past the end read the last (never stored)
    }
    for (var j = 0u; j < TN; j++) {
      b[j] = qw[p.w_offset + min(col0 + j, p.n - 1u) * p.k16 + s];
    }
    for (var i = 0u; i < TM; i++) {
      for (var j = 0u; j < TN; j++) {
        acc[i][j] += dot16(a[i], b[j]);
      }
    }
  }
  let scale = bitcast<f32>(qx[p.m * p.k16].x);
  for (var j = 0u; j < TN; j++) {
    let c = col0 + j;
    if (c >= p.n) {
      break;
    }
    let factor = scale * ws[p.scale_offset + c * p.scale_step];
    let shift = select(0.0, bias[p.bias_offset + c], p.has_bias != 0u);
    for (var i = 0u; i < TM; i++) {
      if (row0 + i < p.m) {
        out[(row0 + i) * p.n + c] = f32(acc[i][j]) * factor + shift;
      }
    }
  }
}
