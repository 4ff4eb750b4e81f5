// GEMMs through NVIDIA's cuBLASLt, loaded at run time with dlopen (libcublasLt.so.13, .so.12, .so;
// KILN_CUBLASLT names a library explicitly), so a build without the CUDA toolkit still links and a
// machine without the library simply falls back to kiln's generated kernels.
//
// Row-major handling: cuBLASLt is column-major. A row-major M x N matrix C with leading dimension
// ldc is, byte for byte, the column-major N x M matrix C^T with the same leading dimension. So kiln
// asks cuBLASLt for C^T = B^T A^T: its first operand is kiln's B, its second kiln's A, and its
// (m, n, k) are kiln's (N, M, K); each operand's transpose flag follows from how it sits in memory
// (see to_column_major). The bias vector, one value per column n of kiln's C, is then one value per
// row of cuBLASLt's D, which is what CUBLASLT_EPILOGUE_BIAS adds. An aux matrix laid out as kiln's C
// (rows ld_aux apart) is likewise cuBLASLt's aux laid out as its D, with leading dimension ld_aux.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/cuda/api.h"
#include "schedule/gemm_desc.h"

namespace kiln::runtime::cuda {

using schedule::GemmDesc;  // what the matcher found; the runner turns it into cuBLASLt calls
using schedule::GemmDescHash;
using schedule::GemmEpilogue;

// Whether libcublasLt loads and has every entry point kiln uses (`why` says why not). Needs no GPU.
bool cublaslt_available(std::string* why = nullptr);

// Why cuBLASLt cannot run this descriptor (unsupported dtype combination, bad sizes or leading
// dimensions), or "" when it can. Pure: no library or device is touched.
std::string gemm_unsupported(const GemmDesc& d);

// The column-major problem handed to cuBLASLt for a row-major GemmDesc (C^T = B^T A^T).
struct ColumnMajorLayout {
  int64_t rows = 0, cols = 0, ld = 0, batch_stride = 0;
};
struct ColumnMajorGemm {
  int64_t m = 0, n = 0, k = 0;  // cuBLASLt's: kiln's N, M, K
  bool trans_first = false;     // CUBLASLT_MATMUL_DESC_TRANSA: the first operand is kiln's B
  bool trans_second = false;    // CUBLASLT_MATMUL_DESC_TRANSB: the second operand is kiln's A
  ColumnMajorLayout first, second, out;
};
ColumnMajorGemm to_column_major(const GemmDesc& d);

// Queues C = epilogue(A x B (+ bias)) on the device's stream (Context::stream). a, b, c and bias
// point at the first element of each operand (bias: c_type values, n of them; 0 when the epilogue
// has no bias), aux at the aux matrix an aux epilogue writes or reads (16-byte aligned, else the
// call declines; 0 without one). Matmul descriptors, layouts and the chosen algorithm are cached per
// descriptor and operand alignment; a 32 MiB workspace is kept per device. Returns false, queuing nothing,
// when cuBLASLt is not installed, does not support the descriptor or finds no algorithm: the caller then runs
// kiln's generated kernel. Throws kiln::Error only for a device that does not exist.
bool gemm(int ordinal, const GemmDesc& d, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias,
          CUdeviceptr aux = 0);

}  // namespace kiln::runtime::cuda
