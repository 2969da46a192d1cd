/* Single-precision matrix product for the numpy backend inside Pyodide, compiled
 * to wasm32 with SIMD128 (and, in a second build, relaxed-SIMD fused multiply-add)
 * by the asset step (server/assets.py: `python -m ziglang cc`). No libc, no
 * emscripten: the module owns its memory; Python copies the operands in and the
 * product out (O(n^2) copies against O(n^3) work).
 *
 *   C[b] = A[b] @ B[b]   for b in 0..batch-1, C contiguous (M x N) per batch,
 *   A[b](i, k) = A[b * sab + i * rsa + k * csa], B[b](k, j) = B[b * sbb + k * rsb + j * csb]
 *
 * so a transposed operand (numpy's `.mT` of a contiguous array) is read in place,
 * and a batch stride of 0 broadcasts one matrix over the batch.
 *
 * Blocking (the usual three-level GEMM, cf. Goto & van de Geijn):
 *   for each NC-wide column block of B
 *     for each KC-deep slice of K:   pack B[kc x nc] into NR-wide panels (k-major),
 *                                    the panel set stays in L2 (256 x 512 x 4 = 512 KiB)
 *       for each MR-row strip of A:  pack A[mr x kc] (k-major, MR floats per k; L1)
 *         for each NR panel:         the MR x NR micro-kernel keeps the C tile in
 *                                    registers: MR * NR/4 accumulators, NR/4 loads of
 *                                    B and one splat of A per row and k.
 * MR x NR = 4 x 8: 8 accumulators + 2 B vectors + 1 splat + the product's temporary
 * fit the 16 SIMD registers x86-64 gives V8. Measured in headless Chromium (relaxed
 * FMA, best of 3, busy 2-core machine): 4 x 8 ran at 12-17 GFLOP/s for N = 256..1024,
 * 5 x 8 and 6 x 8 at 4-8 (V8 spills the larger tiles); relaxed FMA was 15-30% faster
 * than the separate multiply and add.
 * Edges (M % MR, N % NR) are zero-padded in the packs and the tile is stored
 * through a small buffer. The first K slice stores C, the others add to it.
 *
 * sconv is conv2d's forward on the same loops, B being the im2col matrix of the image:
 * its panels are packed from the image directly (pack_b_conv), so the matrix, 9x the
 * image for a 3x3 kernel, is neither built by numpy nor copied into this memory.
 *
 * qlinear is the dynamic-quantized Linear (ao/quantization.py) in int8: x quantized to 0..127 by
 * its range, the int8 products summed in int32 (relaxed SIMD's i8 x i7 dot, exact for 7-bit
 * activations), scaled back with the numpy reference's float32 steps: the reference's bits.
 */
#include <wasm_simd128.h>

#define MR 4
#define NR 8
#define KC 256
#define NC 512

#ifdef RELAXED
#define MADD(acc, a, b) wasm_f32x4_relaxed_madd(a, b, acc)
#else
#define MADD(acc, a, b) wasm_f32x4_add(acc, wasm_f32x4_mul(a, b))
#endif

/* B(k0.., j0..) [kc x nc] -> panels of NR columns, each kc rows of NR floats. */
static void pack_b(int kc, int nc, const float *B, long rsb, long csb, float *out) {
  for (int j0 = 0; j0 < nc; j0 += NR) {
    int nr = nc - j0 < NR ? nc - j0 : NR;
    float *panel = out + (long)j0 * kc;
    for (int k = 0; k < kc; k++) {
      const float *row = B + k * rsb + j0 * csb;
      float *dst = panel + k * NR;
      if (nr == NR && csb == 1) {
        wasm_v128_store(dst, wasm_v128_load(row));
        wasm_v128_store(dst + 4, wasm_v128_load(row + 4));
        continue;
      }
      int j = 0;
      for (; j < nr; j++) dst[j] = row[j * csb];
      for (; j < NR; j++) dst[j] = 0.0f;
    }
  }
}

