// layer_norm.wgsl: normalize each row of a strided view to zero mean, unit variance.
//
// Maths. The launcher views the input as rows: row o (row-major over the leading,
// "kept", dims) holds the n = p.inner elements of the normalized dims, merged into
// one dim of stride p.row_stride. Element r of row o is read at
//   x[offset + sum_k coord_k(o) * keep_strides[k] + r * row_stride]
// so transposed, sliced, flipped and broadcast views are read in place. The
// output is contiguous: element r of row o is out[o * n + r]. With
//   mean = sum_r x[r] / n,   var = sum_r (x[r] - mean)^2 / n   (biased),
//   out[r] = (x[r] - mean) * rstd,   rstd = 1 / sqrt(var + eps).
// The variance is a second pass over the centred values (two-pass), not
// E[x^2] - mean^2, which cancels catastrophically when |mean| >> std. Every
// pass first subtracts the row's first element x0 (mean = x0 + d): x - x0 is
// exact for nearby values, so a large common offset costs no digits, neither
// in the f32 sum nor in rounding the mean itself; out[r] = ((x[r] - x0) - d) * rstd.
//
// With AFFINE (F.layer_norm's weight and bias), out[r] = (that) * w[r] + b[r] in f32, rounded to the
// output type once, as torch's layer norm.
//
// Bindings: 0 Params, 1 x (read through load_x: f32, f16 or a packed 16-bit float, as f32), 2 out (read_write,
// array<SO>: f32, or f16 rounded from f32), 3 w and 4 b (contiguous, of the row's length, as load_w/load_b
// read them; without AFFINE the launcher binds x there and they are not read).
//
// Grid. A workgroup of WG threads is cut into WG / LANES teams of LANES threads;
// each team handles one row in three passes: sum, sum of squared deviations,
// write. LANES = 1 (short rows, CPU adapters): one thread walks its row three
// times with no barrier. LANES > 1 (long rows on a GPU, or rows too long for a
// CPU adapter's loop limit): lane l takes r = l, l + LANES, ...; the team adds
// its lanes' partial sums in a tree in workgroup memory. Workgroups are numbered
// wid.x + wid.y * nwg.x (the grid is folded into y past the per-dimension limit)
// and loop over row groups in steps of the grid size, so any number of rows
// fits any grid.
//
// llvmpipe (Mesa's CPU Vulkan driver) silently ends an invocation after about
// 65535 loop trips in all; the launcher widens LANES until every thread stays
// well under that.

const MAX_RANK: u32 = 8u;  // kept dims after merging

