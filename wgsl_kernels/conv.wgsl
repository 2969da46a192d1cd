// conv.wgsl: 2-D convolution (cross-correlation) forward and both backward passes,
// each one direct dispatch: no im2col buffer, the window is indexed in place. The
// launcher (backend/webgpu/conv.py) runs most shapes as products on matmul.wgsl over
// an im2col copy instead; this kernel takes the rest (few channels a group, strided
// backward input, columns too large).
//
// Maths. x (N, C, H, W), w (O, Cg, kh, kw) with Cg = C / groups, Og = O / groups,
// out (N, O, Ho, Wo); padding (top, left) of zeros (bottom/right only set Ho, Wo):
//   out[n,o,y,x]  = sum_{c<Cg,i,j} x[n, G*Cg + c, y*sh + i*dh - top, x*sw + j*dw - left] * w[o,c,i,j]
// with G = o / Og and out-of-range x reading 0. The backward passes, for g = d loss / d out:
//   gx[n,C',h,v]  = sum_{o in group of C', i, j} g[n, o, (h + top - i*dh) / sh, (v + left - j*dw) / sw] * w[o, C' % Cg, i, j]
//                   over the (i, j) whose divisions are exact and land inside (Ho, Wo);
//   gw[o,c,i,j]   = sum_{n,y,x} g[n,o,y,x] * x[n, G*Cg + c, y*sh + i*dh - top, x*sw + j*dw - left].
//
// Bindings: 0 Params, 1 a (read), 2 b (read), 3 out (read_write, contiguous). a and b are read
// through load_a/load_b (generated: f32, f16, or 16-bit floats packed two to a word, each as f32;
// the sums are f32); out is f32, or f16 rounded as the cpu rounds:
//   conv2d_forward          a = x, b = w, out (N, O, Ho, Wo)
//   conv2d_backward_input   a = g, b = w, out (N, C, H, W)
//   conv2d_backward_weight  a = g, b = x, out (O, Cg, kh, kw)
// a and b are strided 4-D views: element (i0..i3) at off + sum ik * strides[k].
//
// Grid. Workgroups are numbered wid.x + wid.y * nwg.x (folded into y past the
// per-dimension limit); p.total is the number of threads (forward) or elements.
//   forward: thread e = PB pixels (n, oy, ox..ox+PB-1) of one row for OB consecutive output
//     channels of one group (OB = 4 when it divides Og: each x value loaded feeds OB products;
//     PB = 2 or 4: each w value feeds as many pixels').
//   backward_input: likewise PB pixels (n, h, v..) of gx for OB input channels of one group
//     (PB > 1 only with column stride 1).
//   backward_weight: a team of LANES threads per JB weight elements (c, i, j..) of OB output
//     channels, lane l summing the images n = l, l + LANES, ..., then the team adds in a
//     tree (LANES = 1 on CPU adapters, where barriers are slow and there is no idle
//     hardware to fill; JB = 3 kernel columns there, each g value feeding three products).
// Loops run over kernel offsets outside and channels inside, with the in-range
// (i, j) (or output rows/cols) computed up front, so the inner loop has no branches.
// On llvmpipe an invocation ends silently after ~65535 loop trips; the launcher
// widens LANES, or refuses shapes that would pass it.

struct Params {
  n: u32, c: u32, h: u32, w: u32,           // input x dims
  o: u32, kh: u32, kw: u32, groups: u32,    // weight dims (Cg = c / groups)
  ho: u32, wo: u32, sh: u32, sw: u32,       // output dims, stride
  dh: u32, dw: u32, top: u32, left: u32,    // dilation, leading padding
  a_off: u32, b_off: u32, total: u32, pad0: u32,
  a_strides: vec4<i32>,
  b_strides: vec4<i32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<SA>;
@group(0) @binding(2) var<storage, read> b: array<SB>;
@group(0) @binding(3) var<storage, read_write> out: array<SO>;

override WG: u32 = 64;     // threads per workgroup, a power of two
override OB: u32 = 1;      // channels per thread (1 or 4): output (forward, backward_weight), input (backward_input)
override PB: u32 = 1;      // forward, backward_input: pixels per thread along a row (1, 2 or 4)
override LANES: u32 = 1;   // backward_weight: threads per weight element (a power of two <= WG)
override JB: u32 = 1;      // backward_weight: kernel columns per thread (1, or 3 with LANES == 1)
override ROUND_OUT: bool = false;  // out is f16: round each value first (WGSL leaves it to the implementation)

var<workgroup> partial: array<vec4<f32>, WG>;

fn stored(v: f32) -> SO {
  if (ROUND_OUT) {
    return SO(wg_round_f16(v));
  }
  return SO(v);
}

fn thread_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
  return (wid.x + wid.y * nwg.x) * WG + lid;
}

