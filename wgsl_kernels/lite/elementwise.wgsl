// webgrad.export elementwise: out (a strided view) = op(inputs, each a strided view broadcast to
// out's shape). One thread per element. P: total, out offset, out strides (R), shape (R), then
// per input: offset, strides (R).
const R = ${rank}u;
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(${binding}) var<storage, read> in${k}: array<${type}>;
@group(0) @binding(${out_binding}) var<storage, read_write> out: array<${out_type}>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= P[0]) { return; }
  var o = P[1];
  var at${k} = P[${base}u];
  var rest = i;
  for (var d = 0u; d < R; d++) {
    let axis = R - 1u - d;
    let size = P[2u + R + axis];
    let c = rest % size;
    rest = rest / size;
    o += c * P[2u + axis];
    at${k} += c * P[${base}u + 1u + axis];
  }
  out[o] = op(${reads});
}