struct Params {
  rows: u32,         // number of rows
  inner: u32,        // elements per row
  offset: u32,       // the input view's offset in elements
  groups: u32,       // ceil(rows / (WG / LANES))
  keep_rank: u32,
  row_stride: i32,   // input stride along the (merged) row (may be 0 or negative)
  eps: f32,
  pad: u32,
  keep_shape: array<vec4<u32>, 2>,
  keep_strides: array<vec4<i32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<SX>;
@group(0) @binding(2) var<storage, read_write> out: array<SO>;
@group(0) @binding(3) var<storage, read> w: array<SW>;
@group(0) @binding(4) var<storage, read> b: array<SW>;

override WG: u32 = 128;
override LANES: u32 = 1;
override KEEP_FLAT: bool = true;  // at most one kept dim after merging: row o starts at o * stride
override ROUND_OUT: bool = false;  // out is f16: round each value first (WGSL leaves it to the implementation)
override AFFINE: bool = false;     // then * w[r] + b[r]

var<workgroup> scratch: array<f32, WG>;

// One step of the row-major walk, innermost dim first. No loops: llvmpipe counts trips.
fn step(d: u32, rem: ptr<function, u32>, off: ptr<function, i32>) {
  if (d < p.keep_rank) {
    let n = p.keep_shape[d / 4u][d % 4u];
    *off = *off + i32(*rem % n) * p.keep_strides[d / 4u][d % 4u];
    *rem = *rem / n;
  }
}

// Where row o starts in x.
fn row_start(o: u32) -> i32 {
  if (KEEP_FLAT) {
    return i32(p.offset) + i32(o) * p.keep_strides[0].x;
  }
  var rem = o;
  var off = 0;
  step(7u, &rem, &off);
  step(6u, &rem, &off);
  step(5u, &rem, &off);
  step(4u, &rem, &off);
  step(3u, &rem, &off);
  step(2u, &rem, &off);
  step(1u, &rem, &off);
  step(0u, &rem, &off);
  return i32(p.offset) + off;
}

fn load(base: i32, r: u32) -> f32 {
  return load_x(u32(base + i32(r) * p.row_stride));
}

// Element r of a row: its normalized value v, with the affine part in f32 too (rounded once, as torch).
fn store(i: u32, r: u32, v: f32) {
  var y = v;
  if (AFFINE) { y = y * f32(load_w(r)) + f32(load_b(r)); }
  if (ROUND_OUT) { out[i] = SO(wg_round_f16(y)); } else { out[i] = SO(y); }
}

// This lane's sum of ((x[r] - x0) - d)^power over r = lane, lane + LANES, ...
// (power 1 or 2), four elements a loop trip into four accumulators.
fn centered(base: i32, r: u32, x0: f32, d: f32) -> f32 {
  return (load(base, r) - x0) - d;
}

fn lane_sum(base: i32, lane: u32, x0: f32, d: f32, squared: bool) -> f32 {
  var s0 = 0.0;
  var s1 = 0.0;
  var s2 = 0.0;
  var s3 = 0.0;
  var r = lane;
  loop {
    if (r + 3u * LANES >= p.inner) { break; }
    let d0 = centered(base, r, x0, d);
    let d1 = centered(base, r + LANES, x0, d);
    let d2 = centered(base, r + 2u * LANES, x0, d);
    let d3 = centered(base, r + 3u * LANES, x0, d);
    s0 = s0 + select(d0, d0 * d0, squared);
    s1 = s1 + select(d1, d1 * d1, squared);
    s2 = s2 + select(d2, d2 * d2, squared);
    s3 = s3 + select(d3, d3 * d3, squared);
    r = r + 4u * LANES;
  }
  for (; r < p.inner; r = r + LANES) {
    let e = centered(base, r, x0, d);
    s0 = s0 + select(e, e * e, squared);
  }
  return (s0 + s1) + (s2 + s3);
}

fn write_row(base: i32, o: u32, lane: u32, x0: f32, d: f32, rstd: f32) {
  let out_base = o * p.inner;
  var r = lane;
  loop {
    if (r + 3u * LANES >= p.inner) { break; }
    store(out_base + r, r, centered(base, r, x0, d) * rstd);
    store(out_base + r + LANES, r + LANES, centered(base, r + LANES, x0, d) * rstd);
    store(out_base + r + 2u * LANES, r + 2u * LANES, centered(base, r + 2u * LANES, x0, d) * rstd);
    store(out_base + r + 3u * LANES, r + 3u * LANES, centered(base, r + 3u * LANES, x0, d) * rstd);
    r = r + 4u * LANES;
  }
  for (; r < p.inner; r = r + LANES) { store(out_base + r, r, centered(base, r, x0, d) * rstd); }
}

// Add every lane's value of a team and hand the total to all of them. Called
// in uniform control flow: every thread reaches each barrier.
fn team_sum(v: f32, lid: u32, lane: u32) -> f32 {
  var acc = v;
  scratch[lid] = acc;
  workgroupBarrier();
  for (var s = LANES / 2u; s > 0u; s = s / 2u) {
    if (lane < s) {
      acc = acc + scratch[lid + s];
      scratch[lid] = acc;
    }
    workgroupBarrier();
  }
  let result = scratch[lid - lane];
  workgroupBarrier();  // everyone has read lane 0's slot before it is reused
  return result;
}

// A row's first element x0, d = mean - x0 and rstd = 1 / sqrt(var + eps): two passes, each
// added up over the team. Called in uniform control flow (team_sum's barriers).
struct RowStats {
  x0: f32,
  d: f32,
  rstd: f32,
}

fn row_stats(base: i32, lid: u32, lane: u32, live: bool) -> RowStats {
  let n = f32(p.inner);
  let x0 = load(base, 0u);
  var s = 0.0;
  if (live) { s = lane_sum(base, lane, x0, 0.0, false); }
  if (LANES > 1u) { s = team_sum(s, lid, lane); }
  let d = s / n;
  var q = 0.0;
  if (live) { q = lane_sum(base, lane, x0, d, true); }
  if (LANES > 1u) { q = team_sum(q, lid, lane); }
  return RowStats(x0, d, 1.0 / sqrt(q / n + p.eps));
}

@compute @workgroup_size(WG)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
              @builtin(num_workgroups) nwg: vec3<u32>) {
  let lane = lid % LANES;
  let rows_per_group = WG / LANES;
  for (var g = wid.x + wid.y * nwg.x; g < p.groups; g = g + nwg.x * nwg.y) {
    let o = g * rows_per_group + lid / LANES;
    let live = o < p.rows;
    let base = row_start(select(0u, o, live));
    let st = row_stats(base, lid, lane, live);
    if (live) { write_row(base, o, lane, st.x0, st.d, st.rstd); }
  }
}

