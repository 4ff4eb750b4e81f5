// What one (strided-batched) GEMM computes, in the row-major terms kiln's buffers use:
//   C[b] = epilogue(A[b] x B[b] (+ bias)),  A[b]: M x K, B[b]: K x N, C[b]: M x N, f32 accumulation.
// Some epilogues also write or read an aux matrix beside C: a gelu's pre-activation.
// Plain data with no CUDA dependency: the matcher (schedule/match_matmul.h) fills it from a kernel
// AST, the cuBLASLt runner (runtime/cuda/cublaslt.h) builds its descriptors from it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

#include "kiln/dtype.h"

namespace kiln::schedule {

enum class GemmEpilogue : uint8_t {
  None,
  Bias,      // + bias[n] (bias has the output dtype, one value per column of C)
  Gelu,      // gelu(x), tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  BiasGelu,  // gelu(x + bias[n])
  // gelu(x) or gelu(x + bias[n]), the pre-activation (x or x + bias[n]) also written to the aux
  // matrix: a training forward keeps it for the backward
  GeluAux,
  BiasGeluAux,
  DGelu,  // x * gelu'(aux): the gradient through a gelu whose pre-activation the aux matrix holds
};

struct GemmDesc {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  // How A and B sit in memory. trans_a = false: A is stored M x K row-major (K contiguous) and lda is
  // the distance between its rows (>= K); trans_a = true: A is stored K x M row-major (M contiguous),
  // i.e. A^T is what memory holds, and lda (>= M) is the distance between rows of A^T. Likewise for
  // B (K x N, or N x K when trans_b). C is always M x N row-major with ldc >= N.
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  // Distance in elements between consecutive matrices of the batch; 0 reuses one matrix for all.
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  DType a_type = DType::F32, b_type = DType::F32, c_type = DType::F32;
  // f32 inputs only: allow TF32 tensor cores (inputs rounded to 10 mantissa bits); else exact f32.
  bool allow_tf32 = false;
  GemmEpilogue epilogue = GemmEpilogue::None;
  // With an aux epilogue: the aux matrix is M x N row-major with c_type elements and rows ld_aux
  // apart (batch 1 only); 0 otherwise.
  int64_t ld_aux = 0;

  bool has_bias() const {
    return epilogue == GemmEpilogue::Bias || epilogue == GemmEpilogue::BiasGelu ||
           epilogue == GemmEpilogue::BiasGeluAux;
  }
  bool has_aux() const {
    return epilogue == GemmEpilogue::GeluAux || epilogue == GemmEpilogue::BiasGeluAux ||
           epilogue == GemmEpilogue::DGelu;
  }
  bool operator==(const GemmDesc&) const = default;
};

struct GemmDescHash {
  size_t operator()(const GemmDesc& d) const {
    size_t h = 0;
    auto mix = [&h](int64_t v) {
      h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    for (int64_t v :
         {d.m, d.n, d.k, d.batch, d.lda, d.ldb, d.ldc, d.stride_a, d.stride_b, d.stride_c, d.ld_aux})
      mix(v);
    mix(static_cast<int64_t>(d.trans_a) | static_cast<int64_t>(d.trans_b) << 1 |
        static_cast<int64_t>(d.allow_tf32) << 2 | static_cast<int64_t>(d.epilogue) << 3 |
        static_cast<int64_t>(d.a_type) << 8 | static_cast<int64_t>(d.b_type) << 16 |
        static_cast<int64_t>(d.c_type) << 24);
    return h;
  }
};

}  // namespace kiln::schedule
