// matmul.wgsl: batched, broadcasting matrix product  C[b] = A[b] @ B[b],
//   C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]     (k = 0 .. K-1; K = 0 gives zeros)
// A and B are strided views read in place: a transposed operand (x.mT), a
// slice or an expanded batch dim (stride 0) costs no copy. C is contiguous.
//
// Epilogue: every value is stored through ``epilogue(v, batch, row, col)``, spliced
// in by the loader: ``return v;`` for a plain product, or a fused elementwise chain
// applied to C (bias add, activation, a mask: webgrad.graph's epilogue pass) that
// reads up to two extra inputs bound at 4 and 5, addressed through ext0/ext1.
//
// Bindings: 0 Params, 1 a, 2 b, 3 out. Every buffer is bound as array<vec4<S..>>
// (pooled buffers are multiples of 256 bytes), so one binding serves both
// element reads and vec4 reads where the strides allow them.
// T is f32 or i32 (an alias line prepended by the loader), the type the kernel computes in;
// SA, SB, SO the ones the buffers hold: T, f16 for float16 (loaded as f32, summed in f32, stored
// as f16), or u32 words of two packed 16-bit floats (bfloat16, float16 without 'shader-f16'; read
// only: such a product is stored as f32 and rounded by the launcher). The loader generates
// a_at(e) / b_at(e) (element e as T) and a_vec(e) / b_vec(e) (elements e .. e + 3, e a multiple
// of 4, as vec4<T>) for the operands' kinds (source.matmul_readers).
//
// Element addresses (in elements; strides may be 0 or negative):
//   A[b, i, k] = a_offset + batch_a(b) + i * stride_am + k * stride_ak
//   B[b, k, j] = b_offset + batch_b(b) + k * stride_bk + j * stride_bn
//   batch_x(b) = sum_d coord_d(b) * batch_stride_x[d]   over up to 4 batch dims
//
// Blocking: each thread computes a TM x TN block of C (TN = 4 * TN4 columns,
// kept as TN4 vec4s); a workgroup of WG_X x WG_Y threads covers a
// (WG_Y * TM) x (WG_X * TN) tile of C.
// Grid: the tiles of all batches form one line; workgroup w computes tile
// (w % tiles_n, (w / tiles_n) % tiles_m) of batch w / (tiles_n * tiles_m).
// The launcher folds the line into (x, y, z) so that no dimension exceeds the
// device limit: w = x + nwg.x * (y + nwg.y * z), and w >= total returns at once.
//
// Three entry points share this layout:
// - matmul: register blocking without workgroup memory, for CPU adapters such
//   as llvmpipe, where barriers are very slow and every buffer load costs a
//   loop over the SIMD lanes, so the kernel makes few, wide loads: it walks K
//   four at a time and reads a TM x 4 block of A and a 4 x TN block of B as
//   vec4s along whichever axis of each operand has unit stride (A_VEC, B_VEC),
//   element by element otherwise.
// - matmul_tiled: the classic shared-memory tiling for GPUs. The workgroup
//   stages TILE_K columns of its rows of A and TILE_K rows of its columns of B
//   in workgroup memory (zero-filled past the edges), then every thread
//   accumulates its block from there.
// - matmul_4x4: one or two 4 x 4 blocks a thread, no private arrays, for SwiftShader (below).
// Edge tiles: the register kernel clamps rows and columns into range for its
// loads (the extra results are never stored); stores skip elements outside C.

