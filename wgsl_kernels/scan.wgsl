// scan.wgsl: inclusive prefix sums and products along the last dim of a
// contiguous array of `rows` rows of `n` elements (the launcher moves the scanned
// dim last and makes the input contiguous; T is f32 or i32).
//
//   cumsum   out[r, j] = x[r, 0] + x[r, 1] + ... + x[r, j]
//   cumprod  out[r, j] = x[r, 0] * x[r, 1] * ... * x[r, j]
//   (PROD selects the product; the combine is `combine` below, identity T(0) or T(1).)
//
// Every row is cut into `chunks` pieces of `chunk` elements so that no thread walks
// more than `chunk` elements (llvmpipe silently ends an invocation after ~65535
// loop trips; on a GPU the pieces also give more threads work). Three entry points:
//   scan_chunks   one thread per (row, piece): scan the piece alone into out.
//   scan_carries  one thread per row: carries[r, c] = combine of the totals of
//                 pieces 0 .. c-1 (the exclusive scan of the pieces' last elements).
//   scan_apply    one thread per (row, piece c): out[r, j] = combine(carries[r, c], out[r, j])
//                 for the elements j of piece c.
// With one piece per row only scan_chunks runs. Each thread walks its elements in
// order, so results are the same on every run.
//
// Bindings: 0 Params, 1 x (read, array<T>), 2 carries (read_write, array<T>),
// 3 out (read_write, array<T>). Every entry point names all three (arrayLength
// below) so that they share one binding layout.
// Grid: ceil(threads / WG) workgroups, folded into (x, y) past the per-dimension limit
// and capped at limit x limit; each thread then walks its share (t += grid size).

struct Params {
  rows: u32,     // number of rows
  n: u32,        // elements per row
  offset: u32,   // x's offset in elements
  chunk: u32,    // elements per piece
  chunks: u32,   // pieces per row
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> carries: array<T>;
@group(0) @binding(3) var<storage, read_write> out: array<T>;
override WG: u32 = 256;
override PROD: bool = false;

fn combine(a: T, b: T) -> T {
  if (PROD) { return a * b; }
  return a + b;
}

fn identity() -> T {
  return select(T(0), T(1), PROD);
}

fn thread_id(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * WG;
}

fn grid_size(nwg: vec3<u32>) -> u32 {
  return nwg.x * nwg.y * WG;
}

fn bind_all() {
  _ = arrayLength(&x);
  _ = arrayLength(&carries);
  _ = arrayLength(&out);
}

fn scan_chunks_one(t: u32) {
  let row = t / p.chunks;
  let start = (t % p.chunks) * p.chunk;
  let stop = min(start + p.chunk, p.n);
  var acc = identity();
  for (var j = start; j < stop; j++) {
    acc = combine(acc, x[p.offset + row * p.n + j]);
    out[row * p.n + j] = acc;
  }
}

@compute @workgroup_size(WG)
fn scan_chunks(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  bind_all();
  for (var t = thread_id(gid, nwg); t < p.rows * p.chunks; t += grid_size(nwg)) {
    scan_chunks_one(t);
  }
}

fn scan_carries_one(row: u32) {
  var acc = identity();
  for (var c = 0u; c < p.chunks; c++) {
    carries[row * p.chunks + c] = acc;
    let last = min((c + 1u) * p.chunk, p.n) - 1u;
    acc = combine(acc, out[row * p.n + last]);
  }
}

@compute @workgroup_size(WG)
fn scan_carries(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  bind_all();
  for (var row = thread_id(gid, nwg); row < p.rows; row += grid_size(nwg)) {
    scan_carries_one(row);
  }
}

fn scan_apply_one(t: u32) {
  let row = t / p.chunks;
  let start = (t % p.chunks) * p.chunk;
  let stop = min(start + p.chunk, p.n);
  let carry = carries[t];
  for (var j = start; j < stop; j++) {
    out[row * p.n + j] = combine(carry, out[row * p.n + j]);
  }
}

@compute @workgroup_size(WG)
fn scan_apply(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  bind_all();
  for (var t = thread_id(gid, nwg); t < p.rows * p.chunks; t += grid_size(nwg)) {
    scan_apply_one(t);
  }
}
