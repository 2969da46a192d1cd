// pool.wgsl: 2-D max pooling, one thread per output element (select) or per input
// element (backward); see core/ops/pooling.py for the maths.
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
//   max_pool2d_backward_cells: the same where windows never overlap, a thread per window.
// The grid is folded into y past the per-dimension limit (thread_index).

struct Params {
  total: u32, _pad0: u32, _pad1: u32, _pad2: u32,
  offsets: vec4<u32>,      // a, b
  a_strides: vec4<i32>,
  b_strides: vec4<i32>,
}

// The plane and the window are pipeline constants (one pipeline per pooling layer): the
// loops unroll and the divisions are by constants, which CPU adapters (SwiftShader,
// llvmpipe) turn into multiplications; by uniforms they were most of the kernels' time.
override C: u32 = 1u;
override H: u32 = 1u;
override W: u32 = 1u;
override HO: u32 = 1u;
override WO: u32 = 1u;
override KH: u32 = 1u;
override KW: u32 = 1u;
override SH: u32 = 1u;
override SW: u32 = 1u;
override DH: u32 = 1u;
override DW: u32 = 1u;
override TOP: u32 = 0u;
override LEFT: u32 = 0u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<SA>;
@group(0) @binding(2) var<storage, read> b: array<SB>;
@group(0) @binding(3) var<storage, read_write> out: array<SO>;
override ROUND_OUT: bool = false;  // out is f16: round each value first (WGSL leaves it to the implementation)

fn stored(v: f32) -> SO {
  if (ROUND_OUT) {
    return SO(wg_round_f16(v));
  }
  return SO(v);
}

override WG: u32 = 64;

fn thread_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * WG;
}

fn at(offset: u32, strides: vec4<i32>, n: u32, c: u32, y: u32, x: u32) -> u32 {
  return u32(i32(offset) + i32(n) * strides.x + i32(c) * strides.y + i32(y) * strides.z + i32(x) * strides.w);
}

// (n, c, row, col) of element o of a contiguous (N, C, rows, cols) array.
fn coords(o: u32, rows: u32, cols: u32) -> vec4<u32> {
  return vec4<u32>(o / (cols * rows * C), (o / (cols * rows)) % C, (o / cols) % rows, o % cols);
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
  for (var i = 0u; i < KH; i = i + 1u) {
    let row = i32(y * SH + i * DH) - i32(TOP);
    if (row < 0 || row >= i32(H)) { continue; }
    for (var j = 0u; j < KW; j = j + 1u) {
      let col = i32(x * SW + j * DW) - i32(LEFT);
      if (col < 0 || col >= i32(W)) { continue; }
      var v: f32;
      if (from_a) {
        v = load_a(at(p.offsets.x, p.a_strides, n, c, u32(row), u32(col)));
      } else {
        v = load_b(at(p.offsets.y, p.b_strides, n, c, u32(row), u32(col)));
      }
      if (best_at == 0xffffffffu || (!is_nan(best) && (is_nan(v) || v > best))) {
        best = v;
        best_at = u32(row) * W + u32(col);
      }
    }
  }
  return best_at;
}

@compute @workgroup_size(WG)
fn max_pool2d_select(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let o = thread_index(gid, nwg);
  if (o >= p.total) { return; }
  let e = coords(o, HO, WO);  // (n, c, y, x) of the window
  let best = window_max(true, e.x, e.y, e.z, e.w);
  out[o] = stored(load_b(at(p.offsets.y, p.b_strides, e.x, e.y, best / W, best % W)));
}

@compute @workgroup_size(WG)
fn max_pool2d_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let o = thread_index(gid, nwg);
  if (o >= p.total) { return; }
  let e = coords(o, H, W);
  let n = e.x;
  let c = e.y;
  let row = e.z;
  let col = e.w;
  var acc = 0.0;
  // Window rows y with y*sh + i*dh = row + top for some i < kh (one y per i), likewise columns.
  for (var i = 0u; i < KH; i = i + 1u) {
    let ty = i32(row + TOP) - i32(i * DH);
    if (ty < 0 || u32(ty) % SH != 0u || u32(ty) / SH >= HO) { continue; }
    let y = u32(ty) / SH;
    for (var j = 0u; j < KW; j = j + 1u) {
      let tx = i32(col + LEFT) - i32(j * DW);
      if (tx < 0 || u32(tx) % SW != 0u || u32(tx) / SW >= WO) { continue; }
      let x = u32(tx) / SW;
      if (window_max(false, n, c, y, x) == row * W + col) {
        acc = acc + load_a(at(p.offsets.x, p.a_strides, n, c, y, x));
      }
    }
  }
  out[o] = stored(acc);
}

// Windows that never overlap (the dilated window no longer than the stride: 2x2 pooling at
// stride 2): a thread per window finds its maximum once and writes its cell, the rows and
// columns from its window's start to the next window's (the last cell to the plane's edge),
// g at the maximum and zeros elsewhere. The gather above finds the maximum again for each of
// a window's kh*kw elements: the digits CNN's pools took 1.5 ms a backward on llvmpipe, 7x
// their forward.
@compute @workgroup_size(WG)
fn max_pool2d_backward_cells(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let o = thread_index(gid, nwg);
  if (o >= p.total) { return; }
  let e = coords(o, HO, WO);  // (n, c, y, x) of the window
  let best = window_max(false, e.x, e.y, e.z, e.w);
  let g = load_a(at(p.offsets.x, p.a_strides, e.x, e.y, e.z, e.w));
  let row0 = u32(max(i32(e.z * SH) - i32(TOP), 0));
  let col0 = u32(max(i32(e.w * SW) - i32(LEFT), 0));
  var row1 = H;
  var col1 = W;
  if (e.z + 1u < HO) { row1 = min((e.z + 1u) * SH - TOP, H); }
  if (e.w + 1u < WO) { col1 = min((e.w + 1u) * SW - LEFT, W); }
  let plane = (e.x * C + e.y) * H * W;
  for (var row = row0; row < row1; row = row + 1u) {
    for (var col = col0; col < col1; col = col + 1u) {
      let at_ = row * W + col;
      out[plane + at_] = stored(select(0.0, g, at_ == best));
    }
  }
}
