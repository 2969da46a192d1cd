// sort.wgsl: the stable sorting permutation of every row (argsort) by ranking.
//
// The launcher moves the sorted dim last and makes the input contiguous: `rows`
// rows of `n` elements. One thread per element (r, j) counts the elements of its
// row that sort before it:
//   rank(j) = #{ k : key(x[k]) < key(x[j])  or  (key(x[k]) == key(x[j]) and k < j) }
// (with > instead of < when DESCENDING), then writes out[r, rank(j)] = j. Ties keep
// their original order, so the sort is stable in both directions, as
// torch.sort(stable=True). The ranks of a row are distinct, so every output slot
// is written once. Work is n * n per row: fine for the rows this is used on
// (sorting logits over a vocabulary, top-k sampling); the launcher refuses rows
// longer than a CPU adapter's loop limit.
//
// Keys order the bits of T as numbers: for f32 the sign-magnitude bits are
// mapped to an unsigned order, -0.0 equals +0.0, and every NaN is largest (last
// ascending, first descending, as numpy and PyTorch sort). KIND: 0 f32, 1 i32, 2 u32.
//
// Bindings: 0 Params, 1 x (read, array<T>), 2 out (read_write, array<i32>: indices).
// Grid: ceil(rows * n / WG) workgroups, folded into (x, y) past the per-dimension limit.

struct Params {
  rows: u32,     // number of rows
  n: u32,        // elements per row
  offset: u32,   // x's offset in elements
  pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> out: array<i32>;
override WG: u32 = 256;
override KIND: u32 = 0u;
override DESCENDING: bool = false;

fn sort_key(a: T) -> u32 {
  let bits = bitcast<u32>(a);
  if (KIND == 0u) {
    let magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) { return 0xffffffffu; }  // NaN: after +inf
    if (magnitude == 0u) { return 0x80000000u; }          // -0.0 sorts as +0.0
    return select(bits | 0x80000000u, ~bits, (bits & 0x80000000u) != 0u);
  }
  if (KIND == 1u) { return bits ^ 0x80000000u; }
  return bits;
}

@compute @workgroup_size(WG)
fn argsort(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.rows * p.n) { return; }
  let row = i / p.n;
  let j = i % p.n;
  let base = p.offset + row * p.n;
  let mine = sort_key(x[base + j]);
  var rank = 0u;
  for (var k = 0u; k < p.n; k++) {
    let other = sort_key(x[base + k]);
    var before = other < mine;
    if (DESCENDING) { before = other > mine; }
    if (before || (other == mine && k < j)) { rank++; }
  }
  out[row * p.n + rank] = i32(j);
}
