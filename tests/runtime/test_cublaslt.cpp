// cuBLASLt GEMMs. The first tests need no GPU (the column-major translation is checked against the
// float64 reference on the host; unsupported descriptors are refused). The GPU tests run gemm() on
// cuda:0 and compare every output element with the float64 reference computed from the same
// (rounded) inputs; without a GPU or without libcublasLt they skip with a one-line reason.
//
// Tolerances: |got - want| <= rel * sum_k|a b| + round * |want| + abs, per case: f32 exact
// rel 1e-5; TF32 rel 2e-3 (inputs keep 10 mantissa bits); bf16 / f16 outputs add two output ulps
// (round 8e-3 / 1e-3); GELU epilogues add abs 2e-3 (cuBLASLt may evaluate tanh approximately), and
// the aux matrix GELU_AUX writes is held to the pre-activation's bounds. A
// wrong transpose, stride or bias pointer gives errors of the order of the values themselves.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <sstream>

#include "gemm_reference.h"
#include "runtime/buffer.h"
#include "runtime/cuda/cublaslt.h"

using namespace kiln;
using namespace kiln::testing;
using runtime::cuda::ColumnMajorGemm;
using runtime::cuda::gemm_unsupported;
using runtime::cuda::to_column_major;
using schedule::GemmDesc;
using schedule::GemmEpilogue;

namespace {

// A dense descriptor: leading dims and batch strides as tight as the shapes allow, plus `pad`.
GemmDesc dense(int64_t m, int64_t n, int64_t k, DType in, DType out, bool ta = false, bool tb = false,
               int64_t batch = 1, GemmEpilogue epi = GemmEpilogue::None, int64_t pad = 0) {
  GemmDesc d;
  d.m = m;
  d.n = n;
  d.k = k;
  d.batch = batch;
  d.trans_a = ta;
  d.trans_b = tb;
  d.lda = (ta ? m : k) + pad;
  d.ldb = (tb ? k : n) + pad;
  d.ldc = n + pad;
  if (batch > 1) {
    d.stride_a = (ta ? k : m) * d.lda;
    d.stride_b = (tb ? n : k) * d.ldb;
    d.stride_c = m * d.ldc;
  }
  d.a_type = d.b_type = in;
  d.c_type = out;
  d.epilogue = epi;
  return d;
}

std::string describe(const GemmDesc& d) {
  std::ostringstream os;
  os << "GEMM " << d.m << "x" << d.n << "x" << d.k << " batch " << d.batch << " " << dtype_name(d.a_type)
     << "->" << dtype_name(d.c_type) << (d.trans_a ? " A^T" : "") << (d.trans_b ? " B^T" : "") << " lda "
     << d.lda << " ldb " << d.ldb << " ldc " << d.ldc << " strides " << d.stride_a << "/" << d.stride_b << "/"
     << d.stride_c << (d.allow_tf32 ? " tf32" : "") << " epilogue " << static_cast<int>(d.epilogue);
  return os.str();
}

std::vector<double> random_values(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

// --- host-only ---

// Runs the column-major problem to_column_major() describes, in float64, as cuBLASLt would:
// D(i, j) = sum_l op(first)(i, l) op(second)(l, j), element (r, c) of a layout at c * ld + r.
std::vector<double> column_major_gemm(const ColumnMajorGemm& cm, int64_t batch, const std::vector<double>& a,
                                      const std::vector<double>& b, int64_t out_size) {
  std::vector<double> d(static_cast<size_t>(out_size), 0.0);
  auto at = [](const runtime::cuda::ColumnMajorLayout& l, bool trans, int64_t bt, int64_t i, int64_t j) {
    int64_t r = trans ? j : i, c = trans ? i : j;
    return bt * l.batch_stride + c * l.ld + r;
  };
  for (int64_t bt = 0; bt < batch; bt++)
    for (int64_t i = 0; i < cm.m; i++)
      for (int64_t j = 0; j < cm.n; j++) {
        double s = 0;
        for (int64_t l = 0; l < cm.k; l++)
          s += b[static_cast<size_t>(at(cm.first, cm.trans_first, bt, i, l))] *
               a[static_cast<size_t>(at(cm.second, cm.trans_second, bt, l, j))];
        d[static_cast<size_t>(bt * cm.out.batch_stride + j * cm.out.ld + i)] = s;
      }
  return d;
}

}  // namespace

TEST(CuBLASLtHost, ColumnMajorTranslationComputesTheRowMajorProduct) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      GemmDesc d = dense(5, 7, 3, DType::F32, DType::F32, ta, tb, 2, GemmEpilogue::None, 2);
      SCOPED_TRACE(describe(d));
      ColumnMajorGemm cm = to_column_major(d);
      EXPECT_EQ(cm.m, d.n);
      EXPECT_EQ(cm.n, d.m);
      EXPECT_EQ(cm.k, d.k);
      std::vector<double> a = random_values(a_extent(d), 1), b = random_values(b_extent(d), 2);
      // in cuBLASLt's call the first operand is kiln's B, the second kiln's A
      std::vector<double> got = column_major_gemm(cm, d.batch, a, b, c_extent(d));
      GemmReference want = reference_gemm(
          d, [&](int64_t e) { return a[static_cast<size_t>(e)]; },
          [&](int64_t e) { return b[static_cast<size_t>(e)]; }, [](int64_t) { return 0.0; });
      for (int64_t bt = 0; bt < d.batch; bt++)
        for (int64_t m = 0; m < d.m; m++)
          for (int64_t n = 0; n < d.n; n++)
            EXPECT_NEAR(got[static_cast<size_t>(c_offset(d, bt, m, n))],
                        want.c[static_cast<size_t>((bt * d.m + m) * d.n + n)], 1e-12);
    }
}

