// C renderer (see render_c.h). Half types are stored as 16-bit and computed in float.
#include "codegen/render_c.h"

#include <algorithm>
#include <vector>

#include "codegen/render_base.h"
#include "ir/node.h"
#include "kiln/error.h"

namespace kiln::codegen {

using ir::Op;

const char* c_prelude() {
  return R"(#include <math.h>
#include <stdint.h>
#include <stdbool.h>
static inline float kiln_h2f(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu, x;
  if (e == 0) {
    if (m == 0) x = s;
    else { int k = -1; do { k++; m <<= 1; } while (!(m & 0x400u)); x = s | ((uint32_t)(112 - k) << 23) | ((m & 0x3ffu) << 13); }
  } else if (e == 0x1f) x = s | 0x7f800000u | (m << 13);
  else x = s | ((e + 112) << 23) | (m << 13);
  float f; __builtin_memcpy(&f, &x, 4); return f;
}
static inline uint16_t kiln_f2h(float f) {
  uint32_t x; __builtin_memcpy(&x, &f, 4);
  uint32_t s = (x >> 16) & 0x8000u, m = x & 0x7fffffu; int32_t e = (int32_t)((x >> 23) & 0xff);
  if (e == 0xff) return (uint16_t)(s | 0x7c00u | (m ? 0x200u : 0));
  e = e - 112;
  if (e >= 0x1f) return (uint16_t)(s | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)s;
    m |= 0x800000u; uint32_t sh = (uint32_t)(14 - e), h = m >> sh, r = m & ((1u << sh) - 1), hf = 1u << (sh - 1);
    if (r > hf || (r == hf && (h & 1))) h++;
    return (uint16_t)(s | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (m >> 13), r = m & 0x1fffu;
  if (r > 0x1000u || (r == 0x1000u && (h & 1))) h++;
  return (uint16_t)(s | h);
}
/* exp2 and log2 for f32 without calls or branches, so loops using them vectorize:
   exp2: 2^x = 2^i * 2^f with i = rint(x) (by the 1.5*2^23 trick: no libm call, which would stop
   vectorization), |f| <= 0.5, 2^f by its Taylor series to degree 7
   (error < 1e-8); 2^i is applied as two power-of-two factors so subnormal results stay exact.
   log2: x = m * 2^e with m in [sqrt(1/2), sqrt(2)); log2(m) = 2/ln2 * atanh(s), s = (m-1)/(m+1). */
static inline float kiln_exp2f(float x) {
  x = x < -151.0f ? -151.0f : (x > 129.0f ? 129.0f : x);
  float i = (x + 12582912.0f) - 12582912.0f, f = x - i;
  float p = 1.0f + f * (0.693147181f + f * (0.240226507f + f * (0.0555041087f + f * (0.00961812911f +
            f * (0.00133335581f + f * (0.000154035304f + f * 1.52527338e-05f))))));
  int32_t n = (int32_t)i, n1 = n >> 1, n2 = n - n1;
  uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
  float s1, s2;
  __builtin_memcpy(&s1, &b1, 4);
  __builtin_memcpy(&s2, &b2, 4);
  return x != x ? x : p * s1 * s2;
}
/* e^x for f32, for EXP2(x * log2(e)): the product would round x*log2(e) first (a relative error of
   about |x| * 2^-24 in the result), so the range is reduced in x itself: x = n*ln2 + r with ln2
   split in two parts (Cody-Waite), |r| <= 0.35, e^r by its Taylor series to degree 8. */
static inline float kiln_expf(float x) {
  x = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666679f + r * (0.00833333377f +
            r * (0.00138888892f + r * (0.000198412701f + r * 2.48015876e-05f)))))));
  int32_t k = (int32_t)n, k1 = k >> 1, k2 = k - k1;
  uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
  float s1, s2;
  __builtin_memcpy(&s1, &b1, 4);
  __builtin_memcpy(&s2, &b2, 4);
  return x != x ? x : p * s1 * s2;
}
static inline float kiln_log2f(float x) {
  int sub = x < 1.17549435e-38f;
  float y = sub ? x * 8388608.0f : x; /* scale subnormals up by 2^23 */
  uint32_t b;
  __builtin_memcpy(&b, &y, 4);
  int32_t e = (int32_t)((b >> 23) & 0xff) - 127;
  uint32_t mb = (b & 0x7fffffu) | 0x3f800000u;
  float m;
  __builtin_memcpy(&m, &mb, 4);
  int big = m > 1.41421356f;
  m = big ? m * 0.5f : m;
  e += big - (sub ? 23 : 0);
  float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  float r = s * (2.88539008f + s2 * (0.961796694f + s2 * (0.577078016f + s2 * (0.412198583f +
            s2 * (0.320598898f + s2 * 0.262309970f)))));
  r += (float)e;
  return x != x || x < 0.0f ? NAN : x == 0.0f ? -INFINITY : x == INFINITY ? INFINITY : r;
}
/* fused multiply-add where the CPU has it (the kernels are built for this machine), else the two
   operations; either way every kernel of this machine rounds a dot product alike */