/* A convolution's B, its im2col matrix, read from the image itself (sconv): row k = (c, i, j) of
 * the kernel window, column p = (y, x) of the output, B(k, p) = image[c, y sh + i dh - top,
 * x sw + j dw - left], zero outside the image (the padding). */
typedef struct {
  int h, w, kh, kw, sh, sw, dh, dw, top, left, wo;
  int *row0, *col0;  /* per column of the current block: y sh - top, x sw - left (in work) */
} Conv;

/* As pack_b, for B(k0.., j0..) of a convolution over `image` (one group's channels). */
static void pack_b_conv(int kc, int nc, int k0, int j0, const float *image, Conv *g, float *out) {
  for (int p = 0; p < nc; p++) {
    g->row0[p] = (j0 + p) / g->wo * g->sh - g->top;
    g->col0[p] = (j0 + p) % g->wo * g->sw - g->left;
  }
  for (int k = 0; k < kc; k++) {
    int kk = k0 + k, taps = g->kh * g->kw;
    int di = kk % taps / g->kw * g->dh, dj = kk % taps % g->kw * g->dw;
    const float *plane = image + (long)(kk / taps) * g->h * g->w;
    for (int p0 = 0; p0 < nc; p0 += NR) {
      int nr = nc - p0 < NR ? nc - p0 : NR;
      float *dst = out + (long)p0 * kc + k * NR;
      int y = g->row0[p0] + di, x = g->col0[p0] + dj;
      /* NR positions on one output row, stride 1, inside the image: two vector loads. */
      if (nr == NR && g->sw == 1 && g->row0[p0 + NR - 1] == g->row0[p0] && y >= 0 && y < g->h && x >= 0 &&
          x + NR <= g->w) {
        wasm_v128_store(dst, wasm_v128_load(plane + y * g->w + x));
        wasm_v128_store(dst + 4, wasm_v128_load(plane + y * g->w + x + 4));
        continue;
      }
      int t = 0;
      for (; t < nr; t++) {
        y = g->row0[p0 + t] + di;
        x = g->col0[p0 + t] + dj;
        dst[t] = (unsigned)y < (unsigned)g->h && (unsigned)x < (unsigned)g->w ? plane[y * g->w + x] : 0.0f;
      }
      for (; t < NR; t++) dst[t] = 0.0f;
    }
  }
}

/* A(i0.., k0..) [mr x kc] -> kc groups of MR floats. */
static void pack_a(int kc, int mr, const float *A, long rsa, long csa, float *out) {
  if (mr == MR && csa == 1) {
    for (int k = 0; k < kc; k++)
      for (int r = 0; r < MR; r++) out[k * MR + r] = A[r * rsa + k];
    return;
  }
  for (int k = 0; k < kc; k++) {
    int r = 0;
    for (; r < mr; r++) out[k * MR + r] = A[r * rsa + k * csa];
    for (; r < MR; r++) out[k * MR + r] = 0.0f;
  }
}

static void kernel(int kc, const float *pa, const float *pb, float *C, long ldc, int mr, int nr, int add) {
  v128_t c[MR][2];
  for (int r = 0; r < MR; r++) c[r][0] = c[r][1] = wasm_f32x4_splat(0.0f);
  for (int k = 0; k < kc; k++) {
    v128_t b0 = wasm_v128_load(pb), b1 = wasm_v128_load(pb + 4);
    for (int r = 0; r < MR; r++) {
      v128_t a = wasm_v128_load32_splat(pa + r);
      c[r][0] = MADD(c[r][0], a, b0);
      c[r][1] = MADD(c[r][1], a, b1);
    }
    pa += MR;
    pb += NR;
  }
  if (mr == MR && nr == NR) {
    for (int r = 0; r < MR; r++) {
      float *row = C + r * ldc;
      if (add) {
        c[r][0] = wasm_f32x4_add(c[r][0], wasm_v128_load(row));
        c[r][1] = wasm_f32x4_add(c[r][1], wasm_v128_load(row + 4));
      }
      wasm_v128_store(row, c[r][0]);
      wasm_v128_store(row + 4, c[r][1]);
    }
    return;
  }
  float tile[MR * NR];
  for (int r = 0; r < MR; r++) {
    wasm_v128_store(tile + r * NR, c[r][0]);
    wasm_v128_store(tile + r * NR + 4, c[r][1]);
  }
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nr; j++) {
      float *dst = C + r * ldc + j;
      *dst = add ? *dst + tile[r * NR + j] : tile[r * NR + j];
    }
}

