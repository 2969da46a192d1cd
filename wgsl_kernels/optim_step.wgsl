// optim_step.wgsl: one dispatch of an optimizer update (a function of optim.wgsl, which
// is prepended) over one or more parameters, in place, one thread per element of all of
// them: thread t belongs to the member whose element range [start, start + n) holds it.
// A plain optimizer op is a group of one; graph/passes/group.py makes the larger groups.
// A template (backend/webgpu/source.fill): the fields are the member count and the members
// (optim_member.wgsl filled once each); the line naming the member k repeats for each.
//
// Uniform: Params (the scalars, shared: members of a group have equal attrs), then one
// Member each. Bindings, member by member: its gradient (read), then its parameter and
// state buffers in the op's order (read_write), all contiguous: f32, f16 or 16-bit floats packed
// two to a word (optim_member.wgsl loads and stores each as f32).
// Grid: ceil(total elements / WG) workgroups, folded into (x, y) past the per-dimension limit.

struct Member {
  n: u32,
  grad_offset: u32,
  start: u32,         // the first thread of this member
  pad: u32,
  offsets: vec4<u32>, // element offsets of the parameter and the state buffers
}

struct Uniform {
  p: Params,
  m: array<Member, ${count}>,
}

@group(0) @binding(0) var<uniform> u: Uniform;
override WG: u32 = 256;

${members}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let t = gid.x + gid.y * nwg.x * WG;
  if (member_${k}(t)) { return; }
}
