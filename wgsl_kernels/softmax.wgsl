// softmax.wgsl: softmax, log_softmax and cross entropy along one dim of a strided view.
//
// Maths. The launcher views the input as rows: row o (row-major over the other,
// "kept", dims) holds the n = p.inner elements along the softmax dim. Element r
// of row o is read at
//   x[offset + sum_k coord_k(o) * keep_strides[k] + r * row_stride]
// so transposed, sliced, flipped and broadcast views are read in place, never
// copied; the output is contiguous, with its own strides for the same walk.
// With m = max_r x[r] and s = sum_r exp(x[r] - m) (subtracting m keeps exp from
// overflowing):
//   softmax:     out[r] = exp(x[r] - m) / s
//   log_softmax: out[r] = x[r] - m - log(s)
// A row holding NaN gives NaN everywhere, as does a row of -inf (inf - inf), like numpy.
//
// Cross entropy (dim = the class dim, n = C classes, row o has label t = labels[o]):
//   cross_entropy:          out[o] = (1 - s) * (m - x[t]) + s * (m - mean_r x[r]) + log(s_exp)
//                           (= logsumexp - (1 - s) x[t] - s mean(x), s = p.smoothing), 0 where
//                           t == ignore_index
//   cross_entropy_backward: out[r] = g[o] * (softmax[r] - (1 - s) * (r == t) - s / n), 0 where ignored
// A label outside [0, n) that is not ignore_index counts as ignored and sets errors[0],
// which the host raises as an IndexError at its next read.
//
// Bindings: 0 Params, 1 x (read through load_x: f32, f16 or a packed 16-bit float, as f32), 2 out (read_write,
// array<SO>: f32, or f16 rounded from f32; the loss of cross_entropy is f32);
// cross entropy adds 3 labels (read, array<i32>, contiguous over the rows),
// 4 errors (atomic<u32>), and for the backward 5 g (read, array<f32>, g[g_offset + o * g_step]).
//
// Grid. A workgroup of WG threads is cut into WG / LANES teams of LANES threads;
// each team handles one row in three passes: max, sum of exp, write.
// LANES = 1 (short rows, CPU adapters): one thread walks its row three times,
// with no barrier at all. LANES > 1 (long rows on a GPU, or rows too long for a
// CPU adapter's loop limit): lane l takes r = l, l + LANES, ...; the team
// combines its lanes' maxima, then their sums, in trees in workgroup memory.
// Workgroups are numbered wid.x + wid.y * nwg.x (the grid is folded into y past
// the per-dimension limit) and loop over row groups in steps of the grid size,
// so any number of rows fits any grid.
//
// llvmpipe (Mesa's CPU Vulkan driver) silently ends an invocation after about
// 65535 loop trips in all; the launcher widens LANES until every thread stays
// well under that.

const MAX_RANK: u32 = 8u;  // kept dims after merging

