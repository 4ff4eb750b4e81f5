/* The plain C loop kiln's C1 kernel is compared with: out = a*b + tanh(c), c broadcast over rows. */
#include <math.h>
#include <stdint.h>

void c1_plain(float* restrict out, const float* restrict a, const float* restrict b, const float* restrict c,
              int64_t row_start, int64_t row_end, int64_t cols) {
  for (int64_t i = row_start; i < row_end; i++)
    for (int64_t j = 0; j < cols; j++) out[i * cols + j] = a[i * cols + j] * b[i * cols + j] + tanhf(c[j]);
}

/* The same traffic without tanh: the memory-bandwidth reference (floor) for C1. */
void c1_bandwidth(float* restrict out, const float* restrict a, const float* restrict b, const float* restrict c,
                  int64_t row_start, int64_t row_end, int64_t cols) {
  for (int64_t i = row_start; i < row_end; i++)
    for (int64_t j = 0; j < cols; j++) out[i * cols + j] = a[i * cols + j] * b[i * cols + j] + c[j];
}
