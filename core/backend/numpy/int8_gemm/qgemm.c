/* int8 x int8 products for the numpy backend's dynamic-quantized Linear, natively.
 * numpy has no int8 matrix product (its integer matmul is a plain loop), so without
 * this the int8 layer is float32 BLAS plus the quantization: slower than float32.
 * Built by the install step (`python -m webgrad.backend.numpy.int8_gemm`, which runs
 * `python -m ziglang cc -march=native`) into a shared library loaded with ctypes.
 *
 *   out[i, j] = (sum_k xq[i, k] * w[j, k] - zp * wsum[j]) * (scale * wscale[j]) + bias[j]
 *
 * xq: x quantized to 0..127 (uint8 with torch's reduce_range) by its own scale and zero
 * point zp; w: the int8 weight (n x k) with per-row scales. The sums are exact in int32
 * (|xq w| <= 127 x 128, k < 2^17), the epilogue is the float32 arithmetic of the numpy
 * reference in ops order (built with -ffp-contract=off: no fused multiply-add), so the
 * result has the reference's bits.
 *
 * Layout. Each thread packs its share of the weight, two panels of NP = 16 columns at a
 * time, just before multiplying them (so they are still in cache): for each group of 4 k,
 * 16 columns x 4 bytes (64 bytes), k zero-padded to a multiple of 4, columns past n zero.
 * xq is m rows of k4 * 4 bytes (rows padded to MR with zeros). The micro kernel keeps an
 * MR x 32 tile of int32 sums in registers: per group of 4 k, two panel loads, MR broadcasts
 * of 4 bytes of xq and 2 MR four-way dot products: AVX-512 VNNI's vpdpbusd (u8 x s8, four
 * products summed into each int32 lane), or on AVX2 the same from vpmaddubsw (pairs into
 * int16: 2 x 127 x 128 < 2^15, no saturation, which is why torch's x86 path keeps
 * activations to 7 bits) and vpmaddwd; elsewhere plain C.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NP 16  /* columns per panel */
#define MR 8   /* rows per tile */
#define MAX_THREADS 16
#define LANES 16  /* of the range loop */

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>
static const char variant[] = "avx512-vnni";
#elif defined(__AVX2__)
#include <immintrin.h>
static const char variant[] = "avx2";
#else
static const char variant[] = "portable";
#endif

const char *qgemm_variant(void) { return variant; }

/* Columns c0... of w (n x k, row stride ldw), 2 NP of them (zeros past n), as a panel pair (see
 * above), and wsum[c] = sum_k w[c0 + c, k]. */
static void pack_pair(long n, long k, const int8_t *w, long ldw, long c0, int8_t *pair, int32_t wsum[2 * NP]) {
  long k4 = (k + 3) / 4;
  memset(pair, 0, k4 * 4 * 2 * NP);
  for (long c = 0; c < 2 * NP && c0 + c < n; c++) {
    const int8_t *row = w + (c0 + c) * ldw;
    int8_t *dst = pair + (c / NP) * k4 * 4 * NP + (c % NP) * 4;
    int32_t sum = 0;
    long g = 0;
    for (; g < k / 4; g++) memcpy(dst + g * 4 * NP, row + g * 4, 4);
    for (long kk = g * 4; kk < k; kk++) dst[g * 4 * NP + kk - g * 4] = row[kk];
    for (long kk = 0; kk < k; kk++) sum += row[kk];
    wsum[c] = sum;
  }
  for (long c = n - c0 < 0 ? 0 : n - c0; c < 2 * NP; c++) wsum[c] = 0;
}

/* x (m x k float32, row stride ldx) -> xq (rows of k4 * 4 bytes, m padded to MR with zeros) and
 * qparams = {scale, zero point}: torch's dynamic quantization to 0..127 by x's range (with 0 in
 * it), in the float32 steps of the numpy reference (scale = (hi - lo) / 127, or 1 for a range of
 * 0; zp = clip(rint(-lo / scale), 0, 127); q = clip(rint(x / scale) + zp, 0, 127)). Returns -1,
 * quantizing nothing, where x holds an infinity or NaN (left to the reference). */
