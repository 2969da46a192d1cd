// matmul_epilogue.wgsl: the epilogue of a matmul with a fused elementwise chain
// (webgrad.graph's epilogue pass), prepended to matmul.wgsl by the loader.
// Each stored lane runs ``chain(v, batch, row, col)``, spliced in after this file
// (backend/webgpu/source.py, splice): chain input 0 is the product, inputs 1 and 2
// are float32 buffers bound at 4 and 5, read through ``ext0_at``/``ext1_at`` at the
// strides in Params.ext0/ext1 and the offsets in Params.offsets.zw. A binding only
// counts where the chain reads it, so a chain with one extra input binds only 4.

@group(0) @binding(4) var<storage, read> ext0: array<f32>;
@group(0) @binding(5) var<storage, read> ext1: array<f32>;

fn ext0_at(batch: u32, row: u32, col: u32) -> f32 {
  return ext0[u32(i32(p.offsets.z) + i32(batch) * p.ext0.x + i32(row) * p.ext0.y + i32(col) * p.ext0.z)];
}

fn ext1_at(batch: u32, row: u32, col: u32) -> f32 {
  return ext1[u32(i32(p.offsets.w) + i32(batch) * p.ext1.x + i32(row) * p.ext1.y + i32(col) * p.ext1.z)];
}

fn epilogue(v: vec4<T>, batch: u32, row: u32, col: u32) -> vec4<T> {
  var r = v;
  for (var c = 0u; c < 4u; c = c + 1u) {
    let cc = min(col + c, p.dims.y - 1u);  // lanes past N are never stored
    r[c] = chain(r[c], batch, row, cc);
  }
  return r;
}
