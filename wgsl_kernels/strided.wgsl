// strided.wgsl: the Params uniform and index maths shared by the elementwise
// kernels (unary.wgsl, binary.wgsl, ternary.wgsl), prepended to them by the loader.
//
// Every operand — inputs 0..2 and the output (slot 3) — is a strided view of its
// buffer. Thread i walks the output's row-major iteration space; operand k reads
// element  offsets[k] + sum_d coord_d(i) * strides[d][k].  A broadcast dim has
// stride 0. Shapes are coalesced in Python first, so most calls have rank 1 and
// take the CONTIGUOUS fast path (offset + i) instead of the loop.
// Grid: ceil(n / WG) workgroups, folded into (x, y) when x would exceed the
// device limit; thread_index() unfolds it.

const MAX_RANK: u32 = 8u;

// shape: the sizes of dims 0..7 in components; strides[d]: every operand's stride along dim
// d (operand k in component k), one vec4 read per dim.
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
// per dim but the outermost (which takes what is left), over RANK dims: a pipeline constant.
override RANK: u32 = MAX_RANK;

// Consecutive output elements a thread computes (a strided launch whose innermost dim they
// divide, on a CPU adapter: elementwise.STRIDED_RUNS): the offsets are worked out once, for the
// first, then stepped along the innermost dim. CPU adapters (llvmpipe, SwiftShader) divide
// integers one lane at a time: an im2col copy took 57 ms in Chromium one element a thread, 18 ms
// sixteen.
override RUN: u32 = 1;

// Thread t's work in an elementwise shader, whose value(at) is the output element with operand
// offsets at: element t (RUN of them from RUN * t), or with WORDS the whole output word t.
fn run_thread(t: u32) {
  if (WORDS) {
    store_word(t);
  } else if (RUN == 1u) {
    if (t < p.n) {
      let at = offsets_of(t);
      store_out(at.w, value(at));
    }
  } else if (t * RUN < p.n) {
    var at = offsets_of(t * RUN);
    let step = vec4<u32>(p.strides[max(RANK, 1u) - 1u]);  // negative strides wrap, as u32 adds do
    for (var r = 0u; r < RUN; r++) {
      store_out(at.w, value(at));
      at = at + step;
    }
  }
}

// Every operand's element for output element i (slot 3 the output's), contiguous or not.
fn offsets_of(i: u32) -> vec4<u32> {
  if (CONTIGUOUS) {
    return p.offsets + vec4<u32>(i);
  }
  return operand_offsets(i);
}

// Unrolled by hand, every uniform read at a constant index: SwiftShader does not unroll a loop
// over RANK, and reads the uniform at a loop counter's index lane by lane. A broadcasting add
// (64, 16, 8, 8) + (1, 16, 1, 1) took 15 ms in Chromium as a loop, 2 ms so; the im2col copy
// of a 16->32 3x3 conv on 16 32x32 images 350 ms, 50 ms so.
fn operand_offsets(i: u32) -> vec4<u32> {
  var rem = i;
  var off = vec4<i32>(p.offsets);
  if (RANK > 7u) { let outer = rem / p.shape[1].w; off += i32(rem - outer * p.shape[1].w) * p.strides[7]; rem = outer; }
  if (RANK > 6u) { let outer = rem / p.shape[1].z; off += i32(rem - outer * p.shape[1].z) * p.strides[6]; rem = outer; }
  if (RANK > 5u) { let outer = rem / p.shape[1].y; off += i32(rem - outer * p.shape[1].y) * p.strides[5]; rem = outer; }
  if (RANK > 4u) { let outer = rem / p.shape[1].x; off += i32(rem - outer * p.shape[1].x) * p.strides[4]; rem = outer; }
  if (RANK > 3u) { let outer = rem / p.shape[0].w; off += i32(rem - outer * p.shape[0].w) * p.strides[3]; rem = outer; }
  if (RANK > 2u) { let outer = rem / p.shape[0].z; off += i32(rem - outer * p.shape[0].z) * p.strides[2]; rem = outer; }
  if (RANK > 1u) { let outer = rem / p.shape[0].y; off += i32(rem - outer * p.shape[0].y) * p.strides[1]; rem = outer; }
  if (RANK > 0u) { off += i32(rem) * p.strides[0]; }
  return vec4<u32>(off);
}
