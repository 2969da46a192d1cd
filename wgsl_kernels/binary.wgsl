// binary.wgsl: out[i] = op(a[i], b[i]) with broadcasting (stride 0) and strided views.
// Bindings: 0 Params (strided.wgsl), 1 a, 2 b, 3 out, 4 errors (only for an op() that
// calls wg_check_divisor: the launcher binds the backend's error flag there).
// Grid: ceil(n / WG), folded.
// Buffers hold SA/SB/SO (f16 for float16), op() computes in A/B/O (f32 then); load_a()
// and store_out() (source.accessors) convert, and unpack and pack the packed kinds; a packed
// out contiguous from a word's start is written a whole word a thread (WORDS: store_word).
// op() is spliced in from the op's Elementwise record; A is both inputs' type, O the output's.

@group(0) @binding(1) var<storage, read> a: array<SA>;
@group(0) @binding(2) var<storage, read> b: array<SA>;
@group(0) @binding(3) var<storage, read_write> out: array<SO>;
@group(0) @binding(4) var<storage, read_write> errors: array<atomic<u32>>;

// Integer division by zero: set bit 2 of the error flag (raised at the next read as
// PyTorch's ZeroDivisionError) and go on with the divisor unchanged (the result is 0).
fn wg_check_divisor(b: i32) -> i32 {
  if (b == 0) { atomicOr(&errors[0], 2u); }
  return b;
}

@compute @workgroup_size(WG)
fn binary(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  run_thread(thread_index(gid, nwg));
}

// The output element whose operands are at ``at`` (offsets_of: slot k operand k's).
fn value(at: vec4<u32>) -> O {
  return op(load_a(at.x), load_b(at.y));
}
