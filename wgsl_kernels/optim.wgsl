// optim.wgsl: fused optimizer steps as pure functions, one per optimizer op and named
// after it: fn <op>(p: Params, grad: f32, v: vec4<f32>) -> vec4<f32> updates one element,
// v holding the param then the op's state values in its order (the unused lanes are 0
// in and ignored out). optim_step.wgsl runs them in place over one parameter or a group.
// Each function mirrors its numpy kernel in core/optim/updates.py operation by
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
//   adadelta_step      v = v * rho + (1 - rho) * g * g; delta = sqrt(u + eps) / sqrt(v + eps) * g;
//                      u = u * rho + (1 - rho) * delta * delta; param += -lr * delta
//
// lerp(start, end, w) is PyTorch's: start + w * (end - start) if w < 0.5, else
// end - (1 - w) * (end - start); LERP_FROM_END picks the second form.

const MAXIMIZE: u32 = 1u;
const NESTEROV: u32 = 2u;
const FIRST_STEP: u32 = 4u;
const DAMPENED: u32 = 8u;        // dampening != 0
const DECOUPLED: u32 = 16u;      // AdamW
const LERP_FROM_END: u32 = 32u;  // lerp weight >= 0.5

// The scalars of one step, shared by every parameter a dispatch updates. 80 bytes: the
// words after flags are unused, kept so that a uniform slot (256 bytes) holds five members.
struct Params {
  flags: u32,
  unused0: u32,
  unused1: u32,
  unused2: u32,
  unused3: vec4<u32>,
  weight_decay: f32,          // L2 term added to the gradient (0: none)
  neg_lr: f32,                // -lr, or Adam's -step_size
  momentum: f32,              // SGD and RMSprop momentum
  one_minus_dampening: f32,   // SGD
  decay: f32,                 // AdamW: 1 - lr * weight_decay
  rate: f32,                  // beta2 (Adam), alpha (RMSprop), rho (Adadelta): v = v * rate + ...
  one_minus_rate: f32,        // 1 - rate
  lerp_weight: f32,           // 1 - beta1 (Adam), 1 - alpha (centered RMSprop)
  lerp_complement: f32,       // 1 - lerp_weight
  bias_correction2_sqrt: f32, // Adam
  eps: f32,
  pad1: f32,
}

fn has(p: Params, flag: u32) -> bool {
  return (p.flags & flag) != 0u;
}

// -grad if maximizing, plus weight_decay * param (L2) when weight_decay != 0.
fn effective_grad(p: Params, param_value: f32, grad_value: f32, weight_decay: f32) -> f32 {
  var g = select(grad_value, -grad_value, has(p, MAXIMIZE));
  if (weight_decay != 0.0) {
    g = g + param_value * weight_decay;
  }
  return g;
}

fn lerp(p: Params, start: f32, end: f32) -> f32 {
  let diff = end - start;
  if (has(p, LERP_FROM_END)) {
    return end - diff * p.lerp_complement;
  }
  return start + diff * p.lerp_weight;
}

// v: (param)
fn sgd_step(p: Params, grad: f32, v: vec4<f32>) -> vec4<f32> {
  let g = effective_grad(p, v.x, grad, p.weight_decay);
  return vec4<f32>(v.x + g * p.neg_lr, 0.0, 0.0, 0.0);
}

// v: (param, momentum_buffer)
fn sgd_momentum_step(p: Params, grad: f32, v: vec4<f32>) -> vec4<f32> {
  let g = effective_grad(p, v.x, grad, p.weight_decay);
  var buf = g;
  if (!has(p, FIRST_STEP)) {
    buf = v.y * p.momentum;
    if (has(p, DAMPENED)) {
      buf = buf + p.one_minus_dampening * g;
    } else {
      buf = buf + g;
    }
  }
  var update: f32;
  if (has(p, NESTEROV)) {
    update = (buf * p.momentum + g) * p.neg_lr;
  } else {
    update = buf * p.neg_lr;
  }
  return vec4<f32>(v.x + update, buf, 0.0, 0.0);
}