struct Params {
  dims: vec4<u32>,           // M, N, K, batch count
  grid: vec4<u32>,           // tiles along N, tiles along M, total workgroups, 1 if N % 4 == 0
  offsets: vec4<u32>,        // a, b, epilogue inputs 0 and 1 (elements)
  strides: vec4<i32>,        // stride_am, stride_ak, stride_bk, stride_bn
  batch_shape: vec4<u32>,    // batch dims, innermost last, padded with 1 at the front
  batch_a: vec4<i32>,        // A's stride per batch dim (0 where broadcast)
  batch_b: vec4<i32>,        // B's stride per batch dim
  ext0: vec4<i32>,           // epilogue input 0's strides per (batch index, row, column), unused
  ext1: vec4<i32>,           // epilogue input 1's
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4<SA>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<SB>>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<SO>>;

override WG_X: u32 = 8u;         // threads along N
override WG_Y: u32 = 8u;         // threads along M
override TM: u32 = 4u;           // rows of C per thread (matmul: 1 .. MAX_TM, matmul_tiled: 1 .. TILED_MAX_TM,
                                 // matmul_4x4: 4 or 8)
override TN4: u32 = 1u;          // vec4s of columns of C per thread (1 .. MAX_TN4, matmul_tiled: 1 .. TILED_MAX_TN4,
                                 // matmul_4x4: 1 or 2)
override TILE_K: u32 = 16u;      // matmul_tiled: depth of the staged tiles
override A_VEC: u32 = 0u;        // 0 element reads, 1 vec4 along k (stride_ak = 1), 2 vec4 along m (stride_am = 1)
override B_VEC: u32 = 0u;        // 0 element reads, 1 vec4 along n (stride_bn = 1), 2 vec4 along k (stride_bk = 1)
// Private arrays need constant sizes. Keep these equal to the largest blocking
// in use: on llvmpipe every unused slot still costs compile time.
const MAX_TM: u32 = 16u;
const MAX_TN4: u32 = 4u;
const MAX_TN: u32 = 16u;         // 4 * MAX_TN4
const TILED_MAX_TM: u32 = 8u;
const TILED_MAX_TN4: u32 = 2u;

// Which tile of which batch a workgroup computes, and where that batch's A and B start.
struct Place {
  tile_n: u32,
  tile_m: u32,
  batch: u32,
  a_base: i32,
  b_base: i32,
}

fn place(w: u32) -> Place {
  var at: Place;
  at.tile_n = w % p.grid.x;
  at.tile_m = (w / p.grid.x) % p.grid.y;
  at.batch = w / (p.grid.x * p.grid.y);
  at.a_base = i32(p.offsets.x);
  at.b_base = i32(p.offsets.y);
  var rem = at.batch;
  for (var d = 3; d >= 0; d = d - 1) {
    let n = p.batch_shape[d];
    let c = i32(rem % n);
    rem = rem / n;
    at.a_base = at.a_base + c * p.batch_a[d];
    at.b_base = at.b_base + c * p.batch_b[d];
  }
  return at;
}

fn workgroup_line(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return wid.x + nwg.x * (wid.y + nwg.y * wid.z);
}

// Write C[row, col .. col + 3] of the given batch, skipping what lies outside C.
fn store4(v: vec4<T>, batch: u32, row: u32, col: u32) {
  let m = p.dims.x;
  let n = p.dims.y;
  if (row >= m || col >= n) { return; }
  let w = epilogue(v, batch, row, col);
  let e = (batch * m + row) * n + col;
  if (p.grid.w == 1u) {  // N % 4 == 0: rows of C start at multiples of 4, write whole vec4s
    out[e >> 2u] = vec4<SO>(w);
  } else {
    for (var c = 0u; c < min(4u, n - col); c = c + 1u) {
      out[(e + c) >> 2u][(e + c) & 3u] = SO(w[c]);
    }
  }
}

// Row i of the accumulators += row (A[row0 + i, k .. k + 3]) times the B block.
fn accumulate(acc: ptr<function, array<vec4<T>, MAX_TM * MAX_TN4>>, i: u32, row: vec4<T>,
              br: ptr<function, array<vec4<T>, 4u * MAX_TN4>>) {
  for (var q = 0u; q < TN4; q = q + 1u) {
    (*acc)[i * TN4 + q] = (*acc)[i * TN4 + q] + row.x * (*br)[q] + row.y * (*br)[TN4 + q]
                          + row.z * (*br)[2u * TN4 + q] + row.w * (*br)[3u * TN4 + q];
  }
}

@compute @workgroup_size(WG_X, WG_Y)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_id) lid: vec3<u32>) {
  let w = workgroup_line(wid, nwg);
  if (w >= p.grid.z) { return; }
  let at = place(w);
  let m = p.dims.x;
  let n = p.dims.y;
  let k_total = p.dims.z;
  let sam = p.strides.x;
  let sak = p.strides.y;
  let sbk = p.strides.z;
  let sbn = p.strides.w;
  let row0 = (at.tile_m * WG_Y + lid.y) * TM;
  let col0 = (at.tile_n * WG_X + lid.x) * 4u * TN4;

  // Where each row of A and each column of B starts, clamped into the matrix:
  // threads past the edge read valid (unused) data instead of branching in
  // the inner loop. vec4 reads start at a multiple of 4 that stays inside too.
  var a_row: array<i32, MAX_TM>;
  for (var i = 0u; i < TM; i = i + 1u) {
    a_row[i] = at.a_base + i32(min(row0 + i, m - 1u)) * sam;
  }
  var b_col: array<i32, MAX_TN>;
  for (var c = 0u; c < 4u * TN4; c = c + 1u) {
    b_col[c] = at.b_base + i32(min(col0 + c, n - 1u)) * sbn;
  }
  var b_quad: array<i32, MAX_TN4>;  // B_VEC == 1: element (0, col) of each vec4 of columns
  for (var q = 0u; q < TN4; q = q + 1u) {
    b_quad[q] = at.b_base + i32(min(col0 + 4u * q, (n - 1u) & ~3u));
  }

  var acc: array<vec4<T>, MAX_TM * MAX_TN4>;  // acc[i * TN4 + q] = C[row0 + i, col0 + 4q .. col0 + 4q + 3]
  let k4 = k_total & ~3u;
  for (var k = 0u; k < k4; k = k + 4u) {
    let ki = i32(k);
    // B block: br[j * TN4 + q] = B[k + j, col0 + 4q .. col0 + 4q + 3]
    var br: array<vec4<T>, 4u * MAX_TN4>;
    if (B_VEC == 1u) {
      for (var j = 0u; j < 4u; j = j + 1u) {
        for (var q = 0u; q < TN4; q = q + 1u) {
          br[j * TN4 + q] = b_vec(b_quad[q] + (ki + i32(j)) * sbk);
        }
      }
    } else if (B_VEC == 2u) {
      for (var q = 0u; q < TN4; q = q + 1u) {
        let c0 = b_vec(b_col[4u * q] + ki);
        let c1 = b_vec(b_col[4u * q + 1u] + ki);
        let c2 = b_vec(b_col[4u * q + 2u] + ki);
        let c3 = b_vec(b_col[4u * q + 3u] + ki);
        br[q] = vec4<T>(c0.x, c1.x, c2.x, c3.x);
        br[TN4 + q] = vec4<T>(c0.y, c1.y, c2.y, c3.y);
        br[2u * TN4 + q] = vec4<T>(c0.z, c1.z, c2.z, c3.z);
        br[3u * TN4 + q] = vec4<T>(c0.w, c1.w, c2.w, c3.w);
      }
    } else {
      for (var j = 0u; j < 4u; j = j + 1u) {
        let kb = (ki + i32(j)) * sbk;
        for (var q = 0u; q < TN4; q = q + 1u) {
          br[j * TN4 + q] = vec4<T>(b_at(b_col[4u * q] + kb), b_at(b_col[4u * q + 1u] + kb),
                                    b_at(b_col[4u * q + 2u] + kb), b_at(b_col[4u * q + 3u] + kb));
        }
      }
    }
    // A block, row by row: A[row0 + i, k .. k + 3], each row used as soon as it
    // is read (reading all rows first keeps more values alive and is slower).
    var cols: array<vec4<T>, 4>;  // A_VEC == 2: A[g .. g + 3, k + j] for the current group of 4 rows
    for (var i = 0u; i < TM; i = i + 1u) {
      var row: vec4<T>;
      if (A_VEC == 1u) {
        row = a_vec(a_row[i] + ki);
      } else if (A_VEC == 2u) {
        // Rows come four at a time from columns k .. k + 3 (TM is a multiple of 4);
        // a group of rows past the last one reads the last aligned group instead.
        if (i % 4u == 0u) {
          let g = at.a_base + i32(min(row0 + i, (m - 1u) & ~3u)) + ki * sak;
          for (var j = 0; j < 4; j = j + 1) {
            cols[j] = a_vec(g + j * sak);
          }
        }
        row = vec4<T>(cols[0][i % 4u], cols[1][i % 4u], cols[2][i % 4u], cols[3][i % 4u]);
      } else {
        row = vec4<T>(a_at(a_row[i] + ki * sak), a_at(a_row[i] + (ki + 1) * sak),
                      a_at(a_row[i] + (ki + 2) * sak), a_at(a_row[i] + (ki + 3) * sak));
      }
      accumulate(&acc, i, row, &br);
    }
  }
  // The last K % 4 steps, element by element.
  for (var k = k4; k < k_total; k = k + 1u) {
    let ki = i32(k);
    var bv: array<vec4<T>, MAX_TN4>;
    for (var q = 0u; q < TN4; q = q + 1u) {
      bv[q] = vec4<T>(b_at(b_col[4u * q] + ki * sbk), b_at(b_col[4u * q + 1u] + ki * sbk),
                      b_at(b_col[4u * q + 2u] + ki * sbk), b_at(b_col[4u * q + 3u] + ki * sbk));
    }
    for (var i = 0u; i < TM; i = i + 1u) {
      let av = a_at(a_row[i] + ki * sak);
      for (var q = 0u; q < TN4; q = q + 1u) {
        acc[i * TN4 + q] = acc[i * TN4 + q] + av * bv[q];
      }
    }
  }
  for (var i = 0u; i < TM; i = i + 1u) {
    for (var q = 0u; q < TN4; q = q + 1u) {
      store4(acc[i * TN4 + q], at.batch, row0 + i, col0 + 4u * q);
    }
  }
}