/* Floats of scratch `work` must hold for sgemm and sconv: the B panels, one A strip and
 * sconv's two position tables. */
__attribute__((export_name("work_floats")))
int work_floats(void) { return KC * (NC + NR) + KC * MR + 2 * NC; }

/* C (M x N, contiguous) = A @ B, B read through (rsb, csb) or, with `conv`, from the image at B. */
static void gemm(int M, int N, int K, const float *a, long rsa, long csa, const float *bm, long rsb, long csb,
                 Conv *conv, float *c, float *work) {
  float *pb = work, *pa = work + KC * (NC + NR);
  if (K == 0) {
    for (long i = 0; i < (long)M * N; i++) c[i] = 0.0f;
    return;
  }
  for (int j0 = 0; j0 < N; j0 += NC) {
    int nc = N - j0 < NC ? N - j0 : NC;
    for (int k0 = 0; k0 < K; k0 += KC) {
      int kc = K - k0 < KC ? K - k0 : KC;
      if (conv)
        pack_b_conv(kc, nc, k0, j0, bm, conv, pb);
      else
        pack_b(kc, nc, bm + k0 * rsb + j0 * csb, rsb, csb, pb);
      for (int i0 = 0; i0 < M; i0 += MR) {
        int mr = M - i0 < MR ? M - i0 : MR;
        pack_a(kc, mr, a + i0 * rsa + k0 * csa, rsa, csa, pa);
        for (int jr = 0; jr < nc; jr += NR) {
          int nr = nc - jr < NR ? nc - jr : NR;
          kernel(kc, pa, pb + (long)jr * kc, c + (long)i0 * N + j0 + jr, N, mr, nr, k0 > 0);
        }
      }
    }
  }
}

__attribute__((export_name("sgemm")))
void sgemm(int batch, int M, int N, int K,
           const float *A, long sab, long rsa, long csa,
           const float *B, long sbb, long rsb, long csb,
           float *C, float *work) {
  for (int b = 0; b < batch; b++)
    gemm(M, N, K, A + b * sab, rsa, csa, B + b * sbb, rsb, csb, 0, C + (long)b * M * N, work);
}

/* conv2d forward without an im2col matrix: for each image b and group g,
 *   C[b, g] (M x Ho*Wo) = W[g] (M x Cg*kh*kw, contiguous) @ im2col(X[b, g's Cg channels])
 * with X (n, groups * Cg, h, w) contiguous and B packed straight from it (pack_b_conv). */
__attribute__((export_name("sconv")))
void sconv(int n, int groups, int M, int cg, int h, int w, int kh, int kw, int sh, int sw, int dh, int dw,
           int top, int left, int ho, int wo, const float *X, const float *W, float *C, float *work) {
  int K = cg * kh * kw, N = ho * wo;
  int *tables = (int *)(work + KC * (NC + NR) + KC * MR);
  Conv conv = {h, w, kh, kw, sh, sw, dh, dw, top, left, wo, tables, tables + NC};
  for (int b = 0; b < n; b++)
    for (int g = 0; g < groups; g++)
      gemm(M, N, K, W + (long)g * M * K, K, 1, X + ((long)b * groups + g) * cg * h * w, 0, 0, &conv,
           C + ((long)b * groups + g) * M * N, work);
}

/* ---- int8: the dynamic-quantized Linear ----
 *   out[i, j] = (sum_k xq[i, k] w[j, k] - zp wsum[j]) * (scale * wscale[j]) + bias[j]
 * as the native kernel (int8_gemm/qgemm.c) and the numpy reference compute it. w (n x k int8) is
 * read as stored, its rows 16 bytes at a time; xq rows are k padded to 16 with zeros, so the bytes
 * read past a row's end (the next row, or the 16 spare bytes Python leaves after w) meet zeros.
 * Tile QR x QC: QR + QC loads and QR QC dot products (four byte products into each int32 lane)
 * per 16 k, the lanes summed once at the end. */
