/* The plain C yardstick kiln's CPU matmul is compared with: c = a * b (row-major f32, m x k by k x n),
   packed B panels, k blocked for L2, and a 6x32 register tile the compiler keeps in vector
   registers. Rows [row_start, row_end) of c, so callers split it over threads. */
#include <stdint.h>
#include <string.h>

enum { MR = 6, NR = 32, KC = 256 };

static void tile(const float* restrict a, int64_t lda, const float* restrict bp, float* restrict c,
                 int64_t ldc, int64_t kc, int64_t rows) {
  float acc[MR][NR] = {{0}};
  for (int64_t p = 0; p < kc; p++)
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < NR; j++) acc[i][j] += a[i * lda + p] * bp[p * NR + j];
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < NR; j++) c[i * ldc + j] += acc[i][j];
}

/* n must be a multiple of NR; `pack` holds KC * n floats. */
void matmul_plain(const float* restrict a, const float* restrict b, float* restrict c, float* restrict pack,
                  int64_t m, int64_t n, int64_t k, int64_t row_start, int64_t row_end) {
  (void)m;
  for (int64_t i = row_start; i < row_end; i++) memset(c + i * n, 0, (size_t)n * sizeof(float));
  for (int64_t p0 = 0; p0 < k; p0 += KC) {
    int64_t kc = k - p0 < KC ? k - p0 : KC;
    for (int64_t j0 = 0; j0 < n; j0 += NR)
      for (int64_t p = 0; p < kc; p++)
        memcpy(pack + j0 * kc + p * NR, b + (p0 + p) * n + j0, NR * sizeof(float));
    for (int64_t i0 = row_start; i0 < row_end; i0 += MR) {
      int64_t rows = row_end - i0 < MR ? row_end - i0 : MR;
      float abuf[MR * KC];
      const float* ap = a + i0 * k + p0;
      int64_t lda = k;
      if (rows < MR) { /* the last rows: padded with zeros */
        memset(abuf, 0, sizeof abuf);
        for (int i = 0; i < rows; i++) memcpy(abuf + i * KC, ap + i * k, (size_t)kc * sizeof(float));
        ap = abuf;
        lda = KC;
      }
      for (int64_t j0 = 0; j0 < n; j0 += NR) tile(ap, lda, pack + j0 * kc, c + i0 * n + j0, n, kc, rows);
    }
  }
}
