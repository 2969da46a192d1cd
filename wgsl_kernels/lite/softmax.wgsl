// webgrad.export softmax / log_softmax over the middle dim of x viewed as (outer, n, inner),
// contiguous from its offset. One thread per (outer, inner) row. P: outer * inner, n, inner, x offset.
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= P[0]) { return; }
  let n = P[1];
  let inner = P[2];
  let first = (i / inner) * n * inner + i % inner;
  var peak = x[P[3] + first];
  for (var j = 1u; j < n; j++) {
    let v = x[P[3] + first + j * inner];
    if (wg_isnan(v) || v > peak) { peak = v; }
  }
  var total = 0.0;
  for (var j = 0u; j < n; j++) {
    total += wg_exp(x[P[3] + first + j * inner] - peak);
  }
  for (var j = 0u; j < n; j++) {
    let v = x[P[3] + first + j * inner] - peak;
    out[first + j * inner] = ${result};
  }
}
