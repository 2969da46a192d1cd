// index.wgsl: reading and writing elements picked by an integer index tensor.
//
//   gather              out[i] = values[v(i) + j * p.index_step],  j = index[x(i)]
//                       Serves `take` (rows of dim 0) and `gather` (torch.gather): the
//                       launcher drops the indexed dim from the values' iteration
//                       strides and passes that dim's stride as index_step.
//   scatter_add         out[c] += values[c with dim := k]  for k = 0, 1, ..., span - 1 in
//                       order, wherever index[c with dim := k] == c[dim]. One thread per
//                       output word scans the index column of each element in it: no
//                       atomics, the same result on every run, bit for bit numpy's np.add.at
//                       order for 32-bit kinds. Cost: out elements x span loop steps.
//   scatter_add_columns the same sums for 32-bit kinds, one thread per column of out along
//                       dim (c with dim's coordinate left out): it walks k = 0, 1, ...,
//                       span - 1 in order and adds values[c with dim := k] into
//                       out[c with dim := index[c with dim := k]]. Only this thread writes
//                       the column, so no atomics, and the order is the scan's (the same
//                       bits). Cost: out elements / rows x span loop steps.
//   scatter_add_atomic  out[c with dim := index[c]] += values[c], one thread per index
//                       element. WGSL has integer atomics only, so an add is a
//                       compare-exchange loop on the bits of the word holding the element;
//                       the summation order (and so the rounding) changes from run to run.
//                       The launcher picks it when the scan would be too long (big index
//                       with duplicates, e.g. the gradient of an embedding).
//   put                 dst[phys(positions[i] - 1)] = values[v(i)]   (x[key] = value): phys
//                       unflattens a logical position with dst's shape and strides. 32-bit
//                       kinds only (the backend widens narrower ones).
//
// Elements as stored. values and out are bound as u32 words holding PER_WORD elements of
// BITS bits each (32: f32, i32, bool; 16: float16, bfloat16, int16; 8: int8, uint8; element
// 0 in the low bits), so the 2-byte floats and small integers are indexed without wider
// copies. The generated prelude (source.index_codec) gives BITS, value_of(bits) -> T (the
// kind T is computed in: f32 for the 16-bit floats) and bits_of(v) (the element's rounded
// bits). gather moves bits and never rounds. The scatters sum in T and round once as they
// store (the atomic one per add, as CUDA's half atomics do). gather and scatter_add write
// whole words, one thread each, so out starts at a word (the launcher checks).
//
// `out` of the scatters already holds the base tensor (the launcher copies it in).
// Index values are i32 (int64 tensors live as i32 on the device) and must lie in
// [0, rows): no kernel wraps a negative index (x[key] wraps its own per dim before it
// flattens them; index_select, embedding, gather and scatter_add reject negatives, as
// PyTorch does). An index outside [0, rows) never touches memory out of bounds: gather
// writes 0 for it, the scatters skip it, and both set bit 1 of errors[0], which the
// backend checks at the next readback and raises as an IndexError (the device-side
// assert of CUDA, without stalling the queue). put writes nothing while the flag is set
// (the positions it writes come from take, which flags a bad index of this very write).
//
// Windows: a tensor larger than one storage binding is indexed along its rows in windows
// (backend/webgpu/large.py). With `count` > 0 the values (gather) or out (scatter_add_atomic)
// binding holds only rows [first, first + count): an index in range but outside them is
// another window's and is skipped (gather leaves that output element as it is).
//
// Bindings: 0 Params, 1 index (i32), 2 values (words), 3 out (words; atomic words in
// scatter_add_atomic), 4 errors.
// Operand strides are in elements over the iteration space (slot 0 index, 1 values,
// 3 out); put's slot 3 holds dst's strides over `bound` (dst's shape) instead.
// Grid: ceil(threads / WG) workgroups, folded into (x, y) past the per-dimension limit.