// First q in [0, count) with q * step + shift >= 0, and one past the last with q * step + shift < size.
fn first_inside(shift: i32, step: u32) -> u32 {
  return select(0u, (u32(-shift) + step - 1u) / step, shift < 0);
}

fn end_inside(shift: i32, step: u32, size: u32, count: u32) -> u32 {
  if (shift >= i32(size)) { return 0u; }
  return min(count, (u32(i32(size) - 1 - shift)) / step + 1u);
}

// OB channels' values as one vec4 (zeros past OB), and their store: whole-vector arithmetic,
// never a vector component picked by a loop counter, which SwiftShader runs through memory
// (the digits CNN's three conv passes took twice as long in Chromium so).
fn load_a4(at: i32, step: i32) -> vec4<f32> {
  if (OB == 4u) {
    return vec4<f32>(load_a(u32(at)), load_a(u32(at + step)), load_a(u32(at + 2 * step)), load_a(u32(at + 3 * step)));
  }
  return vec4<f32>(load_a(u32(at)), 0.0, 0.0, 0.0);
}

fn load_b4(at: i32, step: i32) -> vec4<f32> {
  if (OB == 4u) {
    return vec4<f32>(load_b(u32(at)), load_b(u32(at + step)), load_b(u32(at + 2 * step)), load_b(u32(at + 3 * step)));
  }
  return vec4<f32>(load_b(u32(at)), 0.0, 0.0, 0.0);
}

fn store4(first: u32, step: u32, v: vec4<f32>) {
  out[first] = stored(v.x);
  if (OB == 4u) {
    out[first + step] = stored(v.y);
    out[first + 2u * step] = stored(v.z);
    out[first + 3u * step] = stored(v.w);
  }
}

// A tap of pixel q of a thread's PB: whether it lands inside (q < PB, col inside [0, size)), and
// the element it reads, its row's first where it does not (the value is then replaced by 0).
fn tap_inside(q: u32, col: i32, size: u32) -> bool {
  return q < PB && col >= 0 && col < i32(size);
}

fn tap_at(row: i32, col: i32, step: i32, inside: bool) -> i32 {
  return row + select(0, col, inside) * step;
}

@compute @workgroup_size(WG)
fn conv2d_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
  // Thread e: PB pixels (n, oy, ox..ox+PB-1) of one output row for OB consecutive output channels
  // of one group (OB divides Og): each x value loaded feeds OB products, each w value PB.
  let e = thread_index(wid, nwg, lid);
  if (e >= p.total) { return; }
  let blocks = (p.wo + PB - 1u) / PB;
  let ox = (e % blocks) * PB;
  let oy = (e / blocks) % p.ho;
  let o = ((e / (blocks * p.ho)) % (p.o / OB)) * OB;
  let n = e / (blocks * p.ho * (p.o / OB));
  let cg = p.c / p.groups;
  let c0 = (o / (p.o / p.groups)) * cg;
  let sa = p.a_strides;
  let sb = p.b_strides;
  let y0 = i32(oy * p.sh) - i32(p.top);
  let x0 = i32(ox * p.sw) - i32(p.left);  // pixel q's window starts q * sw further right
  let sw = i32(p.sw);
  let a_n = i32(p.a_off) + i32(n) * sa.x + i32(c0) * sa.y;
  let b_o = i32(p.b_off) + i32(o) * sb.x;
  // Kernel columns inside the image for some pixel: from the last pixel's first to the first's end.
  let j_lo = first_inside(x0 + i32(PB - 1u) * sw, p.dw);
  let j_hi = end_inside(x0, p.dw, p.w, p.kw);
  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);
  for (var i = first_inside(y0, p.dh); i < end_inside(y0, p.dh, p.h, p.kh); i++) {
    let a_row = a_n + (y0 + i32(i * p.dh)) * sa.z;
    for (var j = j_lo; j < j_hi; j++) {
      let col = x0 + i32(j * p.dw);
      let in0 = tap_inside(0u, col, p.w);
      let in1 = tap_inside(1u, col + sw, p.w);
      let in2 = tap_inside(2u, col + 2 * sw, p.w);
      let in3 = tap_inside(3u, col + 3 * sw, p.w);
      var at0 = tap_at(a_row, col, sa.w, in0);
      var at1 = tap_at(a_row, col + sw, sa.w, in1);
      var at2 = tap_at(a_row, col + 2 * sw, sa.w, in2);
      var at3 = tap_at(a_row, col + 3 * sw, sa.w, in3);
      var b_at = b_o + i32(i) * sb.z + i32(j) * sb.w;
      for (var c = 0u; c < cg; c++) {
        let wk = load_b4(b_at, sb.x);
        acc0 += select(0.0, load_a(u32(at0)), in0) * wk;
        if (PB >= 2u) { acc1 += select(0.0, load_a(u32(at1)), in1) * wk; }
        if (PB == 4u) {
          acc2 += select(0.0, load_a(u32(at2)), in2) * wk;
          acc3 += select(0.0, load_a(u32(at3)), in3) * wk;
        }
        at0 += sa.y;
        at1 += sa.y;
        at2 += sa.y;
        at3 += sa.y;
        b_at += sb.y;
      }
    }
  }
  let plane = p.ho * p.wo;
  let first = (n * p.o + o) * plane + oy * p.wo + ox;
  store4(first, plane, acc0);
  if (PB >= 2u && ox + 1u < p.wo) { store4(first + 1u, plane, acc1); }
  if (PB == 4u && ox + 2u < p.wo) { store4(first + 2u, plane, acc2); }
  if (PB == 4u && ox + 3u < p.wo) { store4(first + 3u, plane, acc3); }
}