// layer_norm_backward: the input gradient of layer_norm_core for the incoming gradient g
// (binding 3, contiguous like out), with y = ((x - x0) - d) * rstd found again as above:
//   out[r] = rstd * (g[r] - mean(g) - y[r] * mean(g * y))
// Each lane adds its elements' g and g * y (two accumulators each), then the team adds its lanes'.
fn lane_grad_sums(base: i32, o: u32, lane: u32, x0: f32, d: f32, rstd: f32) -> vec2<f32> {
  var s = vec2<f32>(0.0, 0.0);
  var t = vec2<f32>(0.0, 0.0);
  var r = lane;
  loop {
    if (r + LANES >= p.inner) { break; }
    let g0 = f32(load_w(o * p.inner + r));
    let g1 = f32(load_w(o * p.inner + r + LANES));
    s = s + vec2<f32>(g0, g0 * (centered(base, r, x0, d) * rstd));
    t = t + vec2<f32>(g1, g1 * (centered(base, r + LANES, x0, d) * rstd));
    r = r + 2u * LANES;
  }
  if (r < p.inner) {
    let g0 = f32(load_w(o * p.inner + r));
    s = s + vec2<f32>(g0, g0 * (centered(base, r, x0, d) * rstd));
  }
  return s + t;
}

@compute @workgroup_size(WG)
fn layer_norm_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
                       @builtin(num_workgroups) nwg: vec3<u32>) {
  let lane = lid % LANES;
  let rows_per_group = WG / LANES;
  let n = f32(p.inner);
  for (var g = wid.x + wid.y * nwg.x; g < p.groups; g = g + nwg.x * nwg.y) {
    let o = g * rows_per_group + lid / LANES;
    let live = o < p.rows;
    let row = select(0u, o, live);
    let base = row_start(row);
    let st = row_stats(base, lid, lane, live);
    var sums = vec2<f32>(0.0, 0.0);
    if (live) { sums = lane_grad_sums(base, row, lane, st.x0, st.d, st.rstd); }
    if (LANES > 1u) { sums = vec2<f32>(team_sum(sums.x, lid, lane), team_sum(sums.y, lid, lane)); }
    let mean_g = sums.x / n;
    let mean_gy = sums.y / n;
    if (live) {
      let out_base = row * p.inner;
      for (var r = lane; r < p.inner; r = r + LANES) {
        let y = centered(base, r, st.x0, st.d) * st.rstd;
        let v = st.rstd * ((f32(load_w(out_base + r)) - mean_g) - y * mean_gy);
        if (ROUND_OUT) { out[out_base + r] = SO(wg_round_f16(v)); } else { out[out_base + r] = SO(v); }
      }
    }
  }
}
