// C renderer (see render_c.h). Half types are stored as 16-bit and computed in float.
#include "codegen/render_c.h"

#include <cmath>
#include <cstdio>
#include <sstream>

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
static inline float kiln_bf2f(uint16_t h) { uint32_t x = (uint32_t)h << 16; float f; __builtin_memcpy(&f, &x, 4); return f; }
static inline uint16_t kiln_f2bf(float f) {
  uint32_t x; __builtin_memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1); return (uint16_t)(x >> 16);
}
)";
}

namespace {

bool is_half(DType t) { return t == DType::F16 || t == DType::BF16; }

// C type of a value in registers (halves compute in float)
const char* value_type(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::U8: return "uint8_t";
    case DType::I8: return "int8_t";
    case DType::I16: return "int16_t";
    case DType::I32: return "int32_t";
    case DType::I64: return "int64_t";
    case DType::U32: return "uint32_t";
    case DType::U64: return "uint64_t";
    case DType::F16:
    case DType::BF16:
    case DType::F32: return "float";
    case DType::F64: return "double";
  }
  return "?";
}

// C type of an element in memory
const char* storage_type(DType t) {
  return is_half(t) ? "uint16_t" : t == DType::Bool ? "uint8_t" : value_type(t);
}

std::string literal(const Inst& in) {
  char buf[64];
  if (is_float(in.dtype)) {
    double v = in.fval;
    bool f64 = in.dtype == DType::F64;
    if (std::isnan(v)) return f64 ? "(double)NAN" : "NAN";
    if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + (f64 ? "(double)INFINITY" : "INFINITY");
    std::snprintf(buf, sizeof buf, f64 ? "%.17g" : "%.9gf",
                  f64 ? v : static_cast<double>(static_cast<float>(v)));
    std::string s = buf;
    if (s.find_first_of(".en") == std::string::npos) s.insert(s.size() - (f64 ? 0 : 1), ".0");
    return s;
  }
  int64_t v = in.arg.empty() ? 0 : in.arg[0];
  if (in.dtype == DType::Bool) return v ? "1" : "0";
  if (v == INT64_MIN) return "(-9223372036854775807LL-1)";
  if (in.dtype == DType::U64) {
    std::snprintf(buf, sizeof buf, "%lluull", static_cast<unsigned long long>(v));
    return buf;
  }
  if (in.dtype == DType::U32) {
    std::snprintf(buf, sizeof buf, "%lluu", static_cast<unsigned long long>(static_cast<uint32_t>(v)));
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%lldLL", static_cast<long long>(v));
  if (in.dtype == DType::I64) return buf;
  return std::string("(") + value_type(in.dtype) + ")" + buf;
}

class Renderer {
 public:
  explicit Renderer(const Program& p) : p_(p), names_(p.insts.size()) {}

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
  const std::string& v(int i) const { return names_[i]; }

  void out(const std::string& s) { os_ << std::string(2 * indent_, ' ') << s << "\n"; }

  void def(int i, const std::string& prefix, const std::string& expr) {
    names_[i] = prefix + std::to_string(i);
    out(std::string(value_type(p_.insts[i].dtype)) + " " + names_[i] + " = " + expr + ";");
  }

  std::string load_expr(const Inst& in) {
    DType t = p_.globals[static_cast<size_t>(p_.insts[in.src[0]].arg[0])];
    std::string raw = v(in.src[0]) + "[" + v(in.src[1]) + "]";
    std::string val = t == DType::F16    ? "kiln_h2f(" + raw + ")"
                      : t == DType::BF16 ? "kiln_bf2f(" + raw + ")"
                                         : raw;
    if (in.src.size() > 2) val = "(" + v(in.src[2]) + " ? " + val + " : 0)";
    return val;
  }

  std::string alu(const Inst& in) {
    auto a = [&](int k) { return v(in.src[static_cast<size_t>(k)]); };
    DType t = in.dtype;
    bool f = is_float(t), f64 = t == DType::F64;
    std::string sfx = f64 ? "" : "f";
    switch (in.op) {
      case Op::EXP2: {
        const Inst& m = p_.insts[in.src[0]];  // exp(x) is built as exp2(x * log2(e))
        if (!f64 && m.op == Op::MUL)
          for (int k = 0; k < 2; k++) {
            const Inst& c = p_.insts[m.src[static_cast<size_t>(k)]];
            if (c.op == Op::CONST && static_cast<float>(c.fval) == static_cast<float>(1.4426950408889634))
              return "kiln_expf(" + v(m.src[static_cast<size_t>(1 - k)]) + ")";
          }
        return (f64 ? "exp2(" : "kiln_exp2f(") + a(0) + ")";
      }
      case Op::LOG2: return (f64 ? "log2(" : "kiln_log2f(") + a(0) + ")";
      case Op::SIN: return "sin" + sfx + "(" + a(0) + ")";
      case Op::SQRT: return "sqrt" + sfx + "(" + a(0) + ")";
      case Op::TRUNC: return "trunc" + sfx + "(" + a(0) + ")";
      case Op::RECIP: return (f64 ? "1.0/" : "1.0f/") + a(0);
      case Op::CAST: {
        DType from = p_.insts[in.src[0]].dtype;
        if (t == DType::Bool) return "(" + a(0) + " != 0)";
        if (t == DType::F16) return "kiln_h2f(kiln_f2h((float)" + a(0) + "))";
        if (t == DType::BF16) return "kiln_bf2f(kiln_f2bf((float)" + a(0) + "))";
        (void)from;
        return std::string("(") + value_type(t) + ")" + a(0);
      }
      case Op::BITCAST: {
        DType from = p_.insts[in.src[0]].dtype;
        if (is_half(t) || is_half(from)) throw Error("kiln.render_c: BITCAST of half types is not supported");
        return std::string("({ ") + value_type(t) + " t_; __builtin_memcpy(&t_, &" + a(0) +
               ", sizeof t_); t_; })";
      }
      case Op::ADD: return a(0) + " + " + a(1);
      case Op::MUL:  // a * recip(b) is an IEEE division: correctly rounded, as a / b is
        for (int k = 0; k < 2; k++) {
          const Inst& r = p_.insts[in.src[static_cast<size_t>(k)]];
          if (r.op == Op::RECIP && f) return a(1 - k) + " / " + v(r.src[0]);
        }
        return a(0) + " * " + a(1);
      case Op::MAX:
        if (f)
          return "(((" + a(0) + " != " + a(0) + ") | (" + a(0) + " > " + a(1) + ")) ? " + a(0) + " : " +
                 a(1) + ")";
        return "(" + a(0) + " > " + a(1) + " ? " + a(0) + " : " + a(1) + ")";
      case Op::IDIV: return "(" + a(1) + " == 0 ? 0 : " + a(0) + " / " + a(1) + ")";
      case Op::MOD: return "(" + a(1) + " == 0 ? 0 : " + a(0) + " % " + a(1) + ")";
      case Op::CMPLT: return a(0) + " < " + a(1);
      case Op::CMPNE: return a(0) + " != " + a(1);
      case Op::AND: return a(0) + " & " + a(1);
      case Op::OR: return a(0) + " | " + a(1);
      case Op::XOR: return a(0) + " ^ " + a(1);
      case Op::SHL: return a(0) + " << (" + a(1) + " & " + std::to_string(dtype_size(t) * 8 - 1) + ")";
      case Op::SHR: return a(0) + " >> (" + a(1) + " & " + std::to_string(dtype_size(t) * 8 - 1) + ")";
      case Op::WHERE: return a(0) + " ? " + a(1) + " : " + a(2);
      case Op::MULACC: return a(0) + " * " + a(1) + " + " + a(2);
      default: break;
    }
    throw Error(std::string("kiln.render_c: no C rendering for ") + ir::op_name(in.op));
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
      if (in.arg.size() == 1 && in.arg[0] == 1 && !in.src.empty() &&
          p_.insts[in.src[0]].op == Op::DEFINE_ACC) {
        if (in.op != Op::ADD && in.op != Op::MUL) return "";
        clause += std::string(" reduction(") + (in.op == Op::ADD ? "+" : "*") + ":" + v(in.src[0]) + ")";
      }
    }
    return clause;
  }

  // Whether another RANGE opens inside the loop that range i opens.
  bool inner_range(int i) const {
    for (size_t j = static_cast<size_t>(i) + 1; j < p_.insts.size(); j++) {
      if (p_.insts[j].op == Op::RANGE) return true;
      if (p_.insts[j].op == Op::ENDRANGE) return false;
    }
    return false;
  }

  void line(int i) {
    const Inst& in = p_.insts[i];
    switch (in.op) {
      case Op::DEFINE_GLOBAL: names_[i] = "data" + std::to_string(in.arg[0]); return;
      case Op::CONST: names_[i] = literal(in); return;
      case Op::RANGE: {
        const char* prefix = in.arg[2] == ir::kUpcastRange   ? "uidx"
                             : in.arg[2] == ir::kReduceRange ? "ridx"
                                                             : "gidx";
        std::string n = prefix + std::to_string(in.arg[0]);
        names_[i] = n;
        std::string lo = in.arg[3] ? "start" : "0", hi = in.arg[3] ? "end" : std::to_string(in.arg[1]);
        if (in.arg[2] == ir::kUpcastRange)  // independent lanes: vectorize the innermost, unroll outer ones
          out(i + 1 < static_cast<int>(p_.insts.size()) && inner_range(i) ? "#pragma GCC unroll 8"
                                                                          : "#pragma omp simd");
        if (in.arg[2] == ir::kReduceRange && in.arg.size() > 4 && in.arg[4]) {
          std::string red = simd_reduction(i);
          if (!red.empty()) out("#pragma omp simd" + red);
        }
        out("for (int64_t " + n + " = " + lo + "; " + n + " < " + hi + "; " + n + "++) {");
        indent_++;
        return;
      }
      case Op::ENDRANGE:
        indent_--;
        out("}");
        return;
      case Op::LOAD: def(i, "val", load_expr(in)); return;
      case Op::DEFINE_ACC:
        if (in.arg.size() >= 4) {  // one accumulator per upcast lane: acc5[uidx3*8+uidx4]
          std::string a = "acc" + std::to_string(i), lanes = std::to_string(in.arg[1]), index;
          for (size_t k = 2; k + 1 < in.arg.size(); k += 2) {
            std::string u = "uidx" + std::to_string(in.arg[k]);
            index = index.empty() ? u : "(" + index + ")*" + std::to_string(in.arg[k + 1]) + "+" + u;
          }
          out(std::string(value_type(in.dtype)) + " " + a + "[" + lanes + "];");
          out("for (int l = 0; l < " + lanes + "; l++) " + a + "[l] = " + v(in.src[0]) + ";");
          names_[i] = a + "[" + index + "]";
          return;
        }
        def(i, "acc", v(in.src[0]));
        return;
      case Op::STORE: {
        DType t = p_.globals[static_cast<size_t>(p_.insts[in.src[0]].arg[0])];
        std::string val = v(in.src[2]);
        if (t == DType::F16) val = "kiln_f2h(" + val + ")";
        if (t == DType::BF16) val = "kiln_f2bf(" + val + ")";
        out(v(in.src[0]) + "[" + v(in.src[1]) + "] = " + val + ";");
        return;
      }
      default:
        if (in.arg.size() == 1 && in.arg[0] == 1 && p_.insts[in.src[0]].op == Op::DEFINE_ACC) {  // accumulate
          names_[i] = v(in.src[0]);
          out(v(in.src[0]) + " = " + alu(in) + ";");
          return;
        }
        def(i, "alu", alu(in));
    }
  }

  const Program& p_;
  std::vector<std::string> names_;
  std::ostringstream os_;
  int indent_ = 0;
};

}  // namespace

std::string render_c(const Program& p) { return Renderer(p).run(); }

}  // namespace kiln::codegen
