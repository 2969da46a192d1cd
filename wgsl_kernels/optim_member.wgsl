// optim_member.wgsl: member j of an optimizer dispatch (optim_step.wgsl), a template filled
// by backend/webgpu/source.fill: the member's buffers, and the update of its element for
// thread t. The lines naming a buffer k repeat for each written buffer: 0 the parameter,
// then the states. Each buffer's element type, and how element o is loaded (as f32) and
// stored, are fields (backend/webgpu/optim.py: f32, f16, or 16-bit floats packed two to a
// word, stored with atomics as other threads write the word's other half).
@group(0) @binding(${grad}) var<storage, read> grad_${j}: array<${grad_type}>;
@group(0) @binding(${binding}) var<storage, read_write> w${k}_${j}: array<${type}>;

fn member_${j}(t: u32) -> bool {
  let m = u.m[${j}];
  if (t < m.start || t - m.start >= m.n) { return false; }
  let i = t - m.start;
  var v = vec4<f32>(0.0);
  { let o = m.offsets[${k}] + i; v[${k}] = ${load}; }
  var g: f32;
  { let o = m.grad_offset + i; g = ${grad_load}; }
  v = ${update}(u.p, g, v);
  { let o = m.offsets[${k}] + i; ${store} }
  return true;
}
