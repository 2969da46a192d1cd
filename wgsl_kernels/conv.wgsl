// conv.wgsl: 2-D convolution (cross-correlation) forward and both backward passes,
// each one implicit-GEMM dispatch: no im2col buffer, the window is indexed in place.
//
// Maths. x (N, C, H, W), w (O, Cg, kh, kw) with Cg = C / groups, Og = O / groups,
// out (N, O, Ho, Wo); padding (top, left) of zeros (bottom/right only set Ho, Wo):
//   out[n,o,y,x]  = sum_{c<Cg,i,j} x[n, G*Cg + c, y*sh + i*dh - top, x*sw + j*dw - left] * w[o,c,i,j]
// with G = o / Og and out-of-range x reading 0. The backward passes, for g = d loss / d out:
//   gx[n,C',h,v]  = sum_{o in group of C', i, j} g[n, o, (h + top - i*dh) / sh, (v + left - j*dw) / sw] * w[o, C' % Cg, i, j]
//                   over the (i, j) whose divisions are exact and land inside (Ho, Wo);
//   gw[o,c,i,j]   = sum_{n,y,x} g[n,o,y,x] * x[n, G*Cg + c, y*sh + i*dh - top, x*sw + j*dw - left].
//
// Bindings: 0 Params, 1 a (read), 2 b (read), 3 out (read_write, contiguous):
//   conv2d_forward          a = x, b = w, out (N, O, Ho, Wo)
//   conv2d_backward_input   a = g, b = w, out (N, C, H, W)
//   conv2d_backward_weight  a = g, b = x, out (O, Cg, kh, kw)
// a and b are strided 4-D views: element (i0..i3) at off + sum ik * strides[k].
//
// Grid. forward / backward_input: one thread per output element, e = (wid.x + wid.y *
// nwg.x) * WG + lid.x (the grid is folded into y past the per-dimension limit); each
// thread runs the whole reduction (Cg*kh*kw or Og*kh*kw terms). backward_weight: one
// workgroup per weight element (the reduction N*Ho*Wo is long and the weight small);
// its WG lanes take t = lid, lid + WG, ... and add their partial sums in a tree.
// On llvmpipe an invocation ends silently after ~65535 loop trips; the launcher
// refuses shapes that would exceed that.

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
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

override WG: u32 = 64;  // a power of two (the weight pass reduces in a tree)

var<workgroup> partial: array<f32, WG>;

fn at_a(i0: u32, i1: u32, i2: i32, i3: i32) -> f32 {
  let s = p.a_strides;
  return a[u32(i32(p.a_off) + i32(i0) * s.x + i32(i1) * s.y + i2 * s.z + i3 * s.w)];
}

fn at_b(i0: u32, i1: u32, i2: i32, i3: i32) -> f32 {
  let s = p.b_strides;
  return b[u32(i32(p.b_off) + i32(i0) * s.x + i32(i1) * s.y + i2 * s.z + i3 * s.w)];
}

fn thread_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
  return (wid.x + wid.y * nwg.x) * WG + lid;
}

@compute @workgroup_size(WG)
fn conv2d_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
  let e = thread_index(wid, nwg, lid);
  if (e >= p.total) { return; }
  let ox = e % p.wo;
  let oy = (e / p.wo) % p.ho;
  let o = (e / (p.wo * p.ho)) % p.o;
  let n = e / (p.wo * p.ho * p.o);
  let cg = p.c / p.groups;
  let c0 = (o / (p.o / p.groups)) * cg;
  let y0 = i32(oy * p.sh) - i32(p.top);
  let x0 = i32(ox * p.sw) - i32(p.left);
  var acc = 0.0;
  for (var c = 0u; c < cg; c++) {
    for (var i = 0u; i < p.kh; i++) {
      let iy = y0 + i32(i * p.dh);
      if (iy < 0 || iy >= i32(p.h)) { continue; }
      for (var j = 0u; j < p.kw; j++) {
        let ix = x0 + i32(j * p.dw);
        if (ix >= 0 && ix < i32(p.w)) {
          acc += at_a(n, c0 + c, iy, ix) * at_b(o, c, i32(i), i32(j));
        }
      }
    }
  }
  out[e] = acc;
}

@compute @workgroup_size(WG)
fn conv2d_backward_input(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lid: u32) {
  let e = thread_index(wid, nwg, lid);
  if (e >= p.total) { return; }
  let v = e % p.w;
  let h = (e / p.w) % p.h;
  let ci = (e / (p.w * p.h)) % p.c;
  let n = e / (p.w * p.h * p.c);
  let cg = p.c / p.groups;
  let og = p.o / p.groups;
  let o0 = (ci / cg) * og;
  let cl = ci % cg;
  let ty0 = i32(h + p.top);
  let tx0 = i32(v + p.left);
  var acc = 0.0;
  for (var k = 0u; k < og; k++) {
    for (var i = 0u; i < p.kh; i++) {
      let ty = ty0 - i32(i * p.dh);
      if (ty < 0) { break; }  // only falls as i grows
      let oy = u32(ty) / p.sh;
      if (u32(ty) % p.sh != 0u || oy >= p.ho) { continue; }
      for (var j = 0u; j < p.kw; j++) {
        let tx = tx0 - i32(j * p.dw);
        if (tx < 0) { break; }
        let ox = u32(tx) / p.sw;
        if (u32(tx) % p.sw == 0u && ox < p.wo) {
          acc += at_a(n, o0 + k, i32(oy), i32(ox)) * at_b(o0 + k, cl, i32(i), i32(j));
        }
      }
    }
  }
  out[e] = acc;
}

@compute @workgroup_size(WG)
fn conv2d_backward_weight(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) lid: u32) {
  let e = wid.x + wid.y * nwg.x;  // one weight element per workgroup (uniform: safe around barriers)
  if (e >= p.total) { return; }
  let j = e % p.kw;
  let i = (e / p.kw) % p.kh;
  let cg = p.c / p.groups;
  let cl = (e / (p.kw * p.kh)) % cg;
  let o = e / (p.kw * p.kh * cg);
  let ci = (o / (p.o / p.groups)) * cg + cl;
  let dy = i32(i * p.dh) - i32(p.top);
  let dx = i32(j * p.dw) - i32(p.left);
  let plane = p.ho * p.wo;
  var acc = 0.0;
  for (var t = lid; t < p.n * plane; t += WG) {
    let ox = t % p.wo;
    let oy = (t / p.wo) % p.ho;
    let n = t / plane;
    let iy = i32(oy * p.sh) + dy;
    let ix = i32(ox * p.sw) + dx;
    if (iy >= 0 && iy < i32(p.h) && ix >= 0 && ix < i32(p.w)) {
      acc += at_a(n, o, i32(oy), i32(ox)) * at_b(n, ci, iy, ix);
    }
  }
  partial[lid] = acc;
  workgroupBarrier();
  for (var half = WG / 2u; half > 0u; half /= 2u) {
    if (lid < half) { partial[lid] += partial[lid + half]; }
    workgroupBarrier();
  }
  if (lid == 0u) { out[e] = partial[0]; }
}