struct Params {
  n: u32,                                  // threads
  rank: u32,                               // rank of the iteration space
  dim: u32,                                // scatter_add: the indexed dim
  rows: u32,                               // size of the indexed dim (bounds)
  offsets: vec4<u32>,                      // element offsets: index, values, -, out
  span: u32,                               // scatter_add: index length along dim; put: dst rank
  index_step: i32,                         // stride that multiplies the index value (or scan step)
  value_step: i32,                         // scatter_add: values' stride along dim
  out_step: i32,                           // scatter_add_columns: out's stride along dim
  shape: array<vec4<u32>, 2>,              // iteration shape
  bound: array<vec4<u32>, 2>,              // scatter_add: index shape; put: dst shape
  strides: array<array<vec4<i32>, 2>, 4>,  // per operand slot, see above
  first: u32,                              // gather, scatter_add_atomic: with `count`, the rows
  count: u32,                              // [first, first + count) bound (0: all `rows`), see below
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> index: array<i32>;
@group(0) @binding(2) var<storage, read> values: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;
// The same binding as `out`, used only by scatter_add_atomic (never both in one entry point).
@group(0) @binding(3) var<storage, read_write> out_atomic: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> errors: array<atomic<u32>>;
override WG: u32 = 256;
const PER_WORD = 32u / BITS;
const MASK = 0xffffffffu >> (32u - BITS);  // an element's bits, at the bottom of a word

fn thread_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * WG;
}

// The iteration space's rank (p.rank) as a pipeline constant, so that strided() unrolls:
// SwiftShader does not unroll a loop over it, and reads the uniform at a loop counter's index
// lane by lane (as strided.wgsl notes).
override RANK: u32 = 8u;

// The coordinate along a dim of size n in a row-major walk, innermost dim first.
fn peel(n: u32, rem: ptr<function, u32>) -> i32 {
  let c = *rem % n;
  *rem = *rem / n;
  return i32(c);
}

// Element offset (without the base offset) of operand slot k at iteration index i.
fn strided(i: u32, k: u32) -> i32 {
  let s = p.strides[k];
  var rem = i;
  var off = 0;
  if (RANK > 7u) { off = off + peel(p.shape[1].w, &rem) * s[1].w; }
  if (RANK > 6u) { off = off + peel(p.shape[1].z, &rem) * s[1].z; }
  if (RANK > 5u) { off = off + peel(p.shape[1].y, &rem) * s[1].y; }
  if (RANK > 4u) { off = off + peel(p.shape[1].x, &rem) * s[1].x; }
  if (RANK > 3u) { off = off + peel(p.shape[0].w, &rem) * s[0].w; }
  if (RANK > 2u) { off = off + peel(p.shape[0].z, &rem) * s[0].z; }
  if (RANK > 1u) { off = off + peel(p.shape[0].y, &rem) * s[0].y; }
  if (RANK > 0u) { off = off + peel(p.shape[0].x, &rem) * s[0].x; }
  return off;
}

fn in_range(j: i32) -> bool {
  return j >= 0 && u32(j) < p.rows;
}

// Whether row j (in range) is bound by this dispatch; its position in the binding is j - first.
fn in_window(j: i32) -> bool {
  return p.count == 0u || (u32(j) >= p.first && u32(j) - p.first < p.count);
}

// The bits of element e of values.
fn element_bits(e: u32) -> u32 {
  return (values[e / PER_WORD] >> ((e % PER_WORD) * BITS)) & MASK;
}

// ``word`` with element k's bits replaced by ``bits``.
fn with_bits(word: u32, k: u32, bits: u32) -> u32 {
  let shift = k * BITS;
  return (word & ~(MASK << shift)) | (bits << shift);
}

// Where the column (along dim) of iteration element i starts: i unflattened over p.shape,
// innermost dim first, the index and values elements with dim's coordinate 0 (slots 0 and 1),
// out's too (slot 3: scatter_add_columns, whose dim has size 1), and i's coordinate along dim
// (row). inside is false where the index tensor (p.bound) is smaller than the iteration space.
struct Column {
  index_at: i32,
  value_at: i32,
  out_at: i32,
  row: i32,
  inside: bool,
}

fn column_of(i: u32) -> Column {
  var col = Column(i32(p.offsets.x), i32(p.offsets.y), i32(p.offsets.w), 0, true);
  var rem = i;
  for (var d = i32(p.rank) - 1; d >= 0; d = d - 1) {
    let du = u32(d);
    let n = p.shape[du / 4u][du % 4u];
    let c = rem % n;
    rem = rem / n;
    if (du == p.dim) {
      col.row = i32(c);
    } else {
      col.inside = col.inside && c < p.bound[du / 4u][du % 4u];
      col.index_at = col.index_at + i32(c) * p.strides[0][du / 4u][du % 4u];
      col.value_at = col.value_at + i32(c) * p.strides[1][du / 4u][du % 4u];
      col.out_at = col.out_at + i32(c) * p.strides[3][du / 4u][du % 4u];
    }
  }
  return col;
}

