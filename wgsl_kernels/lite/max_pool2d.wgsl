// webgrad.export max_pool2d: out (N*C, Ho, Wo) = each window's maximum of x (N*C, H, W), as
// max_pool2d_select(x, x): positions outside x are skipped, a NaN wins. One thread per output.
// P: total, N*C, H, W, Ho, Wo, kh, kw, sh, sw, top, left, dh, dw, x offset.
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= P[0]) { return; }
  let H = P[2]; let W = P[3]; let Ho = P[4]; let Wo = P[5];
  let ox = i % Wo;
  let oy = (i / Wo) % Ho;
  let plane = P[14] + (i / (Wo * Ho)) * H * W;
  var best = 0.0;
  var found = false;
  for (var ky = 0u; ky < P[6]; ky++) {
    let iy = i32(oy * P[8] + ky * P[12]) - i32(P[10]);
    if (iy < 0 || iy >= i32(H)) { continue; }
    for (var kx = 0u; kx < P[7]; kx++) {
      let ix = i32(ox * P[9] + kx * P[13]) - i32(P[11]);
      if (ix < 0 || ix >= i32(W)) { continue; }
      let v = x[plane + u32(iy) * W + u32(ix)];
      if (!found || (!wg_isnan(best) && (wg_isnan(v) || v > best))) {
        best = v;
        found = true;
      }
    }
  }
  out[i] = best;
}
