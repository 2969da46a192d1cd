// pool.wgsl: 2-D max pooling, one thread per output element (select) or per input
// element (backward); see core/ops/pool.py for the maths.
//
// Window (y, x) of plane (n, c) reads rows y*sh - top + i*dh and columns
// x*sw - left + j*dw, i < kh, j < kw row-major; positions outside the input are
// skipped (padding never wins). Its first maximum: a larger value replaces the best
// so far, a NaN replaces any number, nothing replaces a NaN.
//
// Bindings: 0 Params, 1 a, 2 b (read, f32, strided 4-D views), 3 out (contiguous).
//   max_pool2d_select:   a = x (where the maxima are), b = source; out (N, C, Ho, Wo)
//   max_pool2d_backward: a = g (N, C, Ho, Wo), b = x; out (N, C, H, W), each g added
//     at its window's maximum (a gather: the thread of an input element visits the
//     windows that contain it, so no atomics).
// The grid is folded into y past the per-dimension limit (thread_index).

struct Params {
  n: u32, c: u32, h: u32, w: u32,
  ho: u32, wo: u32, kh: u32, kw: u32,
  sh: u32, sw: u32, dh: u32, dw: u32,
  top: u32, left: u32, total: u32, _pad: u32,
  offsets: vec4<u32>,      // a, b
  a_strides: vec4<i32>,
  b_strides: vec4<i32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

override WG: u32 = 64;

fn thread_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * WG;
}

fn at(offset: u32, strides: vec4<i32>, n: u32, c: u32, y: u32, x: u32) -> u32 {
  return u32(i32(offset) + i32(n) * strides.x + i32(c) * strides.y + i32(y) * strides.z + i32(x) * strides.w);
}

// (n, c, row, col) of element o of a contiguous (N, C, rows, cols) array.
fn coords(o: u32, rows: u32, cols: u32) -> vec4<u32> {
  return vec4<u32>(o / (cols * rows * p.c), (o / (cols * rows)) % p.c, (o / cols) % rows, o % cols);
}

// Bit test rather than v != v: compilers may fold that to false.
fn is_nan(v: f32) -> bool {
  return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

// Position (row * w + col) of the first maximum of window (y, x) of x's plane (n, c);
// x is binding `a` in select and `b` in backward.
fn window_max(from_a: bool, n: u32, c: u32, y: u32, x: u32) -> u32 {
  var best = 0.0;
  var best_at = 0xffffffffu;
  for (var i = 0u; i < p.kh; i = i + 1u) {
    let row = i32(y * p.sh + i * p.dh) - i32(p.top);
    if (row < 0 || row >= i32(p.h)) { continue; }
    for (var j = 0u; j < p.kw; j = j + 1u) {
      let col = i32(x * p.sw + j * p.dw) - i32(p.left);
      if (col < 0 || col >= i32(p.w)) { continue; }
      var v: f32;
      if (from_a) {
        v = a[at(p.offsets.x, p.a_strides, n, c, u32(row), u32(col))];
      } else {
        v = b[at(p.offsets.y, p.b_strides, n, c, u32(row), u32(col))];
      }
      if (best_at == 0xffffffffu || (!is_nan(best) && (is_nan(v) || v > best))) {
        best = v;
        best_at = u32(row) * p.w + u32(col);
      }
    }
  }
  return best_at;
}

@compute @workgroup_size(WG)
fn max_pool2d_select(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let o = thread_index(gid, nwg);
  if (o >= p.total) { return; }
  let e = coords(o, p.ho, p.wo);  // (n, c, y, x) of the window
  let best = window_max(true, e.x, e.y, e.z, e.w);
  out[o] = b[at(p.offsets.y, p.b_strides, e.x, e.y, best / p.w, best % p.w)];
}

@compute @workgroup_size(WG)
fn max_pool2d_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let o = thread_index(gid, nwg);
  if (o >= p.total) { return; }
  let e = coords(o, p.h, p.w);
  let n = e.x;
  let c = e.y;
  let row = e.z;
  let col = e.w;
  var acc = 0.0;
  // Window rows y with y*sh + i*dh = row + top for some i < kh (one y per i), likewise columns.
  for (var i = 0u; i < p.kh; i = i + 1u) {
    let ty = i32(row + p.top) - i32(i * p.dh);
    if (ty < 0 || u32(ty) % p.sh != 0u || u32(ty) / p.sh >= p.ho) { continue; }
    let y = u32(ty) / p.sh;
    for (var j = 0u; j < p.kw; j = j + 1u) {
      let tx = i32(col + p.left) - i32(j * p.dw);
      if (tx < 0 || u32(tx) % p.sw != 0u || u32(tx) / p.sw >= p.wo) { continue; }
      let x = u32(tx) / p.sw;
      if (window_max(false, n, c, y, x) == row * p.w + col) {
        acc = acc + a[at(p.offsets.x, p.a_strides, n, c, y, x)];
      }
    }
  }
  out[o] = acc;
}