#ifdef __FMA__
#define kiln_fmaf(a, b, c) __builtin_fmaf(a, b, c)
#define kiln_fma(a, b, c) __builtin_fma(a, b, c)
#else
#define kiln_fmaf(a, b, c) ((a) * (b) + (c))
#define kiln_fma(a, b, c) ((a) * (b) + (c))
#endif
static inline float kiln_bf2f(uint16_t h) { uint32_t x = (uint32_t)h << 16; float f; __builtin_memcpy(&f, &x, 4); return f; }
static inline uint16_t kiln_f2bf(float f) {
  uint32_t x; __builtin_memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1); return (uint16_t)(x >> 16);
}
)";
}

namespace {

class CRenderer : public RendererBase {
 public:
  using RendererBase::RendererBase;

  std::string run() {
    os_ << "void " << p_.symbol << "(";
    for (size_t i = 0; i < p_.globals.size(); i++)
      os_ << (i ? ", " : "") << (p_.written[i] ? "" : "const ") << storage_type(p_.globals[i])
          << "* restrict data" << i;
    os_ << (p_.globals.empty() ? "" : ", ") << "int64_t start, int64_t end) {\n";
    indent_ = 1;
    for (size_t i = 0; i < p_.insts.size(); i++) line(static_cast<int>(i));
    os_ << "}\n";
    os_ << "void " << p_.symbol << "_call(void** bufs, int64_t start, int64_t end) {\n  " << p_.symbol << "(";
    for (size_t i = 0; i < p_.globals.size(); i++)
      os_ << "(" << (p_.written[i] ? "" : "const ") << storage_type(p_.globals[i]) << "*)bufs[" << i << "], ";
    os_ << "start, end);\n}\n";
    return os_.str();
  }

 private:
  std::string exp2(const std::string& x, bool f64) override {
    return (f64 ? "exp2(" : "kiln_exp2f(") + x + ")";
  }
  std::string expf(const std::string& x) override { return "kiln_expf(" + x + ")"; }
  std::string fma(const std::string& a, const std::string& b, const std::string& c, bool f64) override {
    return (f64 ? "kiln_fma(" : "kiln_fmaf(") + a + ", " + b + ", " + c + ")";
  }
  std::string log2(const std::string& x, bool f64) override {
    return (f64 ? "log2(" : "kiln_log2f(") + x + ")";
  }
  std::string half_to_float(DType t, const std::string& raw) override {
    return (t == DType::F16 ? "kiln_h2f(" : "kiln_bf2f(") + raw + ")";
  }
  std::string float_to_half(DType t, const std::string& val) override {
    return (t == DType::F16 ? "kiln_f2h(" : "kiln_f2bf(") + val + ")";
  }
  std::string bitcast(DType to, DType, const std::string& x) override {
    return std::string("({ ") + value_type(to) + " t_; __builtin_memcpy(&t_, &" + x + ", sizeof t_); t_; })";
  }

  // An innermost reduce loop whose accumulators only add or multiply may be vectorized with the
  // partial sums reassociated: " reduction(+:acc5) ..." for its pragma, or "" to keep it in order.
  // (MAX keeps its order: its NaN propagation is not what a SIMD max does.)
  std::string simd_reduction(int range) const {
    std::string clause;
    for (size_t j = static_cast<size_t>(range) + 1; j < p_.insts.size(); j++) {
      const Inst& in = p_.insts[j];
      if (in.op == Op::RANGE) return "";  // not the innermost loop
      if (in.op == Op::ENDRANGE) break;
      if (accumulates(in)) {
        if (in.op != Op::ADD && in.op != Op::MUL) return "";
        clause += std::string(" reduction(") + (in.op == Op::ADD ? "+" : "*") + ":" + v(in.src[0]) + ")";
      }
    }
    return clause;
  }

