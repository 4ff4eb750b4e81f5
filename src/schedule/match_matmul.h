// Recognizes kernels that are (batched) matrix multiplies a GEMM library can run:
//   C[b, m, n] = out( epilogue( sum_k A[b, m, k] * B[b, k, n] (+ bias[n]) ) )
// where A and B are plain strided loads of input buffers (one of each operand's two inner dims
// contiguous), each optionally cast to f32 before or after the multiply, the sum accumulates in f32,
// the epilogue is nothing, + bias[n], gelu (kiln's Tensor::gelu(true), tanh approximation) or
// gelu(x + bias[n]), and `out` is an optional cast to the output dtype (f32, f16, bf16). Two more
// shapes take a gelu's aux matrix: a kernel with two outputs, the pre-activation and the gelu of it
// (GeluAux, BiasGeluAux), and x * gelu'(h) with h a load of the pre-activation laid out as C (DGelu:
// the gelu's gradient, as autograd writes it). Casts
// between the steps that round to the output dtype are accepted (the library keeps f32 there, so
// its result is at least as accurate as the kernel's).
//
// Several output dims can form one GEMM dim when they are nested contiguously in every operand
// (e.g. x.matmul(w) with x (B, M, K) and w (K, N) is one (B*M) x K times K x N GEMM); a dim read by
// A and B both is a batch dim; an outer dim that only A (or only B) reads and that cannot be merged
// becomes a batch dim with stride 0 in the other operand.
#pragma once
#include <cstdint>
#include <optional>

#include "ir/symbolic.h"
#include "schedule/gemm_desc.h"
#include "schedule/schedule.h"

namespace kiln::schedule {

struct MatchedMatmul {
  GemmDesc desc;  // allow_tf32 is left false: the caller decides
  // Which of Kernel::inputs hold A, B and the bias (-1: no bias), and the element offset of each
  // operand's first element in its buffer (views such as slices start inside a buffer).
  int a_input = -1, b_input = -1, bias_input = -1;
  int64_t a_offset = 0, b_offset = 0, bias_offset = 0;
  // Which of Kernel::outputs is C, and, with an epilogue that writes the aux matrix, which holds it
  // (-1: none); with one that reads it, the input holding it and its offset.
  int c_output = 0, aux_output = -1;
  int aux_input = -1;
  int64_t aux_offset = 0;
};

// Builds the tensor graph of Tensor::gelu(true) on the f32 node x: the epilogue template matched
// against kernels. The frontend, which defines gelu, registers it (schedule includes nothing above
// it); until then no epilogue is taken for a gelu.
using GeluGraph = ir::NodeRef (*)(const ir::NodeRef& x);
void set_gelu_graph(GeluGraph build);
// Likewise the gradient of Tensor::gelu(true) at the f32 node x given the f32 gradient dy of its
// output, as autograd builds it: the DGelu epilogue's template.
using GeluGradGraph = ir::NodeRef (*)(const ir::NodeRef& x, const ir::NodeRef& dy);
void set_gelu_grad_graph(GeluGradGraph build);

// The GEMM kernel k computes, or nullopt when it is anything else (elementwise, a reduction that is
// not a matmul, a matmul with fused work a GEMM epilogue cannot express, several outputs other than
// a gelu's pre-activation ...). A kernel with symbolic sizes matches at the values its tensors give
// the variables in this realize.
std::optional<MatchedMatmul> match_matmul(const Kernel& k);
// The same for the kernel AST `ast` with `nouts` outputs, its VARs at `values` (a symbolic kernel's
// GEMM at one binding; a VAR without a value does not match).
std::optional<MatchedMatmul> match_matmul_at(const ir::NodeRef& ast, size_t nouts,
                                             const ir::Bindings& values);
// Whether a matched GEMM is large enough for the library to beat the generated kernel.
bool worth_library_gemm(const GemmDesc& d);

}  // namespace kiln::schedule
