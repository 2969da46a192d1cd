// optim_member.wgsl: member j of an optimizer dispatch (optim_step.wgsl), a template filled
// by backend/webgpu/source.fill: the member's buffers, and the update of its element for
// thread t. The lines naming a buffer k repeat for each written buffer: 0 the parameter,
// then the states.
@group(0) @binding(${grad}) var<storage, read> grad_${j}: array<f32>;
@group(0) @binding(${binding}) var<storage, read_write> w${k}_${j}: array<f32>;

fn member_${j}(t: u32) -> bool {
  let m = u.m[${j}];
  if (t < m.start || t - m.start >= m.n) { return false; }
  let i = t - m.start;
  var v = vec4<f32>(0.0);
  v[${k}] = w${k}_${j}[m.offsets[${k}] + i];
  v = ${update}(u.p, grad_${j}[m.grad_offset + i], v);
  w${k}_${j}[m.offsets[${k}] + i] = v[${k}];
  return true;
}
