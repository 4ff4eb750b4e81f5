// The hand-written flash-attention backward kernels (CUDA C++ for NVRTC, sm_80 and newer), built on
// the helpers and constants of flash_attention_kernel.cpp. Both recompute the probabilities tile by
// tile from q, k and the forward's log-sum-exp, P = exp2(S * SCALE_LOG2 - lse * log2 e), and take
// dS = P * (dO V^T - delta) with delta = rowsum(dO * O): nothing of size T x T is stored. Each has
// one writer per output element, so the results do not depend on scheduling.
#include "codegen/flash_attention.h"

namespace kiln::codegen {

// dq: one block computes BM query rows of one batch entry (NT / 32 warps of 16 rows). Q and dO stay
// in registers; K and V tiles of BN rows stream through shared memory (cp.async, two stages);
// S = Q K^T, dP = dO V^T and dQ += dS K run on tensor cores with f32 accumulation.
// dkv: one block computes BN key rows (16 a warp) of dK and dV side by side. K and V stay in shared
// memory; Q and dO tiles of BM rows with their lse and delta stream through it; S^T = K Q^T,
// dP^T = V dO^T, dV += P^T dO and dK += dS^T Q. Query tiles wholly above the causal diagonal are
// skipped in both.
const char* flash_attention_backward_kernel_source() {
  return R"kiln_fa(
// base-2 log-sum-exp of a row, 0 where the row has no keys (its scores are all -inf then)
__device__ __forceinline__ float lse2_of(float lse) { return lse == -INFINITY ? 0.f : lse * 1.4426950408889634f; }

__device__ __forceinline__ void flash_dq(uint16_t* out, const uint16_t* qg, const uint16_t* kg, const uint16_t* vg,
                                         const uint16_t* og, const float* lg, const float* dg) {
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sq = smem_addr(smem), so = sq + BM * D * 2, sk = so + BM * D * 2, sv = sk + 2 * BN * D * 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int mb = CAUSAL ? NMB - 1 - (int)(blockIdx.x / BATCH) : (int)(blockIdx.x / BATCH);
  const long long bh = blockIdx.x % BATCH;
  long long off[6];
  offsets(bh, off);
  qg += off[0];
  kg += off[1];
  vg += off[2];
  og += off[3];
  lg += off[4];
  dg += off[5];
  const int m0 = mb * BM, wrow = m0 + warp * 16;
  const int n_end = CAUSAL ? (TK < m0 + BM ? TK : m0 + BM) : TK;
  const int nblocks = (n_end + BN - 1) / BN;

  load_tile<BM>(sq, qg, Q_RS, m0, TQ);
  load_tile<BM>(so, og, O_RS, m0, TQ);
  load_tile<BN>(sk, kg, K_RS, 0, TK);
  load_tile<BN>(sv, vg, V_RS, 0, TK);
  cp_commit();

  float lse2[2], delta[2];  // rows g and g + 8 of the warp's 16
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int row = wrow + g + r * 8;
    lse2[r] = row < TQ ? lse2_of(lg[row * L_RS]) : 0.f;
    delta[r] = row < TQ ? dg[row * DL_RS] : 0.f;
  }
  uint32_t qf[D / 16][4], of[D / 16][4];
  float dq[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; j++) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.f;
  const int mi = lane >> 3, r8 = lane & 7;

  for (int it = 0; it < nblocks; it++) {
    const int stage = it & 1;
    if (it + 1 < nblocks) {
      load_tile<BN>(sk + (stage ^ 1) * BN * D * 2, kg, K_RS, (it + 1) * BN, TK);
      load_tile<BN>(sv + (stage ^ 1) * BN * D * 2, vg, V_RS, (it + 1) * BN, TK);
    }
    cp_commit();
    cp_wait<1>();
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; kk++) {
        ldsm4(qf[kk], chunk_at(sq, warp * 16 + (mi & 1) * 8 + r8, 2 * kk + (mi >> 1)));
        ldsm4(of[kk], chunk_at(so, warp * 16 + (mi & 1) * 8 + r8, 2 * kk + (mi >> 1)));
      }
    }
    const int n0 = it * BN;
    const uint32_t kt = sk + stage * BN * D * 2, vt = sv + stage * BN * D * 2;
    if (!(CAUSAL && n0 > wrow + 15)) {
      float s[BN / 8][4], dp[BN / 8][4];
      mma_frag_tile_t<BN / 16>(s, qf, kt, mi, r8);
      mma_frag_tile_t<BN / 16>(dp, of, vt, mi, r8);
      const bool edge = n0 + BN > TK || (CAUSAL && n0 + BN - 1 > wrow);
#pragma unroll
      for (int j = 0; j < BN / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          float p = fast_exp2(fmaf(s[j][e], SCALE_LOG2, -lse2[e >> 1]));
          if (edge) {
            int col = n0 + j * 8 + 2 * t + (e & 1), row = wrow + g + (e >> 1) * 8;
            if (col >= TK || (CAUSAL && col > row)) p = 0.f;
          }
          s[j][e] = p * (dp[j][e] - delta[e >> 1]);  // dS
        }
      // dQ += dS K (dS from the accumulator registers, K read transposed)
      mma_acc_tile<BN / 16>(dq, s, kt, mi, r8);
    }
    __syncthreads();  // this stage is refilled next iteration
  }
  cp_wait<0>();

#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int row = wrow + g + r * 8;
    if (row < TQ) {
      store_row(out + (bh * TQ + row) * (long long)D + 2 * t, dq, r, SCALE);
    }
  }
}