@compute @workgroup_size(WG)
fn conv2d_backward_input(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lid: u32) {
  // Thread e: PB pixels (n, h, v..v+PB-1) of one row of gx for OB consecutive input channels of
  // one group (OB divides Cg; PB > 1 only with column stride 1): each w value feeds PB pixels.
  let e = thread_index(wid, nwg, lid);
  if (e >= p.total) { return; }
  let blocks = (p.w + PB - 1u) / PB;
  let v = (e % blocks) * PB;
  let h = (e / blocks) % p.h;
  let ci = ((e / (blocks * p.h)) % (p.c / OB)) * OB;
  let n = e / (blocks * p.h * (p.c / OB));
  let cg = p.c / p.groups;
  let og = p.o / p.groups;
  let o0 = (ci / cg) * og;
  let sa = p.a_strides;
  let sb = p.b_strides;
  let a_n = i32(p.a_off) + i32(n) * sa.x + i32(o0) * sa.y;
  let b_c = i32(p.b_off) + i32(o0) * sb.x + i32(ci % cg) * sb.y;
  let ty0 = i32(h + p.top);
  let tx0 = i32(v + p.left);
  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);
  for (var i = 0u; i < p.kh; i++) {
    let ty = ty0 - i32(i * p.dh);
    if (ty < 0) { break; }  // only falls as i grows
    let oy = u32(ty) / p.sh;
    if (u32(ty) % p.sh != 0u || oy >= p.ho) { continue; }
    let a_row = a_n + i32(oy) * sa.z;
    for (var j = 0u; j < p.kw; j++) {
      let tx = tx0 - i32(j * p.dw);  // pixel q's is tx + q (PB > 1: stride 1)
      if (tx + i32(PB) - 1 < 0) { break; }
      let ox = u32(max(tx, 0)) / p.sw;
      let in0 = tx >= 0 && u32(tx) % p.sw == 0u && ox < p.wo;
      let in1 = tap_inside(1u, tx + 1, p.wo);
      let in2 = tap_inside(2u, tx + 2, p.wo);
      let in3 = tap_inside(3u, tx + 3, p.wo);
      if (!(in0 || in1 || in2 || in3)) { continue; }
      // a pixel whose tap lands outside g reads its row's first element and uses 0
      var at0 = tap_at(a_row, i32(ox), sa.w, in0);
      var at1 = tap_at(a_row, tx + 1, sa.w, in1);
      var at2 = tap_at(a_row, tx + 2, sa.w, in2);
      var at3 = tap_at(a_row, tx + 3, sa.w, in3);
      var b_at = b_c + i32(i) * sb.z + i32(j) * sb.w;
      for (var k = 0u; k < og; k++) {
        let wq = load_b4(b_at, sb.y);
        acc0 += select(0.0, load_a(u32(at0)), in0) * wq;
        if (PB >= 2u) { acc1 += select(0.0, load_a(u32(at1)), in1) * wq; }
        if (PB == 4u) {
          acc2 += select(0.0, load_a(u32(at2)), in2) * wq;
          acc3 += select(0.0, load_a(u32(at3)), in3) * wq;
        }
        at0 += sa.y;
        at1 += sa.y;
        at2 += sa.y;
        at3 += sa.y;
        b_at += sb.x;
      }
    }
  }
  let plane = p.h * p.w;
  let first = (n * p.c + ci) * plane + h * p.w + v;
  store4(first, plane, acc0);
  if (PB >= 2u && v + 1u < p.w) { store4(first + 1u, plane, acc1); }
  if (PB == 4u && v + 2u < p.w) { store4(first + 2u, plane, acc2); }
  if (PB == 4u && v + 3u < p.w) { store4(first + 3u, plane, acc3); }
}

