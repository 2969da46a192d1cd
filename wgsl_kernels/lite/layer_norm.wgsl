// webgrad.export layer_norm: each row of n elements of x (contiguous from its offset) as
// (x - mean) / sqrt(var + eps), var biased. One thread per row. P: rows, n, eps (f32 bits), x offset.
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= P[0]) { return; }
  let n = P[1];
  let first = P[3] + i * n;
  var total = 0.0;
  for (var j = 0u; j < n; j++) { total += x[first + j]; }
  let mean = total / f32(n);
  var spread = 0.0;
  for (var j = 0u; j < n; j++) {
    let c = x[first + j] - mean;
    spread += c * c;
  }
  let scale = 1.0 / sqrt(spread / f32(n) + bitcast<f32>(P[2]));
  for (var j = 0u; j < n; j++) { out[i * n + j] = (x[first + j] - mean) * scale; }
}