struct Params {
  rows: u32,         // number of rows
  inner: u32,        // elements per row (the softmax dim's size)
  offset: u32,       // the input view's offset in elements
  groups: u32,       // ceil(rows / (WG / LANES))
  keep_rank: u32,
  row_stride: i32,   // input stride along the softmax dim (may be 0 or negative)
  out_row_stride: u32,
  pad: u32,
  keep_shape: array<vec4<u32>, 2>,
  keep_strides: array<vec4<i32>, 2>,      // input
  out_keep_strides: array<vec4<i32>, 2>,  // output (contiguous)
  labels_offset: u32,  // cross entropy only, from here on
  ignore_index: i32,
  smoothing: f32,
  g_offset: u32,
  g_step: u32,       // 0 (one g broadcast to every row) or 1
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<SX>;
@group(0) @binding(2) var<storage, read_write> out: array<SO>;
@group(0) @binding(3) var<storage, read> labels: array<i32>;
@group(0) @binding(4) var<storage, read_write> errors: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read> g_rows: array<f32>;

override WG: u32 = 128;
override LANES: u32 = 1;
override KEEP_FLAT: bool = true;  // at most one kept dim after merging: row o starts at o * stride
override ROUND_OUT: bool = false;  // out is f16: round each value first (WGSL leaves it to the implementation)

var<workgroup> scratch: array<f32, WG>;

// One step of the row-major walk, innermost dim first. No loops: llvmpipe counts trips.
fn step(d: u32, rem: ptr<function, u32>, off: ptr<function, i32>, out_off: ptr<function, i32>) {
  if (d < p.keep_rank) {
    let n = p.keep_shape[d / 4u][d % 4u];
    let c = i32(*rem % n);
    *off = *off + c * p.keep_strides[d / 4u][d % 4u];
    *out_off = *out_off + c * p.out_keep_strides[d / 4u][d % 4u];
    *rem = *rem / n;
  }
}

// Where row o starts: (input element, output element).
struct Row { base: i32, out_base: i32 }

fn row_start(o: u32) -> Row {
  if (KEEP_FLAT) {
    return Row(i32(p.offset) + i32(o) * p.keep_strides[0].x, i32(o) * p.out_keep_strides[0].x);
  }
  var rem = o;
  var off = 0;
  var out_off = 0;
  step(7u, &rem, &off, &out_off);
  step(6u, &rem, &off, &out_off);
  step(5u, &rem, &off, &out_off);
  step(4u, &rem, &off, &out_off);
  step(3u, &rem, &off, &out_off);
  step(2u, &rem, &off, &out_off);
  step(1u, &rem, &off, &out_off);
  step(0u, &rem, &off, &out_off);
  return Row(i32(p.offset) + off, out_off);
}

fn load(row: Row, r: u32) -> f32 {
  return load_x(u32(row.base + i32(r) * p.row_stride));
}

fn store(row: Row, r: u32, v: f32) {
  if (ROUND_OUT) {
    out[u32(row.out_base) + r * p.out_row_stride] = SO(wg_round_f16(v));
  } else {
    out[u32(row.out_base) + r * p.out_row_stride] = SO(v);
  }
}

// This lane's maximum over r = lane, lane + LANES, ... (four a loop trip).
// A lane past a short row takes its first element, which changes nothing (and
// needs no -inf constant, which Tint may refuse to fold).
fn lane_max(row: Row, lane: u32) -> f32 {
  var m = load(row, min(lane, p.inner - 1u));  // wg_max/wg_exp (math.wgsl): NaN propagates on every adapter
  var r = lane + LANES;
  loop {
    if (r + 3u * LANES >= p.inner) { break; }
    m = wg_max(wg_max(m, load(row, r)),
               wg_max(load(row, r + LANES), wg_max(load(row, r + 2u * LANES), load(row, r + 3u * LANES))));
    r = r + 4u * LANES;
  }
  for (; r < p.inner; r = r + LANES) { m = wg_max(m, load(row, r)); }
  return m;
}

fn lane_sum_exp(row: Row, lane: u32, m: f32) -> f32 {
  var s = 0.0;
  var r = lane;
  loop {
    if (r + 3u * LANES >= p.inner) { break; }
    s = s + wg_exp(load(row, r) - m) + wg_exp(load(row, r + LANES) - m)
          + wg_exp(load(row, r + 2u * LANES) - m) + wg_exp(load(row, r + 3u * LANES) - m);
    r = r + 4u * LANES;
  }
  for (; r < p.inner; r = r + LANES) { s = s + wg_exp(load(row, r) - m); }
  return s;
}

fn lane_sum(row: Row, lane: u32) -> f32 {
  var t = 0.0;
  var r = lane;
  loop {
    if (r + 3u * LANES >= p.inner) { break; }
    t = t + load(row, r) + load(row, r + LANES) + load(row, r + 2u * LANES) + load(row, r + 3u * LANES);
    r = r + 4u * LANES;
  }
  for (; r < p.inner; r = r + LANES) { t = t + load(row, r); }
  return t;
}

// What write_row stores at element r, given the row's max m and sum of exps s.
const SOFTMAX: u32 = 0u;
const LOG_SOFTMAX: u32 = 1u;
const CE_GRAD: u32 = 2u;      // g * (softmax - (1 - smoothing) * (r == label) - smoothing / n)
struct Emit { kind: u32, m: f32, scale: f32, log_s: f32, label: i32, g: f32 }

fn emit_value(e: Emit, row: Row, r: u32) -> f32 {
  // log_softmax is (x - m) - log_s, not x - (m + log_s): with large x that sum would round away log_s's low bits.
  let shifted = load(row, r) - e.m;
  if (e.kind == LOG_SOFTMAX) { return shifted - e.log_s; }
  let prob = wg_exp(shifted) * e.scale;
  if (e.kind == CE_GRAD) {
    return e.g * (prob - select(0.0, 1.0 - p.smoothing, i32(r) == e.label) - p.smoothing / f32(p.inner));
  }
  return prob;
}

fn write_row(e: Emit, row: Row, lane: u32) {
  var r = lane;
  loop {
    if (r + 3u * LANES >= p.inner) { break; }
    store(row, r, emit_value(e, row, r));
    store(row, r + LANES, emit_value(e, row, r + LANES));
    store(row, r + 2u * LANES, emit_value(e, row, r + 2u * LANES));
    store(row, r + 3u * LANES, emit_value(e, row, r + 3u * LANES));
    r = r + 4u * LANES;
  }
  for (; r < p.inner; r = r + LANES) { store(row, r, emit_value(e, row, r)); }
}

// Combine every lane's value of a team (max or sum) and hand the result to all
// of them. Called in uniform control flow: every thread reaches each barrier.
fn team_combine(take_max: bool, v: f32, lid: u32, lane: u32) -> f32 {
  var acc = v;
  scratch[lid] = acc;
  workgroupBarrier();
  for (var s = LANES / 2u; s > 0u; s = s / 2u) {
    if (lane < s) {
      let other = scratch[lid + s];
      acc = select(acc + other, wg_max(acc, other), take_max);
      scratch[lid] = acc;
    }
    workgroupBarrier();
  }
  let result = scratch[lid - lane];
  workgroupBarrier();  // everyone has read lane 0's slot before it is reused
  return result;
}

// The row this thread's team takes in row group g (may be past the last row).
fn row_of(g: u32, lid: u32) -> u32 {
  return g * (WG / LANES) + lid / LANES;
}

// (max, sum of exp(x - max)) of a row, known to every lane of its team.
// Called in uniform control flow (it may hold barriers); `live` says whether the row exists.
fn row_stats(row: Row, live: bool, lid: u32, lane: u32) -> vec2<f32> {
  var m = 0.0;
  if (live) { m = lane_max(row, lane); }
  if (LANES > 1u) { m = team_combine(true, m, lid, lane); }
  var s = 0.0;
  if (live) { s = lane_sum_exp(row, lane, m); }
  if (LANES > 1u) { s = team_combine(false, s, lid, lane); }
  return vec2(m, s);
}

// The row loop below is written out in each run_* function on purpose: an entry
// point's bindings are those its call tree touches, so a shared loop calling the
// cross-entropy bodies would make softmax need the labels/errors/g buffers too.
fn run_softmax(kind: u32, wid: vec3<u32>, lid: u32, nwg: vec3<u32>) {
  let lane = lid % LANES;
  for (var g = wid.x + wid.y * nwg.x; g < p.groups; g = g + nwg.x * nwg.y) {
    let o = row_of(g, lid);
    let live = o < p.rows;
    let row = row_start(select(0u, o, live));
    let ms = row_stats(row, live, lid, lane);
    if (live) { write_row(Emit(kind, ms.x, 1.0 / ms.y, log(ms.y), -1, 0.0), row, lane); }
  }
}

// Row o's class, or -1 where it is ignored or out of range (which also sets errors[0]).
fn label_of(o: u32) -> i32 {
  let t = labels[p.labels_offset + o];
  if (t == p.ignore_index) { return -1; }
  if (t < 0 || u32(t) >= p.inner) {
    atomicOr(&errors[0], 1u);
    return -1;
  }
  return t;
}

fn run_cross_entropy(wid: vec3<u32>, lid: u32, nwg: vec3<u32>) {
  let lane = lid % LANES;
  for (var g = wid.x + wid.y * nwg.x; g < p.groups; g = g + nwg.x * nwg.y) {
    let o = row_of(g, lid);
    let live = o < p.rows;
    let row = row_start(select(0u, o, live));
    let ms = row_stats(row, live, lid, lane);
    var total = 0.0;
    if (p.smoothing != 0.0) {  // uniform: every thread takes the same branch
      if (live) { total = lane_sum(row, lane); }
      if (LANES > 1u) { total = team_combine(false, total, lid, lane); }
    }
    if (live && lane == 0u) {
      let t = label_of(o);
      var loss = 0.0;
      if (t >= 0) {
        let m = ms.x;
        loss = (1.0 - p.smoothing) * (m - load(row, u32(t))) + p.smoothing * (m - total / f32(p.inner)) + log(ms.y);
      }
      out[o] = SO(loss);
    }
  }
}

fn run_cross_entropy_backward(wid: vec3<u32>, lid: u32, nwg: vec3<u32>) {
  let lane = lid % LANES;
  for (var g = wid.x + wid.y * nwg.x; g < p.groups; g = g + nwg.x * nwg.y) {
    let o = row_of(g, lid);
    let live = o < p.rows;
    let row = row_start(select(0u, o, live));
    let ms = row_stats(row, live, lid, lane);
    if (live) {
      let t = label_of(o);
      let scale = select(0.0, g_rows[p.g_offset + o * p.g_step], t >= 0);
      write_row(Emit(CE_GRAD, ms.x, 1.0 / ms.y, 0.0, t, scale), row, lane);
    }
  }
}

@compute @workgroup_size(WG)
fn softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
           @builtin(num_workgroups) nwg: vec3<u32>) {
  run_softmax(SOFTMAX, wid, lid, nwg);
}

@compute @workgroup_size(WG)
fn log_softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
               @builtin(num_workgroups) nwg: vec3<u32>) {
  run_softmax(LOG_SOFTMAX, wid, lid, nwg);
}

@compute @workgroup_size(WG)
fn cross_entropy(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
  run_cross_entropy(wid, lid, nwg);
}

@compute @workgroup_size(WG)
fn cross_entropy_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
                          @builtin(num_workgroups) nwg: vec3<u32>) {
  run_cross_entropy_backward(wid, lid, nwg);
}
