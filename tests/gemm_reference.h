// A float64 host reference for schedule::GemmDesc, shared by the matcher tests (which check
// that a matched descriptor reads the kernel's buffers as the kernel does) and the cuBLASLt tests.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "schedule/gemm_desc.h"

namespace kiln::testing {

// Element e of an operand's memory (e: offset in elements from the operand's first element).
using ElementReader = std::function<double(int64_t e)>;

// Where each matrix element sits, in elements from the operand's first element.
int64_t a_offset(const schedule::GemmDesc& d, int64_t b, int64_t m, int64_t k);
int64_t b_offset(const schedule::GemmDesc& d, int64_t b, int64_t k, int64_t n);
int64_t c_offset(const schedule::GemmDesc& d, int64_t b, int64_t m, int64_t n);
int64_t aux_offset(const schedule::GemmDesc& d, int64_t m, int64_t n);  // batch 1, rows ld_aux apart
// Elements an operand spans (the largest offset + 1).
int64_t a_extent(const schedule::GemmDesc& d);
int64_t b_extent(const schedule::GemmDesc& d);
int64_t c_extent(const schedule::GemmDesc& d);

// kiln's gelu with the tanh approximation, and its derivative, in float64.
double gelu_tanh(double x);
double gelu_tanh_grad(double x);

struct GemmReference {
  std::vector<double> c;      // batch x M x N, dense (b, m, n)
  std::vector<double> scale;  // sum_k |a b| + |bias|: the size rounding errors are relative to
  std::vector<double> pre;    // A B + bias, before the activation: what GELU_AUX writes as aux
};
// C = epilogue(A B + bias) in float64; `bias` is read only when the epilogue has one, `aux` (the
// pre-activation DGELU reads) only by DGELU.
GemmReference reference_gemm(const schedule::GemmDesc& d, const ElementReader& a, const ElementReader& b,
                             const ElementReader& bias, const ElementReader& aux = nullptr);

}  // namespace kiln::testing
