// math.wgsl: scalar helpers that WGSL lacks or defines differently from numpy,
// prepended to the elementwise kernels. Each matches numpy/PyTorch semantics.

// Bits to f32 through a function, so the compiler cannot fold inf/NaN constants
// (Chrome's Tint rejects a constant that is not a finite f32).
fn wg_bits(x: u32) -> u32 {
  return x;
}

// float16 and bfloat16 results are computed in f32 and rounded
// to the nearest value of their dtype (ties to even; past the range: inf; NaN stays NaN),
// exactly as numpy rounds a float32 to float16 and webgrad's cpu rounds to bfloat16.
fn wg_round_f16(x: f32) -> f32 {
  let bits = bitcast<u32>(x);
  let magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // inf or NaN
    return x;
  }
  if (magnitude >= 0x477ff000u) {  // |x| >= 65520 rounds past float16's largest, 65504
    return bitcast<f32>((bits & 0x80000000u) | wg_bits(0x7f800000u));
  }
  if (magnitude < 0x38800000u) {  // |x| < 2**-14: float16's subnormals, steps of 2**-24
    return round(x * 16777216.0) * 5.9604644775390625e-8;
  }
  return bitcast<f32>((bits + 0xfffu + ((bits >> 13u) & 1u)) & 0xffffe000u);
}

fn wg_round_bf16(x: f32) -> f32 {
  let bits = bitcast<u32>(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it NaN (rounding could carry it into inf)
    return bitcast<f32>((bits & 0xffff0000u) | 0x00400000u);
  }
  return bitcast<f32>((bits + 0x7fffu + ((bits >> 16u) & 1u)) & 0xffff0000u);
}

// Packed kinds (geometry.PACKED: several to a u32 word, where WGSL has no such type): the
// bits of a value rounded or wrapped to the dtype, and a value from its bits (the low bits of
// h; the rest are ignored). The floats are worked out by hand, so that rounding and
// subnormals never depend on the implementation's float conversions.
fn wg_i8_value(h: u32) -> i32 {
  return bitcast<i32>(h << 24u) >> 24u;
}

fn wg_u8_value(h: u32) -> i32 {
  return i32(h & 0xffu);
}

fn wg_i16_value(h: u32) -> i32 {
  return bitcast<i32>(h << 16u) >> 16u;
}

fn wg_low8_bits(v: i32) -> u32 {  // two's complement wraps, as a cast to int8 or uint8
  return bitcast<u32>(v) & 0xffu;
}

fn wg_low16_bits(v: i32) -> u32 {
  return bitcast<u32>(v) & 0xffffu;
}

fn wg_bf16_bits(x: f32) -> u32 {
  return bitcast<u32>(wg_round_bf16(x)) >> 16u;
}

fn wg_bf16_value(h: u32) -> f32 {
  return bitcast<f32>(h << 16u);
}

fn wg_f16_bits(x: f32) -> u32 {
  let r = wg_round_f16(x);
  let bits = bitcast<u32>(r);
  let sign = (bits >> 16u) & 0x8000u;
  let magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) { return sign | 0x7e00u; }  // NaN
  if (magnitude >= 0x47800000u) { return sign | 0x7c00u; }  // inf (rounding left nothing past 65504)
  if (magnitude >= 0x38800000u) { return sign | ((magnitude - 0x38000000u) >> 13u); }  // rebias 127 -> 15
  return sign | u32(abs(r) * 16777216.0);  // subnormal: a whole number of 2**-24
}

