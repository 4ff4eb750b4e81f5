// CUDA C++ renderer (see render_cuda.h).
#include "codegen/render_cuda.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "codegen/render_base.h"
#include "ir/node.h"
#include "kiln/error.h"

namespace kiln::codegen {

using ir::Op;

const char* cuda_prelude() {
  return R"(typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
/* 16-bit floats are stored as bits and computed in float; the conversions round to nearest even */
__device__ __forceinline__ float kiln_h2f(uint16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ uint16_t kiln_f2h(float f) { uint16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float kiln_bf2f(uint16_t h) { return __uint_as_float(((uint32_t)h) << 16); }
__device__ __forceinline__ uint16_t kiln_f2bf(float f) { uint16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
/* a thread's 4 consecutive elements: one 16-byte access for 4-byte types */
template <class T> struct alignas(4 * sizeof(T)) kiln_v4 { T v[4]; };
template <class T, class F> __device__ __forceinline__ T kiln_bitcast(F f) { union { F f; T t; } u; u.f = f; return u.t; }
template <class T> __device__ __forceinline__ T kiln_shfl(T v, int o) {
  if constexpr (sizeof(T) < 4) return (T)__shfl_xor_sync(0xffffffffu, (int)v, o);
  else return __shfl_xor_sync(0xffffffffu, v, o);
}
struct kiln_add { template <class T> __device__ T operator()(T a, T b) const { return a + b; } };
struct kiln_mul { template <class T> __device__ T operator()(T a, T b) const { return a * b; } };
struct kiln_max { template <class T> __device__ T operator()(T a, T b) const { return ((a != a) | (a > b)) ? a : b; } };
/* Combines one value per thread of the block; every thread gets the result. blockDim.x is a
   multiple of 32. The first barrier keeps a previous call's readers ahead of this call's writers. */
/* partial results of split reductions: 8-byte slots in global memory, read around L1 */
template <class T> __device__ __forceinline__ void kiln_put(unsigned char* s, int64_t i, T v) { *(T*)(s + 8 * i) = v; }
template <class T> __device__ __forceinline__ T kiln_get(unsigned char* s, int64_t i) {
  if constexpr (sizeof(T) == 8) return kiln_bitcast<T>(__ldcg((const unsigned long long*)(s + 8 * i)));
  else if constexpr (sizeof(T) == 4) return kiln_bitcast<T>(__ldcg((const unsigned int*)(s + 8 * i)));
  else if constexpr (sizeof(T) == 2) return (T)__ldcg((const unsigned short*)(s + 8 * i));
  else return (T)__ldcg((const unsigned char*)(s + 8 * i));
}
/* Combines one value per thread over each aligned group of G lanes of a warp (G a power of two);
   every lane of the group gets the result. The whole warp takes part. */
template <int G, class T, class Op> __device__ __forceinline__ T kiln_group_reduce(T v, Op op) {
  for (int o = G / 2; o > 0; o >>= 1) v = op(v, kiln_shfl(v, o));
  return v;
}
template <class T, class Op> __device__ __forceinline__ T kiln_block_reduce(T v, Op op) {
  __shared__ T part[32];
  for (int o = 16; o > 0; o >>= 1) v = op(v, kiln_shfl(v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  v = part[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); w++) v = op(v, part[w]);
  return v;
}
)";
}

namespace {

class CudaRenderer : public RendererBase {
 public:
  // Rows a block keeps in shared memory: the device's per-block limit less what the kernels' own
  // reductions take, and never less than the 48 KB every device has.
  CudaRenderer(const Program& p, const DeviceLimits& limits)
      : RendererBase(p),
        row_cache_budget_(std::max<int64_t>(48 * 1024, limits.shared_per_block - 1024)),
        sms_(limits.cores > 1 ? limits.cores : 132) {}

  CudaKernel run() {
    CudaKernel k;
    plan(k.launch);
    work_ = k.launch.work;
    block_reduce_ = k.launch.kind == CudaLaunch::Kind::BlockReduce;
    column_ = k.launch.kind == CudaLaunch::Kind::ColumnReduce;
    group_ = k.launch.group;
    std::string lanes = std::to_string(k.launch.lanes);
    os_ << "extern \"C\" __global__ void __launch_bounds__(" << k.launch.block << ") " << p_.symbol << "(";
    for (size_t i = 0; i < p_.globals.size(); i++)
      os_ << (i ? ", " : "") << (p_.written[i] ? "" : "const ") << storage_type(p_.globals[i])
          << "* __restrict__ data" << i;
    if (k.launch.split > 1)
      os_ << (p_.globals.empty() ? "" : ", ") << "unsigned char* __restrict__ kiln_scratch";
    os_ << ") {\n";
    if (k.launch.smem_bytes > 0) os_ << "  extern __shared__ __align__(16) unsigned char kiln_smem[];\n";
    indent_ = 1;
    split_count_ = k.launch.split;
    counters_offset_ = k.launch.counters_offset;
    if (column_) {  // a column per warp lane; threads past the end compute the last one, publish nothing
      out("for (int64_t t = blockIdx.x * " + std::to_string(k.launch.columns) +
          "LL + (threadIdx.x & 31), kiln_once = 0; kiln_once < 1; kiln_once++) {");
      out("  bool kiln_live = t < " + std::to_string(k.launch.work) + "LL;");
      out("  if (!kiln_live) t = " + std::to_string(k.launch.work - 1) + "LL;");
    } else if (split_count_ > 1)
      out("for (int64_t t = blockIdx.x / " + std::to_string(split_count_) + "; t < " +
          std::to_string(k.launch.work) + "LL; t = " + std::to_string(k.launch.work) + "LL) {");
    else if (block_reduce_)
      out("for (int64_t t = blockIdx.x; t < " + std::to_string(k.launch.work) + "LL; t += gridDim.x) {");
    else if (group_ > 1) {
      // group_ threads share each output's reduce. A warp's groups stay in the loop together (their
      // shuffles need the whole warp): groups past the end compute the last output, store nothing.
      int64_t per_warp = 32 / group_, rounded = (work_ + per_warp - 1) / per_warp * per_warp;
      std::string g = std::to_string(group_);
      out("for (int64_t kiln_t0 = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / " + g +
          ", t = 0; kiln_t0 < " + std::to_string(rounded) +
          "LL; kiln_t0 += (int64_t)gridDim.x * blockDim.x / " + g + ") {");
      out("  const bool kiln_live = kiln_t0 < " + std::to_string(work_) + "LL;");
      out("  t = kiln_live ? kiln_t0 : " + std::to_string(work_ - 1) + "LL;");
    } else if (segmented_)
      out("{  // segments, each a grid-stride loop of its own");
    else if (k.launch.step > 1)
      out("for (int64_t t = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) * " + lanes + "; t < " +
          std::to_string(k.launch.work) + "LL; t += (int64_t)gridDim.x * blockDim.x * " + lanes + ") {");
    else
      out("for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < " +
          std::to_string(k.launch.work) + "LL; t += (int64_t)gridDim.x * blockDim.x) {");
    indent_++;
    for (size_t i = 0; i < p_.insts.size(); i++) emit(static_cast<int>(i));
    indent_--;
    out("}");
    os_ << "}\n";
    k.source = os_.str();
    return k;
  }

 private:
  // The output loops (all opened first by the linearizer) map onto t; the outermost reduce loop of
  // each reduce group is split over the block when the reduces are long enough to fill one.
  void plan(CudaLaunch& l) {
    for (auto& in : p_.insts) segmented_ |= in.op == Op::RANGE && in.arg[2] == ir::kSegmentRange;
    if (segmented_) {  // the grid sized for the flat loop; each segment's loop spans the whole grid
      l.work = p_.outer_size;
      plan_lanes(l, {});
      return;
    }
    // symbolic trip counts (codegen/program.h): the launch covers the largest, each thread skips the
    // outputs past the actual ones; no mode that needs a warp or a block to stay whole past the end
    for (auto& in : p_.insts) symbolic_ |= in.op == Op::RANGE && !in.src.empty();
    std::vector<size_t> stack;
    std::vector<size_t> globals;
    bool opened_reduce = false;
    int64_t longest = 0;
    bool lanes = false;
    for (size_t i = 0; i < p_.insts.size(); i++) {
      const Inst& in = p_.insts[i];
      if (in.op == Op::RANGE) {
        bool top = std::all_of(stack.begin(), stack.end(), [&](size_t s) {
          return p_.insts[s].arg[2] == ir::kGlobalRange && !inner_.count(s);
        });
        if (in.arg[2] == ir::kGlobalRange) {
          // an output loop opened after a reduce (a row's loop after the row's reduces) stays a
          // loop, split over the block's threads; the ones before map onto t
          if (opened_reduce)
            inner_.insert(i);
          else
            globals.push_back(i);
        }
        if (in.arg[2] == ir::kReduceRange) opened_reduce = true;
        if (in.arg[2] == ir::kUpcastRange) lanes = true;
        if (in.arg[2] == ir::kReduceRange && top) {
          split_[i] = {};
          longest = std::max(longest, in.arg[1]);
        }
        stack.push_back(i);
      } else if (in.op == Op::ENDRANGE) {
        stack.pop_back();
      } else if (accumulates(in)) {
        for (size_t s : stack)
          if (split_.count(s)) split_[s].push_back(in.src[0]);
      }
    }
    int64_t stride = 1;
    for (size_t k = globals.size(); k-- > 0;) {
      stride_[globals[k]] = stride;
      stride *= p_.insts[globals[k]].arg[1];
    }
    l.work = stride;
    if (!lanes && (longest >= 128 || !inner_.empty())) {
      l.kind = CudaLaunch::Kind::BlockReduce;
      int64_t row = longest;
      for (size_t i : inner_) row = std::max(row, p_.insts[i].arg[1]);
      // Measured on an H100: rows of 1024 to 4095 run best at 16 elements a thread (G7's masked
      // softmax over 1024 keys: G7 1.07 ms against 1.32 with 256 threads); shorter and longer rows
      // keep the sizes below (layernorm over 768 and over 4096 columns: 3-4% slower with fewer).
      l.block = row >= 4096 ? 512 : row >= 2048 ? 128 : row >= 1024 ? 64 : row >= 128 ? 128 : 32;
      // Few outputs and one long reduce: share each output over blocks, up to ~4 blocks per SM (the
      // device's SMs; an H100's 132 where the limits do not say), each with at least 4 elements per
      // thread.
      int64_t accs = split_.size() == 1 ? static_cast<int64_t>(split_.begin()->second.size()) : 0;
      int64_t s = std::min<int64_t>(longest / (l.block * 4), 4 * sms_ / std::max<int64_t>(l.work, 1));
      const Inst& top = p_.insts[split_.empty() ? 0 : split_.begin()->first];
      bool contiguous = split_.size() == 1 && top.arg.size() > 4 && top.arg[4];
      if (accs > 0 && !contiguous && inner_.empty() && !globals.empty() && l.work >= 32 && !symbolic_) {
        // 32 columns x 8 rows of threads a block; enough row chunks over gridDim.y for about 8
        // blocks per SM, each thread walking at least 8 rows of its chunk
        l.kind = CudaLaunch::Kind::ColumnReduce;
        l.block = kColumnBlock;
        l.columns = 32;
        int64_t bx = (l.work + l.columns - 1) / l.columns;
        int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(longest / 64, 8 * sms_ / bx));
        chunk_ = (longest + chunks - 1) / chunks;
        if (chunks > 1) {
          l.split = static_cast<int>(chunks);
          l.counters_offset = l.work * chunks * accs * 8;
          l.scratch_bytes = l.counters_offset + bx * 4;
        }
        return;
      }
      if (accs > 0 && s > 1 && inner_.empty() && !symbolic_) {
        l.split = static_cast<int>(s);
        l.counters_offset = l.work * s * accs * 8;
        l.scratch_bytes = l.counters_offset + l.work * 4;
      }
      if (l.split == 1 && !symbolic_) plan_row_cache(l);
    } else if (int g = group_size(); g > 1) {
      l.group = g;
    } else {
      split_.clear();
    }
    plan_lanes(l, globals);
  }

  // Threads sharing one output's reduce in an Elementwise kernel, or 1: a kernel whose one reduce
  // loop is short (under a block's worth) but contiguous takes kLanes values a thread and a group of
  // up to 32 threads an output, so a warp's loads cover whole rows (rowsum(dO * O) over a head's 64
  // values) instead of one thread walking each row.
  int group_size() const {
    if (split_.size() != 1 || !inner_.empty() || split_.begin()->second.empty()) return 1;
    int reduces = 0;
    for (auto& in : p_.insts) {
      if (in.op == Op::RANGE && in.arg[2] != ir::kGlobalRange) reduces++;
      if (in.op == Op::STORE && !in.arg.empty()) return 1;  // an adding store: one atomic an element
    }
    const Inst& r = p_.insts[split_.begin()->first];
    if (reduces != 1 || r.arg.size() <= 4 || !r.arg[4] || r.arg[1] % kLanes != 0 || symbolic_) return 1;
    int g = 1;
    while (g < 32 && (g * 2) * kLanes <= r.arg[1]) g *= 2;
    return g >= 8 ? g : 1;
  }

  // --- lanes (see render_cuda.h) ---
  static constexpr int kLanes = 4;

  // Elementwise kernels of output loops alone lane their innermost loop; BlockReduce kernels whose
  // blocks own their outputs lane each loop split over the threads. A laned loop's size is a
  // multiple of kLanes, so lane 0's index is a multiple of kLanes too.
  void plan_lanes(CudaLaunch& l, const std::vector<size_t>& globals) {
    auto lane_size = [&](size_t r) { return p_.insts[r].src.empty() && p_.insts[r].arg[1] % kLanes == 0; };
    if (segmented_) {  // segments of whole lanes: their loops step by kLanes (nothing else is laned)
      for (size_t i = 0; i < p_.insts.size(); i++)
        if (p_.insts[i].op == Op::RANGE && lane_size(i)) laned_.insert(i);
    } else if (l.kind == CudaLaunch::Kind::Elementwise) {
      bool reduces = false;
      for (auto& in : p_.insts) {  // (an adding store is one atomic per element)
        if (in.op == Op::STORE && !in.arg.empty()) return;
        reduces |= (in.op == Op::RANGE && in.arg[2] != ir::kGlobalRange) || in.op == Op::DEFINE_ACC;
      }
      if (reduces) {
        // a short reduce each thread walks alone: its contiguous innermost loop takes kLanes values
        // a step (one vector load each, not one access a value), added in the loop's order
        for (size_t i = 0; i < p_.insts.size(); i++) {
          const Inst& in = p_.insts[i];
          if (in.op == Op::RANGE && in.arg[2] == ir::kReduceRange && in.arg.size() > 4 && in.arg[4] &&
              lane_size(i))
            laned_.insert(i);
        }
      } else if (!globals.empty() && lane_size(globals.back())) {
        laned_.insert(globals.back());
      }
    } else if (l.kind == CudaLaunch::Kind::BlockReduce && l.split == 1) {
      for (auto& [r, accs] : split_)
        if (lane_size(r)) laned_.insert(r);
      for (size_t r : inner_)
        if (lane_size(r)) laned_.insert(r);
    }
    // a laned loop holds no loop or accumulator of its own (they would need one per lane)
    std::vector<size_t> open;
    for (size_t i = 0; i < p_.insts.size(); i++) {
      const Inst& in = p_.insts[i];
      if ((in.op == Op::RANGE || in.op == Op::DEFINE_ACC) && !open.empty() && laned_.count(open.back()))
        laned_.erase(open.back());
      if (in.op == Op::RANGE) open.push_back(i);
      if (in.op == Op::ENDRANGE) open.pop_back();
    }
    lane_of_.assign(p_.insts.size(), -1);
    for (size_t i = 0; i < p_.insts.size(); i++) {
      const Inst& in = p_.insts[i];
      if (in.op == Op::RANGE) {
        if (laned_.count(i)) lane_of_[i] = static_cast<int>(i);
        open.push_back(i);
        continue;
      }
      if (in.op == Op::ENDRANGE) {
        open.pop_back();
        continue;
      }
      // an accumulation in a laned loop happens once per lane, whatever it adds
      if (accumulates(in) && !open.empty() && laned_.count(open.back()))
        lane_of_[i] = static_cast<int>(open.back());
      for (int s : in.src) {
        int r = lane_of_[static_cast<size_t>(s)];
        // an accumulator's value after its loop is the same in every lane
        if (r < 0 || accumulates(p_.insts[static_cast<size_t>(s)])) continue;
        if (lane_of_[i] >= 0 && lane_of_[i] != r) {  // values of two laned loops meet: no lanes
          laned_.clear();
          lane_of_.assign(p_.insts.size(), -1);
          return;
        }
        lane_of_[i] = r;
      }
    }
    lanes_.assign(p_.insts.size(), {});
    if (!laned_.empty()) l.lanes = kLanes;
    for (size_t r : laned_)  // a laned output loop: kLanes outputs a step of the grid-stride loop
      if (l.kind == CudaLaunch::Kind::Elementwise && p_.insts[r].arg[2] == ir::kGlobalRange) l.step = kLanes;
  }

  // How an integer value moves from one lane to the next (nullopt: not by a fixed step).
  std::optional<int64_t> lane_step(int i) const {
    const Inst& in = p_.insts[static_cast<size_t>(i)];
    if (lane_of_[static_cast<size_t>(i)] < 0) return 0;
    if (in.op == Op::RANGE) return 1;
    if (in.op == Op::ADD) {
      auto a = lane_step(in.src[0]), b = lane_step(in.src[1]);
      if (a && b) return *a + *b;
    }
    if (in.op == Op::MUL)
      for (int k = 0; k < 2; k++) {
        const Inst& c = p_.insts[static_cast<size_t>(in.src[static_cast<size_t>(k)])];
        auto o = lane_step(in.src[static_cast<size_t>(1 - k)]);
        if (c.op == Op::CONST && !is_float(c.dtype) && o) return c.arg.at(0) * *o;
      }
    if (in.op == Op::CAST && !is_float(in.dtype) && dtype_size(in.dtype) >= 4) return lane_step(in.src[0]);
    return std::nullopt;
  }

  // Whether an integer value is a multiple of kLanes in lane 0.
  bool lane_aligned(int i) const {
    const Inst& in = p_.insts[static_cast<size_t>(i)];
    switch (in.op) {
      case Op::RANGE: return laned_.count(static_cast<size_t>(i)) > 0;
      case Op::CONST: return !is_float(in.dtype) && in.arg.at(0) % kLanes == 0;
      case Op::ADD: return lane_aligned(in.src[0]) && lane_aligned(in.src[1]);
      case Op::MUL: return lane_aligned(in.src[0]) || lane_aligned(in.src[1]);
      case Op::CAST: return !is_float(in.dtype) && dtype_size(in.dtype) >= 4 && lane_aligned(in.src[0]);
      default: return false;
    }
  }

  // A LOAD or STORE whose kLanes elements are one vector access.
  bool vector_access(const Inst& in) const {
    size_t bytes = dtype_size(global_dtype(in));
    bool plain = in.op == Op::LOAD ? in.src.size() == 2 : in.src.size() == 3;
    auto step = lane_step(in.src[1]);
    return plain && bytes <= 4 && step && *step == 1 && lane_aligned(in.src[1]);
  }

  // Renders instruction i; one that varies with a laned loop once per lane.
  void emit(int i) {
    const Inst& in = p_.insts[static_cast<size_t>(i)];
    size_t u = static_cast<size_t>(i);
    if (lane_of_.empty() || lane_of_[u] < 0 || in.op == Op::RANGE || in.op == Op::ENDRANGE) return line(i);
    auto cached = row_cache_.find(u);
    bool fill = cached != row_cache_.end() && cached->second.fills;
    bool load = in.op == Op::LOAD && (cached == row_cache_.end() || fill), store = in.op == Op::STORE;
    if ((load || store) && vector_access(in)) {
      std::string st = storage_type(global_dtype(in)), vec = "vec" + std::to_string(i);
      std::string at = "*(" + std::string(load ? "const " : "") + "kiln_v4<" + st + ">*)(" + v(in.src[0]) +
                       " + " + v(in.src[1]) + ")";
      if (load) {
        out("const kiln_v4<" + st + "> " + vec + " = " + at + ";");
        DType t = global_dtype(in);
        for (int k = 0; k < kLanes; k++) {
          std::string raw = vec + ".v[" + std::to_string(k) + "]";
          suffix_ = "_" + std::to_string(k);
          def(i, "val", is_half(t) ? half_to_float(t, raw) : raw);
          lanes_[u][static_cast<size_t>(k)] = v(i);
        }
        suffix_.clear();
        for (int k = 0; k < kLanes && fill; k++)
          in_lane(k, [&] { out(slot(i) + " = " + vec + ".v[" + std::to_string(k) + "];"); });
        names_[u] = lanes_[u][0];
        return;
      }
      out("kiln_v4<" + st + "> " + vec + ";");
      for (int k = 0; k < kLanes; k++)
        in_lane(k, [&] { out(vec + ".v[" + std::to_string(k) + "] = " + store_value(in) + ";"); });
      out(at + " = " + vec + ";");
      return;
    }
    for (int k = 0; k < kLanes; k++)
      in_lane(k, [&] {
        suffix_ = "_" + std::to_string(k);
        line(i);
        suffix_.clear();
        lanes_[u][static_cast<size_t>(k)] = v(i);
      });
    names_[u] = lanes_[u][0];  // outside a lane, a value is named as in lane 0
  }

  // Runs f with every lane-varying value named as in lane k.
  template <class F>
  void in_lane(int k, F f) {
    std::vector<std::pair<size_t, std::string>> saved;
    for (size_t j = 0; j < lanes_.size(); j++)
      if (lane_of_[j] >= 0 && !lanes_[j][static_cast<size_t>(k)].empty() && !accumulates(p_.insts[j])) {
        saved.emplace_back(j, names_[j]);
        names_[j] = lanes_[j][static_cast<size_t>(k)];
      }
    f();
    for (auto& [j, name] : saved) names_[j] = name;
  }

  void set_range_lanes(int i) {
    size_t u = static_cast<size_t>(i);
    if (!laned_.count(u)) return;
    for (int k = 0; k < kLanes; k++)
      lanes_[u][static_cast<size_t>(k)] =
          k == 0 ? names_[u] : "(" + names_[u] + " + " + std::to_string(k) + ")";
  }

  // Rows that several loops of the block read are read from memory once. Each such loop gives
  // thread i the elements i, i + blockDim.x, ... of the row (4 lanes each where laned), so the first
  // loop keeps what it loads in shared memory and in the later loops each thread reads back only
  // what it wrote itself (no barrier). A load qualifies when its index is (a row's start, fixed
  // before the loop) + the loop's index, in a loop directly under the output digits; up to the
  // block's shared memory in all (row_cache_budget_). A row kept in shared memory beat re-reading it
  // from L2 or from memory (bench/RESULTS.md, softmax cross-entropy over 50304 columns). Larger rows
  // are re-read; the launch then runs few enough blocks at once for L2 to hold them
  // (CudaLaunch::reread_bytes).
  struct Cached {
    int64_t offset;
    size_t loop;
    bool fills;  // the first loop: loads from memory and keeps the value
  };
  void plan_row_cache(CudaLaunch& l) {
    struct Use {
      size_t load, loop;
    };
    std::map<std::tuple<int, int, int64_t>, std::vector<Use>> rows;  // (buffer, row start, length)
    std::vector<size_t> stack;
    for (size_t i = 0; i < p_.insts.size(); i++) {
      const Inst& in = p_.insts[i];
      if (in.op == Op::RANGE) stack.push_back(i);
      if (in.op == Op::ENDRANGE) stack.pop_back();
      if (in.op != Op::LOAD || stack.empty()) continue;
      size_t loop = stack.back();
      bool alone = std::all_of(stack.begin(), stack.end() - 1, [&](size_t s) {
        return p_.insts[s].arg[2] == ir::kGlobalRange && !inner_.count(s);
      });
      if (!alone || !(split_.count(loop) || inner_.count(loop))) continue;
      const Inst& idx = p_.insts[static_cast<size_t>(in.src[1])];
      if (idx.op != Op::ADD) continue;
      for (int k = 0; k < 2; k++)
        if (idx.src[static_cast<size_t>(k)] == static_cast<int>(loop) &&
            idx.src[static_cast<size_t>(1 - k)] < static_cast<int>(loop))
          rows[{in.src[0], idx.src[static_cast<size_t>(1 - k)], p_.insts[loop].arg[1]}].push_back({i, loop});
    }
    int64_t bytes = 0;
    for (auto& [key, uses] : rows) {
      std::set<size_t> loops;
      for (auto& u : uses) loops.insert(u.loop);
      DType t = global_dtype(p_.insts[uses[0].load]);
      int64_t n = (std::get<2>(key) * dtype_size(t) + 15) / 16 * 16;  // as stored in memory
      if (loops.size() >= 2 && bytes + n > row_cache_budget_) l.reread_bytes += n;
      if (loops.size() < 2 || bytes + n > row_cache_budget_) continue;
      for (auto& u : uses) row_cache_[u.load] = {bytes, u.loop, u.loop == *loops.begin()};
      fills_.insert(*loops.begin());
      bytes += n;
    }
    l.smem_bytes = bytes;
    if (l.reread_bytes > 0 || l.smem_bytes > 113 * 1024)
      l.block = 1024;  // one block per SM is all that fits
    else if (l.smem_bytes > 96 * 1024)
      l.block = 512;  // two blocks per SM: one's loads overlap the other's work on its row
  }

  // A cached row's shared-memory element for a LOAD of row_cache_, as stored in memory (16-bit
  // floats as their bits: half the bytes, so more blocks fit an SM).
  std::string slot(int i) const {
    const Cached& c = row_cache_.at(static_cast<size_t>(i));
    return std::string("((") + storage_type(global_dtype(p_.insts[static_cast<size_t>(i)])) +
           "*)(kiln_smem + " + std::to_string(c.offset) + "))[" + v(static_cast<int>(c.loop)) + "]";
  }

  void load(int i) override {
    auto it = row_cache_.find(static_cast<size_t>(i));
    if (it == row_cache_.end()) return RendererBase::load(i);
    DType t = global_dtype(p_.insts[static_cast<size_t>(i)]);
    if (!it->second.fills) return def(i, "val", is_half(t) ? half_to_float(t, slot(i)) : slot(i));
    def(i, "val", load_expr(p_.insts[static_cast<size_t>(i)]));
    out(slot(i) + " = " + (is_half(t) ? float_to_half(t, v(i)) : v(i)) + ";");  // exact: the bits read
  }

  // A loop's trip count: its size, or its symbolic count's value.
  std::string trips(const Inst& in) const {
    return in.src.empty() ? std::to_string(in.arg[1]) + "LL" : "(int64_t)" + v(in.src[0]);
  }

  void range(int i) override {
    const Inst& in = p_.insts[static_cast<size_t>(i)];
    if (in.arg[2] == ir::kSegmentRange) {  // the whole grid strides through the segment
      std::string n = "sidx" + std::to_string(in.arg[0]);
      names_[static_cast<size_t>(i)] = n;
      std::string w = laned_.count(static_cast<size_t>(i)) ? " * " + std::to_string(kLanes) : "";
      out("for (int64_t " + n + " = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x)" + w + "; " + n + " < " +
          std::to_string(in.arg[1]) + "LL; " + n + " += (int64_t)gridDim.x * blockDim.x" + w + ") {");
      set_range_lanes(i);
      open_.push_back(-2);
      indent_++;
      return;
    }
    if (inner_.count(static_cast<size_t>(i))) {  // a row's output loop: over the block's threads
      std::string n = "gidx" + std::to_string(in.arg[0]);
      names_[static_cast<size_t>(i)] = n;
      std::string w = laned_.count(static_cast<size_t>(i)) ? " * " + std::to_string(kLanes) : "";
      out("for (int64_t " + n + " = threadIdx.x" + w + "; " + n + " < " + trips(in) + "; " + n +
          " += blockDim.x" + w + ") {");
      set_range_lanes(i);
      open_.push_back(-3);
      indent_++;
      return;
    }
    if (in.arg[2] == ir::kGlobalRange) {  // an output loop: a digit of t
      std::string n = "gidx" + std::to_string(in.arg[0]);
      names_[static_cast<size_t>(i)] = n;
      int64_t stride = stride_.at(static_cast<size_t>(i)), size = in.arg[1];
      // 64-bit division is a long software sequence on the GPU: below 2^32 the digits of t are
      // taken in 32 bits, where division by a constant is a multiply and a shift
      bool narrow = work_ <= (int64_t{1} << 32);
      std::string tt = narrow ? "(uint32_t)t" : "t", sfx = narrow ? "u" : "LL";
      std::string e = stride == 1 ? tt : tt + " / " + std::to_string(stride) + sfx;
      if (stride * size != work_) e = "(" + e + ") % " + std::to_string(size) + sfx;
      out("int64_t " + n + " = " + e + ";");
      if (!in.src.empty()) out("if (" + n + " >= " + v(in.src[0]) + ") continue;");  // past the actual size
      set_range_lanes(i);
      open_.push_back(-1);
      return;
    }
    std::string n = (in.arg[2] == ir::kUpcastRange ? "uidx" : "ridx") + std::to_string(in.arg[0]);
    names_[static_cast<size_t>(i)] = n;
    std::string size = trips(in);
    bool split = split_.count(static_cast<size_t>(i)) > 0;
    if (split && column_) {
      // each thread walks its column: several rows' loads in flight
      std::string end = "kiln_end" + std::to_string(i), c = std::to_string(chunk_) + "LL";
      out("const int64_t " + end + " = min(" + size + ", (blockIdx.y + 1) * " + c + ");");
      out("#pragma unroll 8");
      out("for (int64_t " + n + " = blockIdx.y * " + c + " + (threadIdx.x >> 5); " + n + " < " + end + "; " +
          n + " += " + std::to_string(kColumnBlock / 32) + ") {");
    } else if (split && group_ > 1) {
      std::string w = laned_.count(static_cast<size_t>(i)) ? " * " + std::to_string(kLanes) : "";
      std::string g = std::to_string(group_);
      out("for (int64_t " + n + " = (threadIdx.x & " + std::to_string(group_ - 1) + ")" + w + "; " + n +
          " < " + size + "; " + n + " += " + g + w + ") {");
      set_range_lanes(i);
    } else if (split && split_count_ > 1)
      out("for (int64_t " + n + " = (blockIdx.x % " + std::to_string(split_count_) +
          ") * (int64_t)blockDim.x + threadIdx.x; " + n + " < " + size + "; " + n +
          " += (int64_t)blockDim.x * " + std::to_string(split_count_) + ") {");
    else if (split) {
      // the loop that fills the shared row: each thread keeps several loads in flight
      std::string w = laned_.count(static_cast<size_t>(i)) ? " * " + std::to_string(kLanes) : "";
      if (fills_.count(static_cast<size_t>(i))) out("#pragma unroll 8");
      out("for (int64_t " + n + " = threadIdx.x" + w + "; " + n + " < " + size + "; " + n + " += blockDim.x" +
          w + ") {");
      set_range_lanes(i);
    } else if (laned_.count(static_cast<size_t>(i))) {
      out("#pragma unroll 4");
      out("for (int64_t " + n + " = 0; " + n + " < " + size + "; " + n + " += " + std::to_string(kLanes) +
          ") {");
      set_range_lanes(i);
    } else
      out("for (int64_t " + n + " = 0; " + n + " < " + size + "; " + n + "++) {");
    open_.push_back(split ? i : -2);
    indent_++;
  }

  void end_range(int) override {
    int r = open_.back();
    open_.pop_back();
    if (r == -1) return;  // output loops close with the grid-stride loop
    indent_--;
    out("}");
    if (r < 0) return;
    const std::vector<int>& accs = split_.at(static_cast<size_t>(r));
    if (column_) {
      combine_columns(accs);
      return;
    }
    if (group_ > 1) {
      for (int acc : accs)
        out(v(acc) + " = kiln_group_reduce<" + std::to_string(group_) + ">(" + v(acc) + ", " + combine(acc) +
            ");");
      return;
    }
    for (int acc : accs) out(v(acc) + " = kiln_block_reduce(" + v(acc) + ", " + combine(acc) + ");");
    if (split_count_ > 1) combine_blocks(accs);
  }

  std::string combine(int acc) const {
    Op op = static_cast<Op>(p_.insts[static_cast<size_t>(acc)].arg[0]);
    return op == Op::ADD ? "kiln_add()" : op == Op::MUL ? "kiln_mul()" : "kiln_max()";
  }

  // The block's rows of threads combine their columns' results in shared memory, in row order,
  // and every thread gets them. With the rows cut into chunks, one thread a column publishes its
  // chunk's results; the last block of this column of blocks (blockIdx.x) to arrive combines the
  // chunks in a fixed order: each row of threads takes every 8th chunk, then the rows are combined.
  // The results lie by (accumulator, chunk, column), so a warp's loads are coalesced.
  void combine_columns(const std::vector<int>& accs) {
    combine_rows(accs);
    if (split_count_ == 1) return;
    std::string s = std::to_string(split_count_), w = std::to_string(work_) + "LL";
    std::string counter =
        "((unsigned int*)(kiln_scratch + " + std::to_string(counters_offset_) + "))[blockIdx.x]";
    for (size_t a = 0; a < accs.size(); a++)
      out("if (kiln_live && threadIdx.x < 32) kiln_put(kiln_scratch, (" + std::to_string(a) + " * " + s +
          " + blockIdx.y) * " + w + " + t, " + v(accs[a]) + ");");
    out("__threadfence();");
    out("__syncthreads();");
    out("__shared__ bool kiln_last;");
    out("if (threadIdx.x == 0) kiln_last = atomicAdd(&" + counter +
        ", 1u) == " + std::to_string(split_count_ - 1) + "u;");
    out("__syncthreads();");
    out("if (!kiln_last) return;");
    out("__threadfence();");
    for (size_t a = 0; a < accs.size(); a++) {
      const Inst& acc = p_.insts[static_cast<size_t>(accs[a])];
      std::string type = value_type(acc.dtype);
      out(v(accs[a]) + " = " + v(acc.src[0]) + ";");
      out("#pragma unroll 4");  // the chunks' results come from L2: several loads in flight
      out("for (int64_t j = threadIdx.x >> 5; j < " + s + "; j += " + std::to_string(kColumnBlock / 32) +
          ") " + v(accs[a]) + " = " + combine(accs[a]) + "(" + v(accs[a]) + ", kiln_get<" + type +
          ">(kiln_scratch, (" + std::to_string(a) + " * " + s + " + j) * " + w + " + t));");
    }
    combine_rows(accs);
    out("if (threadIdx.x == 0) " + counter + " = 0u;");
  }

  // Combines each accumulator over the block's rows of threads (threadIdx.x >> 5), in row order.
  void combine_rows(const std::vector<int>& accs) {
    for (size_t a = 0; a < accs.size(); a++) {
      std::string type = value_type(p_.insts[static_cast<size_t>(accs[a])].dtype);
      std::string sh = "kiln_rows" + std::to_string(a) + "_" + std::to_string(combines_);
      out("__shared__ " + type + " " + sh + "[" + std::to_string(kColumnBlock) + "];");
      out(sh + "[threadIdx.x] = " + v(accs[a]) + ";");
      combined_.push_back({accs[a], sh});
    }
    out("__syncthreads();");
    for (auto& [acc, sh] : combined_) {
      out(v(acc) + " = " + sh + "[threadIdx.x & 31];");
      out("for (int kiln_r = 1; kiln_r < " + std::to_string(kColumnBlock / 32) + "; kiln_r++) " + v(acc) +
          " = " + combine(acc) + "(" + v(acc) + ", " + sh + "[kiln_r * 32 + (threadIdx.x & 31)]);");
    }
    combined_.clear();
    combines_++;
  }

  // The blocks sharing output t publish their results; the last one to arrive combines them all in
  // block order (so the result does not depend on timing) and goes on; the others are done.
  void combine_blocks(const std::vector<int>& accs) {
    std::string s = std::to_string(split_count_), n = std::to_string(accs.size());
    std::string slot = "(t * " + s + " + blockIdx.x % " + s + ") * " + n;
    out("if (threadIdx.x == 0) {");
    for (size_t a = 0; a < accs.size(); a++)
      out("  kiln_put(kiln_scratch, " + slot + " + " + std::to_string(a) + ", " + v(accs[a]) + ");");
    out("}");
    out("__threadfence();");
    out("__shared__ bool kiln_last;");
    out("if (threadIdx.x == 0) kiln_last = atomicAdd((unsigned int*)(kiln_scratch + " +
        std::to_string(counters_offset_) + ") + t, 1u) == " + std::to_string(split_count_ - 1) + "u;");
    out("__syncthreads();");
    out("if (!kiln_last) return;");
    out("__threadfence();");
    for (size_t a = 0; a < accs.size(); a++) {
      const Inst& acc = p_.insts[static_cast<size_t>(accs[a])];
      std::string type = value_type(acc.dtype), part = "kiln_part" + std::to_string(a);
      out(type + " " + part + " = " + v(acc.src[0]) + ";");
      out("for (int64_t j = threadIdx.x; j < " + s + "; j += blockDim.x) " + part + " = " + combine(accs[a]) +
          "(" + part + ", kiln_get<" + type + ">(kiln_scratch, (t * " + s + " + j) * " + n + " + " +
          std::to_string(a) + "));");
      out(v(accs[a]) + " = kiln_block_reduce(" + part + ", " + combine(accs[a]) + ");");
    }
    out("if (threadIdx.x == 0) ((unsigned int*)(kiln_scratch + " + std::to_string(counters_offset_) +
        "))[t] = 0u;");
  }

  void store(int i) override {
    const Inst& in = p_.insts[static_cast<size_t>(i)];
    bool add = !in.arg.empty() && in.arg[0] == 1;
    std::string s = add ? "atomicAdd(&" + v(in.src[0]) + "[" + v(in.src[1]) + "], " + store_value(in) + ");"
                        : v(in.src[0]) + "[" + v(in.src[1]) + "] = " + store_value(in) + ";";
    if (in.src.size() > 3) s = "{ if (" + v(in.src[3]) + ") " + s + " }";  // a gated store
    bool per_thread = std::count(open_.begin(), open_.end(), -3) > 0;      // inside a row's loop
    out(column_      ? "if (kiln_live && threadIdx.x < 32) " + s
        : group_ > 1 ? "if (kiln_live && (threadIdx.x & " + std::to_string(group_ - 1) + ") == 0) " + s
        : block_reduce_ && !per_thread ? "if (threadIdx.x == 0) " + s
                                       : s);
  }

  std::string exp2(const std::string& x, bool f64) override { return (f64 ? "exp2(" : "exp2f(") + x + ")"; }
  std::string expf(const std::string& x) override { return "expf(" + x + ")"; }
  std::string fma(const std::string& a, const std::string& b, const std::string& c, bool f64) override {
    return (f64 ? "fma(" : "fmaf(") + a + ", " + b + ", " + c + ")";
  }
  std::string log2(const std::string& x, bool f64) override { return (f64 ? "log2(" : "log2f(") + x + ")"; }
  std::string half_to_float(DType t, const std::string& raw) override {
    return (t == DType::F16 ? "kiln_h2f(" : "kiln_bf2f(") + raw + ")";
  }
  std::string float_to_half(DType t, const std::string& val) override {
    return (t == DType::F16 ? "kiln_f2h(" : "kiln_f2bf(") + val + ")";
  }
  std::string bitcast(DType to, DType from, const std::string& x) override {
    return std::string("kiln_bitcast<") + value_type(to) + ", " + value_type(from) + ">(" + x + ")";
  }

  int64_t row_cache_budget_;
  int64_t sms_;                               // the device's multiprocessors
  std::map<size_t, int64_t> stride_;          // output RANGE -> its stride in t
  std::map<size_t, std::vector<int>> split_;  // reduce RANGE split over the block -> its accumulators
  std::vector<int> open_;   // open RANGEs: -1 output (a digit of t), -2 plain loop, -3 row loop, else split
  std::set<size_t> inner_;  // output RANGEs opened after a reduce: loops over the block's threads
  std::map<size_t, Cached> row_cache_;  // LOADs of rows kept in shared memory
  std::set<size_t> fills_;              // the loops that load those rows from memory
  int64_t work_ = 1;
  bool block_reduce_ = false;
  bool symbolic_ = false;  // a loop runs to a symbolic trip count
  int split_count_ = 1;
  int64_t chunk_ = 0;  // ColumnReduce: reduce steps per chunk
  bool column_ = false;
  bool segmented_ = false;  // a horizontally fused kernel: its segments' loops, one after another
  int group_ = 1;           // Elementwise: threads sharing an output's reduce (see group_size)
  static constexpr int kColumnBlock = 256;             // ColumnReduce: threads a block
  int combines_ = 0;                                   // ColumnReduce: shared arrays so far
  std::vector<std::pair<int, std::string>> combined_;  // (accumulator, its shared array)
  int64_t counters_offset_ = 0;
  std::set<size_t> laned_;    // RANGEs whose kLanes consecutive values one thread takes
  std::vector<int> lane_of_;  // per instruction: the laned RANGE its value varies with, or -1
  std::vector<std::array<std::string, kLanes>> lanes_;  // a varying value's name in each lane
};

}  // namespace

CudaKernel render_cuda(const Program& p, const DeviceLimits& limits) { return CudaRenderer(p, limits).run(); }

}  // namespace kiln::codegen