TEST(CuBLASLtHost, UnsupportedDescriptorsAreNamed) {
  EXPECT_EQ(gemm_unsupported(dense(64, 64, 64, DType::F32, DType::F32)), "");
  EXPECT_EQ(gemm_unsupported(dense(64, 64, 64, DType::BF16, DType::F32)), "");
  EXPECT_EQ(gemm_unsupported(dense(64, 64, 64, DType::F16, DType::F16, true, true, 4)), "");
  EXPECT_NE(gemm_unsupported(dense(64, 64, 64, DType::F32, DType::BF16)), "");
  EXPECT_NE(gemm_unsupported(dense(64, 64, 64, DType::F64, DType::F64)), "");
  GemmDesc mixed = dense(64, 64, 64, DType::BF16, DType::BF16);
  mixed.b_type = DType::F16;
  EXPECT_NE(gemm_unsupported(mixed), "");
  GemmDesc narrow = dense(64, 64, 64, DType::F32, DType::F32);
  narrow.lda = 32;
  EXPECT_NE(gemm_unsupported(narrow), "");
  EXPECT_NE(gemm_unsupported(dense(0, 64, 64, DType::F32, DType::F32)), "");
  GemmDesc aux = dense(64, 64, 64, DType::BF16, DType::BF16, false, true, 1, GemmEpilogue::BiasGeluAux);
  aux.ld_aux = 64;
  EXPECT_EQ(gemm_unsupported(aux), "");
  aux.ld_aux = 68;  // cuBLASLt's aux rows are a multiple of 8 elements apart
  EXPECT_NE(gemm_unsupported(aux), "");
  aux.ld_aux = 56;
  EXPECT_NE(gemm_unsupported(aux), "");
  GemmDesc batched_aux = dense(64, 64, 64, DType::BF16, DType::BF16, false, false, 2, GemmEpilogue::DGelu);
  batched_aux.ld_aux = 64;
  EXPECT_NE(gemm_unsupported(batched_aux), "");
}

TEST(CuBLASLtHost, WithoutALibraryOrGpuGemmDeclines) {
  std::string why;
  bool lib = runtime::cuda::cublaslt_available(&why);
  if (!lib) {
    EXPECT_FALSE(why.empty());
  }
  if (lib && cuda_available()) GTEST_SKIP() << "cuBLASLt and a GPU are present (the GPU tests cover this)";
  EXPECT_FALSE(runtime::cuda::gemm(0, dense(64, 64, 64, DType::F32, DType::F32), 0, 0, 0, 0));
}