@compute @workgroup_size(WG)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let first = thread_index(gid, nwg) * PER_WORD;  // this thread's output word holds elements first...
  if (first >= p.n) { return; }
  let o = p.offsets.w / PER_WORD + first / PER_WORD;
  var word = 0u;
  if (p.count != 0u) { word = out[o]; }  // other windows' elements stay
  for (var i = first; i < min(first + PER_WORD, p.n); i++) {
    let j = index[u32(i32(p.offsets.x) + strided(i, 0u))];
    var bits = 0u;
    if (in_range(j)) {
      if (!in_window(j)) { continue; }
      bits = element_bits(u32(i32(p.offsets.y) + strided(i, 1u) + (j - i32(p.first)) * p.index_step));
    } else {
      atomicOr(&errors[0], 1u);
    }
    word = with_bits(word, i - first, bits);
  }
  out[o] = word;
}

@compute @workgroup_size(WG)
fn scatter_add(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let first = thread_index(gid, nwg) * PER_WORD;
  if (first >= p.n) { return; }
  let o = p.offsets.w / PER_WORD + first / PER_WORD;
  var word = out[o];
  for (var i = first; i < min(first + PER_WORD, p.n); i++) {
    let col = column_of(i);
    if (!col.inside) { continue; }
    let k = i - first;
    var acc = value_of((word >> (k * BITS)) & MASK);
    for (var s = 0u; s < p.span; s = s + 1u) {
      let j = index[u32(col.index_at + i32(s) * p.index_step)];
      if (j == col.row) {
        acc = acc + value_of(element_bits(u32(col.value_at + i32(s) * p.value_step)));
      } else if (col.row == 0 && !in_range(j)) {
        atomicOr(&errors[0], 1u);  // row 0 always exists: its threads report each column's bad indices
      }
    }
    word = with_bits(word, k, bits_of(acc));
  }
  out[o] = word;
}

@compute @workgroup_size(WG)
fn scatter_add_columns(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = thread_index(gid, nwg);
  if (i >= p.n) { return; }
  let col = column_of(i);  // out's shape with dim's size 1: i is a column
  if (!col.inside) { return; }
  for (var s = 0u; s < p.span; s = s + 1u) {
    let j = index[u32(col.index_at + i32(s) * p.index_step)];
    if (!in_range(j)) {
      atomicOr(&errors[0], 1u);
      continue;
    }
    let at = u32(col.out_at + j * p.out_step);
    out[at] = bits_of(value_of(out[at]) + value_of(values[u32(col.value_at + i32(s) * p.value_step)]));
  }
}

@compute @workgroup_size(WG)
fn scatter_add_atomic(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = thread_index(gid, nwg);
  if (i >= p.n) { return; }
  let j = index[u32(i32(p.offsets.x) + strided(i, 0u))];
  if (!in_range(j)) {
    atomicOr(&errors[0], 1u);
    return;
  }
  if (!in_window(j)) { return; }
  let v = value_of(element_bits(u32(i32(p.offsets.y) + strided(i, 1u))));
  let at = u32(i32(p.offsets.w) + strided(i, 3u) + (j - i32(p.first)) * p.index_step);
  let k = at % PER_WORD;
  var old = atomicLoad(&out_atomic[at / PER_WORD]);
  loop {
    let sum = value_of((old >> (k * BITS)) & MASK) + v;
    let swapped = atomicCompareExchangeWeak(&out_atomic[at / PER_WORD], old, with_bits(old, k, bits_of(sum)));
    if (swapped.exchanged) { break; }
    old = swapped.old_value;
  }
}

@compute @workgroup_size(WG)
fn put(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = thread_index(gid, nwg);
  if (i >= p.n) { return; }
  // A flagged index anywhere since the last read (take, run just before on the positions,
  // flags this write's own) skips the whole write: x[key] = v is all or nothing, as on the cpu.
  if (atomicLoad(&errors[0]) != 0u) { return; }
  let position = index[u32(i32(p.offsets.x) + strided(i, 0u))];
  if (position <= 0) { return; }  // out of range; positions are 1-based
  var rem = u32(position - 1);
  let v = values[u32(i32(p.offsets.y) + strided(i, 1u))];
  var at = i32(p.offsets.w);
  for (var d = i32(p.span) - 1; d >= 0; d = d - 1) {
    let du = u32(d);
    let n = p.bound[du / 4u][du % 4u];
    at = at + i32(rem % n) * p.strides[3][du / 4u][du % 4u];
    rem = rem / n;
  }
  out[u32(at)] = v;
}
