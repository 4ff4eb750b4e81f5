// cuBLASLt GEMMs (see cublaslt.h).
//
// cublasLt.h cannot be included (machines without the CUDA toolkit build kiln), so the enum values
// below are written out. Each was checked against NVIDIA's headers: cublasLt.h
// (cublasLtMatmulDescAttributes_t, cublasLtMatrixLayoutAttribute_t,
// cublasLtMatmulPreferenceAttributes_t, cublasLtEpilogue_t, cublasLtMatmulHeuristicResult_t),
// cublas_api.h (cublasComputeType_t, cublasOperation_t, cublasStatus_t) and library_types.h
// (cudaDataType_t); the cuBLAS documentation (docs.nvidia.com/cuda/cublas, section cuBLASLt
// datatypes reference) lists the same values.
#include "runtime/cuda/cublaslt.h"

#include <climits>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/debug.h"
#include "runtime/cache_dir.h"
#include "runtime/cache_entry.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/context.h"
#include "runtime/program_cache.h"

namespace kiln::runtime::cuda {

namespace {

// cudaDataType_t (library_types.h)
constexpr int kCudaR32F = 0;    // CUDA_R_32F
constexpr int kCudaR16F = 2;    // CUDA_R_16F
constexpr int kCudaR16BF = 14;  // CUDA_R_16BF
// cublasComputeType_t (cublas_api.h)
constexpr int kCompute32F = 68;          // CUBLAS_COMPUTE_32F
constexpr int kCompute32FFastTF32 = 77;  // CUBLAS_COMPUTE_32F_FAST_TF32
// cublasOperation_t (cublas_api.h)
constexpr int32_t kOpN = 0;  // CUBLAS_OP_N
constexpr int32_t kOpT = 1;  // CUBLAS_OP_T
// cublasStatus_t (cublas_api.h)
constexpr int kStatusSuccess = 0;  // CUBLAS_STATUS_SUCCESS
// cublasLtMatmulDescAttributes_t (cublasLt.h)
constexpr int kDescTransA = 3;       // CUBLASLT_MATMUL_DESC_TRANSA, int32_t
constexpr int kDescTransB = 4;       // CUBLASLT_MATMUL_DESC_TRANSB, int32_t
constexpr int kDescEpilogue = 7;     // CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t
constexpr int kDescBiasPointer = 8;  // CUBLASLT_MATMUL_DESC_BIAS_POINTER, const void*
constexpr int kDescAuxPointer = 11;  // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, void*
constexpr int kDescAuxLd = 12;       // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t (elements)
constexpr int kDescAuxType = 22;     // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, int32_t
// cublasLtEpilogue_t (cublasLt.h)
constexpr uint32_t kEpilogueDefault = 1;        // CUBLASLT_EPILOGUE_DEFAULT
constexpr uint32_t kEpilogueBias = 4;           // CUBLASLT_EPILOGUE_BIAS
constexpr uint32_t kEpilogueGelu = 32;          // CUBLASLT_EPILOGUE_GELU
constexpr uint32_t kEpilogueGeluBias = 36;      // CUBLASLT_EPILOGUE_GELU_BIAS = GELU | BIAS
constexpr uint32_t kEpilogueGeluAux = 160;      // CUBLASLT_EPILOGUE_GELU_AUX = GELU | 128
constexpr uint32_t kEpilogueGeluAuxBias = 164;  // CUBLASLT_EPILOGUE_GELU_AUX_BIAS = GELU_AUX | BIAS
constexpr uint32_t kEpilogueDGelu = 192;        // CUBLASLT_EPILOGUE_DGELU = 64 | 128
// cublasLtMatrixLayoutAttribute_t (cublasLt.h)
constexpr int kLayoutBatchCount = 5;   // CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, int32_t
constexpr int kLayoutBatchStride = 6;  // CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, int64_t
// cublasLtMatmulPreferenceAttributes_t (cublasLt.h)
constexpr int kPrefMaxWorkspace = 1;  // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t
constexpr int kPrefMinAlignA = 5;     // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t
constexpr int kPrefMinAlignB = 6;     // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, uint32_t
constexpr int kPrefMinAlignC = 7;     // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, uint32_t
constexpr int kPrefMinAlignD = 8;     // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, uint32_t

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// Opaque cuBLASLt objects, and the two structs kiln reads (layouts as in cublasLt.h).
using LtHandle = void*;      // cublasLtHandle_t
using LtMatmulDesc = void*;  // cublasLtMatmulDesc_t
using LtLayout = void*;      // cublasLtMatrixLayout_t
using LtPreference = void*;  // cublasLtMatmulPreference_t
struct LtAlgo {              // cublasLtMatmulAlgo_t
  uint64_t data[8];
};
struct LtHeuristic {  // cublasLtMatmulHeuristicResult_t
  LtAlgo algo;
  size_t workspace_size;
  int state;  // cublasStatus_t
  float waves_count;
  int reserved[4];
};
static_assert(sizeof(LtHeuristic) == 96, "cublasLtMatmulHeuristicResult_t is 96 bytes");

struct LtApi {
  void* lib = nullptr;
  int (*cublasLtCreate)(LtHandle*);
  int (*cublasLtMatmulDescCreate)(LtMatmulDesc*, int compute_type, int scale_type);
  int (*cublasLtMatmulDescDestroy)(LtMatmulDesc);
  int (*cublasLtMatmulDescSetAttribute)(LtMatmulDesc, int, const void*, size_t);
  int (*cublasLtMatrixLayoutCreate)(LtLayout*, int type, uint64_t rows, uint64_t cols, int64_t ld);
  int (*cublasLtMatrixLayoutDestroy)(LtLayout);
  int (*cublasLtMatrixLayoutSetAttribute)(LtLayout, int, const void*, size_t);
  int (*cublasLtMatmulPreferenceCreate)(LtPreference*);
  int (*cublasLtMatmulPreferenceDestroy)(LtPreference);
  int (*cublasLtMatmulPreferenceSetAttribute)(LtPreference, int, const void*, size_t);
  int (*cublasLtMatmulAlgoGetHeuristic)(LtHandle, LtMatmulDesc, LtLayout, LtLayout, LtLayout, LtLayout,
                                        LtPreference, int, LtHeuristic*, int*);
  int (*cublasLtMatmul)(LtHandle, LtMatmulDesc, const void* alpha, const void* a, LtLayout, const void* b,
                        LtLayout, const void* beta, const void* c, LtLayout, void* d, LtLayout, const LtAlgo*,
                        void* workspace, size_t workspace_bytes, CUstream);
  int (*cublasLtMatmulAlgoCheck)(LtHandle, LtMatmulDesc, LtLayout, LtLayout, LtLayout, LtLayout,
                                 const LtAlgo*, LtHeuristic*);
  size_t (*cublasLtGetVersion)();
};

struct LoadedLt {
  LtApi api;
  bool ok = false;
  std::string why;
};

LoadedLt load_lt() {
  LoadedLt r;
  LtApi& a = r.api;
  std::string tried;
  std::string home = env("CUDA_HOME").empty() ? env("CUDA_PATH") : env("CUDA_HOME");
  a.lib =
      open_first({settings().cublaslt, "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so",
                  home.empty() ? "" : home + "/lib64/libcublasLt.so", "/usr/local/cuda/lib64/libcublasLt.so"},
                 tried);
  if (!a.lib) {
    r.why = "cuBLASLt is not installed (tried " + tried + ")";
    return r;
  }
  std::string missing;
  bind(a.lib, a.cublasLtCreate, "cublasLtCreate", missing);
  bind(a.lib, a.cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate", missing);
  bind(a.lib, a.cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy", missing);
  bind(a.lib, a.cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute", missing);
  bind(a.lib, a.cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate", missing);
  bind(a.lib, a.cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy", missing);
  bind(a.lib, a.cublasLtMatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute", missing);
  bind(a.lib, a.cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate", missing);
  bind(a.lib, a.cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy", missing);
  bind(a.lib, a.cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute", missing);
  bind(a.lib, a.cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic", missing);
  bind(a.lib, a.cublasLtMatmul, "cublasLtMatmul", missing);
  bind(a.lib, a.cublasLtMatmulAlgoCheck, "cublasLtMatmulAlgoCheck", missing);
  bind(a.lib, a.cublasLtGetVersion, "cublasLtGetVersion", missing);
  if (!missing.empty()) {
    r.why = "cuBLASLt lacks the entry point " + missing + " (too old a library?)";
    return r;
  }
  r.ok = true;
  return r;
}

const LtApi* lt_api(std::string* why = nullptr) {
  static std::once_flag once;
  static LoadedLt* loaded = nullptr;
  std::call_once(once, [] { loaded = new LoadedLt(load_lt()); });
  if (!loaded->ok) {
    if (why) *why = loaded->why;
    return nullptr;
  }
  return &loaded->api;
}

int cuda_type(DType t) {
  switch (t) {
    case DType::F32: return kCudaR32F;
    case DType::F16: return kCudaR16F;
    case DType::BF16: return kCudaR16BF;
    default: return -1;
  }
}

uint32_t epilogue_code(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::None: return kEpilogueDefault;
    case GemmEpilogue::Bias: return kEpilogueBias;
    case GemmEpilogue::Gelu: return kEpilogueGelu;
    case GemmEpilogue::BiasGelu: return kEpilogueGeluBias;
    case GemmEpilogue::GeluAux: return kEpilogueGeluAux;
    case GemmEpilogue::BiasGeluAux: return kEpilogueGeluAuxBias;
    case GemmEpilogue::DGelu: return kEpilogueDGelu;
  }
  return kEpilogueDefault;
}

// The largest power of two (at most 256) dividing the address: what the algorithm may assume.
uint32_t alignment(CUdeviceptr p) {
  uint32_t a = 256;
  while (a > 1 && p % a) a /= 2;
  return a;
}

// A descriptor at given operand alignments: the cache key of a plan.
struct PlanKey {
  GemmDesc d;
  uint32_t align_a = 0, align_b = 0, align_c = 0, align_bias = 0, align_aux = 0;
  bool operator==(const PlanKey&) const = default;
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    return GemmDescHash()(k.d) ^ (static_cast<size_t>(k.align_a) << 1) ^
           (static_cast<size_t>(k.align_b) << 11) ^ (static_cast<size_t>(k.align_c) << 21) ^
           (static_cast<size_t>(k.align_bias) << 31) ^ (static_cast<size_t>(k.align_aux) << 41);
  }
};

// cuBLASLt's objects for one descriptor, created once and kept for the life of the process.
struct Plan {
  bool ok = false;  // false: cuBLASLt has no algorithm for it (remembered, so it is asked once)
  LtMatmulDesc desc = nullptr;
  LtLayout first = nullptr, second = nullptr, out = nullptr;
  LtAlgo algo{};
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    const LtApi* lt = lt_api();
    if (!lt) return;
    if (desc) lt->cublasLtMatmulDescDestroy(desc);
    for (LtLayout l : {first, second, out})
      if (l) lt->cublasLtMatrixLayoutDestroy(l);
  }
};

// Per device: the handle, the workspace and the plans. Never destroyed (static destructors may run
// after the driver is gone).
struct DeviceState {
  std::mutex mu;
  bool tried = false;
  LtHandle handle = nullptr;
  CUdeviceptr workspace = 0;
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;
};

std::mutex states_mu;
std::vector<DeviceState*>* states = new std::vector<DeviceState*>();

// kiln::clear_memory_cache: the plans are forgotten (a later call reads its choice from the cache)
void forget_plans() {
  std::lock_guard<std::mutex> l(states_mu);
  for (DeviceState* s : *states)
    if (s) {
      std::lock_guard<std::mutex> ls(s->mu);
      s->plans.clear();
    }
}

DeviceState& device_state(int ordinal) {
  static const bool registered = (on_clear_memory_cache(forget_plans), true);
  (void)registered;
  std::vector<DeviceState*>* all = states;
  std::lock_guard<std::mutex> l(states_mu);
  if (all->size() <= static_cast<size_t>(ordinal)) all->resize(static_cast<size_t>(ordinal) + 1, nullptr);
  DeviceState*& s = (*all)[static_cast<size_t>(ordinal)];
  if (!s) s = new DeviceState();
  return *s;
}

bool make_layout(const LtApi& lt, LtLayout* out, int type, const ColumnMajorLayout& l, int64_t batch) {
  if (lt.cublasLtMatrixLayoutCreate(out, type, static_cast<uint64_t>(l.rows), static_cast<uint64_t>(l.cols),
                                    l.ld) != kStatusSuccess)
    return false;
  if (batch == 1) return true;
  int32_t count = static_cast<int32_t>(batch);
  int64_t stride = l.batch_stride;
  return lt.cublasLtMatrixLayoutSetAttribute(*out, kLayoutBatchCount, &count, sizeof(count)) ==
             kStatusSuccess &&
         lt.cublasLtMatrixLayoutSetAttribute(*out, kLayoutBatchStride, &stride, sizeof(stride)) ==
             kStatusSuccess;
}

// The operands of the call a plan is made for: its candidates are timed on them.
struct Operands {
  CUdeviceptr a, b, c, bias, aux, workspace;
  CUstream stream;
};

// Candidates the heuristic is asked for; each is timed on the first call's operands, kTimedRuns runs.
constexpr int kCandidates = 8;
constexpr int kTimedRuns = 3;

// Device time of `runs` runs of candidate `algo` (after one untimed run), or infinity when it fails.
double time_algo(const LtApi& lt, LtHandle handle, const Plan& p, const LtAlgo& algo, const Operands& o,
                 int runs) {
  const Api& cu = *api();
  const float alpha = 1.0f, beta = 0.0f;
  auto ptr = [](CUdeviceptr x) { return reinterpret_cast<void*>(static_cast<uintptr_t>(x)); };
  auto run = [&] {
    return lt.cublasLtMatmul(handle, p.desc, &alpha, ptr(o.b), p.first, ptr(o.a), p.second, &beta, ptr(o.c),
                             p.out, ptr(o.c), p.out, &algo, ptr(o.workspace), kWorkspaceBytes,
                             o.stream) == kStatusSuccess;
  };
  CUevent start = nullptr, stop = nullptr;
  double ms = std::numeric_limits<double>::infinity();
  bool ok = cu.cuEventCreate(&start, 0) == 0 && cu.cuEventCreate(&stop, 0) == 0;
  ok = ok && run() && cu.cuEventRecord(start, o.stream) == 0;
  for (int r = 0; ok && r < runs; r++) ok = run();
  float elapsed = 0;
  if (ok && cu.cuEventRecord(stop, o.stream) == 0 && cu.cuEventSynchronize(stop) == 0 &&
      cu.cuEventElapsedTime(&elapsed, start, stop) == 0)
    ms = elapsed;
  if (start) cu.cuEventDestroy(start);
  if (stop) cu.cuEventDestroy(stop);
  return ms;
}

// The program-cache entry holding the algorithm chosen for a plan on this device and cuBLASLt.
std::string choice_path(const LtApi& lt, const PlanKey& key, const std::string& device) {
  const GemmDesc& d = key.d;
  std::ostringstream k;
  k << "cublaslt " << lt.cublasLtGetVersion() << " " << device;
  for (int64_t v :
       {d.m, d.n, d.k, d.batch, d.lda, d.ldb, d.ldc, d.stride_a, d.stride_b, d.stride_c, d.ld_aux})
    k << " " << v;
  k << " " << d.trans_a << d.trans_b << d.allow_tf32 << " " << static_cast<int>(d.epilogue) << " "
    << static_cast<int>(d.a_type) << " " << static_cast<int>(d.b_type) << " " << static_cast<int>(d.c_type)
    << " " << key.align_a << " " << key.align_b << " " << key.align_c << " " << key.align_bias << " "
    << key.align_aux;
  return cache_dir() + "/gemm_" + hash_hex(hash_string(k.str())) + ".algo";
}

// A chosen algorithm read back from the cache, if its entry is whole and cuBLASLt still accepts it
// for the plan's descriptors.
std::optional<LtAlgo> cached_choice(const LtApi& lt, LtHandle handle, const Plan& p,
                                    const std::string& path) {
  std::optional<std::string> bytes = read_entry(path);
  if (!bytes || bytes->size() != sizeof(LtAlgo)) return std::nullopt;
  LtAlgo algo;
  std::memcpy(&algo, bytes->data(), sizeof algo);
  LtHeuristic check{};
  if (lt.cublasLtMatmulAlgoCheck(handle, p.desc, p.first, p.second, p.out, p.out, &algo, &check) !=
          kStatusSuccess ||
      check.state != kStatusSuccess || check.workspace_size > kWorkspaceBytes)
    return std::nullopt;
  return algo;
}

// Builds the descriptors and asks the heuristic for its best algorithms; plan.ok says whether it
// found one. Several candidates are timed on the call's operands and the fastest kept (the
// heuristic's first choice is not always the fastest for a shape); not while a graph is being
// captured (nothing may wait then) nor with KILN_DETERMINISTIC (the choice would vary by run). The
// choice is kept in the program cache, so a later process times nothing.
std::unique_ptr<Plan> make_plan(const LtApi& lt, LtHandle handle, const PlanKey& key, const Operands& o,
                                const std::string& device) {
  const CUdeviceptr bias = o.bias;
  auto p = std::make_unique<Plan>();
  const GemmDesc& d = key.d;
  ColumnMajorGemm cm = to_column_major(d);
  bool f32 = d.a_type == DType::F32;
  int compute = f32 && d.allow_tf32 ? kCompute32FFastTF32 : kCompute32F;
  if (lt.cublasLtMatmulDescCreate(&p->desc, compute, kCudaR32F) != kStatusSuccess) {
    p->desc = nullptr;
    return p;
  }
  int32_t ta = cm.trans_first ? kOpT : kOpN, tb = cm.trans_second ? kOpT : kOpN;
  uint32_t epi = epilogue_code(d.epilogue);
  bool ok = lt.cublasLtMatmulDescSetAttribute(p->desc, kDescTransA, &ta, sizeof(ta)) == kStatusSuccess &&
            lt.cublasLtMatmulDescSetAttribute(p->desc, kDescTransB, &tb, sizeof(tb)) == kStatusSuccess &&
            lt.cublasLtMatmulDescSetAttribute(p->desc, kDescEpilogue, &epi, sizeof(epi)) == kStatusSuccess;
  if (ok && d.has_bias()) {  // the heuristic reads the pointer's alignment
    const void* bp = reinterpret_cast<const void*>(static_cast<uintptr_t>(bias));
    ok = lt.cublasLtMatmulDescSetAttribute(p->desc, kDescBiasPointer, &bp, sizeof(bp)) == kStatusSuccess;
  }
  if (ok && d.has_aux()) {  // laid out as cuBLASLt's D: N x M column-major, ld_aux apart
    void* ap = reinterpret_cast<void*>(static_cast<uintptr_t>(o.aux));
    int64_t ld = d.ld_aux;
    ok = lt.cublasLtMatmulDescSetAttribute(p->desc, kDescAuxPointer, &ap, sizeof(ap)) == kStatusSuccess &&
         lt.cublasLtMatmulDescSetAttribute(p->desc, kDescAuxLd, &ld, sizeof(ld)) == kStatusSuccess;
    // D's type, also the default: a library older than the attribute refuses it and keeps D's type
    int32_t type = cuda_type(d.c_type);
    lt.cublasLtMatmulDescSetAttribute(p->desc, kDescAuxType, &type, sizeof(type));
  }
  // cuBLASLt's first operand is kiln's B, its second kiln's A
  ok = ok && make_layout(lt, &p->first, cuda_type(d.b_type), cm.first, d.batch) &&
       make_layout(lt, &p->second, cuda_type(d.a_type), cm.second, d.batch) &&
       make_layout(lt, &p->out, cuda_type(d.c_type), cm.out, d.batch);
  if (!ok) return p;
  LtPreference pref = nullptr;
  if (lt.cublasLtMatmulPreferenceCreate(&pref) != kStatusSuccess) return p;
  uint64_t ws = kWorkspaceBytes;
  uint32_t al_first = key.align_b, al_second = key.align_a, al_c = key.align_c;
  ok = lt.cublasLtMatmulPreferenceSetAttribute(pref, kPrefMaxWorkspace, &ws, sizeof(ws)) == kStatusSuccess &&
       lt.cublasLtMatmulPreferenceSetAttribute(pref, kPrefMinAlignA, &al_first, sizeof(al_first)) ==
           kStatusSuccess &&
       lt.cublasLtMatmulPreferenceSetAttribute(pref, kPrefMinAlignB, &al_second, sizeof(al_second)) ==
           kStatusSuccess &&
       lt.cublasLtMatmulPreferenceSetAttribute(pref, kPrefMinAlignC, &al_c, sizeof(al_c)) == kStatusSuccess &&
       lt.cublasLtMatmulPreferenceSetAttribute(pref, kPrefMinAlignD, &al_c, sizeof(al_c)) == kStatusSuccess;
  bool search = !capturing_on_this_thread() && !settings().deterministic;
  const std::string path = search ? choice_path(lt, key, device) : "";
  if (search)
    if (std::optional<LtAlgo> algo = cached_choice(lt, handle, *p, path)) {
      lt.cublasLtMatmulPreferenceDestroy(pref);
      p->algo = *algo;
      p->ok = true;
      return p;
    }
  LtHeuristic results[kCandidates] = {};
  int found = 0;
  if (!ok || lt.cublasLtMatmulAlgoGetHeuristic(handle, p->desc, p->first, p->second, p->out, p->out, pref,
                                               search ? kCandidates : 1, results, &found) != kStatusSuccess)
    found = 0;
  lt.cublasLtMatmulPreferenceDestroy(pref);
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < found; i++) {
    const LtHeuristic& r = results[i];
    if (r.state != kStatusSuccess || r.workspace_size > kWorkspaceBytes) continue;
    double ms = found > 1 ? time_algo(lt, handle, *p, r.algo, o, kTimedRuns) : 0;
    if (!p->ok || ms < best) {
      p->algo = r.algo;
      p->ok = true;
      best = ms;
    }
  }
  if (search && p->ok && found > 1)
    write_entry(path, std::string_view(reinterpret_cast<const char*>(&p->algo), sizeof p->algo));
  if (settings().debug >= 3 && found > 1)
    std::fprintf(stderr, "kiln: cuBLASLt %lldx%lldx%lld: %d candidates timed, fastest %.4f ms\n",
                 static_cast<long long>(key.d.m), static_cast<long long>(key.d.n),
                 static_cast<long long>(key.d.k), found, best / kTimedRuns);
  return p;
}

}  // namespace

bool cublaslt_available(std::string* why) { return lt_api(why) != nullptr; }

std::string gemm_unsupported(const GemmDesc& d) {
  auto name = [](DType t) { return std::string(dtype_name(t)); };
  if (d.m < 1 || d.n < 1 || d.k < 1 || d.batch < 1) return "empty or negative sizes";
  for (int64_t v : {d.m, d.n, d.k, d.batch, d.lda, d.ldb, d.ldc})
    if (v > INT32_MAX) return "a size or leading dimension does not fit in 32 bits";
  if (d.a_type != d.b_type) return "A is " + name(d.a_type) + " but B is " + name(d.b_type);
  if (cuda_type(d.a_type) < 0)
    return "inputs of type " + name(d.a_type) + " (f32, f16 and bf16 are supported)";
  bool out_ok = d.c_type == d.a_type || (d.a_type != DType::F32 && d.c_type == DType::F32);
  if (!out_ok) return name(d.a_type) + " inputs with a " + name(d.c_type) + " output";
  if (d.lda < (d.trans_a ? d.m : d.k)) return "lda is smaller than a row of A as stored";
  if (d.ldb < (d.trans_b ? d.k : d.n)) return "ldb is smaller than a row of B as stored";
  if (d.ldc < d.n) return "ldc is smaller than N";
  if (d.stride_a < 0 || d.stride_b < 0 || d.stride_c < 0) return "negative batch strides";
  if (d.batch > 1 && d.stride_c < d.m * d.ldc) return "the output matrices of the batch overlap";
  if (d.has_aux() && d.batch != 1) return "an aux epilogue with a batch of matrices";
  if (d.has_aux() && d.ld_aux < d.n) return "ld_aux is smaller than N";
  if (d.has_aux() && d.ld_aux % 8) return "ld_aux is not a multiple of 8 (cuBLASLt's aux matrix needs it)";
  return "";
}

ColumnMajorGemm to_column_major(const GemmDesc& d) {
  ColumnMajorGemm r;
  r.m = d.n;
  r.n = d.m;
  r.k = d.k;
  // first operand, op(first) must be N x K: kiln's B stored K x N row-major is B^T (N x K) column-major
  r.trans_first = d.trans_b;
  r.first = d.trans_b ? ColumnMajorLayout{d.k, d.n, d.ldb, d.stride_b}
                      : ColumnMajorLayout{d.n, d.k, d.ldb, d.stride_b};
  // second operand, op(second) must be K x M: kiln's A stored M x K row-major is A^T (K x M) column-major
  r.trans_second = d.trans_a;
  r.second = d.trans_a ? ColumnMajorLayout{d.m, d.k, d.lda, d.stride_a}
                       : ColumnMajorLayout{d.k, d.m, d.lda, d.stride_a};
  r.out = {d.n, d.m, d.ldc, d.stride_c};
  return r;
}

bool gemm(int ordinal, const GemmDesc& d, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias,
          CUdeviceptr aux) {
  const LtApi* lt = lt_api();
  if (!lt || !api() || !gemm_unsupported(d).empty() || (d.has_bias() && !bias)) return false;
  if (d.has_aux() && (!aux || aux % 16)) return false;  // cuBLASLt's aux pointer is 16-byte aligned
  Context& ctx = context(ordinal);  // current on this thread; throws for a device that does not exist
  DeviceState& s = device_state(ordinal);
  std::lock_guard<std::mutex> l(s.mu);
  if (!s.tried) {
    s.tried = true;
    if (lt->cublasLtCreate(&s.handle) != kStatusSuccess) s.handle = nullptr;
    if (s.handle) s.workspace = device_alloc(ordinal, kWorkspaceBytes);
  }
  if (!s.handle) return false;
  PlanKey key{d,
              alignment(a),
              alignment(b),
              alignment(c),
              d.has_bias() ? alignment(bias) : 0,
              d.has_aux() ? alignment(aux) : 0};
  auto it = s.plans.find(key);
  if (it == s.plans.end())
    it = s.plans
             .emplace(key, make_plan(*lt, s.handle, key, {a, b, c, bias, aux, s.workspace, ctx.stream},
                                     ctx.info.name))
             .first;
  Plan& p = *it->second;
  if (!p.ok) return false;
  if (d.has_bias()) {  // the plan is shared by calls with other bias buffers of the same alignment
    const void* bp = reinterpret_cast<const void*>(static_cast<uintptr_t>(bias));
    if (lt->cublasLtMatmulDescSetAttribute(p.desc, kDescBiasPointer, &bp, sizeof(bp)) != kStatusSuccess)
      return false;
  }
  if (d.has_aux()) {  // likewise the aux matrix
    void* ap = reinterpret_cast<void*>(static_cast<uintptr_t>(aux));
    if (lt->cublasLtMatmulDescSetAttribute(p.desc, kDescAuxPointer, &ap, sizeof(ap)) != kStatusSuccess)
      return false;
  }
  const float alpha = 1.0f, beta = 0.0f;
  auto ptr = [](CUdeviceptr x) { return reinterpret_cast<void*>(static_cast<uintptr_t>(x)); };
  // C^T = B^T A^T: cuBLASLt's first operand is kiln's B, its second kiln's A; C is read (beta = 0) and
  // written
  int rc = lt->cublasLtMatmul(s.handle, p.desc, &alpha, ptr(b), p.first, ptr(a), p.second, &beta, ptr(c),
                              p.out, ptr(c), p.out, &p.algo, ptr(s.workspace), kWorkspaceBytes, ctx.stream);
  return rc == kStatusSuccess;
}

}  // namespace kiln::runtime::cuda