int qgemm_quantize(long m, long k, const float *x, long ldx, uint8_t *xq, float qparams[2]) {
  /* The range, in LANES independent lanes (so that the loop vectorizes without reordering float
   * operations), merged after; `bad` marks an infinity or NaN (|v| <= max is false for them). */
  float los[LANES] = {0}, his[LANES] = {0}, lo = 0.0f, hi = 0.0f;
  int32_t bad[LANES] = {0}, any_bad = 0;
  for (long i = 0; i < m; i++) {
    const float *row = x + i * ldx;
    long kk = 0;
    for (; kk + LANES <= k; kk += LANES)
      for (int l = 0; l < LANES; l++) {
        float v = row[kk + l];
        los[l] = v < los[l] ? v : los[l];
        his[l] = v > his[l] ? v : his[l];
        bad[l] |= !(fabsf(v) <= FLT_MAX);
      }
    for (; kk < k; kk++) {
      float v = row[kk];
      los[0] = v < los[0] ? v : los[0];
      his[0] = v > his[0] ? v : his[0];
      bad[0] |= !(fabsf(v) <= FLT_MAX);
    }
  }
  for (int l = 0; l < LANES; l++) {
    lo = los[l] < lo ? los[l] : lo;
    hi = his[l] > hi ? his[l] : hi;
    any_bad |= bad[l];
  }
  if (any_bad) return -1;
  float scale = (hi - lo) / 127.0f;
  if (!(scale > 0.0f)) scale = 1.0f;
  float zp = nearbyintf(-lo / scale);
  zp = zp < 0.0f ? 0.0f : (zp > 127.0f ? 127.0f : zp);
  qparams[0] = scale;
  qparams[1] = zp;
  long row_bytes = (k + 3) / 4 * 4, rows = (m + MR - 1) / MR * MR;
  memset(xq, 0, rows * row_bytes);
  for (long i = 0; i < m; i++) {
    for (long kk = 0; kk < k; kk++) {
      float q = nearbyintf(x[i * ldx + kk] / scale) + zp;
      q = q < 0.0f ? 0.0f : (q > 127.0f ? 127.0f : q);
      xq[i * row_bytes + kk] = (uint8_t)q;
    }
  }
  return 0;
}

/* sums[r][c] = sum over the k4 groups of xq row r . column c of the panel pair at w. */
static void tile(long k4, const uint8_t *xq, long row_bytes, const int8_t *w, int32_t sums[MR][2 * NP]) {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  __m512i acc[MR][2];
  for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  const int8_t *w1 = w + k4 * 4 * NP;
  for (long g = 0; g < k4; g++) {
    __m512i b0 = _mm512_loadu_si512(w + g * 4 * NP), b1 = _mm512_loadu_si512(w1 + g * 4 * NP);
    for (int r = 0; r < MR; r++) {
      int32_t four;
      memcpy(&four, xq + r * row_bytes + g * 4, 4);
      __m512i a = _mm512_set1_epi32(four);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], a, b0);
      acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], a, b1);
    }
  }
  for (int r = 0; r < MR; r++) {
    _mm512_storeu_si512(sums[r], acc[r][0]);
    _mm512_storeu_si512(sums[r] + NP, acc[r][1]);
  }
#elif defined(__AVX2__)
  /* Half the rows at a time: 4 x 32 int32 sums are 16 ymm registers, the lot AVX2 has. */
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t *w1 = w + k4 * 4 * NP;
  for (int half = 0; half < MR; half += 4) {
    __m256i acc[4][4];
    for (int r = 0; r < 4; r++) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = _mm256_setzero_si256();
    for (long g = 0; g < k4; g++) {
      __m256i b[4] = {_mm256_loadu_si256((const __m256i *)(w + g * 4 * NP)),
                      _mm256_loadu_si256((const __m256i *)(w + g * 4 * NP + 32)),
                      _mm256_loadu_si256((const __m256i *)(w1 + g * 4 * NP)),
                      _mm256_loadu_si256((const __m256i *)(w1 + g * 4 * NP + 32))};
      for (int r = 0; r < 4; r++) {
        int32_t four;
        memcpy(&four, xq + (half + r) * row_bytes + g * 4, 4);
        __m256i a = _mm256_set1_epi32(four);
        for (int q = 0; q < 4; q++)
          acc[r][q] = _mm256_add_epi32(acc[r][q], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b[q]), ones));
      }
    }
    for (int r = 0; r < 4; r++)
      for (int q = 0; q < 4; q++) _mm256_storeu_si256((__m256i *)(sums[half + r] + 8 * q), acc[r][q]);
  }