// lse (base 2) and delta of query rows m0.. into shared memory, for the dkv kernel; rows past TQ
// read as 0
__device__ __forceinline__ void load_stats(float* sl, float* sd, const float* lg, const float* dg, int m0) {
  for (int i = threadIdx.x; i < BM; i += NT) {
    const int row = m0 + i;
    sl[i] = row < TQ ? lse2_of(lg[row * L_RS]) : 0.f;
    sd[i] = row < TQ ? dg[row * DL_RS] : 0.f;
  }
}

__device__ __forceinline__ void flash_dkv(uint16_t* out, const uint16_t* qg, const uint16_t* kg, const uint16_t* vg,
                                          const uint16_t* og, const float* lg, const float* dg) {
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sk = smem_addr(smem), sv = sk + BN * D * 2, sq = sv + BN * D * 2, so = sq + 2 * BM * D * 2;
  float* const stats = (float*)(smem + (2 * BN + 4 * BM) * D * 2);  // lse, delta of two stages
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int nb = (int)(blockIdx.x / BATCH);  // causal: the first key tiles have the most queries
  const long long bh = blockIdx.x % BATCH;
  long long off[6];
  offsets(bh, off);
  qg += off[0];
  kg += off[1];
  vg += off[2];
  og += off[3];
  lg += off[4];
  dg += off[5];
  const int n0 = nb * BN, wk = n0 + warp * 16;  // the block's and the warp's first key rows
  const int m_first = CAUSAL ? n0 / BM : 0;
  const int ntiles = NMB - m_first > 0 ? NMB - m_first : 0;

  load_tile<BN>(sk, kg, K_RS, n0, TK);
  load_tile<BN>(sv, vg, V_RS, n0, TK);
  if (ntiles > 0) {
    load_tile<BM>(sq, qg, Q_RS, m_first * BM, TQ);
    load_tile<BM>(so, og, O_RS, m_first * BM, TQ);
    load_stats(stats, stats + BM, lg, dg, m_first * BM);
  }
  cp_commit();

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) dk[j][e] = dv[j][e] = 0.f;
  const int mi = lane >> 3, r8 = lane & 7;

  for (int it = 0; it < ntiles; it++) {
    const int stage = it & 1, m0 = (m_first + it) * BM;
    if (it + 1 < ntiles) {
      load_tile<BM>(sq + (stage ^ 1) * BM * D * 2, qg, Q_RS, m0 + BM, TQ);
      load_tile<BM>(so + (stage ^ 1) * BM * D * 2, og, O_RS, m0 + BM, TQ);
      load_stats(stats + (stage ^ 1) * 2 * BM, stats + (stage ^ 1) * 2 * BM + BM, lg, dg, m0 + BM);
    }
    cp_commit();
    cp_wait<1>();
    __syncthreads();
    const uint32_t qt = sq + stage * BM * D * 2, ot = so + stage * BM * D * 2;
    const float *sl = stats + stage * 2 * BM, *sd = sl + BM;
    // a warp whose keys all lie after this tile's last query has nothing to add
    if (!(CAUSAL && wk > m0 + BM - 1)) {
      float s[BM / 8][4], dp[BM / 8][4];
#pragma unroll
      for (int j = 0; j < BM / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[j][e] = dp[j][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; kk++) {
        uint32_t ka[4], va[4];
        ldsm4(ka, chunk_at(sk, warp * 16 + (mi & 1) * 8 + r8, 2 * kk + (mi >> 1)));
        ldsm4(va, chunk_at(sv, warp * 16 + (mi & 1) * 8 + r8, 2 * kk + (mi >> 1)));
#pragma unroll
        for (int j = 0; j < BM / 16; j++) {
          uint32_t b[4];
          ldsm4(b, chunk_at(qt, j * 16 + (mi >> 1) * 8 + r8, 2 * kk + (mi & 1)));
          mma(s[2 * j], ka, b[0], b[1]);
          mma(s[2 * j + 1], ka, b[2], b[3]);
          ldsm4(b, chunk_at(ot, j * 16 + (mi >> 1) * 8 + r8, 2 * kk + (mi & 1)));
          mma(dp[2 * j], va, b[0], b[1]);
          mma(dp[2 * j + 1], va, b[2], b[3]);
        }
      }
      // s: key rows wk + g (+ 8), query columns m0 + 8 j + 2 t (+ 1)
      const bool edge = m0 + BM > TQ || (CAUSAL && wk + 15 > m0);
#pragma unroll
      for (int j = 0; j < BM / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int c = j * 8 + 2 * t + (e & 1);
          float p = fast_exp2(fmaf(s[j][e], SCALE_LOG2, -sl[c]));
          if (edge) {
            int key = wk + g + (e >> 1) * 8;
            if (m0 + c >= TQ || (CAUSAL && key > m0 + c)) p = 0.f;
          }
          s[j][e] = p;
          dp[j][e] = p * (dp[j][e] - sd[c]);  // dS^T
        }
      // dV += P^T dO and dK += dS^T Q (the accumulators as A operands, dO and Q read transposed)
      mma_acc_tile<BM / 16>(dv, s, ot, mi, r8);
      mma_acc_tile<BM / 16>(dk, dp, qt, mi, r8);
    }
    __syncthreads();  // this stage is refilled next iteration
  }
  cp_wait<0>();

#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int key = wk + g + r * 8;
    if (key < TK) {
      uint16_t* dst = out + (bh * TK + key) * (long long)(2 * D) + 2 * t;
      store_row(dst, dk, r, SCALE);
      store_row(dst + D, dv, r, 1.f);
    }
  }
}
)kiln_fa";
}

}  // namespace kiln::codegen