fn wg_f16_value(h: u32) -> f32 {
  let sign = (h & 0x8000u) << 16u;
  let exponent = (h >> 10u) & 0x1fu;
  let mantissa = h & 0x3ffu;
  if (exponent == 0u) {
    return bitcast<f32>(sign | bitcast<u32>(f32(mantissa) * 5.9604644775390625e-8));
  }
  if (exponent == 31u) { return bitcast<f32>(sign | wg_bits(0x7f800000u) | (mantissa << 13u)); }
  return bitcast<f32>(sign | ((exponent + 112u) << 23u) | (mantissa << 13u));
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

// sign(NaN) is 0, as in PyTorch.
fn wg_sign(x: f32) -> f32 {
  return select(sign(x), 0.0, wg_isnan(x));
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
  if (b == 0.0 || a == 1.0) { return 1.0; }
  if (wg_isnan(a) || wg_isnan(b)) { return bitcast<f32>(wg_bits(0x7fc00000u)); }  // nan ** inf too
  if (a == -1.0 && wg_isinf(b)) { return 1.0; }
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

// ---- more unary maths (tan, inverse and hyperbolic functions, expm1, erfc, erfinv) ----
// WGSL's builtins for these are only as accurate as their defining formulas (sinh is
// (exp(x) - exp(-x)) / 2, losing every digit near 0), so the careful forms live here.
fn wg_nan() -> f32 {
  return bitcast<f32>(wg_bits(0x7fc00000u));
}

fn wg_inf() -> f32 {
  return bitcast<f32>(wg_bits(0x7f800000u));
}

fn wg_tan(x: f32) -> f32 {
  return wg_sin(x) / wg_cos(x);
}

// Through atan2 (the asin and acos builtins are off by 1e-4 on llvmpipe). Out of [-1, 1]
// (or NaN) is NaN, as in numpy; WGSL leaves the builtins' result there open.
fn wg_asin(x: f32) -> f32 {
  // x itself at 0 keeps -0 (SwiftShader's atan2(-0, 1) is pi, not -0)
  let r = select(atan2(x, sqrt((1.0 - x) * (1.0 + x))), x, x == 0.0);
  return select(r, wg_nan(), wg_isnan(x) || abs(x) > 1.0);
}

fn wg_acos(x: f32) -> f32 {
  return select(atan2(sqrt((1.0 - x) * (1.0 + x)), x), wg_nan(), wg_isnan(x) || abs(x) > 1.0);
}

fn wg_atan(x: f32) -> f32 {
  return select(atan(x), x, wg_isnan(x));
}

fn wg_atan2(y: f32, x: f32) -> f32 {
  // y = +-0 by the sign bits (SwiftShader's atan2 gets signed zeros wrong): +-0 when x is +0 or
  // positive, +-pi when x is -0 or negative.
  let x_negative = (bitcast<u32>(x) >> 31u) == 1u;
  let pi = select(3.14159265358979, -3.14159265358979, (bitcast<u32>(y) >> 31u) == 1u);
  let r = select(atan2(y, x), select(y, pi, x_negative), y == 0.0);
  return select(r, wg_nan(), wg_isnan(x) || wg_isnan(y));
}

// exp(x) - 1 without cancellation near 0 (Kahan: the rounding of exp(x) cancels in u - 1 / log u).
fn wg_expm1(x: f32) -> f32 {
  if (wg_isnan(x)) { return x; }
  if (x > 88.0) { return wg_exp(x); }
  let u = exp(x);
  if (u == 1.0) { return x; }
  let um1 = u - 1.0;
  if (um1 == -1.0) { return -1.0; }
  return um1 * x / log(u);
}

fn wg_sinh(x: f32) -> f32 {
  let a = abs(x);
  if (a < 1.0) {
    let e = wg_expm1(a);
    return sign(x) * 0.5 * e * (2.0 + e) / (1.0 + e);
  }
  let h = wg_exp(a - 0.6931471805599453);  // exp(a) / 2 without overflowing first
  return select(sign(x) * (h - 0.25 / h), x, wg_isnan(x));
}

fn wg_cosh(x: f32) -> f32 {
  let h = wg_exp(abs(x) - 0.6931471805599453);
  return h + 0.25 / h;
}

fn wg_asinh(x: f32) -> f32 {
  let a = abs(x);
  var r: f32;
  if (a > 4096.0) {
    r = wg_log(a) + 0.6931471805599453;
  } else {
    r = wg_log1p(a + a * a / (1.0 + sqrt(1.0 + a * a)));
  }
  return select(select(r, -r, x < 0.0), x, wg_isnan(x));
}

fn wg_acosh(x: f32) -> f32 {
  if (wg_isnan(x) || x < 1.0) { return wg_nan(); }
  if (x > 4096.0) { return wg_log(x) + 0.6931471805599453; }
  let t = x - 1.0;
  return wg_log1p(t + sqrt(t * (x + 1.0)));
}

fn wg_atanh(x: f32) -> f32 {
  let a = abs(x);
  if (wg_isnan(x) || a > 1.0) { return wg_nan(); }
  if (a == 1.0) { return select(wg_inf(), -wg_inf(), x < 0.0); }
  let r = 0.5 * wg_log1p(2.0 * a / (1.0 - a));
  return select(r, -r, x < 0.0);
}

// erfc keeps its relative accuracy for large x, where 1 - erf(x) is all rounding:
// t * exp(-z^2 + P(t)) with t = 1 / (1 + z/2), a Chebyshev fit good to 1.2e-7 relative.
fn wg_erfc(x: f32) -> f32 {
  if (wg_isnan(x)) { return x; }
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
          + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  let r = t * exp(-z * z + p);
  return select(r, 2.0 - r, x < 0.0);
}

// erfinv: a polynomial in w = -log(1 - x^2) on two ranges (single-precision fit).
fn wg_erfinv(x: f32) -> f32 {
  if (wg_isnan(x) || abs(x) > 1.0) { return wg_nan(); }
  if (abs(x) == 1.0) { return select(wg_inf(), -wg_inf(), x < 0.0); }
  var w = -log((1.0 - x) * (1.0 + x));
  var p: f32;
  if (w < 5.0) {
    w = w - 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  return p * x;
}

fn wg_trunc(x: f32) -> f32 {
  return select(trunc(x), x, wg_isnan(x) || wg_isinf(x));
}

// Sign bit of b on the magnitude of a (also for -0.0 and NaN, as numpy's copysign).
fn wg_copysign(a: f32, b: f32) -> f32 {
  return bitcast<f32>((bitcast<u32>(a) & 0x7fffffffu) | (bitcast<u32>(b) & 0x80000000u));
}

// C's fmod: the remainder takes the sign of the dividend.
fn wg_fmod(a: f32, b: f32) -> f32 {
  if (wg_isnan(a) || wg_isnan(b) || wg_isinf(a) || b == 0.0) { return wg_nan(); }
  if (wg_isinf(b)) { return a; }
  return a - b * trunc(a / b);
}

fn wg_ifmod(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  return a % b;
}
