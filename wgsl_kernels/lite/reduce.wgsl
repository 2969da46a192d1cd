// webgrad.export reduction: each output element reduces x (a strided view) over the reduced dims.
// One thread per output element. P: total, x offset, kept shape (RK), kept strides (RK),
// reduced shape (RR), reduced strides (RR). argmax/argmin count the reduced elements in order.
const RK = ${kept}u;
const RR = ${reduced}u;
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<${in_type}>;
@group(0) @binding(2) var<storage, read_write> out: array<${out_type}>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= P[0]) { return; }
  var base = P[1];
  var rest = i;
  for (var d = 0u; d < RK; d++) {
    let axis = RK - 1u - d;
    base += (rest % P[2u + axis]) * P[2u + RK + axis];
    rest = rest / P[2u + axis];
  }
  var count = 1u;
  for (var d = 0u; d < RR; d++) { count *= P[2u + 2u * RK + d]; }
  var acc: ${acc_type} = ${init};
  var index = 0u;
  for (var j = 0u; j < count; j++) {
    var at = base;
    var left = j;
    for (var d = 0u; d < RR; d++) {
      let axis = RR - 1u - d;
      at += (left % P[2u + 2u * RK + axis]) * P[2u + 2u * RK + RR + axis];
      left = left / P[2u + 2u * RK + axis];
    }
    let v = x[at];
    ${update}
  }
  out[i] = ${result};
}