#define QR 2
#define QC 4

#ifdef RELAXED
#define DOT16(acc, w, x) wasm_i32x4_relaxed_dot_i8x16_i7x16_add(w, x, acc)
#else
#define DOT16(acc, w, x)                                                                                     \
  wasm_i32x4_add(acc, wasm_i32x4_add(                                                                         \
      wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(w), wasm_i16x8_extend_low_i8x16(x)),                   \
      wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(w), wasm_i16x8_extend_high_i8x16(x))))
#endif

/* x (m x k) -> xq (rows of k16 bytes; m padded to QR with zero rows) and {scale, zero point}:
 * torch's dynamic quantization to 0..127 in the float32 steps of the numpy reference (see
 * qgemm_quantize in qgemm.c). Returns -1 where x holds an infinity or NaN (left to the reference). */
static int quantize(int m, int k, int k16, const float *x, unsigned char *xq, float *qparams) {
  v128_t lo = wasm_f32x4_splat(0.0f), hi = lo, bad = wasm_i32x4_splat(0), big = wasm_f32x4_splat(3.4028234664e38f);
  float los = 0.0f, his = 0.0f;
  long total = (long)m * k, i = 0;
  for (; i + 4 <= total; i += 4) {
    v128_t v = wasm_v128_load(x + i);
    lo = wasm_f32x4_pmin(v, lo);  /* v < lo ? v : lo */
    hi = wasm_f32x4_pmax(v, hi);
    bad = wasm_v128_or(bad, wasm_v128_not(wasm_f32x4_le(wasm_f32x4_abs(v), big)));
  }
  int any_bad = wasm_v128_any_true(bad);
  for (; i < total; i++) {
    float v = x[i];
    los = v < los ? v : los;
    his = v > his ? v : his;
    any_bad |= !(__builtin_fabsf(v) <= 3.4028234664e38f);
  }
  if (any_bad) return -1;
  float lanes[8];
  wasm_v128_store(lanes, lo);
  wasm_v128_store(lanes + 4, hi);
  for (int l = 0; l < 4; l++) {
    los = lanes[l] < los ? lanes[l] : los;
    his = lanes[4 + l] > his ? lanes[4 + l] : his;
  }
  float scale = (his - los) / 127.0f;
  if (!(scale > 0.0f)) scale = 1.0f;
  float zp = __builtin_nearbyintf(-los / scale);
  zp = zp < 0.0f ? 0.0f : (zp > 127.0f ? 127.0f : zp);
  qparams[0] = scale;
  qparams[1] = zp;
  int rows = (m + QR - 1) / QR * QR;
  for (int r = 0; r < rows; r++) {
    const float *row = x + (long)r * k;
    unsigned char *dst = xq + (long)r * k16;
    int kk = 0;
    if (r < m)
      for (; kk < k; kk++) {
        float q = __builtin_nearbyintf(row[kk] / scale) + zp;
        dst[kk] = (unsigned char)(q < 0.0f ? 0.0f : (q > 127.0f ? 127.0f : q));
      }
    for (; kk < k16; kk++) dst[kk] = 0;
  }
  return 0;
}

/* The four int32 lanes of each of a[0..3], summed: lane c of the result is a[c]'s total. */
static v128_t lane_sums(const v128_t a[QC]) {
  v128_t s01 = wasm_i32x4_add(wasm_i32x4_shuffle(a[0], a[1], 0, 4, 2, 6), wasm_i32x4_shuffle(a[0], a[1], 1, 5, 3, 7));
  v128_t s23 = wasm_i32x4_add(wasm_i32x4_shuffle(a[2], a[3], 0, 4, 2, 6), wasm_i32x4_shuffle(a[2], a[3], 1, 5, 3, 7));
  return wasm_i32x4_add(wasm_i32x4_shuffle(s01, s23, 0, 1, 4, 5), wasm_i32x4_shuffle(s01, s23, 2, 3, 6, 7));
}

