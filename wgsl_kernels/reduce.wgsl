// reduce.wgsl: sum, prod, amax, amin, argmax, argmin over some dims of a strided view.
//
// Maths. The launcher splits the input's dims into kept dims (the output's) and
// reduced dims, and coalesces each list. Row o (an output element, row-major over
// the kept dims) and position r in it (row-major over the reduced dims) read
//   x[offset + sum_k coord_k(o) * keep_strides[k] + sum_j coord_j(r) * red_strides[j]]
// so broadcast (stride 0), permuted, sliced and flipped (negative stride) views
// are reduced in place, never copied. out[o] = combine over r of that element:
//   sum: +  (empty row: 0)    prod: *  (empty row: 1)
//   amax / amin: max / min; a NaN anywhere wins, like numpy
//   argmax / argmin: the smallest r holding the extreme (or the first NaN), as i32.
//
// Bindings: 0 Params, 1 x (read, array<X>), 2 out (read_write, array<O>).
// Types: X is the input's element type (load_x, source.accessors, reads it from its buffer of
// SX: f16 and the packed kinds are read as f32 or i32), T the accumulator's, O the output's
// (T, or i32 for arg*). Two hooks: prologue(v) makes each element from the input's (X -> T)
// and epilogue(v) each stored result (T -> O). A plain reduction takes them from
// reduce_plain.wgsl (X = T, a cast); a fused one (graph.passes.reduce) has them
// generated from its chains, whose one-element inputs are bound at 3.. and read at
// the offsets in Params.ext (backend/webgpu/fused.py, reduction_source).
//
// Grid. A workgroup of WG threads is cut into WG / LANES teams of LANES
// threads; each team reduces one row: lane l folds r = l, l + LANES, ... in a
// register (four elements a loop trip), then the team combines its lanes in a
// tree in workgroup memory (log2(LANES) barriers). LANES = WG is one workgroup
// per row (long rows on a GPU); LANES = 1 is one thread per row (short rows,
// reductions down columns whose outputs are adjacent in memory, and CPU
// adapters, where barriers are dear), with no barrier at all.
// Long rows may be cut into `chunks` pieces of `chunk_len`: a first pass writes
// one partial result per piece (rows = kept elements x chunks), a second pass
// reduces the partials. A lane with no element of a short piece takes the
// identity (sum, prod) or repeats the piece's first element (max, min, arg*),
// which changes nothing; so max/min need no identity value.
// Workgroups are numbered wid.x + wid.y * nwg.x (the grid is folded into y past
// the per-dimension limit) and loop over row groups in steps of the grid size,
// so any number of rows fits any grid.
//
// llvmpipe (Mesa's CPU Vulkan driver) silently ends an invocation after about
// 65535 loop trips in all; the launcher keeps every thread well under that.

const MAX_RANK: u32 = 8u;  // dims of each kind (kept, reduced) after merging
const OP_SUM: u32 = 0u;
const OP_PROD: u32 = 1u;
const OP_MAX: u32 = 2u;
const OP_MIN: u32 = 3u;

