// sort.wgsl: the stable sorting permutation of every row (argsort).
//
// The launcher moves the sorted dim last and makes the input contiguous: `rows`
// rows of `n` elements. The result is out[r, rank] = the index j whose element
// has that rank; ties keep their original order (stable, as torch.sort(stable=True)).
// Elements are compared by key (below) and then by index, a strict total order,
// so every output slot is written exactly once.
//
// Two algorithms, one per row length (the launcher picks):
//   argsort         short rows: one thread per element (r, j) counts the elements
//                   that sort before it,
//                     rank(j) = #{ k : key(x[k]) < key(x[j]) or (equal keys and k < j) },
//                   and writes out[r, rank(j)] = j. n * n work per row, one dispatch.
//   bitonic_init    long rows: a bitonic sorting network over the row padded to a
//   bitonic_step    power of two N. init writes (key, index) pairs (padding gets the
//   bitonic_write   largest key and an index >= n, so it sorts last); each step (k, j)
//                   compare-exchanges pair (i, i ^ j) in the direction given by bit k of
//                   i, for k = 2, 4, ..., N and j = k / 2, ..., 1; write copies the first
//                   n indices to out. n log^2 n work, log2(N) (log2(N) + 1) / 2 steps, no
//                   loops in the shader (so no loop limit on CPU adapters).
//
// Keys order the bits of T as numbers: for f32 the sign-magnitude bits are mapped
// to an unsigned order, -0.0 equals +0.0, and every NaN is largest (last ascending,
// first descending, as numpy and PyTorch sort); DESCENDING flips every key (~key),
// so the index tie-break still keeps equal elements in order. KIND: 0 f32, 1 i32, 2 u32.
//
// Bindings: 0 Params, 1 x (read, array<T>), 2 keys (read_write, array<u32>),
// 3 idx (read_write, array<i32>), 4 out (read_write, array<i32>). Every entry point
// names all four (bind_all) so that they share one binding layout; argsort gets
// one-element scratch buffers for keys and idx.
// Grid: ceil(threads / WG) workgroups, folded into (x, y) past the per-dimension limit
// and capped at limit x limit; each thread then walks its share (t += grid size).
// Threads: argsort rows * n, init and step rows * N, write rows * n.

struct Params {
  rows: u32,     // number of rows
  n: u32,        // elements per row
  offset: u32,   // x's offset in elements
  padded: u32,   // N: n rounded up to a power of two (bitonic)
  k: u32,        // bitonic_step: size of the sequences being merged
  j: u32,        // bitonic_step: compare distance
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> keys: array<u32>;
@group(0) @binding(3) var<storage, read_write> idx: array<i32>;
@group(0) @binding(4) var<storage, read_write> out: array<i32>;
override WG: u32 = 256;
override KIND: u32 = 0u;
override DESCENDING: bool = false;

fn sort_key(a: T) -> u32 {
  let bits = bitcast<u32>(a);
  var key = bits;
  if (KIND == 0u) {
    let magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) {
      key = 0xffffffffu;                                   // NaN: after +inf
    } else if (magnitude == 0u) {
      key = 0x80000000u;                                   // -0.0 sorts as +0.0
    } else {
      key = select(bits | 0x80000000u, ~bits, (bits & 0x80000000u) != 0u);
    }
  } else if (KIND == 1u) {
    key = bits ^ 0x80000000u;
  }
  return select(key, ~key, DESCENDING);
}

fn thread_id(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * WG;
}

fn grid_size(nwg: vec3<u32>) -> u32 {
  return nwg.x * nwg.y * WG;
}

fn bind_all() {
  _ = arrayLength(&x);
  _ = arrayLength(&keys);
  _ = arrayLength(&idx);
  _ = arrayLength(&out);
}

fn argsort_one(i: u32) {
  let row = i / p.n;
  let j = i % p.n;
  let base = p.offset + row * p.n;
  let mine = sort_key(x[base + j]);
  var rank = 0u;
  for (var k = 0u; k < p.n; k++) {
    let other = sort_key(x[base + k]);
    if (other < mine || (other == mine && k < j)) { rank++; }
  }
  out[row * p.n + rank] = i32(j);
}

@compute @workgroup_size(WG)
fn argsort(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  bind_all();
  for (var i = thread_id(gid, nwg); i < p.rows * p.n; i += grid_size(nwg)) {
    argsort_one(i);
  }
}

fn bitonic_init_one(i: u32) {
  let row = i / p.padded;
  let j = i % p.padded;
  if (j < p.n) {
    keys[i] = sort_key(x[p.offset + row * p.n + j]);
  } else {
    keys[i] = 0xffffffffu;
  }
  idx[i] = i32(j);
}

@compute @workgroup_size(WG)
fn bitonic_init(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  bind_all();
  for (var i = thread_id(gid, nwg); i < p.rows * p.padded; i += grid_size(nwg)) {
    bitonic_init_one(i);
  }
}

fn bitonic_step_one(t: u32) {
  let i = t % p.padded;
  let partner = i ^ p.j;
  if (partner <= i) { return; }
  let a = t;
  let b = t - i + partner;
  let ascending = (i & p.k) == 0u;
  let a_after_b = keys[a] > keys[b] || (keys[a] == keys[b] && idx[a] > idx[b]);
  if (a_after_b == ascending) {
    let key = keys[a];
    keys[a] = keys[b];
    keys[b] = key;
    let index = idx[a];
    idx[a] = idx[b];
    idx[b] = index;
  }
}

@compute @workgroup_size(WG)
fn bitonic_step(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  bind_all();
  for (var t = thread_id(gid, nwg); t < p.rows * p.padded; t += grid_size(nwg)) {
    bitonic_step_one(t);
  }
}

fn bitonic_write_one(i: u32) {
  let row = i / p.n;
  out[i] = idx[row * p.padded + i % p.n];
}

@compute @workgroup_size(WG)
fn bitonic_write(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  bind_all();
  for (var i = thread_id(gid, nwg); i < p.rows * p.n; i += grid_size(nwg)) {
    bitonic_write_one(i);
  }
}