// --- on the GPU ---

namespace {

struct Operand {
  std::shared_ptr<Buffer> device;
  std::vector<double> host;  // the values as stored (rounded to the dtype)
};

Operand upload_random(int64_t n, DType t, uint64_t seed) {
  Buffer host(t, n);
  std::vector<double> v = random_values(n, seed);
  Operand o;
  for (int64_t i = 0; i < n; i++) host.set_f(i, v[static_cast<size_t>(i)]);
  for (int64_t i = 0; i < n; i++) o.host.push_back(host.get_f(i));
  o.device = host.to(Device::cuda(0));
  return o;
}

runtime::cuda::CUdeviceptr ptr(const Operand& o, int64_t offset = 0) {
  return reinterpret_cast<runtime::cuda::CUdeviceptr>(o.device->data) +
         static_cast<uint64_t>(offset * dtype_size(o.device->dtype));
}

struct Tolerance {
  double rel = 1e-5, round = 0, abs = 1e-6;
};
Tolerance tolerance(const GemmDesc& d) {
  Tolerance t;
  if (d.a_type == DType::F32 && d.allow_tf32) t.rel = 2e-3;
  if (d.a_type != DType::F32) t.rel = 1e-4;
  if (d.c_type == DType::BF16) t.round = 8e-3;
  if (d.c_type == DType::F16) t.round = 1e-3;
  if (d.epilogue != GemmEpilogue::None && d.epilogue != GemmEpilogue::Bias) t.abs += 2e-3;
  return t;
}

#define REQUIRE_GPU()                                                           \
  do {                                                                          \
    std::string why_;                                                           \
    if (!cuda_available(&why_)) GTEST_SKIP() << "no usable CUDA GPU: " << why_; \
    if (!runtime::cuda::cublaslt_available(&why_)) GTEST_SKIP() << why_;        \
  } while (0)

// Runs d on cuda:0 with random inputs (A starting `a_shift` elements into its buffer) and compares
// with the float64 reference; `bias_seed` picks the bias values. With an aux epilogue the aux matrix
// is random pre-activations (DGELU reads them) or checked against the reference's (GELU_AUX writes
// them).
void check_gemm(const GemmDesc& d, int64_t a_shift = 0, uint64_t bias_seed = 3) {
  SCOPED_TRACE(describe(d));
  Operand a = upload_random(a_extent(d) + a_shift, d.a_type, 1), b = upload_random(b_extent(d), d.b_type, 2);
  Operand bias = upload_random(d.n, d.c_type, bias_seed);
  Operand c = upload_random(c_extent(d), d.c_type, 4);  // garbage the GEMM must overwrite
  Operand aux = upload_random(d.has_aux() ? d.m * d.ld_aux : 1, d.c_type, 5);
  bool ran = runtime::cuda::gemm(0, d, ptr(a, a_shift), ptr(b), ptr(c), d.has_bias() ? ptr(bias) : 0,
                                 d.has_aux() ? ptr(aux) : 0);
  ASSERT_TRUE(ran) << "cuBLASLt declined the descriptor (no algorithm, or unsupported): "
                   << runtime::cuda::gemm_unsupported(d);
  synchronize(Device::cuda(0));
  std::shared_ptr<Buffer> out = c.device->to(Device::cpu());
  std::shared_ptr<Buffer> aux_out = aux.device->to(Device::cpu());
  GemmReference want = reference_gemm(
      d, [&](int64_t e) { return a.host[static_cast<size_t>(a_shift + e)]; },
      [&](int64_t e) { return b.host[static_cast<size_t>(e)]; },
      [&](int64_t e) { return bias.host[static_cast<size_t>(e)]; },
      [&](int64_t e) { return aux.host[static_cast<size_t>(e)]; });
  bool writes_aux = d.epilogue == GemmEpilogue::GeluAux || d.epilogue == GemmEpilogue::BiasGeluAux;
  Tolerance tol = tolerance(d);
  int bad = 0;
  double worst = 0;
  auto check = [&](const char* what, int64_t bt, int64_t m, int64_t n, double got, double w, double scale) {
    double err = std::fabs(got - w), bound = tol.rel * scale + tol.round * std::fabs(w) + tol.abs;
    worst = std::max(worst, err / bound);
    if (!(err <= bound) && bad++ < 5)
      ADD_FAILURE() << what << "[" << bt << "][" << m << "][" << n << "] = " << got << ", float64 reference "
                    << w << " (error " << err << ", allowed " << bound << ")";
  };
  for (int64_t bt = 0; bt < d.batch; bt++)
    for (int64_t m = 0; m < d.m; m++)
      for (int64_t n = 0; n < d.n; n++) {
        size_t i = static_cast<size_t>((bt * d.m + m) * d.n + n);
        check("C", bt, m, n, out->get_f(c_offset(d, bt, m, n)), want.c[i], want.scale[i]);
        if (writes_aux)
          check("aux", bt, m, n, aux_out->get_f(aux_offset(d, m, n)), want.pre[i], want.scale[i]);
      }
  EXPECT_EQ(bad, 0) << bad << " elements out of tolerance; worst error / allowed = " << worst;
}

}  // namespace

