// cross_entropy_total.wgsl: the sum of cross entropy over its positions, or its mean over the
// positions whose label is not ignore_index, in one workgroup:
//
//   out[0] = (values[0] + ... + values[n - 1]) / (p.mean != 0 ? count : 1),
//   count  = #{o < rows : labels[labels_offset + o] != ignore_index}
//
// Forward: values are the per-position losses of softmax.wgsl's cross_entropy (0 where ignored),
// n = rows. Backward: values is the total's gradient g (n = 1), so out[0] is g / count, the one
// gradient cross_entropy_backward then reads for every position (its g_step 0).
// Each thread walks n / WG values and rows / WG labels, then the workgroup adds its WG partial
// sums in a tree; the host keeps rows small enough for llvmpipe's ~65535 loop trips per invocation.
//
// Bindings: 0 Params, 1 values (read, f32), 2 labels (read, i32, contiguous), 3 out (f32, one).

struct Params {
  n: u32,
  rows: u32,
  values_offset: u32,
  labels_offset: u32,
  ignore_index: i32,
  mean: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> values: array<f32>;
@group(0) @binding(2) var<storage, read> labels: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const WG: u32 = 256u;
var<workgroup> sums: array<f32, WG>;
var<workgroup> counts: array<u32, WG>;

@compute @workgroup_size(WG)
fn total(@builtin(local_invocation_index) lid: u32) {
  var sum = 0.0;
  for (var i = lid; i < p.n; i = i + WG) {
    sum = sum + values[p.values_offset + i];
  }
  var count = 0u;
  for (var o = lid; o < p.rows; o = o + WG) {
    count = count + select(0u, 1u, labels[p.labels_offset + o] != p.ignore_index);
  }
  sums[lid] = sum;
  counts[lid] = count;
  workgroupBarrier();
  for (var half = WG / 2u; half > 0u; half = half / 2u) {
    if (lid < half) {
      sums[lid] = sums[lid] + sums[lid + half];
      counts[lid] = counts[lid] + counts[lid + half];
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    out[0] = select(sums[0], sums[0] / f32(counts[0]), p.mean != 0u);
  }
}
