// strided.wgsl: the Params uniform and index maths shared by the elementwise
// kernels (unary.wgsl, binary.wgsl, ternary.wgsl), prepended to them by the loader.
//
// Every operand — inputs 0..2 and the output (slot 3) — is a strided view of its
// buffer. Thread i walks the output's row-major iteration space; operand k reads
// element  offsets[k] + sum_d coord_d(i) * strides[k][d].  A broadcast dim has
// stride 0. Shapes are coalesced in Python first, so most calls have rank 1 and
// take the CONTIGUOUS fast path (offset + i) instead of the loop.
// Grid: ceil(n / WG) workgroups, folded into (x, y) when x would exceed the
// device limit; thread_index() unfolds it.

const MAX_RANK: u32 = 8u;

// strides[d]: every operand's stride along dim d (operand k in component k), one whole vec4
// read per dim. Picking a vector's component by a run-time index is slow on SwiftShader: a
// broadcasting add (64, 16, 8, 8) + (1, 16, 1, 1) took 15 ms in Chromium with the strides
// picked that way, 5 ms so (size(): the shape's components through selects).
struct Params {
  n: u32,
  rank: u32,
  pad0: u32,
  pad1: u32,
  offsets: vec4<u32>,
  shape: array<vec4<u32>, 2>,
  strides: array<vec4<i32>, MAX_RANK>,
}

@group(0) @binding(0) var<uniform> p: Params;
override WG: u32 = 256;
override CONTIGUOUS: bool = true;  // every operand is: element i of each is its offset + i
// The output is packed (several elements to a u32 word) and contiguous from a word's start:
// each thread computes the elements of one word and stores it whole (store_word), instead of
// one element a thread setting its bits with atomic and/or.
override WORDS: bool = false;

fn thread_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * WG;
}

// Every operand's element for output element i: slot k of the result is operand k's (slot 3
// the output's). The coordinates are worked out once for all operands, with one division
// per dim but the outermost (which takes what is left), over RANK dims: a pipeline constant,
// so the loop unrolls and reads the uniform at constant indices. (Integer division is the
// cost on CPU adapters: SwiftShader made a broadcasting add 9x slower than a contiguous one
// with a division and a remainder per dim and operand.)
override RANK: u32 = MAX_RANK;

// Thread t's work in an elementwise shader, whose value(i) is output element i: that element,
// or with WORDS the whole output word t.
fn run_thread(t: u32) {
  if (WORDS) {
    store_word(t);
  } else if (t < p.n) {
    store_out(offsets_of(t).w, value(t));
  }
}

// Every operand's element for output element i (slot 3 the output's), contiguous or not.
fn offsets_of(i: u32) -> vec4<u32> {
  if (CONTIGUOUS) {
    return p.offsets + vec4<u32>(i);
  }
  return operand_offsets(i);
}

fn size(d: u32) -> u32 {
  let four = p.shape[d / 4u];
  let r = d % 4u;
  return select(select(four.x, four.y, r == 1u), select(four.z, four.w, r == 3u), r >= 2u);
}

fn operand_offsets(i: u32) -> vec4<u32> {
  var rem = i;
  var off = vec4<i32>(p.offsets);
  for (var d = i32(RANK) - 1; d >= 1; d = d - 1) {
    let n = size(u32(d));
    let outer = rem / n;
    off = off + i32(rem - outer * n) * p.strides[d];
    rem = outer;
  }
  if (RANK > 0u) {
    off = off + i32(rem) * p.strides[0];
  }
  return vec4<u32>(off);
}