TEST(CuBLASLt, F32ExactAllTransposes) {
  REQUIRE_GPU();
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check_gemm(dense(96, 80, 72, DType::F32, DType::F32, ta, tb));
}

TEST(CuBLASLt, F32WithTF32) {
  REQUIRE_GPU();
  for (bool tb : {false, true}) {
    GemmDesc d = dense(128, 96, 256, DType::F32, DType::F32, false, tb);
    d.allow_tf32 = true;
    check_gemm(d);
  }
}

TEST(CuBLASLt, BF16AllTransposes) {
  REQUIRE_GPU();
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check_gemm(dense(96, 80, 72, DType::BF16, DType::BF16, ta, tb));
  check_gemm(dense(96, 80, 72, DType::BF16, DType::F32));  // bf16 inputs, f32 output
}

TEST(CuBLASLt, F16) {
  REQUIRE_GPU();
  check_gemm(dense(96, 80, 72, DType::F16, DType::F16));
  check_gemm(dense(96, 80, 72, DType::F16, DType::F16, true, false));
  check_gemm(dense(96, 80, 72, DType::F16, DType::F32, false, true));
}

TEST(CuBLASLt, Epilogues) {
  REQUIRE_GPU();
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (GemmEpilogue e : {GemmEpilogue::Bias, GemmEpilogue::Gelu, GemmEpilogue::BiasGelu})
      check_gemm(dense(96, 80, 72, t, t, false, true, 1, e));  // Linear: x w^T (+ b)
}

// A training MLP's gelu: GELU_AUX(_BIAS) writes the pre-activation beside the gelu, DGELU multiplies
// a product by gelu' of a pre-activation it reads; the aux matrix with rows as long as C's or padded.
TEST(CuBLASLt, GeluAuxEpilogues) {
  REQUIRE_GPU();
  for (DType t : {DType::BF16, DType::F16, DType::F32})
    for (GemmEpilogue e : {GemmEpilogue::GeluAux, GemmEpilogue::BiasGeluAux, GemmEpilogue::DGelu})
      for (int64_t pad : {0, 8}) {
        GemmDesc d = dense(96, 80, 72, t, t, false, true, 1, e);
        d.ld_aux = d.n + pad;
        check_gemm(d);
      }
  GemmDesc back = dense(128, 256, 64, DType::BF16, DType::BF16, false, false, 1, GemmEpilogue::DGelu);
  back.ld_aux = 256;  // dout w: w not transposed, as a Linear's backward reads it
  check_gemm(back);
}