@compute @workgroup_size(WG)
fn conv2d_backward_weight(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) lid: u32) {
  // A team of LANES threads per JB weight elements (c, i, j..j+JB-1) of OB consecutive output
  // channels (OB divides Og, JB divides kw): each x value loaded feeds OB products, each g value
  // JB. Lane l sums the images l, l + LANES, ...
  let team = lid / LANES;
  let lane = lid % LANES;
  let e = (wid.x + wid.y * nwg.x) * (WG / LANES) + team;
  let valid = e < p.total;
  let cg = p.c / p.groups;
  let kwb = p.kw / JB;  // blocks of kernel columns
  let per_o = cg * p.kh * kwb;
  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);  // JB == 3: the next two kernel columns
  var acc2 = vec4<f32>(0.0);
  if (valid) {
    let j = (e % kwb) * JB;
    let i = (e / kwb) % p.kh;
    let cl = (e / (kwb * p.kh)) % cg;
    let o = (e / per_o) * OB;
    let ci = (o / (p.o / p.groups)) * cg + cl;
    let sa = p.a_strides;
    let sb = p.b_strides;
    let dy = i32(i * p.dh) - i32(p.top);
    let dx = i32(j * p.dw) - i32(p.left);  // the first column's; column j + q adds q * dw
    let y_lo = first_inside(dy, p.sh);
    let y_hi = end_inside(dy, p.sh, p.h, p.ho);
    // output columns whose tap lands inside the image for some of the JB kernel columns
    let x_lo = first_inside(dx + i32((JB - 1u) * p.dw), p.sw);
    let x_hi = end_inside(dx, p.sw, p.w, p.wo);
    for (var n = lane; n < p.n; n += LANES) {
      let a_n = i32(p.a_off) + i32(n) * sa.x + i32(o) * sa.y;
      let b_n = i32(p.b_off) + i32(n) * sb.x + i32(ci) * sb.y;
      for (var oy = y_lo; oy < y_hi; oy++) {
        var a_at = a_n + i32(oy) * sa.z + i32(x_lo) * sa.w;
        let b_row = b_n + (i32(oy * p.sh) + dy) * sb.z;
        for (var ox = x_lo; ox < x_hi; ox++) {
          let gv = load_a4(a_at, sa.y);
          let x0 = i32(ox * p.sw) + dx;  // column of the image under kernel column j
          if (JB == 3u) {
            // a tap outside the image reads its row's first element and uses 0
            let x1 = x0 + i32(p.dw);
            let x2 = x1 + i32(p.dw);
            let in0 = x0 >= 0 && x0 < i32(p.w);
            let in1 = x1 >= 0 && x1 < i32(p.w);
            let in2 = x2 >= 0 && x2 < i32(p.w);
            acc0 += gv * select(0.0, load_b(u32(b_row + select(0, x0, in0) * sb.w)), in0);
            acc1 += gv * select(0.0, load_b(u32(b_row + select(0, x1, in1) * sb.w)), in1);
            acc2 += gv * select(0.0, load_b(u32(b_row + select(0, x2, in2) * sb.w)), in2);
          } else {
            acc0 += gv * load_b(u32(b_row + x0 * sb.w));
          }
          a_at += sa.w;
        }
      }
    }
  }
  if (LANES > 1u) {  // an override constant: uniform, so the barriers are legal (JB is 1 then)
    partial[lid] = acc0;
    workgroupBarrier();
    for (var half = LANES / 2u; half > 0u; half /= 2u) {
      if (lane < half) { partial[lid] += partial[lid + half]; }
      workgroupBarrier();
    }
    acc0 = partial[lid];
  }
  if (valid && lane == 0u) {
    let per_o_elements = cg * p.kh * p.kw;
    let first = (e / per_o) * OB * per_o_elements + (e % per_o) * JB;
    store4(first, per_o_elements, acc0);
    if (JB == 3u) {
      store4(first + 1u, per_o_elements, acc1);
      store4(first + 2u, per_o_elements, acc2);
    }
  }
}
