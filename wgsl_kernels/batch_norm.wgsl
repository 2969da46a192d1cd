// batch_norm.wgsl: batch normalization over every dim but the channel dim (ops/normalization.py).
//
// The launcher binds contiguous f32 arrays, viewed as (N, C, S): element (n, c, s) at
// (n * C + c) * S + s. A channel's m = N * S values are numbered j = n * S + s.
//   batch_stats:      out[c] = mean, out[C + c] = biased variance
//   batch_grad_sums:  out[c] = sum(g), out[C + c] = sum(g * xhat)    xhat = (x - mean) * rstd
//   batch_normalize:  out = xhat * w + b                             rstd = 1 / sqrt(var + eps)
//   batch_backward:   out = w * rstd * (g - sum(g) / m - xhat * sum(g * xhat) / m)
// The two sums run one workgroup per channel: thread t takes j = t, t + WG, ... (walk_next), and the
// workgroup adds its threads' partial sums in a tree in workgroup memory (WG a power of two).
// batch_stats makes two passes, the variance over the centred values (never E[x^2] - mean^2, which
// cancels when |mean| >> std); both first subtract the channel's first value x0, so a large
// common offset costs no digits in the f32 sums. The other two are one thread per element.
//
// Bindings: each entry point uses a prefix of them. Bindings 4 and 5 are g and w for the
// gradient entries, w and b for batch_normalize: an entry point sees only the declarations it uses.

struct Params {
  n: u32,
  c: u32,
  s: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read> stats: array<f32>;
@group(0) @binding(4) var<storage, read> g: array<f32>;        // batch_grad_sums, batch_backward
@group(0) @binding(5) var<storage, read> w: array<f32>;        // batch_backward
@group(0) @binding(6) var<storage, read> sums: array<f32>;     // batch_backward
@group(0) @binding(4) var<storage, read> weight: array<f32>;   // batch_normalize
@group(0) @binding(5) var<storage, read> bias: array<f32>;     // batch_normalize

override WG: u32 = 256;

var<workgroup> scratch: array<vec2<f32>, WG>;

// A thread's walk over its values of one channel: j = lid, lid + WG, ... as (image n, place s),
// stepped without a division per value (CPU adapters run integer division one lane at a time).
struct Walk {
  n: u32,
  s: u32,
}

fn walk_start(lid: u32) -> Walk {
  return Walk(lid / p.s, lid % p.s);
}

fn walk_next(w: ptr<function, Walk>) {
  (*w).s = (*w).s + WG % p.s;
  (*w).n = (*w).n + WG / p.s;
  if ((*w).s >= p.s) {
    (*w).s = (*w).s - p.s;
    (*w).n = (*w).n + 1u;
  }
}

// Where the walk's value of channel c is.
fn at(c: u32, w: Walk) -> u32 {
  return (w.n * p.c + c) * p.s + w.s;
}

fn rstd_of(c: u32) -> f32 {
  return 1.0 / sqrt(stats[p.c + c] + p.eps);
}

// The total of every thread's v, handed to all of them.
fn workgroup_sum(v: vec2<f32>, lid: u32) -> vec2<f32> {
  scratch[lid] = v;
  workgroupBarrier();
  for (var half = WG / 2u; half > 0u; half = half / 2u) {
    if (lid < half) { scratch[lid] = scratch[lid] + scratch[lid + half]; }
    workgroupBarrier();
  }
  let total = scratch[0];
  workgroupBarrier();  // everyone has read it before scratch is written again
  return total;
}

// Channel c's mean and variance into out[c] and out[C + c].
fn channel_stats(c: u32, lid: u32) {
  let m = p.n * p.s;
  let x0 = x[c * p.s];
  var s = 0.0;
  for (var w = walk_start(lid); w.n < p.n; walk_next(&w)) { s = s + (x[at(c, w)] - x0); }
  let d = workgroup_sum(vec2<f32>(s, 0.0), lid).x / f32(m);
  var q = 0.0;
  for (var w = walk_start(lid); w.n < p.n; walk_next(&w)) {
    let e = (x[at(c, w)] - x0) - d;
    q = q + e * e;
  }
  let variance = workgroup_sum(vec2<f32>(q, 0.0), lid).x / f32(m);
  if (lid == 0u) {
    out[c] = x0 + d;
    out[p.c + c] = variance;
  }
}

// Channel c's sum(g) and sum(g * xhat) into out[c] and out[C + c].
fn channel_grad_sums(c: u32, lid: u32) {
  let mean = stats[c];
  var sg = 0.0;
  var sgx = 0.0;
  for (var w = walk_start(lid); w.n < p.n; walk_next(&w)) {
    let i = at(c, w);
    sg = sg + g[i];
    sgx = sgx + g[i] * (x[i] - mean);
  }
  let total = workgroup_sum(vec2<f32>(sg, sgx), lid);
  if (lid == 0u) {
    out[c] = total.x;
    out[p.c + c] = total.y * rstd_of(c);
  }
}

// Workgroups take channels wid.x + wid.y * nwg.x, then that plus the grid's size, and so on:
// any number of channels fits the grid.
@compute @workgroup_size(WG)
fn batch_stats(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  for (var c = wid.x + wid.y * nwg.x; c < p.c; c = c + nwg.x * nwg.y) { channel_stats(c, lid); }
}

@compute @workgroup_size(WG)
fn batch_grad_sums(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
  for (var c = wid.x + wid.y * nwg.x; c < p.c; c = c + nwg.x * nwg.y) { channel_grad_sums(c, lid); }
}

fn element_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * WG;
}

@compute @workgroup_size(WG)
fn batch_normalize(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = element_index(gid, nwg);
  if (i >= p.n * p.c * p.s) { return; }
  let c = (i / p.s) % p.c;
  out[i] = (x[i] - stats[c]) * rstd_of(c) * weight[c] + bias[c];
}

@compute @workgroup_size(WG)
fn batch_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = element_index(gid, nwg);
  if (i >= p.n * p.c * p.s) { return; }
  let c = (i / p.s) % p.c;
  let m = f32(p.n * p.s);
  let rstd = rstd_of(c);
  let xhat = (x[i] - stats[c]) * rstd;
  out[i] = w[c] * rstd * (g[i] - sums[c] / m - xhat * sums[p.c + c] / m);
}