// matmul_4x4: for SwiftShader (Chromium's CPU adapter) and llvmpipe's smaller products. Each
// thread computes TM = 4 or 8 rows by 4 * TN4 = 4 or 8 columns of C: up to four 4 x 4 blocks, in
// vec4 accumulators and no private arrays (SwiftShader keeps those in memory). Where A's rows are
// contiguous along K (A_VEC == 1) and B's along N (B_VEC == 1) it walks K four steps at a time,
// a vec4 of each operand per row and column quad: 8 reads for 64 multiply-adds with one block,
// 16 for 256 with four. In Chromium 1024 x 1024 took 1407 ms one step at a time, 757-769 four at
// a time with one block, 637-644 with two (8 x 4), 504-531 with four (8 x 8). The rest goes one
// step at a time: element reads of A, a vec4 of B where B_VEC == 1, else four elements. Rows and
// columns past the edge are clamped for loads, as in matmul.
fn rank4(c: vec4<T>, r: vec4<T>, q0: vec4<T>, q1: vec4<T>, q2: vec4<T>, q3: vec4<T>) -> vec4<T> {
  return c + r.x * q0 + r.y * q1 + r.z * q2 + r.w * q3;  // c + the row r of A times four rows of B
}

fn b_quad_at(b0: i32, b1: i32, b2: i32, b3: i32, quad: i32, kb: i32) -> vec4<T> {
  if (B_VEC == 1u) {
    return b_vec(quad + kb);
  }
  return vec4<T>(b_at(b0 + kb), b_at(b1 + kb), b_at(b2 + kb), b_at(b3 + kb));
}

