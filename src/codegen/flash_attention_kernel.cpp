// The hand-written flash-attention forward kernel (CUDA C++ for NVRTC, sm_80 and newer) and the
// helpers it shares with the backward kernels (flash_attention_backward_kernel.cpp). The generated
// part (codegen/flash_attention.cpp) defines the constants they read and wraps them in a namespace
// of its own, so several instances compile in one translation unit.
#include "codegen/flash_attention.h"

namespace kiln::codegen {

// Constants the generated part defines before this text:
//   D (head dim, 64 or 128), BM, BN (query and key rows of a block's tile), NT (threads), TQ, TK,
//   NMB (query tiles), BATCH, CAUSAL (top-left aligned), F16 (else bf16), SCALE (the scale),
//   SCALE_LOG2 (scale * log2 e), Q_RS, K_RS, V_RS, O_RS, L_RS, DL_RS (row strides in elements of
//   q, k, v, dO, lse, delta) and offsets(bh, off) (element offsets of batch entry bh's first rows,
//   in that order), STORE_O and STORE_LSE (what the forward writes).
const char* flash_attention_common_source() {
  return R"kiln_fa(
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldsm4_t(uint32_t (&r)[4], uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (F16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// two floats rounded to 16 bits each, lo in the low half
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t r;
  if constexpr (F16) asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float fast_exp2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x)); return y; }

// A tile of ROWS rows x D columns in shared memory: 16-byte chunk c of row r sits at chunk c ^ (r % 8),
// so the 8 rows an ldmatrix reads fall in 8 different bank groups.
__device__ __forceinline__ uint32_t chunk_at(uint32_t base, int row, int c) {
  return base + row * (D * 2) + ((c ^ (row & 7)) << 4);
}
// Rows r0.. of a (T x D) matrix with row stride rs; rows past T read as zeros.
template <int ROWS>
__device__ __forceinline__ void load_tile(uint32_t base, const uint16_t* g, long long rs, int r0, int t) {
  constexpr int CPR = D / 8;
  static_assert(ROWS * CPR % NT == 0, "a tile is a whole number of chunks per thread");
#pragma unroll
  for (int n = 0; n < ROWS * CPR / NT; n++) {
    int i = threadIdx.x + n * NT, row = i / CPR, c = i % CPR;
    bool ok = r0 + row < t;
    cp_async16(chunk_at(base, row, c), g + (ok ? (long long)(r0 + row) * rs : 0) + c * 8, ok);
  }
}
// acc (16 rows x 16 NB) = A B^T, where A (16 rows x D) is in the fragments af and B the tile of
// 16 NB rows x D at base
template <int NB>
__device__ __forceinline__ void mma_frag_tile_t(float (&acc)[2 * NB][4], const uint32_t (&af)[D / 16][4], uint32_t base,
                                                int mi, int r8) {
#pragma unroll
  for (int j = 0; j < 2 * NB; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {
#pragma unroll
    for (int j = 0; j < NB; j++) {
      uint32_t b[4];
      ldsm4(b, chunk_at(base, j * 16 + (mi >> 1) * 8 + r8, 2 * kk + (mi & 1)));
      mma(acc[2 * j], af[kk], b[0], b[1]);
      mma(acc[2 * j + 1], af[kk], b[2], b[3]);
    }
  }
}
// Row r (0: the thread's row g, 1: row g + 8) of a warp's 16 x D accumulators, times scale, as
// 16-bit values to dst (the row's element 2 t)
__device__ __forceinline__ void store_row(uint16_t* dst, const float (&acc)[D / 8][4], int r, float scale) {
#pragma unroll
  for (int j = 0; j < D / 8; j++) *(uint32_t*)(dst + j * 8) = pack2(acc[j][2 * r] * scale, acc[j][2 * r + 1] * scale);
}
// acc (16 rows x D) += A B, where A (16 rows x 16 KT) is the f32 accumulators s of an earlier
// product, rounded to 16 bits (an m16n8 accumulator pair is an m16k16 operand), and B the tile of
// 16 KT rows x D at base, read transposed
template <int KT>
__device__ __forceinline__ void mma_acc_tile(float (&acc)[D / 8][4], const float (&s)[2 * KT][4], uint32_t base, int mi,
                                             int r8) {
#pragma unroll
  for (int kk = 0; kk < KT; kk++) {
    uint32_t a[4] = {pack2(s[2 * kk][0], s[2 * kk][1]), pack2(s[2 * kk][2], s[2 * kk][3]),
                     pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int dj = 0; dj < D / 16; dj++) {
      uint32_t b[4];
      ldsm4_t(b, chunk_at(base, kk * 16 + (mi & 1) * 8 + r8, 2 * dj + (mi >> 1)));
      mma(acc[2 * dj], a, b[0], b[1]);
      mma(acc[2 * dj + 1], a, b[2], b[3]);
    }
  }
}
)kiln_fa";
}

