// webgrad.export matmul: out[batch, row, col] = sum_t a[batch, row, t] * b[batch, t, col], a and b
// strided views (batch dims broadcast), out contiguous. One thread per output element.
// P: total, M, N, K, batch shape (RB), a offset, a batch strides (RB), a row stride, a t stride,
// b offset, b batch strides (RB), b t stride, b col stride[, b's elements per row (int8 scales)].
const RB = ${rank}u;
const A_OFF = 4u + RB;
const B_OFF = 7u + 2u * RB;
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<${b_type}>;
${scale_binding}
@group(0) @binding(${out_binding}) var<storage, read_write> out: array<f32>;

${load_b}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= P[0]) { return; }
  let m = P[1];
  let n = P[2];
  let k = P[3];
  let col = i % n;
  let row = (i / n) % m;
  var rest = i / (n * m);
  var a_at = P[A_OFF];
  var b_at = P[B_OFF];
  for (var d = 0u; d < RB; d++) {
    let axis = RB - 1u - d;
    let c = rest % P[4u + axis];
    rest = rest / P[4u + axis];
    a_at += c * P[A_OFF + 1u + axis];
    b_at += c * P[B_OFF + 1u + axis];
  }
  a_at += row * P[A_OFF + 1u + RB];
  b_at += col * P[B_OFF + 2u + RB];
  let a_step = P[A_OFF + 2u + RB];
  let b_step = P[B_OFF + 1u + RB];
  var acc = 0.0;
  for (var t = 0u; t < k; t++) {
    acc += a[a_at + t * a_step] * load_b(b_at + t * b_step);
  }
  out[i] = acc;
}