/* Bytes of scratch qlinear needs for m rows of k: the quantized x. */
__attribute__((export_name("qlinear_work_bytes")))
long qlinear_work_bytes(int m, int k) { return (long)((m + QR - 1) / QR * QR) * ((k + 15) / 16 * 16); }

/* out (m x n) = the quantized layer on x (m x k float32) and w (n x k int8, 16 bytes readable past
 * its end) with scales wscale[j * wscale_step] (step 0: one for all) and bias (null: none).
 * Returns 0, or -1 (nothing written) where x holds an infinity or NaN. */
__attribute__((export_name("qlinear")))
int qlinear(int m, int n, int k, const float *x, const signed char *w, const float *wscale, int wscale_step,
            const float *bias, float *out, unsigned char *work) {
  int k16 = (k + 15) / 16 * 16;
  float qparams[2];
  if (quantize(m, k, k16, x, work, qparams) != 0) return -1;
  float scale = qparams[0];
  int zp = (int)qparams[1];
  for (int j0 = 0; j0 < n; j0 += QC) {
    const signed char *rows[QC];
    int32_t wsum[QC];
    float column_scale[QC], column_bias[QC];
    for (int c = 0; c < QC; c++) {
      int j = j0 + c < n ? j0 + c : n - 1;  /* past n: a repeat, computed and not stored */
      rows[c] = w + (long)j * k;
      v128_t sum = wasm_i32x4_splat(0);
      int kk = 0;
      for (; kk + 16 <= k; kk += 16)
        sum = wasm_i32x4_add(sum, wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extadd_pairwise_i8x16(wasm_v128_load(rows[c] + kk))));
      int32_t s = wasm_i32x4_extract_lane(sum, 0) + wasm_i32x4_extract_lane(sum, 1) +
                  wasm_i32x4_extract_lane(sum, 2) + wasm_i32x4_extract_lane(sum, 3);
      for (; kk < k; kk++) s += rows[c][kk];
      wsum[c] = zp * s;  /* the zero point's share of each sum */
      column_scale[c] = scale * wscale[j * wscale_step];
      column_bias[c] = bias ? bias[j] : 0.0f;
    }
    v128_t offset = wasm_v128_load(wsum), cscale = wasm_v128_load(column_scale), cbias = wasm_v128_load(column_bias);
    for (int i0 = 0; i0 < m; i0 += QR) {
      v128_t acc[QR][QC];
      for (int r = 0; r < QR; r++)
        for (int c = 0; c < QC; c++) acc[r][c] = wasm_i32x4_splat(0);
      const unsigned char *xr = work + (long)i0 * k16;
      for (int kk = 0; kk < k16; kk += 16) {
        v128_t wv[QC], xv[QR];
        for (int c = 0; c < QC; c++) wv[c] = wasm_v128_load(rows[c] + kk);
        for (int r = 0; r < QR; r++) xv[r] = wasm_v128_load(xr + (long)r * k16 + kk);
        for (int r = 0; r < QR; r++)
          for (int c = 0; c < QC; c++) acc[r][c] = DOT16(acc[r][c], wv[c], xv[r]);
      }
      for (int r = 0; r < QR && i0 + r < m; r++) {
        /* the product times the scale, then plus the bias, rounded as the reference rounds them
         * (no bias is no add: -0 + 0 would be +0) */
        v128_t y = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_sub(lane_sums(acc[r]), offset)), cscale);
        if (bias) y = wasm_f32x4_add(y, cbias);
        float *o = out + (long)(i0 + r) * n + j0;
        if (j0 + QC <= n) {
          wasm_v128_store(o, y);
        } else {
          float tile[QC];
          wasm_v128_store(tile, y);
          for (int c = 0; j0 + c < n; c++) o[c] = tile[c];
        }
      }
    }
  }
  return 0;
}