// v: (param, exp_avg, exp_avg_sq, max_exp_avg_sq when amsgrad)
fn adam(p: Params, grad: f32, v: vec4<f32>, amsgrad: bool) -> vec4<f32> {
  var param_value = v.x;
  var g: f32;
  if (has(p, DECOUPLED)) {
    if (p.weight_decay != 0.0) { param_value = param_value * p.decay; }
    g = effective_grad(p, param_value, grad, 0.0);
  } else {
    g = effective_grad(p, param_value, grad, p.weight_decay);
  }
  let exp_avg = lerp(p, v.y, g);
  let exp_avg_sq = v.z * p.rate + (g * p.one_minus_rate) * g;
  var max_exp_avg_sq = 0.0;
  var denom: f32;
  if (amsgrad) {
    max_exp_avg_sq = max(v.w, exp_avg_sq);
    denom = sqrt(max_exp_avg_sq);
  } else {
    denom = sqrt(exp_avg_sq);
  }
  denom = denom / p.bias_correction2_sqrt + p.eps;
  return vec4<f32>(param_value + (exp_avg / denom) * p.neg_lr, exp_avg, exp_avg_sq, max_exp_avg_sq);
}

fn adam_step(p: Params, grad: f32, v: vec4<f32>) -> vec4<f32> {
  return adam(p, grad, v, false);
}

fn adam_amsgrad_step(p: Params, grad: f32, v: vec4<f32>) -> vec4<f32> {
  return adam(p, grad, v, true);
}

// RMSprop's values: square_avg, then grad_avg (centered), then momentum_buffer (momentum).
struct Rmsprop {
  param: f32,
  square_avg: f32,
  grad_avg: f32,
  momentum_buffer: f32,
}

fn rmsprop(p: Params, grad: f32, param_in: f32, square_avg_in: f32, grad_avg_in: f32, buf_in: f32,
           centered: bool, with_momentum: bool) -> Rmsprop {
  var r: Rmsprop;
  let g = effective_grad(p, param_in, grad, p.weight_decay);
  r.square_avg = square_avg_in * p.rate + (g * p.one_minus_rate) * g;
  var denom: f32;
  if (centered) {
    r.grad_avg = lerp(p, grad_avg_in, g);
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

// v: (param, square_avg)
fn rmsprop_step(p: Params, grad: f32, v: vec4<f32>) -> vec4<f32> {
  let r = rmsprop(p, grad, v.x, v.y, 0.0, 0.0, false, false);
  return vec4<f32>(r.param, r.square_avg, 0.0, 0.0);
}

// v: (param, square_avg, grad_avg)
fn rmsprop_centered_step(p: Params, grad: f32, v: vec4<f32>) -> vec4<f32> {
  let r = rmsprop(p, grad, v.x, v.y, v.z, 0.0, true, false);
  return vec4<f32>(r.param, r.square_avg, r.grad_avg, 0.0);
}

// v: (param, square_avg, momentum_buffer)
fn rmsprop_momentum_step(p: Params, grad: f32, v: vec4<f32>) -> vec4<f32> {
  let r = rmsprop(p, grad, v.x, v.y, 0.0, v.z, false, true);
  return vec4<f32>(r.param, r.square_avg, r.momentum_buffer, 0.0);
}

// v: (param, square_avg, grad_avg, momentum_buffer)
fn rmsprop_centered_momentum_step(p: Params, grad: f32, v: vec4<f32>) -> vec4<f32> {
  let r = rmsprop(p, grad, v.x, v.y, v.z, v.w, true, true);
  return vec4<f32>(r.param, r.square_avg, r.grad_avg, r.momentum_buffer);
}

// v: (param, square_avg, acc_delta)
fn adadelta_step(p: Params, grad: f32, v: vec4<f32>) -> vec4<f32> {
  let g = effective_grad(p, v.x, grad, p.weight_decay);
  let square_avg = v.y * p.rate + (g * p.one_minus_rate) * g;
  let delta = sqrt(v.z + p.eps) / sqrt(square_avg + p.eps) * g;
  let acc_delta = v.z * p.rate + (delta * p.one_minus_rate) * delta;
  return vec4<f32>(v.x + delta * p.neg_lr, square_avg, acc_delta, 0.0);
}