#else
  const int8_t *w1 = w + k4 * 4 * NP;
  for (int r = 0; r < MR; r++)
    for (int c = 0; c < 2 * NP; c++) {
      const int8_t *col = (c < NP ? w : w1) + (c % NP) * 4;
      int32_t s = 0;
      for (long g = 0; g < k4; g++)
        for (int t = 0; t < 4; t++) s += (int32_t)xq[r * row_bytes + g * 4 + t] * col[g * 4 * NP + t];
      sums[r][c] = s;
    }
#endif
}

typedef struct {
  long m, n, k, pairs;
  long *next_pair;  /* shared: each thread takes the next panel pair until none is left */
  const uint8_t *xq;
  const int8_t *w;
  long ldw;
  const float *wscale, *bias;
  long wscale_step;
  float scale, zp;
  float *out;
  long ldo;
} Job;

static void *run(void *arg) {
  const Job *j = arg;
  long k4 = (j->k + 3) / 4, row_bytes = k4 * 4;
  int32_t sums[MR][2 * NP], wsum[2 * NP], offset[2 * NP];
  float column_scale[2 * NP], column_bias[2 * NP];
  int8_t *pair = malloc(k4 * 4 * 2 * NP);  /* packed where it is used: still in cache for the tiles */
  if (!pair) return (void *)1;
  for (long p; (p = __atomic_fetch_add(j->next_pair, 1, __ATOMIC_RELAXED)) < j->pairs;) {
    long c0 = p * 2 * NP, cols = j->n - c0 < 2 * NP ? j->n - c0 : 2 * NP;
    pack_pair(j->n, j->k, j->w, j->ldw, c0, pair, wsum);
    for (long c = 0; c < cols; c++) {
      offset[c] = (int32_t)j->zp * wsum[c];  /* the zero point's share of each sum */
      column_scale[c] = j->scale * j->wscale[(c0 + c) * j->wscale_step];
      column_bias[c] = j->bias ? j->bias[c0 + c] : 0.0f;
    }
    for (long i0 = 0; i0 < j->m; i0 += MR) {
      tile(k4, j->xq + i0 * row_bytes, row_bytes, pair, sums);
      long rows = j->m - i0 < MR ? j->m - i0 : MR;
      for (long r = 0; r < rows; r++) {
        float *o = j->out + (i0 + r) * j->ldo + c0;
        /* the product times the scale, then plus the bias: rounded as the reference rounds them
         * (no bias is no add: -0 + 0 would be +0) */
        if (j->bias) {
          for (long c = 0; c < cols; c++) o[c] = (float)(sums[r][c] - offset[c]) * column_scale[c] + column_bias[c];
        } else {
          for (long c = 0; c < cols; c++) o[c] = (float)(sums[r][c] - offset[c]) * column_scale[c];
        }
      }
    }
  }
  free(pair);
  return 0;
}

/* out (m x n, row stride ldo) from xq and its qparams (qgemm_quantize) and w (n x k int8, row
 * stride ldw) with scales wscale[j * wscale_step] (step 0: one for all), on `threads` threads, each
 * packing and multiplying a share of the panel pairs. bias may be null.
 * Returns 0, or -1 where no thread had memory for a panel pair (out is then incomplete). */
int qgemm_linear(long m, long n, long k, const uint8_t *xq, const float qparams[2], const int8_t *w, long ldw,
                 const float *wscale, long wscale_step, const float *bias, float *out, long ldo, int threads) {
  long pairs = (n + 2 * NP - 1) / (2 * NP);
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  if (threads > pairs) threads = (int)pairs;
  if (threads < 1) threads = 1;
  Job jobs[MAX_THREADS];
  pthread_t ids[MAX_THREADS];
  long next_pair = 0;  /* taken as threads get to it: a thread slowed by a busy core takes fewer */
  for (int t = 0; t < threads; t++)
    jobs[t] = (Job){m, n, k, pairs, &next_pair, xq, w, ldw, wscale, bias, wscale_step, qparams[0], qparams[1], out, ldo};
  int started = 1;
  for (int t = 1; t < threads; t++, started++)
    if (pthread_create(&ids[t], 0, run, &jobs[t]) != 0) break;
  run(&jobs[0]);
  for (int t = 1; t < started; t++) pthread_join(ids[t], 0);
  /* A thread without memory for its panel pair took none; the others took its share. */
  return next_pair < pairs ? -1 : 0;
}