struct Params {
  rows: u32,         // outputs of this pass: kept elements x chunks
  inner: u32,        // length of a whole row
  offset: u32,       // the input view's offset in elements
  groups: u32,       // ceil(rows / (WG / LANES))
  keep_rank: u32,
  red_rank: u32,
  chunks: u32,       // pieces each row is split into (1: no split)
  chunk_len: u32,    // elements per piece (the last may be shorter)
  keep_shape: array<vec4<u32>, 2>,
  keep_strides: array<vec4<i32>, 2>,
  red_shape: array<vec4<u32>, 2>,
  red_strides: array<vec4<i32>, 2>,
  ext: vec4<u32>,    // offsets of a fused reduction's one-element inputs (S0..S3)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<SX>;
@group(0) @binding(2) var<storage, read_write> out: array<O>;

override WG: u32 = 128;
override LANES: u32 = 128;
override IS_FLOAT: bool = true;
override KEEP_FLAT: bool = true;  // at most one kept dim after merging: row o starts at o * stride
override ROW_FLAT: bool = true;   // at most one reduced dim: element r is at r * stride
// The kept and reduced dims after merging: constants, so that keep_offset/red_offset keep only their
// steps (its branches on them compile away) and reads the uniform at constant indices.
override KEEP_RANK: u32 = MAX_RANK;
override RED_RANK: u32 = MAX_RANK;

var<workgroup> scratch: array<T, WG>;
var<workgroup> scratch_index: array<u32, WG>;

// Index maths without loops, and early returns only on override constants (which
// compile away): both cost llvmpipe loop trips. The only loops are the row walk,
// the tree and the grid-stride loop. One division per dim: integer division is dear on
// CPU adapters. Offset of element i of a row-major walk over the kept (or reduced) dims,
// from the innermost (last) dim out, unrolled by hand with every uniform read at a constant
// index (SwiftShader reads a uniform at a run-time index lane by lane: the digits CNN's bias
// gradient, a sum over (0, 2, 3), took 7.5 ms in Chromium through a shared walk function).
// Two copies: WGSL cannot pass a uniform by reference, and arrays passed by value were as slow.
fn keep_offset(i: u32) -> i32 {
  var rem = i;
  var off = 0;
  if (KEEP_RANK > 7u) { let q = rem / p.keep_shape[1].w; off += i32(rem - q * p.keep_shape[1].w) * p.keep_strides[1].w; rem = q; }
  if (KEEP_RANK > 6u) { let q = rem / p.keep_shape[1].z; off += i32(rem - q * p.keep_shape[1].z) * p.keep_strides[1].z; rem = q; }
  if (KEEP_RANK > 5u) { let q = rem / p.keep_shape[1].y; off += i32(rem - q * p.keep_shape[1].y) * p.keep_strides[1].y; rem = q; }
  if (KEEP_RANK > 4u) { let q = rem / p.keep_shape[1].x; off += i32(rem - q * p.keep_shape[1].x) * p.keep_strides[1].x; rem = q; }
  if (KEEP_RANK > 3u) { let q = rem / p.keep_shape[0].w; off += i32(rem - q * p.keep_shape[0].w) * p.keep_strides[0].w; rem = q; }
  if (KEEP_RANK > 2u) { let q = rem / p.keep_shape[0].z; off += i32(rem - q * p.keep_shape[0].z) * p.keep_strides[0].z; rem = q; }
  if (KEEP_RANK > 1u) { let q = rem / p.keep_shape[0].y; off += i32(rem - q * p.keep_shape[0].y) * p.keep_strides[0].y; rem = q; }
  if (KEEP_RANK > 0u) { off += i32(rem) * p.keep_strides[0].x; }
  return off;
}

fn red_offset(i: u32) -> i32 {
  var rem = i;
  var off = 0;
  if (RED_RANK > 7u) { let q = rem / p.red_shape[1].w; off += i32(rem - q * p.red_shape[1].w) * p.red_strides[1].w; rem = q; }
  if (RED_RANK > 6u) { let q = rem / p.red_shape[1].z; off += i32(rem - q * p.red_shape[1].z) * p.red_strides[1].z; rem = q; }
  if (RED_RANK > 5u) { let q = rem / p.red_shape[1].y; off += i32(rem - q * p.red_shape[1].y) * p.red_strides[1].y; rem = q; }
  if (RED_RANK > 4u) { let q = rem / p.red_shape[1].x; off += i32(rem - q * p.red_shape[1].x) * p.red_strides[1].x; rem = q; }
  if (RED_RANK > 3u) { let q = rem / p.red_shape[0].w; off += i32(rem - q * p.red_shape[0].w) * p.red_strides[0].w; rem = q; }
  if (RED_RANK > 2u) { let q = rem / p.red_shape[0].z; off += i32(rem - q * p.red_shape[0].z) * p.red_strides[0].z; rem = q; }
  if (RED_RANK > 1u) { let q = rem / p.red_shape[0].y; off += i32(rem - q * p.red_shape[0].y) * p.red_strides[0].y; rem = q; }
  if (RED_RANK > 0u) { off += i32(rem) * p.red_strides[0].x; }
  return off;
}

// Offset of row o's first element, relative to p.offset.
fn row_offset(o: u32) -> i32 {
  if (KEEP_FLAT) { return i32(o) * p.keep_strides[0].x; }
  return keep_offset(o);
}

fn load(base: i32, r: u32) -> T {
  if (ROW_FLAT) { return prologue(load_x(u32(base + i32(r) * p.red_strides[0].x))); }
  return prologue(load_x(u32(base + red_offset(r))));
}

// Bit test rather than x != x: compilers may fold that to false.
fn is_nan(v: T) -> bool {
  return IS_FLOAT && (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

fn identity(op: u32) -> T {
  return select(T(0), T(1), op == OP_PROD);  // max/min never use it (rows are never empty)
}

// op is a constant at every call site, so the compiler keeps one branch.
fn combine(op: u32, a: T, b: T) -> T {
  var r = a + b;
  if (op == OP_PROD) {
    r = a * b;
  } else if (op == OP_MAX) {
    r = select(select(max(a, b), b, is_nan(b)), a, is_nan(a));
  } else if (op == OP_MIN) {
    r = select(select(min(a, b), b, is_nan(b)), a, is_nan(a));
  }
  return r;
}

// Does candidate (vb, ib) beat the current (va, ia)? NaN beats numbers; ties go
// to the smaller index. Parenthesised: `vb < va, vb > va` would parse as a template list.
fn better(op: u32, va: T, ia: u32, vb: T, ib: u32) -> bool {
  let na = is_nan(va);
  let nb = is_nan(vb);
  let ordered = select((vb < va), (vb > va), op == OP_MAX) || (vb == va && ib < ia);
  return select(ordered, nb && (!na || ib < ia), na || nb);
}

// The first row group this workgroup handles, and the step between its groups.
fn first_group(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return wid.x + wid.y * nwg.x; }
fn group_step(nwg: vec3<u32>) -> u32 { return nwg.x * nwg.y; }

// Row piece handled by output slot `o` of this pass: (kept index, first r, length).
struct Piece { base: i32, start: u32, len: u32 }

fn piece(o: u32) -> Piece {
  let row = o / p.chunks;
  let start = (o % p.chunks) * p.chunk_len;
  return Piece(i32(p.offset) + row_offset(row), start, min(p.chunk_len, p.inner - start));
}

fn reduce(op: u32, wid: vec3<u32>, lid: u32, nwg: vec3<u32>) {
  let lane = lid % LANES;
  let rows_per_group = WG / LANES;
  for (var g = first_group(wid, nwg); g < p.groups; g = g + group_step(nwg)) {
    let o = g * rows_per_group + lid / LANES;
    var acc = identity(op);
    if (o < p.rows) {
      let pc = piece(o);
      if (lane < pc.len) {
        acc = load(pc.base, pc.start + lane);
        var r = lane + LANES;
        loop {  // four elements a trip, then the rest one by one
          if (r + 3u * LANES >= pc.len) { break; }
          acc = combine(op, acc, load(pc.base, pc.start + r));
          acc = combine(op, acc, load(pc.base, pc.start + r + LANES));
          acc = combine(op, acc, load(pc.base, pc.start + r + 2u * LANES));
          acc = combine(op, acc, load(pc.base, pc.start + r + 3u * LANES));
          r = r + 4u * LANES;
        }
        for (; r < pc.len; r = r + LANES) {
          acc = combine(op, acc, load(pc.base, pc.start + r));
        }
      } else if (op >= OP_MAX && pc.len > 0u) {
        acc = load(pc.base, pc.start);  // a lane past a short piece repeats its first element
      }
    }
    if (LANES > 1u) {
      scratch[lid] = acc;
      workgroupBarrier();
      for (var s = LANES / 2u; s > 0u; s = s / 2u) {
        if (lane < s) {
          acc = combine(op, acc, scratch[lid + s]);
          scratch[lid] = acc;
        }
        workgroupBarrier();
      }
    }
    if (lane == 0u && o < p.rows) { out[o] = epilogue(acc); }
  }
}

fn consider(op: u32, best: ptr<function, T>, best_index: ptr<function, u32>, base: i32, r: u32) {
  let v = load(base, r);
  if (better(op, *best, *best_index, v, r)) {
    *best = v;
    *best_index = r;
  }
}

fn arg_reduce(op: u32, wid: vec3<u32>, lid: u32, nwg: vec3<u32>) {
  let lane = lid % LANES;
  let rows_per_group = WG / LANES;
  for (var g = first_group(wid, nwg); g < p.groups; g = g + group_step(nwg)) {
    let o = g * rows_per_group + lid / LANES;
    var best = T(0);
    var best_index = 0u;
    if (o < p.rows) {
      let pc = piece(o);
      best_index = pc.start + select(0u, lane, lane < pc.len);  // past a short piece: its first element
      best = load(pc.base, best_index);
      let end = pc.start + pc.len;
      var r = pc.start + lane + LANES;
      loop {  // four elements a trip, in order, then the rest one by one
        if (r + 3u * LANES >= end) { break; }
        consider(op, &best, &best_index, pc.base, r);
        consider(op, &best, &best_index, pc.base, r + LANES);
        consider(op, &best, &best_index, pc.base, r + 2u * LANES);
        consider(op, &best, &best_index, pc.base, r + 3u * LANES);
        r = r + 4u * LANES;
      }
      for (; r < end; r = r + LANES) {
        consider(op, &best, &best_index, pc.base, r);
      }
    }
    if (LANES > 1u) {
      scratch[lid] = best;
      scratch_index[lid] = best_index;
      workgroupBarrier();
      for (var s = LANES / 2u; s > 0u; s = s / 2u) {
        if (lane < s && better(op, best, best_index, scratch[lid + s], scratch_index[lid + s])) {
          best = scratch[lid + s];
          best_index = scratch_index[lid + s];
        }
        if (lane < s) {
          scratch[lid] = best;
          scratch_index[lid] = best_index;
        }
        workgroupBarrier();
      }
    }
    if (lane == 0u && o < p.rows) { out[o] = O(best_index); }
  }
}

@compute @workgroup_size(WG)
fn sum(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
       @builtin(num_workgroups) nwg: vec3<u32>) {
  reduce(OP_SUM, wid, lid, nwg);
}

@compute @workgroup_size(WG)
fn prod(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(num_workgroups) nwg: vec3<u32>) {
  reduce(OP_PROD, wid, lid, nwg);
}

@compute @workgroup_size(WG)
fn amax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(num_workgroups) nwg: vec3<u32>) {
  reduce(OP_MAX, wid, lid, nwg);
}

@compute @workgroup_size(WG)
fn amin(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(num_workgroups) nwg: vec3<u32>) {
  reduce(OP_MIN, wid, lid, nwg);
}

@compute @workgroup_size(WG)
fn argmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
          @builtin(num_workgroups) nwg: vec3<u32>) {
  arg_reduce(OP_MAX, wid, lid, nwg);
}

@compute @workgroup_size(WG)
fn argmin(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
          @builtin(num_workgroups) nwg: vec3<u32>) {
  arg_reduce(OP_MIN, wid, lid, nwg);
}
