// math.wgsl: scalar helpers that WGSL lacks or defines differently from numpy,
// prepended to the elementwise kernels. Each matches numpy/PyTorch semantics.

// Bits to f32 through a function, so the compiler cannot fold inf/NaN constants
// (Chrome's Tint rejects a constant that is not a finite f32).
fn wg_bits(x: u32) -> u32 {
  return x;
}

// erf: Abramowitz & Stegun 7.1.26 refined with one Newton step is overkill for
// f32; this rational form has |error| < 1.5e-7, below f32 resolution near 1.
fn wg_erf(x: f32) -> f32 {
  let t = 1.0 / (1.0 + 0.3275911 * abs(x));
  let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
                 + 0.254829592) * t * exp(-x * x);
  return select(-y, y, x >= 0.0);
}

// sin and cos accurate to about 1 ulp on the range tests use: WGSL only promises
// 2**-11 absolute error, and SwiftShader delivers about that. Cody-Waite reduction
// by pi/2 in three parts, then Cephes' sinf/cosf polynomials on [-pi/4, pi/4].
fn wg_reduce_half_pi(x: f32) -> vec2<f32> {
  let k = round(x * 0.63661977236);
  let r = ((x - k * 1.5703125) - k * 4.837512969970703125e-4) - k * 7.54978995489188216e-8;
  return vec2<f32>(r, k);
}

fn wg_sin_poly(r: f32) -> f32 {
  let z = r * r;
  return r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
}

fn wg_cos_poly(r: f32) -> f32 {
  let z = r * r;
  return 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
}

fn wg_sin(x: f32) -> f32 {
  let rk = wg_reduce_half_pi(x);
  let q = i32(rk.y) & 3;
  let s = wg_sin_poly(rk.x);
  let c = wg_cos_poly(rk.x);
  return select(select(select(-c, -s, q == 2), c, q == 1), s, q == 0);
}

fn wg_cos(x: f32) -> f32 {
  let rk = wg_reduce_half_pi(x);
  let q = i32(rk.y) & 3;
  let s = wg_sin_poly(rk.x);
  let c = wg_cos_poly(rk.x);
  return select(select(select(s, -c, q == 2), -s, q == 1), c, q == 0);
}

// tanh through exp of a clamped argument: some drivers return NaN for |x| > 88.
// NaN tests look at the bits: WGSL lets a compiler assume NaNs never occur, so x != x
// may be folded to false. max, min, clamp and sign leave NaN inputs unspecified;
// the wg_ forms below propagate NaN, as numpy and PyTorch do.
fn wg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn wg_isinf(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
}

// Truth of a float, as bool(x) in numpy and PyTorch: NaN is true (it is not zero).
fn wg_truthy(x: f32) -> bool {
  return wg_isnan(x) || x != 0.0;
}

fn wg_max(a: f32, b: f32) -> f32 {
  return select(select(max(a, b), b, wg_isnan(b)), a, wg_isnan(a));
}

fn wg_min(a: f32, b: f32) -> f32 {
  return select(select(min(a, b), b, wg_isnan(b)), a, wg_isnan(a));
}

fn wg_sign(x: f32) -> f32 {
  return select(sign(x), x, wg_isnan(x));
}

// SwiftShader (Chromium's software WebGPU) returns inf for exp(NaN).
fn wg_exp(x: f32) -> f32 {
  return select(exp(x), x, wg_isnan(x));
}

fn wg_tanh(x: f32) -> f32 {
  let z = clamp(x, -15.0, 15.0);
  let e = exp(2.0 * z);
  return select((e - 1.0) / (e + 1.0), x, wg_isnan(x));
}

fn wg_sigmoid(x: f32) -> f32 {
  return 0.5 * (1.0 + wg_tanh(0.5 * x));
}

// log with IEEE's special cases: SwiftShader's approximation returns finite values
// for 0, inf, NaN and negative inputs.
fn wg_log(x: f32) -> f32 {
  let inf = bitcast<f32>(wg_bits(0x7f800000u));
  if (x > 0.0 && x < inf) { return log(x); }
  if (x == 0.0) { return -inf; }
  if (x == inf) { return inf; }
  return bitcast<f32>(wg_bits(0x7fc00000u));  // negative or NaN
}

// log(1 + x) without losing digits for tiny x.
fn wg_log1p(x: f32) -> f32 {
  let u = 1.0 + x;
  if (u == 1.0) { return x; }
  if (u > 1.0e30) { return wg_log(u); }  // the correction would be inf / inf there
  return wg_log(u) * x / (u - 1.0);
}

// pow with numpy's rules for negative bases (integral exponents keep the sign).
fn wg_pow(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return 1.0; }
  if (b == floor(b) && abs(b) <= 16.0) {  // exact for small integral powers (x ** 2)
    var r = 1.0;
    for (var k = 0; k < i32(abs(b)); k = k + 1) { r = r * a; }
    return select(r, 1.0 / r, b < 0.0);
  }
  if (a >= 0.0) {
    if (a == 0.0) { return select(0.0, bitcast<f32>(wg_bits(0x7f800000u)), b < 0.0); }  // 0 ** negative = inf
    return exp2(b * log2(a));
  }
  if (b != floor(b)) { return bitcast<f32>(wg_bits(0x7fc00000u)); }  // NaN
  let m = exp2(b * log2(-a));
  return select(m, -m, (abs(b) % 2.0) == 1.0);
}

fn wg_ipow(a: i32, b: i32) -> i32 {
  var result = 1;
  var base = a;
  var e = b;
  if (e < 0) { return 0; }
  while (e > 0) {
    if ((e & 1) == 1) { result = result * base; }
    base = base * base;
    e = e >> 1u;
  }
  return result;
}

// Python's modulo and floor division for ints (the sign follows the divisor).
fn wg_imod(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  let r = a % b;
  return select(r, r + b, r != 0 && ((r < 0) != (b < 0)));
}

fn wg_ifloordiv(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  let q = a / b;
  return select(q, q - 1, (a % b != 0) && ((a < 0) != (b < 0)));
}
