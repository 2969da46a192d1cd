// strided.wgsl: the Params uniform and index maths shared by the elementwise
// kernels (unary.wgsl, binary.wgsl, ternary.wgsl), prepended to them by the loader.
//
// Every operand — inputs 0..2 and the output (slot 3) — is a strided view of its
// buffer. Thread i walks the output's row-major iteration space; operand k reads
// element  offsets[k] + sum_d coord_d(i) * strides[k][d].  A broadcast dim has
// stride 0. Shapes are coalesced in Python first, so most calls have rank 1 and
// take the *_CONTIGUOUS fast path (offset + i) instead of the loop.
// Grid: ceil(n / WG) workgroups, folded into (x, y) when x would exceed the
// device limit; thread_index() unfolds it.

const MAX_RANK: u32 = 8u;

struct Params {
  n: u32,
  rank: u32,
  pad0: u32,
  pad1: u32,
  offsets: vec4<u32>,
  shape: array<vec4<u32>, 2>,
  strides: array<array<vec4<i32>, 2>, 4>,
}

@group(0) @binding(0) var<uniform> p: Params;
override WG: u32 = 256;

fn thread_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * WG;
}

fn operand_offset(i: u32, k: u32) -> u32 {
  var rem = i;
  var off = i32(p.offsets[k]);
  for (var d = i32(p.rank) - 1; d >= 0; d = d - 1) {
    let du = u32(d);
    let n = p.shape[du / 4u][du % 4u];
    off = off + i32(rem % n) * p.strides[k][du / 4u][du % 4u];
    rem = rem / n;
  }
  return u32(off);
}
