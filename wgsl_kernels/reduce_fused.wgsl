// reduce_fused.wgsl: the one-element inputs of a fused reduction (graph.passes.reduce),
// prepended to reduce.wgsl with its hooks prologue(v) and epilogue(v), which run the
// reduction's chains (backend/webgpu/source.splice) and read input k as s<k>_value().
// A template filled by backend/webgpu/source.fill: the lines naming input k repeat for
// each; its element type is the alias S<k>, its offset Params.ext[k].

@group(0) @binding(${binding}) var<storage, read> s${k}: array<S${k}>;
fn s${k}_value() -> S${k} { return s${k}[p.ext[${k}]]; }
