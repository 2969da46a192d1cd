// random.wgsl: random numbers drawn on the device with Philox4x32-10 (Salmon et
// al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), a counter-based
// generator: block t of four 32-bit words is philox(counter = (t, offset, 0, 0),
// key = (seed, 0)), a pure function, so no state lives on the GPU and the same
// (seed, offset) gives the same numbers whatever the grid. Thread t writes
// elements 4t .. 4t + 3 (those below n).
//
// Entry points are named after the creation ops (`uniform` cannot name a WGSL
// function: it is the address space in `var<uniform>`):
//   rand     uniform: out = low + scale * u,  u = (bits >> 8) * 2^-24 in [0, 1)
//   randn    normal: out = mean + std * z,  z from Box-Muller on two words:
//            sqrt(-2 ln u1) * (cos, sin)(2 pi u2),  u1 = ((bits >> 8) + 1) * 2^-24 in (0, 1]
//   randint  out = low + mulhi(bits, range)  (Lemire's multiply-shift: unbiased to 2^-32)
//   bernoulli  out = scale where u < low (the probability), else 0: dropout's scaled mask
//
// Bindings: 0 Params, 1 out (O). Grid: ceil(ceil(n / 4) / WG) workgroups, folded
// into (x, y) past the per-dimension limit.

struct Params {
  n: u32,
  seed: u32,
  offset: u32,
  range: u32,   // randint: high - low
  low: f32,     // uniform: low; normal: mean; bernoulli: probability
  scale: f32,   // uniform: high - low; normal: std; bernoulli: value drawn with that probability
  int_low: i32, // randint: low
  first_block: u32, // block of the whole draw that thread 0 writes (a window of a large tensor)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<O>;
override WG: u32 = 256;

const PHILOX_M0: u32 = 0xD2511F53u;
const PHILOX_M1: u32 = 0xCD9E8D57u;
const PHILOX_W0: u32 = 0x9E3779B9u;
const PHILOX_W1: u32 = 0xBB67AE85u;
const TWO_PI: f32 = 6.283185307179586;
const INV_2_24: f32 = 5.9604644775390625e-8;

// The high 32 bits of a * b, from 16-bit halves (WGSL has no 64-bit integers).
fn mulhi(a: u32, b: u32) -> u32 {
  let a_lo = a & 0xFFFFu;
  let a_hi = a >> 16u;
  let b_lo = b & 0xFFFFu;
  let b_hi = b >> 16u;
  let lo_lo = a_lo * b_lo;
  let hi_lo = a_hi * b_lo;
  let lo_hi = a_lo * b_hi;
  let cross = (lo_lo >> 16u) + (hi_lo & 0xFFFFu) + lo_hi;  // at most 2^32 - 1: no overflow
  return a_hi * b_hi + (hi_lo >> 16u) + (cross >> 16u);
}

fn philox(counter: vec4<u32>, key_in: vec2<u32>) -> vec4<u32> {
  var c = counter;
  var key = key_in;
  for (var i = 0; i < 10; i = i + 1) {
    let hi0 = mulhi(PHILOX_M0, c.x);
    let lo0 = PHILOX_M0 * c.x;
    let hi1 = mulhi(PHILOX_M1, c.z);
    let lo1 = PHILOX_M1 * c.z;
    c = vec4<u32>(hi1 ^ c.y ^ key.x, lo1, hi0 ^ c.w ^ key.y, lo0);
    key = key + vec2<u32>(PHILOX_W0, PHILOX_W1);
  }
  return c;
}

fn thread_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * WG;
}

fn block(t: u32) -> vec4<u32> {
  return philox(vec4<u32>(p.first_block + t, p.offset, 0u, 0u), vec2<u32>(p.seed, 0u));
}

fn store(first: u32, values: vec4<f32>) {
  for (var k = 0u; k < 4u; k = k + 1u) {
    if (first + k < p.n) { out[first + k] = O(values[k]); }
  }
}

@compute @workgroup_size(WG)
fn rand(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let t = thread_index(gid, nwg);
  if (t * 4u >= p.n) { return; }
  let u = vec4<f32>(block(t) >> vec4<u32>(8u)) * INV_2_24;
  store(t * 4u, p.low + p.scale * u);
}

@compute @workgroup_size(WG)
fn bernoulli(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let t = thread_index(gid, nwg);
  if (t * 4u >= p.n) { return; }
  let u = vec4<f32>(block(t) >> vec4<u32>(8u)) * INV_2_24;
  store(t * 4u, select(vec4<f32>(0.0), vec4<f32>(p.scale), u < vec4<f32>(p.low)));
}

@compute @workgroup_size(WG)
fn randn(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let t = thread_index(gid, nwg);
  if (t * 4u >= p.n) { return; }
  let bits = block(t) >> vec4<u32>(8u);
  let u1 = (vec2<f32>(bits.xz) + 1.0) * INV_2_24;  // (0, 1]: log never sees 0
  let u2 = vec2<f32>(bits.yw) * INV_2_24;
  let r = sqrt(-2.0 * log(u1));
  let z = vec4<f32>(r.x * cos(TWO_PI * u2.x), r.x * sin(TWO_PI * u2.x),
                    r.y * cos(TWO_PI * u2.y), r.y * sin(TWO_PI * u2.y));
  store(t * 4u, p.low + p.scale * z);
}

@compute @workgroup_size(WG)
fn randint(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let t = thread_index(gid, nwg);
  if (t * 4u >= p.n) { return; }
  let bits = block(t);
  for (var k = 0u; k < 4u; k = k + 1u) {
    if (t * 4u + k < p.n) { out[t * 4u + k] = O(p.int_low + i32(mulhi(bits[k], p.range))); }
  }
}