// The forward: one block computes BM query rows of one batch entry: Q stays in registers, K and V
// tiles of BN rows stream through shared memory (cp.async, two stages), S = Q K^T and O += P V run on
// tensor cores (mma.sync m16n8k16, f32 accumulation) and the softmax is online (running max and sum
// per row, in base 2). Tiles above the causal diagonal are skipped; the T x T scores are never
// stored. It writes O, or (STORE_LSE) the rows' log-sum-exp of the scaled scores, which skips P V.
const char* flash_attention_kernel_source() {
  return R"kiln_fa(
__device__ __forceinline__ void flash_forward(uint16_t* out, float* lse, const uint16_t* qg,
                                              const uint16_t* kg, const uint16_t* vg) {
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sq = smem_addr(smem), sk = sq + BM * D * 2, sv = sk + 2 * BN * D * 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  // heaviest causal tiles (the last query rows) first
  const int mb = CAUSAL ? NMB - 1 - (int)(blockIdx.x / BATCH) : (int)(blockIdx.x / BATCH);
  const long long bh = blockIdx.x % BATCH;
  long long off[3];
  offsets(bh, off);
  qg += off[0];
  kg += off[1];
  vg += off[2];
  const int m0 = mb * BM, wrow = m0 + warp * 16;
  const int n_end = CAUSAL ? (TK < m0 + BM ? TK : m0 + BM) : TK;
  const int nblocks = (n_end + BN - 1) / BN;

  load_tile<BM>(sq, qg, Q_RS, m0, TQ);
  load_tile<BN>(sk, kg, K_RS, 0, TK);
  if (STORE_O) load_tile<BN>(sv, vg, V_RS, 0, TK);
  cp_commit();

  uint32_t qf[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
  const int mi = lane >> 3, r8 = lane & 7;

  for (int it = 0; it < nblocks; it++) {
    const int stage = it & 1;
    if (it + 1 < nblocks) {
      load_tile<BN>(sk + (stage ^ 1) * BN * D * 2, kg, K_RS, (it + 1) * BN, TK);
      if (STORE_O) load_tile<BN>(sv + (stage ^ 1) * BN * D * 2, vg, V_RS, (it + 1) * BN, TK);
    }
    cp_commit();
    cp_wait<1>();
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; kk++) ldsm4(qf[kk], chunk_at(sq, warp * 16 + (mi & 1) * 8 + r8, 2 * kk + (mi >> 1)));
    }
    const int n0 = it * BN;
    const uint32_t kt = sk + stage * BN * D * 2, vt = sv + stage * BN * D * 2;
    // a warp whose rows all lie above this tile's first column has nothing to add
    if (!(CAUSAL && n0 > wrow + 15)) {
      float s[BN / 8][4];
      mma_frag_tile_t<BN / 16>(s, qf, kt, mi, r8);
      const bool edge = n0 + BN > TK || (CAUSAL && n0 + BN - 1 > wrow);
      // with a positive scale the row max is taken over the unscaled scores and the scale joins the
      // exponent's subtraction (one multiply-add a score); a negative one scales first
      constexpr bool FOLD = SCALE_LOG2 > 0.f;
#pragma unroll
      for (int j = 0; j < BN / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          float x = FOLD ? s[j][e] : s[j][e] * SCALE_LOG2;
          if (edge) {
            int col = n0 + j * 8 + 2 * t + (e & 1), row = wrow + g + (e >> 1) * 8;
            if (col >= TK || (CAUSAL && col > row)) x = -INFINITY;
          }
          s[j][e] = x;
        }
      // online softmax: rows g (elements 0, 1) and g + 8 (elements 2, 3) of the warp's 16; mrow is
      // in the scaled (base 2) domain
      constexpr float C = FOLD ? SCALE_LOG2 : 1.f;
#pragma unroll
      for (int r = 0; r < 2; r++) {
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) mx = fmaxf(mx, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
        mx = fmaxf(mx * C, mrow[r]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float base = mx == -INFINITY ? 0.f : mx;
        const float factor = fast_exp2(mrow[r] - base);
        mrow[r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
          s[j][2 * r] = fast_exp2(fmaf(s[j][2 * r], C, -base));
          s[j][2 * r + 1] = fast_exp2(fmaf(s[j][2 * r + 1], C, -base));
          sum += s[j][2 * r] + s[j][2 * r + 1];
        }
        lrow[r] = lrow[r] * factor + sum;
        // the output is rescaled only when a row max of the warp moved
        if (STORE_O && __any_sync(0xffffffffu, factor != 1.f)) {
#pragma unroll
          for (int j = 0; j < D / 8; j++) {
            o[j][2 * r] *= factor;
            o[j][2 * r + 1] *= factor;
          }
        }
      }
      // O += P V, P taken from the score registers
      if (STORE_O) mma_acc_tile<BN / 16>(o, s, vt, mi, r8);
    }
    __syncthreads();  // this stage is refilled next iteration
  }
  cp_wait<0>();

#pragma unroll
  for (int r = 0; r < 2; r++) {
    float l = lrow[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int row = wrow + g + r * 8;
    if (STORE_LSE && t == 0 && row < TQ)
      lse[bh * TQ + row] = l > 0.f ? (mrow[r] + log2f(l)) * 0.6931471805599453f : -INFINITY;
    if (STORE_O && row < TQ) {
      store_row(out + (bh * TQ + row) * (long long)D + 2 * t, o, r, inv);
    }
  }
}
)kiln_fa";
}

}  // namespace kiln::codegen