  // x - offset clamped to [0, size]: where a bound of the flat loop falls in a segment's loop.
  static std::string segment_bound(const std::string& x, int64_t offset, int64_t size) {
    std::string o = std::to_string(offset) + "LL", n = std::to_string(size) + "LL";
    return "(" + x + " <= " + o + " ? 0LL : " + x + " - " + o + " >= " + n + " ? " + n + " : " + x + " - " +
           o + ")";
  }

  // Whether another RANGE opens inside the loop that range i opens.
  bool inner_range(int i) const {
    for (size_t j = static_cast<size_t>(i) + 1; j < p_.insts.size(); j++) {
      if (p_.insts[j].op == Op::RANGE) return true;
      if (p_.insts[j].op == Op::ENDRANGE) return false;
    }
    return false;
  }

  void range(int i) override {
    const Inst& in = p_.insts[static_cast<size_t>(i)];
    const char* prefix = in.arg[2] == ir::kUpcastRange    ? "uidx"
                         : in.arg[2] == ir::kReduceRange  ? "ridx"
                         : in.arg[2] == ir::kPackRange    ? "pidx"
                         : in.arg[2] == ir::kSegmentRange ? "sidx"
                                                          : "gidx";
    std::string n = prefix + std::to_string(in.arg[0]);
    names_[static_cast<size_t>(i)] = n;
    std::string lo = in.arg[3] ? "start" : "0", hi = in.arg[3] ? "end" : std::to_string(in.arg[1]);
    if (in.arg[2] == ir::kSegmentRange) {  // this thread's part [start, end) of the flat loop, in the segment
      lo = segment_bound("start", in.arg[5], in.arg[1]);
      hi = segment_bound("end", in.arg[5], in.arg[1]);
    }
    if (!in.src.empty()) {  // symbolic: the split runs to the largest trip count
      const std::string& e = v(in.src[0]);
      hi = in.arg[3] ? "(end < " + e + " ? end : " + e + ")" : e;
    }
    // independent lanes: the innermost vectorized; outer ones unrolled inside a reduce loop, so that
    // the accumulators stay in registers, but not after it (a long epilogue unrolled 16 times is
    // code that misses the instruction cache: a gelu backward took 2x as long)
    bool in_reduce = std::count(open_.begin(), open_.end(), ir::kReduceRange) > 0;
    bool summed = in.arg[2] == ir::kUpcastRange && in.arg.size() > 4 && in.arg[4];  // a sum's lanes added up
    if (summed)
      out("#pragma GCC unroll " + std::to_string(in.arg[1]));
    else if (in.arg[2] == ir::kUpcastRange && !inner_range(i))
      out("#pragma omp simd");
    else if (in.arg[2] == ir::kUpcastRange && in_reduce)
      out("#pragma GCC unroll " + std::to_string(in.arg[1]));
    open_.push_back(in.arg[2]);
    if (in.arg[2] == ir::kReduceRange && in.arg.size() > 4 && in.arg[4]) {
      std::string red = simd_reduction(i);
      if (!red.empty()) out("#pragma omp simd" + red);
    }
    out("for (int64_t " + n + " = " + lo + "; " + n + " < " + hi + "; " + n + "++) {");
    indent_++;
  }

  void end_range(int) override {
    open_.pop_back();
    indent_--;
    out("}");
  }

  std::vector<int64_t> open_;  // the kinds of the loops open, outermost first

  void store(int i) override {
    const Inst& in = p_.insts[static_cast<size_t>(i)];
    bool add = !in.arg.empty() && in.arg[0] == 1;
    std::string gate = in.src.size() > 3 ? "if (" + v(in.src[3]) + ") " : "";
    out(gate + v(in.src[0]) + "[" + v(in.src[1]) + (add ? "] += " : "] = ") + store_value(in) + ";");
  }
};

}  // namespace

std::string render_c(const Program& p) { return CRenderer(p).run(); }

}  // namespace kiln::codegen
