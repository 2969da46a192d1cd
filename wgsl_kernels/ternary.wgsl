// ternary.wgsl: out[i] = op(a[i], b[i], c[i]) with broadcasting and strided views
// (where: a is the u32 condition, b and c the values).
// Bindings: 0 Params (strided.wgsl), 1 a, 2 b, 3 c, 4 out. Grid: ceil(n / WG), folded.
// Buffers hold SA/SB/SO (f16 for float16), op() computes in A/B/O (f32 then); load_a()
// and store_out() (source.accessors) convert, and unpack and pack the packed kinds; a packed
// out contiguous from a word's start is written a whole word a thread (WORDS: store_word).
// op() is spliced in from the op's Elementwise record; A is a's type, B the values', O the output's.

@group(0) @binding(1) var<storage, read> a: array<SA>;
@group(0) @binding(2) var<storage, read> b: array<SB>;
@group(0) @binding(3) var<storage, read> c: array<SB>;
@group(0) @binding(4) var<storage, read_write> out: array<SO>;

@compute @workgroup_size(WG)
fn ternary(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  run_thread(thread_index(gid, nwg));
}

// The output element whose operands are at ``at`` (offsets_of: slot k operand k's).
fn value(at: vec4<u32>) -> O {
  return op(load_a(at.x), load_b(at.y), load_c(at.z));
}