@compute @workgroup_size(WG_X, WG_Y)
fn matmul_4x4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_id) lid: vec3<u32>) {
  let w = workgroup_line(wid, nwg);
  if (w >= p.grid.z) { return; }
  let at = place(w);
  let m = p.dims.x;
  let n = p.dims.y;
  let sam = p.strides.x;
  let sbn = p.strides.w;
  let row0 = (at.tile_m * WG_Y + lid.y) * TM;
  let col0 = (at.tile_n * WG_X + lid.x) * 4u * TN4;
  // rows 4..7 (TM == 8) and columns 4..7 (TN4 == 2) are the second block each way
  let a0 = at.a_base + i32(min(row0, m - 1u)) * sam;
  let a1 = at.a_base + i32(min(row0 + 1u, m - 1u)) * sam;
  let a2 = at.a_base + i32(min(row0 + 2u, m - 1u)) * sam;
  let a3 = at.a_base + i32(min(row0 + 3u, m - 1u)) * sam;
  let a4 = at.a_base + i32(min(row0 + 4u, m - 1u)) * sam;
  let a5 = at.a_base + i32(min(row0 + 5u, m - 1u)) * sam;
  let a6 = at.a_base + i32(min(row0 + 6u, m - 1u)) * sam;
  let a7 = at.a_base + i32(min(row0 + 7u, m - 1u)) * sam;
  let b0 = at.b_base + i32(min(col0, n - 1u)) * sbn;
  let b1 = at.b_base + i32(min(col0 + 1u, n - 1u)) * sbn;
  let b2 = at.b_base + i32(min(col0 + 2u, n - 1u)) * sbn;
  let b3 = at.b_base + i32(min(col0 + 3u, n - 1u)) * sbn;
  let b4 = at.b_base + i32(min(col0 + 4u, n - 1u)) * sbn;
  let b5 = at.b_base + i32(min(col0 + 5u, n - 1u)) * sbn;
  let b6 = at.b_base + i32(min(col0 + 6u, n - 1u)) * sbn;
  let b7 = at.b_base + i32(min(col0 + 7u, n - 1u)) * sbn;
  let quad0 = at.b_base + i32(min(col0, (n - 1u) & ~3u));  // B_VEC == 1: where each column quad starts
  let quad1 = at.b_base + i32(min(col0 + 4u, (n - 1u) & ~3u));
  var c0 = vec4<T>();  // c_i: row i, columns col0 .. col0 + 3
  var c1 = vec4<T>();
  var c2 = vec4<T>();
  var c3 = vec4<T>();
  var c4 = vec4<T>();
  var c5 = vec4<T>();
  var c6 = vec4<T>();
  var c7 = vec4<T>();
  var d0 = vec4<T>();  // d_i: row i, columns col0 + 4 .. col0 + 7
  var d1 = vec4<T>();
  var d2 = vec4<T>();
  var d3 = vec4<T>();
  var d4 = vec4<T>();
  var d5 = vec4<T>();
  var d6 = vec4<T>();
  var d7 = vec4<T>();
  var k0 = 0u;
  if (A_VEC == 1u && B_VEC == 1u) {
    // Four steps of K at once: a vec4 of each row of A (stride_ak = 1) and four rows of B.
    let sbk = p.strides.z;
    for (; k0 < (p.dims.z & ~3u); k0 = k0 + 4u) {
      let ka = i32(k0);
      let kb = ka * sbk;
      let q0 = b_vec(quad0 + kb);
      let q1 = b_vec(quad0 + kb + sbk);
      let q2 = b_vec(quad0 + kb + 2 * sbk);
      let q3 = b_vec(quad0 + kb + 3 * sbk);
      var s0 = vec4<T>();
      var s1 = vec4<T>();
      var s2 = vec4<T>();
      var s3 = vec4<T>();
      if (TN4 == 2u) {
        s0 = b_vec(quad1 + kb);
        s1 = b_vec(quad1 + kb + sbk);
        s2 = b_vec(quad1 + kb + 2 * sbk);
        s3 = b_vec(quad1 + kb + 3 * sbk);
      }
      let r0 = a_vec(a0 + ka);
      let r1 = a_vec(a1 + ka);
      let r2 = a_vec(a2 + ka);
      let r3 = a_vec(a3 + ka);
      c0 = rank4(c0, r0, q0, q1, q2, q3);
      c1 = rank4(c1, r1, q0, q1, q2, q3);
      c2 = rank4(c2, r2, q0, q1, q2, q3);
      c3 = rank4(c3, r3, q0, q1, q2, q3);
      if (TN4 == 2u) {
        d0 = rank4(d0, r0, s0, s1, s2, s3);
        d1 = rank4(d1, r1, s0, s1, s2, s3);
        d2 = rank4(d2, r2, s0, s1, s2, s3);
        d3 = rank4(d3, r3, s0, s1, s2, s3);
      }
      if (TM == 8u) {
        let r4 = a_vec(a4 + ka);
        let r5 = a_vec(a5 + ka);
        let r6 = a_vec(a6 + ka);
        let r7 = a_vec(a7 + ka);
        c4 = rank4(c4, r4, q0, q1, q2, q3);
        c5 = rank4(c5, r5, q0, q1, q2, q3);
        c6 = rank4(c6, r6, q0, q1, q2, q3);
        c7 = rank4(c7, r7, q0, q1, q2, q3);
        if (TN4 == 2u) {
          d4 = rank4(d4, r4, s0, s1, s2, s3);
          d5 = rank4(d5, r5, s0, s1, s2, s3);
          d6 = rank4(d6, r6, s0, s1, s2, s3);
          d7 = rank4(d7, r7, s0, s1, s2, s3);
        }
      }
    }
  }
  for (var k = k0; k < p.dims.z; k = k + 1u) {
    let ka = i32(k) * p.strides.y;
    let kb = i32(k) * p.strides.z;
    let bv = b_quad_at(b0, b1, b2, b3, quad0, kb);
    var bw = vec4<T>();
    if (TN4 == 2u) {
      bw = b_quad_at(b4, b5, b6, b7, quad1, kb);
    }
    let x0 = a_at(a0 + ka);
    let x1 = a_at(a1 + ka);
    let x2 = a_at(a2 + ka);
    let x3 = a_at(a3 + ka);
    c0 = c0 + x0 * bv;
    c1 = c1 + x1 * bv;
    c2 = c2 + x2 * bv;
    c3 = c3 + x3 * bv;
    if (TN4 == 2u) {
      d0 = d0 + x0 * bw;
      d1 = d1 + x1 * bw;
      d2 = d2 + x2 * bw;
      d3 = d3 + x3 * bw;
    }
    if (TM == 8u) {
      let x4 = a_at(a4 + ka);
      let x5 = a_at(a5 + ka);
      let x6 = a_at(a6 + ka);
      let x7 = a_at(a7 + ka);
      c4 = c4 + x4 * bv;
      c5 = c5 + x5 * bv;
      c6 = c6 + x6 * bv;
      c7 = c7 + x7 * bv;
      if (TN4 == 2u) {
        d4 = d4 + x4 * bw;
        d5 = d5 + x5 * bw;
        d6 = d6 + x6 * bw;
        d7 = d7 + x7 * bw;
      }
    }
  }
  store4(c0, at.batch, row0, col0);
  store4(c1, at.batch, row0 + 1u, col0);
  store4(c2, at.batch, row0 + 2u, col0);
  store4(c3, at.batch, row0 + 3u, col0);
  if (TN4 == 2u) {
    store4(d0, at.batch, row0, col0 + 4u);
    store4(d1, at.batch, row0 + 1u, col0 + 4u);
    store4(d2, at.batch, row0 + 2u, col0 + 4u);
    store4(d3, at.batch, row0 + 3u, col0 + 4u);
  }
  if (TM == 8u) {
    store4(c4, at.batch, row0 + 4u, col0);
    store4(c5, at.batch, row0 + 5u, col0);
    store4(c6, at.batch, row0 + 6u, col0);
    store4(c7, at.batch, row0 + 7u, col0);
    if (TN4 == 2u) {
      store4(d4, at.batch, row0 + 4u, col0 + 4u);
      store4(d5, at.batch, row0 + 5u, col0 + 4u);
      store4(d6, at.batch, row0 + 6u, col0 + 4u);
      store4(d7, at.batch, row0 + 7u, col0 + 4u);
    }
  }
}

