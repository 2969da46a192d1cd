// optim.wgsl: fused optimizer steps, in place, one thread per parameter element.
// Each entry point mirrors its numpy kernel in core/optim/kernels.py operation by
// operation (same order, every scalar rounded to f32 as numpy does), so webgpu and
// cpu runs agree to float32 rounding. With g the effective gradient
// (-grad if maximize, plus weight_decay * param if weight_decay != 0):
//
//   sgd_step           param += -lr * g
//   sgd_momentum_step  buf = g on the first step, else buf * momentum + (1 - dampening) * g;
//                      param += -lr * (nesterov ? g + momentum * buf : buf)
//   adam_step          (AdamW: param *= 1 - lr * weight_decay, and g leaves out the decay)
//                      m = lerp(m, g, 1 - beta1); v = v * beta2 + (1 - beta2) * g * g;
//                      param += -step_size * m / (sqrt(v) / bias_correction2_sqrt + eps)
//   adam_amsgrad_step  the same with v_max = max(v_max, v) in place of v under the sqrt
//   rmsprop_*step      v = v * alpha + (1 - alpha) * g * g; centered: a = lerp(a, g, 1 - alpha),
//                      s = sqrt(v - a * a) + eps, else s = sqrt(v) + eps;
//                      momentum: buf = buf * momentum + g / s, param += -lr * buf;
//                      otherwise param += -lr * g / s
//
// lerp(start, end, w) is PyTorch's: start + w * (end - start) if w < 0.5, else
// end - (1 - w) * (end - start); LERP_FROM_END picks the second form.
//
// Bindings: 0 Params, 1 grad (read), 2 param, then the state buffers in the op's
// order (all read_write, contiguous, f32):
//   sgd_momentum_step              3 momentum_buffer
//   adam_step                      3 exp_avg, 4 exp_avg_sq
//   adam_amsgrad_step              3 exp_avg, 4 exp_avg_sq, 5 max_exp_avg_sq
//   rmsprop_step                   3 square_avg
//   rmsprop_centered_step          3 square_avg, 4 grad_avg
//   rmsprop_momentum_step          3 square_avg, 4 momentum_buffer
//   rmsprop_centered_momentum_step 3 square_avg, 4 grad_avg, 5 momentum_buffer
// Grid: ceil(n / WG) workgroups, folded into (x, y) past the per-dimension limit.

const MAXIMIZE: u32 = 1u;
const NESTEROV: u32 = 2u;
const FIRST_STEP: u32 = 4u;
const DAMPENED: u32 = 8u;        // dampening != 0
const DECOUPLED: u32 = 16u;      // AdamW
const LERP_FROM_END: u32 = 32u;  // lerp weight >= 0.5

struct Params {
  n: u32,
  flags: u32,
  grad_offset: u32,
  pad0: u32,
  offsets: vec4<u32>,         // element offsets of param and the state buffers 3, 4, 5
  weight_decay: f32,          // L2 term added to the gradient (0: none)
  neg_lr: f32,                // -lr, or Adam's -step_size
  momentum: f32,              // SGD and RMSprop momentum
  one_minus_dampening: f32,   // SGD
  decay: f32,                 // AdamW: 1 - lr * weight_decay
  rate: f32,                  // beta2 (Adam), alpha (RMSprop): v = v * rate + ...
  one_minus_rate: f32,        // 1 - rate
  lerp_weight: f32,           // 1 - beta1 (Adam), 1 - alpha (centered RMSprop)
  lerp_complement: f32,       // 1 - lerp_weight
  bias_correction2_sqrt: f32, // Adam
  eps: f32,
  pad1: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> param: array<f32>;
@group(0) @binding(3) var<storage, read_write> state0: array<f32>;
@group(0) @binding(4) var<storage, read_write> state1: array<f32>;
@group(0) @binding(5) var<storage, read_write> state2: array<f32>;
override WG: u32 = 256;

fn thread_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * WG;
}

fn has(flag: u32) -> bool {
  return (p.flags & flag) != 0u;
}

// -grad if maximizing, plus weight_decay * param (L2) when weight_decay != 0.
fn effective_grad(param_value: f32, grad_value: f32, weight_decay: f32) -> f32 {
  var g = select(grad_value, -grad_value, has(MAXIMIZE));
  if (weight_decay != 0.0) {
    g = g + param_value * weight_decay;
  }
  return g;
}

fn lerp(start: f32, end: f32) -> f32 {
  let diff = end - start;
  if (has(LERP_FROM_END)) {
    return end - diff * p.lerp_complement;
  }
  return start + diff * p.lerp_weight;
}

@compute @workgroup_size(WG)
fn sgd_step(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = thread_index(gid, nwg);
  if (i >= p.n) { return; }
  let pi = p.offsets.x + i;
  let g = effective_grad(param[pi], grad[p.grad_offset + i], p.weight_decay);
  param[pi] = param[pi] + g * p.neg_lr;
}

@compute @workgroup_size(WG)
fn sgd_momentum_step(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = thread_index(gid, nwg);
  if (i >= p.n) { return; }
  let pi = p.offsets.x + i;
  let bi = p.offsets.y + i;
  let g = effective_grad(param[pi], grad[p.grad_offset + i], p.weight_decay);
  var buf = g;
  if (!has(FIRST_STEP)) {
    buf = state0[bi] * p.momentum;
    if (has(DAMPENED)) {
      buf = buf + p.one_minus_dampening * g;
    } else {
      buf = buf + g;
    }
  }
  state0[bi] = buf;
  var update: f32;
  if (has(NESTEROV)) {
    update = (buf * p.momentum + g) * p.neg_lr;
  } else {
    update = buf * p.neg_lr;
  }
  param[pi] = param[pi] + update;
}