TEST(CuBLASLt, Batched) {
  REQUIRE_GPU();
  check_gemm(dense(64, 48, 40, DType::F32, DType::F32, false, false, 3));
  check_gemm(dense(64, 48, 40, DType::BF16, DType::BF16, false, true, 4));  // q k^T per head
  check_gemm(dense(64, 48, 40, DType::BF16, DType::BF16, true, false, 2, GemmEpilogue::BiasGelu));
  GemmDesc shared_b = dense(64, 48, 40, DType::F32, DType::F32, false, false, 3);
  shared_b.stride_b = 0;  // one B for every batch entry
  check_gemm(shared_b);
}

TEST(CuBLASLt, PaddedLeadingDimensionsAndOddSizes) {
  REQUIRE_GPU();
  check_gemm(dense(64, 48, 40, DType::F32, DType::F32, false, false, 2, GemmEpilogue::Bias, 8));
  check_gemm(dense(64, 48, 40, DType::BF16, DType::BF16, true, true, 1, GemmEpilogue::None, 8));
  check_gemm(dense(33, 17, 29, DType::F32, DType::F32));
  check_gemm(dense(33, 17, 29, DType::F32, DType::F32, true, true));
}

TEST(CuBLASLt, MisalignedOperandStillRuns) {
  REQUIRE_GPU();
  check_gemm(dense(64, 48, 40, DType::F32, DType::F32), 1);  // A 4 bytes past a 256-byte boundary
}

TEST(CuBLASLt, CachedPlanTakesEachCallsBias) {
  REQUIRE_GPU();
  GemmDesc d = dense(64, 48, 40, DType::F32, DType::F32, false, true, 1, GemmEpilogue::Bias);
  check_gemm(d, 0, 3);
  check_gemm(d, 0, 5);  // same descriptor, another bias buffer and values
}

TEST(CuBLASLt, UnsupportedDescriptorIsDeclinedNotThrown) {
  REQUIRE_GPU();
  Operand a = upload_random(64 * 64, DType::F32, 1);
  bool ran = true;
  EXPECT_NO_THROW(
      ran = runtime::cuda::gemm(0, dense(64, 64, 64, DType::F32, DType::BF16), ptr(a), ptr(a), ptr(a), 0));
  EXPECT_FALSE(ran);
  // an aux matrix not 16-byte aligned, or missing
  GemmDesc d = dense(64, 64, 64, DType::F32, DType::F32, false, false, 1, GemmEpilogue::GeluAux);
  d.ld_aux = 64;
  Operand c = upload_random(64 * 64 + 1, DType::F32, 2);
  EXPECT_FALSE(runtime::cuda::gemm(0, d, ptr(a), ptr(a), ptr(c), 0, ptr(c, 1)));
  EXPECT_FALSE(runtime::cuda::gemm(0, d, ptr(a), ptr(a), ptr(c), 0, 0));
}

// A new plan times the heuristic's candidates on the call's operands and keeps the fastest (said at
// KILN_DEBUG=3), and keeps its choice in the program cache: once the plans in memory are forgotten,
// the same GEMM reads it back and times nothing. With KILN_DETERMINISTIC the heuristic's first
// choice is kept, timing nothing.
TEST(CuBLASLt, PlansTimeTheHeuristicsCandidatesOnce) {
  REQUIRE_GPU();
  Settings saved = settings();
  auto dir = std::filesystem::temp_directory_path() / ("kiln_gemm_choice_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  settings().cache_dir = dir.string();
  settings().debug = 3;
  GemmDesc d = dense(512, 384, 256, DType::BF16, DType::BF16, false, true);
  ::testing::internal::CaptureStderr();
  check_gemm(d);
  std::string timed = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(timed.find("cuBLASLt 512x384x256: "), std::string::npos) << timed;
  EXPECT_NE(timed.find("candidates timed"), std::string::npos) << timed;
  clear_memory_cache();
  ::testing::internal::CaptureStderr();
  check_gemm(d);
  std::string cached = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(cached.find("candidates timed"), std::string::npos) << cached;
  settings().deterministic = true;
  ::testing::internal::CaptureStderr();
  check_gemm(dense(520, 384, 256, DType::BF16, DType::BF16, false, true));
  std::string kept = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(kept.find("candidates timed"), std::string::npos) << kept;
  settings() = saved;
  std::filesystem::remove_all(dir);
}
