// Rendering shared by the C and CUDA renderers (see render_base.h).
#include "codegen/render_base.h"

#include <cmath>
#include <cstdio>

#include "ir/node.h"
#include "kiln/error.h"

namespace kiln::codegen {

using ir::Op;

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

void RendererBase::def(int i, const std::string& prefix, const std::string& expr) {
  names_[static_cast<size_t>(i)] = prefix + std::to_string(i) + suffix_;
  out(std::string(value_type(p_.insts[static_cast<size_t>(i)].dtype)) + " " + v(i) + " = " + expr + ";");
}

std::string RendererBase::load_expr(const Inst& in) {
  DType t = global_dtype(in);
  std::string raw = v(in.src[0]) + "[" + v(in.src[1]) + "]";
  std::string val = is_half(t) ? half_to_float(t, raw) : raw;
  if (in.src.size() > 2) val = "(" + v(in.src[2]) + " ? " + val + " : 0)";
  return val;
}

std::string RendererBase::store_value(const Inst& in) {
  DType t = global_dtype(in);
  return is_half(t) ? float_to_half(t, v(in.src[2])) : v(in.src[2]);
}

RendererBase::RendererBase(const Program& p) : p_(p), names_(p.insts.size()) {}

bool RendererBase::divides(const Inst& mul, int k) const {
  const Inst& r = p_.insts[static_cast<size_t>(mul.src[static_cast<size_t>(k)])];
  return mul.op == Op::MUL && is_float(mul.dtype) && r.op == Op::RECIP && !r.arg.empty() &&
         r.arg[0] == ir::kDivisor;
}

bool RendererBase::accumulates(const Inst& in) const {
  return in.arg.size() == 1 && in.arg[0] == 1 && !in.src.empty() &&
         p_.insts[static_cast<size_t>(in.src[0])].op == Op::DEFINE_ACC;
}

std::string RendererBase::accumulate(const Inst& in) {
  const Inst& m = p_.insts[static_cast<size_t>(in.src[1])];
  bool fused = in.op == Op::ADD && (in.dtype == DType::F32 || in.dtype == DType::F64) && m.op == Op::MUL &&
               m.dtype == in.dtype;
  for (int k = 0; fused && k < 2; k++) fused = !divides(m, k);
  if (!fused) return alu(in);
  return fma(v(m.src[0]), v(m.src[1]), v(in.src[0]), in.dtype == DType::F64);
}

std::string RendererBase::alu(const Inst& in) {
  auto a = [&](int k) { return v(in.src[static_cast<size_t>(k)]); };
  DType t = in.dtype;
  bool f = is_float(t), f64 = t == DType::F64;
  std::string sfx = f64 ? "" : "f";
  switch (in.op) {
    case Op::EXP2: {
      const Inst& m = p_.insts[static_cast<size_t>(in.src[0])];  // exp(x) is built as exp2(x * log2(e))
      if (!f64 && m.op == Op::MUL)
        for (int k = 0; k < 2; k++) {
          const Inst& c = p_.insts[static_cast<size_t>(m.src[static_cast<size_t>(k)])];
          if (c.op == Op::CONST && static_cast<float>(c.fval) == static_cast<float>(1.4426950408889634))
            return expf(v(m.src[static_cast<size_t>(1 - k)]));
        }
      return exp2(a(0), f64);
    }
    case Op::LOG2: return log2(a(0), f64);
    case Op::SIN: return "sin" + sfx + "(" + a(0) + ")";
    case Op::SQRT: return "sqrt" + sfx + "(" + a(0) + ")";
    case Op::TRUNC: return "trunc" + sfx + "(" + a(0) + ")";
    case Op::RECIP: return (f64 ? "1.0/" : "1.0f/") + a(0);
    case Op::CAST:
      if (t == DType::Bool) return "(" + a(0) + " != 0)";
      if (is_half(t)) return half_to_float(t, float_to_half(t, "(float)" + a(0)));
      return std::string("(") + value_type(t) + ")" + a(0);
    case Op::BITCAST: {
      DType from = p_.insts[static_cast<size_t>(in.src[0])].dtype;
      if (is_half(t) || is_half(from)) throw Error("kiln.render: BITCAST of half types is not supported");
      return bitcast(t, from, a(0));
    }
    case Op::ADD: return a(0) + " + " + a(1);
    case Op::MUL:
      for (int k = 0; k < 2; k++)
        if (divides(in, k))
          return a(1 - k) + " / " + v(p_.insts[static_cast<size_t>(in.src[static_cast<size_t>(k)])].src[0]);
      return a(0) + " * " + a(1);
    case Op::MAX:
      if (f)
        return "(((" + a(0) + " != " + a(0) + ") | (" + a(0) + " > " + a(1) + ")) ? " + a(0) + " : " + a(1) +
               ")";
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
  throw Error(std::string("kiln.render: no rendering for ") + ir::op_name(in.op));
}

void RendererBase::line(int i) {
  const Inst& in = p_.insts[static_cast<size_t>(i)];
  switch (in.op) {
    case Op::DEFINE_GLOBAL: names_[static_cast<size_t>(i)] = "data" + std::to_string(in.arg[0]); return;
    case Op::CONST: names_[static_cast<size_t>(i)] = literal(in); return;
    case Op::VAR:
      def(i, "var", "data" + std::to_string(in.arg[0]) + "[" + std::to_string(in.arg[1]) + "]");
      return;
    case Op::RANGE: range(i); return;
    case Op::ENDRANGE: end_range(i); return;
    case Op::LOAD: load(i); return;
    case Op::DEFINE_ACC:
      if (in.arg.size() >= 4) {  // one accumulator per upcast lane: acc5[uidx3*8+uidx4]
        std::string a = "acc" + std::to_string(i), lanes = std::to_string(in.arg[1]), index;
        for (size_t k = 2; k + 1 < in.arg.size(); k += 2) {
          std::string u = "uidx" + std::to_string(in.arg[k]);
          index = index.empty() ? u : "(" + index + ")*" + std::to_string(in.arg[k + 1]) + "+" + u;
        }
        out(std::string(value_type(in.dtype)) + " " + a + "[" + lanes + "];");
        out("for (int l = 0; l < " + lanes + "; l++) " + a + "[l] = " + v(in.src[0]) + ";");
        names_[static_cast<size_t>(i)] = a + "[" + index + "]";
        return;
      }
      def(i, "acc", v(in.src[0]));
      return;
    case Op::STORE: store(i); return;
    default:
      if (accumulates(in)) {
        names_[static_cast<size_t>(i)] = v(in.src[0]);
        out(v(in.src[0]) + " = " + accumulate(in) + ";");
        return;
      }
      def(i, "alu", alu(in));
  }
}

}  // namespace kiln::codegen
