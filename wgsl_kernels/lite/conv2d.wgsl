// webgrad.export conv2d: out (N, O, Ho, Wo) from x (N, C, H, W) and w (O, C / groups, kh, kw), both
// contiguous from their offsets; positions outside x read zero. One thread per output element.
// P: total, N, C, H, W, O, Ho, Wo, kh, kw, sh, sw, top, left, dh, dw, groups, x offset, w offset
// [, w's elements per row (int8 scales)].
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<${b_type}>;
${scale_binding}
@group(0) @binding(${out_binding}) var<storage, read_write> out: array<f32>;

${load_b}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= P[0]) { return; }
  let C = P[2]; let H = P[3]; let W = P[4]; let O = P[5]; let Ho = P[6]; let Wo = P[7];
  let kh = P[8]; let kw = P[9]; let sh = P[10]; let sw = P[11]; let top = P[12]; let left = P[13];
  let dh = P[14]; let dw = P[15]; let per_group_in = C / P[16]; let per_group_out = O / P[16];
  let ox = i % Wo;
  let oy = (i / Wo) % Ho;
  let oc = (i / (Wo * Ho)) % O;
  let nb = i / (Wo * Ho * O);
  let first = (oc / per_group_out) * per_group_in;
  var acc = 0.0;
  for (var ci = 0u; ci < per_group_in; ci++) {
    let plane = P[17] + ((nb * C + first + ci) * H) * W;
    let taps = P[18] + (oc * per_group_in + ci) * kh * kw;
    for (var ky = 0u; ky < kh; ky++) {
      let iy = i32(oy * sh + ky * dh) - i32(top);
      if (iy < 0 || iy >= i32(H)) { continue; }
      for (var kx = 0u; kx < kw; kx++) {
        let ix = i32(ox * sw + kx * dw) - i32(left);
        if (ix < 0 || ix >= i32(W)) { continue; }
        acc += x[plane + u32(iy) * W + u32(ix)] * load_b(taps + ky * kw + kx);
      }
    }
  }
  out[i] = acc;
}