struct AdamOut {
  param: f32,
  exp_avg: f32,
  exp_avg_sq: f32,
  max_exp_avg_sq: f32,
}

fn adam(param_in: f32, grad_in: f32, exp_avg_in: f32, exp_avg_sq_in: f32, max_in: f32, amsgrad: bool) -> AdamOut {
  var r: AdamOut;
  var param_value = param_in;
  var g: f32;
  if (has(DECOUPLED)) {
    if (p.weight_decay != 0.0) { param_value = param_value * p.decay; }
    g = effective_grad(param_value, grad_in, 0.0);
  } else {
    g = effective_grad(param_value, grad_in, p.weight_decay);
  }
  r.exp_avg = lerp(exp_avg_in, g);
  r.exp_avg_sq = exp_avg_sq_in * p.rate + (g * p.one_minus_rate) * g;
  var denom: f32;
  if (amsgrad) {
    r.max_exp_avg_sq = max(max_in, r.exp_avg_sq);
    denom = sqrt(r.max_exp_avg_sq);
  } else {
    denom = sqrt(r.exp_avg_sq);
  }
  denom = denom / p.bias_correction2_sqrt + p.eps;
  r.param = param_value + (r.exp_avg / denom) * p.neg_lr;
  return r;
}

@compute @workgroup_size(WG)
fn adam_step(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = thread_index(gid, nwg);
  if (i >= p.n) { return; }
  let pi = p.offsets.x + i;
  let mi = p.offsets.y + i;
  let vi = p.offsets.z + i;
  let r = adam(param[pi], grad[p.grad_offset + i], state0[mi], state1[vi], 0.0, false);
  param[pi] = r.param;
  state0[mi] = r.exp_avg;
  state1[vi] = r.exp_avg_sq;
}

@compute @workgroup_size(WG)
fn adam_amsgrad_step(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = thread_index(gid, nwg);
  if (i >= p.n) { return; }
  let pi = p.offsets.x + i;
  let mi = p.offsets.y + i;
  let vi = p.offsets.z + i;
  let xi = p.offsets.w + i;
  let r = adam(param[pi], grad[p.grad_offset + i], state0[mi], state1[vi], state2[xi], true);
  param[pi] = r.param;
  state0[mi] = r.exp_avg;
  state1[vi] = r.exp_avg_sq;
  state2[xi] = r.max_exp_avg_sq;
}

struct RmspropOut {
  param: f32,
  square_avg: f32,
  grad_avg: f32,
  momentum_buffer: f32,
}

fn rmsprop(param_in: f32, grad_in: f32, square_avg_in: f32, grad_avg_in: f32, buf_in: f32,
           centered: bool, with_momentum: bool) -> RmspropOut {
  var r: RmspropOut;
  let g = effective_grad(param_in, grad_in, p.weight_decay);
  r.square_avg = square_avg_in * p.rate + (g * p.one_minus_rate) * g;
  var denom: f32;
  if (centered) {
    r.grad_avg = lerp(grad_avg_in, g);
    denom = sqrt(r.square_avg - r.grad_avg * r.grad_avg);
  } else {
    denom = sqrt(r.square_avg);
  }
  let step = g / (denom + p.eps);
  if (with_momentum) {
    r.momentum_buffer = buf_in * p.momentum + step;
    r.param = param_in + r.momentum_buffer * p.neg_lr;
  } else {
    r.param = param_in + step * p.neg_lr;
  }
  return r;
}

@compute @workgroup_size(WG)
fn rmsprop_step(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = thread_index(gid, nwg);
  if (i >= p.n) { return; }
  let pi = p.offsets.x + i;
  let vi = p.offsets.y + i;
  let r = rmsprop(param[pi], grad[p.grad_offset + i], state0[vi], 0.0, 0.0, false, false);
  param[pi] = r.param;
  state0[vi] = r.square_avg;
}

@compute @workgroup_size(WG)
fn rmsprop_centered_step(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = thread_index(gid, nwg);
  if (i >= p.n) { return; }
  let pi = p.offsets.x + i;
  let vi = p.offsets.y + i;
  let ai = p.offsets.z + i;
  let r = rmsprop(param[pi], grad[p.grad_offset + i], state0[vi], state1[ai], 0.0, true, false);
  param[pi] = r.param;
  state0[vi] = r.square_avg;
  state1[ai] = r.grad_avg;
}

@compute @workgroup_size(WG)
fn rmsprop_momentum_step(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = thread_index(gid, nwg);
  if (i >= p.n) { return; }
  let pi = p.offsets.x + i;
  let vi = p.offsets.y + i;
  let bi = p.offsets.z + i;
  let r = rmsprop(param[pi], grad[p.grad_offset + i], state0[vi], 0.0, state1[bi], false, true);
  param[pi] = r.param;
  state0[vi] = r.square_avg;
  state1[bi] = r.momentum_buffer;
}

@compute @workgroup_size(WG)
fn rmsprop_centered_momentum_step(@builtin(global_invocation_id) gid: vec3<u32>,
                                  @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = thread_index(gid, nwg);
  if (i >= p.n) { return; }
  let pi = p.offsets.x + i;
  let vi = p.offsets.y + i;
  let ai = p.offsets.z + i;
  let bi = p.offsets.w + i;
  let r = rmsprop(param[pi], grad[p.grad_offset + i], state0[vi], state1[ai], state2[bi], true, true);
  param[pi] = r.param;
  state0[vi] = r.square_avg;
  state1[ai] = r.grad_avg;
  state2[bi] = r.momentum_buffer;
}