// matmul_tiled: a_tile[kk * (BM + 1) + r] = A[tile row r, k + kk] and
// b_tile[kk * BN + c] = B[k + kk, tile column c], with BM = WG_Y * TM, BN = WG_X * 4 * TN4.
// The A tile's pitch is BM + 1 so that threads staging consecutive k write to
// different memory banks.
var<workgroup> a_tile: array<T, (WG_Y * TM + 1u) * TILE_K>;
var<workgroup> b_tile: array<T, TILE_K * WG_X * 4u * TN4>;

@compute @workgroup_size(WG_X, WG_Y)
fn matmul_tiled(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_id) lid: vec3<u32>,
                @builtin(local_invocation_index) lindex: u32) {
  let w = workgroup_line(wid, nwg);
  if (w >= p.grid.z) { return; }  // uniform across the workgroup, so the barriers below stay valid
  let at = place(w);
  let m = p.dims.x;
  let n = p.dims.y;
  let k_total = p.dims.z;
  let bm = WG_Y * TM;
  let pitch = bm + 1u;
  let bn = WG_X * 4u * TN4;
  let tile_row0 = at.tile_m * bm;
  let tile_col0 = at.tile_n * bn;
  let threads = WG_X * WG_Y;

  var acc: array<vec4<T>, TILED_MAX_TM * TILED_MAX_TN4>;  // acc[i * TN4 + q], as in matmul
  for (var k = 0u; k < k_total; k = k + TILE_K) {
    // Stage the tiles; consecutive threads take consecutive k (for A) and
    // consecutive columns (for B). Outside the matrices: zeros.
    for (var t = lindex; t < bm * TILE_K; t = t + threads) {
      let r = t / TILE_K;
      let kk = t % TILE_K;
      var v = T(0);
      if (tile_row0 + r < m && k + kk < k_total) {
        v = a_at(at.a_base + i32(tile_row0 + r) * p.strides.x + i32(k + kk) * p.strides.y);
      }
      a_tile[kk * pitch + r] = v;
    }
    for (var t = lindex; t < TILE_K * bn; t = t + threads) {
      let kk = t / bn;
      let c = t % bn;
      var v = T(0);
      if (k + kk < k_total && tile_col0 + c < n) {
        v = b_at(at.b_base + i32(k + kk) * p.strides.z + i32(tile_col0 + c) * p.strides.w);
      }
      b_tile[kk * bn + c] = v;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < TILE_K; kk = kk + 1u) {
      var bv: array<vec4<T>, TILED_MAX_TN4>;
      for (var q = 0u; q < TN4; q = q + 1u) {
        let e = kk * bn + (lid.x * TN4 + q) * 4u;
        bv[q] = vec4<T>(b_tile[e], b_tile[e + 1u], b_tile[e + 2u], b_tile[e + 3u]);
      }
      for (var i = 0u; i < TM; i = i + 1u) {
        let av = a_tile[kk * pitch + lid.y * TM + i];
        for (var q = 0u; q < TN4; q = q + 1u) {
          acc[i * TN4 + q] = acc[i * TN4 + q] + av * bv[q];
        }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < TM; i = i + 1u) {
    for (var q = 0u; q < TN4; q = q + 1u) {
      store4(acc[i * TN4 + q], at.batch, tile_row0 + lid.y * TM + i, tile_col0 + (lid.x * TN4 + q) * 4u);
    }
  }
}
