// The ref interpreter's loop (see program.h): one switch over decoded steps and a register file.
// Arithmetic is the C kernels' (codegen/render_c.cpp): f32 in float, f64 in double, integers
// wrapped to their dtype, IDIV and MOD by zero give 0, MAX propagates a NaN in its first operand.
#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/error.h"
#include "runtime/ref/float_math.h"
#include "runtime/ref/program.h"

namespace kiln::runtime::ref_device {

namespace {

// bf16 <-> f32 as kiln::bf16_to_float and float_to_bf16 (ir/dtype.cpp), inline: bf16 kernels
// convert at every load and store
inline float from_bf16(uint16_t h) {
  uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
inline uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

float round_half(float f, DType t) {
  if (t == DType::F16) return half_to_float(float_to_half(f));
  if (t == DType::BF16) return from_bf16(to_bf16(f));
  return f;
}

// A float or double converted to dtype t as a C cast does (float -> int truncates).
template <typename X>
Value from_float(X x, DType t) {
  Value v{.i = 0};
  switch (t) {
    case DType::Bool: v.i = x != 0; break;
    case DType::U8: v.i = static_cast<uint8_t>(x); break;
    case DType::I8: v.i = static_cast<int8_t>(x); break;
    case DType::I16: v.i = static_cast<int16_t>(x); break;
    case DType::I32: v.i = static_cast<int32_t>(x); break;
    case DType::I64: v.i = static_cast<int64_t>(x); break;
    case DType::U32: v.i = static_cast<uint32_t>(x); break;
    case DType::U64: v.u = static_cast<uint64_t>(x); break;
    case DType::F64: v.d = static_cast<double>(x); break;
    default: v.f = round_half(static_cast<float>(x), t); break;  // f32, f16, bf16
  }
  return v;
}

Value from_int(Value x, DType from, DType t) {
  if (is_float(t)) return from == DType::U64 ? from_float(x.u, t) : from_float(x.i, t);
  return {.i = wrap(x.u, t)};
}

Value bitcast(Value x, DType from, DType t) {
  uint64_t bits = x.u;
  if (from == DType::F32) {
    uint32_t b;
    std::memcpy(&b, &x.f, 4);
    bits = b;
  } else if (dtype_size(from) == 4) {
    bits &= 0xffffffffu;
  }
  Value v{.i = 0};
  if (t == DType::F32) {
    uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&v.f, &b, 4);
  } else if (t == DType::F64) {
    v.u = bits;
  } else {
    v.i = wrap(bits, t);
  }
  return v;
}

inline Value load(const void* base, int64_t k, DType t) {
  Value v{.i = 0};
  switch (t) {
    case DType::F32: v.f = static_cast<const float*>(base)[k]; break;
    case DType::F64: v.d = static_cast<const double*>(base)[k]; break;
    case DType::F16: v.f = half_to_float(static_cast<const uint16_t*>(base)[k]); break;
    case DType::BF16: v.f = from_bf16(static_cast<const uint16_t*>(base)[k]); break;
    case DType::Bool: v.i = static_cast<const uint8_t*>(base)[k] != 0; break;
    case DType::U8: v.i = static_cast<const uint8_t*>(base)[k]; break;
    case DType::I8: v.i = static_cast<const int8_t*>(base)[k]; break;
    case DType::I16: v.i = static_cast<const int16_t*>(base)[k]; break;
    case DType::I32: v.i = static_cast<const int32_t*>(base)[k]; break;
    case DType::U32: v.i = static_cast<const uint32_t*>(base)[k]; break;
    case DType::I64: v.i = static_cast<const int64_t*>(base)[k]; break;
    case DType::U64: v.u = static_cast<const uint64_t*>(base)[k]; break;
  }
  return v;
}

void store(void* base, int64_t k, DType t, Value v) {
  switch (t) {
    case DType::F32: static_cast<float*>(base)[k] = v.f; break;
    case DType::F64: static_cast<double*>(base)[k] = v.d; break;
    case DType::F16: static_cast<uint16_t*>(base)[k] = float_to_half(v.f); break;
    case DType::BF16: static_cast<uint16_t*>(base)[k] = to_bf16(v.f); break;
    case DType::Bool:
    case DType::U8: static_cast<uint8_t*>(base)[k] = static_cast<uint8_t>(v.i); break;
    case DType::I8: static_cast<int8_t*>(base)[k] = static_cast<int8_t>(v.i); break;
    case DType::I16: static_cast<int16_t*>(base)[k] = static_cast<int16_t>(v.i); break;
    case DType::I32: static_cast<int32_t*>(base)[k] = static_cast<int32_t>(v.i); break;
    case DType::U32: static_cast<uint32_t*>(base)[k] = static_cast<uint32_t>(v.i); break;
    case DType::I64: static_cast<int64_t*>(base)[k] = v.i; break;
    case DType::U64: static_cast<uint64_t*>(base)[k] = v.u; break;
  }
}

// The element after adding v into it (a scatter's STORE {1}): f32, f64 and integers.
Value added(Value old, Value v, DType t) {
  if (t == DType::F32)
    old.f += v.f;
  else if (t == DType::F64)
    old.d += v.d;
  else
    old.i = wrap(old.u + v.u, t);
  return old;
}

[[noreturn]] void out_of_bounds(const Decoded& d, const char* what, int arg, int64_t k, int64_t elems) {
  throw Error("kiln.ref: kernel " + d.name + " " + what + " element " + std::to_string(k) + " of argument " +
              std::to_string(arg) + " (" + dtype_name(d.globals[static_cast<size_t>(arg)]) +
              "), which holds " + std::to_string(elems) + " elements");
}

}  // namespace

void execute(const Decoded& d, void* const* args, const int64_t* elems, int64_t start, int64_t end) {
  thread_local std::vector<Value> file;
  file = d.registers;
  Value* R = file.data();
  R[d.start].i = start;
  R[d.end].i = end;
  const Step* steps = d.steps.data();
  const size_t n = d.steps.size();
  auto lane = [&](int32_t index) {
    const LaneIndex& l = d.lane_indices[static_cast<size_t>(index)];
    return R[l.r0].i * l.s0 + R[l.r1].i * l.s1;
  };
  for (size_t pc = 0; pc < n;) {
    const Step& s = steps[pc++];
    const int64_t off = s.lane < 0 ? 0 : lane(s.lane);
    Value& o = R[s.dst + off];
    const Value a = R[s.a + off], b = R[s.b];
    switch (s.code) {
      case Code::RANGE:
        o.i = a.i;
        if (a.i >= b.i) pc = static_cast<size_t>(s.imm);
        break;
      case Code::ENDRANGE:
        if (++o.i < b.i) pc = static_cast<size_t>(s.imm);
        break;
      case Code::LOAD:
        if (!b.i) {
          o.i = 0;  // all-zero bits: 0 in every kind
          break;
        }
        if (static_cast<uint64_t>(a.i) >= static_cast<uint64_t>(elems[s.imm]))
          out_of_bounds(d, "loads", s.imm, a.i, elems[s.imm]);
        o = load(args[s.imm], a.i, s.type);
        break;
      case Code::STORE:
        if (!R[s.c].i) break;  // a gated store whose gate is off
        if (static_cast<uint64_t>(a.i) >= static_cast<uint64_t>(elems[s.imm]))
          out_of_bounds(d, "stores", s.imm, a.i, elems[s.imm]);
        store(args[s.imm], a.i, s.type, b);
        break;
      case Code::STORE_ADD:
        if (!R[s.c].i) break;
        if (static_cast<uint64_t>(a.i) >= static_cast<uint64_t>(elems[s.imm]))
          out_of_bounds(d, "adds into", s.imm, a.i, elems[s.imm]);
        store(args[s.imm], a.i, s.type, added(load(args[s.imm], a.i, s.type), b, s.type));
        break;
      case Code::COPY: o = a; break;
      case Code::LANE_FILL:
        for (int32_t l = 0; l < s.imm; l++) R[s.dst + l] = a;
        break;
      case Code::LANE_READ: o = R[s.a + lane(s.imm)]; break;

      case Code::EXP2_F: o.f = exp2f_kiln(a.f); break;
      case Code::EXP_F: o.f = expf_kiln(a.f); break;
      case Code::LOG2_F: o.f = log2f_kiln(a.f); break;
      case Code::SIN_F: o.f = std::sin(a.f); break;
      case Code::SQRT_F: o.f = std::sqrt(a.f); break;
      case Code::TRUNC_F: o.f = std::trunc(a.f); break;
      case Code::RECIP_F: o.f = 1.0f / a.f; break;
      case Code::EXP2_D: o.d = std::exp2(a.d); break;
      case Code::LOG2_D: o.d = std::log2(a.d); break;
      case Code::SIN_D: o.d = std::sin(a.d); break;
      case Code::SQRT_D: o.d = std::sqrt(a.d); break;
      case Code::TRUNC_D: o.d = std::trunc(a.d); break;
      case Code::RECIP_D: o.d = 1.0 / a.d; break;
      case Code::CAST_F: o = from_float(a.f, s.type); break;
      case Code::CAST_D: o = from_float(a.d, s.type); break;
      case Code::CAST_I: o = from_int(a, s.from, s.type); break;
      case Code::BITCAST: o = bitcast(a, s.from, s.type); break;

      case Code::ADD_F: o.f = a.f + b.f; break;
      case Code::MUL_F: o.f = a.f * b.f; break;
      case Code::DIV_F: o.f = a.f / b.f; break;
      case Code::IDIV_F: o.f = b.f == 0 ? 0.0f : a.f / b.f; break;
      case Code::MAX_F: o.f = (a.f != a.f) || a.f > b.f ? a.f : b.f; break;
      case Code::CMPLT_F: o.i = a.f < b.f; break;
      case Code::CMPNE_F: o.i = a.f != b.f; break;
      case Code::MULACC_F: {
        float p = a.f * b.f;
        o.f = p + R[s.c].f;
        break;
      }
      case Code::FMA_F: o.f = std::fma(b.f, R[s.c].f, a.f); break;
      case Code::ADD_D: o.d = a.d + b.d; break;
      case Code::MUL_D: o.d = a.d * b.d; break;
      case Code::DIV_D: o.d = a.d / b.d; break;
      case Code::IDIV_D: o.d = b.d == 0 ? 0.0 : a.d / b.d; break;
      case Code::MAX_D: o.d = (a.d != a.d) || a.d > b.d ? a.d : b.d; break;
      case Code::CMPLT_D: o.i = a.d < b.d; break;
      case Code::CMPNE_D: o.i = a.d != b.d; break;
      case Code::MULACC_D: {
        double p = a.d * b.d;
        o.d = p + R[s.c].d;
        break;
      }
      case Code::FMA_D: o.d = std::fma(b.d, R[s.c].d, a.d); break;

      case Code::ADD_I: o.i = wrap(a.u + b.u, s.type); break;
      case Code::MUL_I: o.i = wrap(a.u * b.u, s.type); break;
      case Code::IDIV_I:
        if (b.i == 0)
          o.i = 0;
        else if (s.type == DType::U64)
          o.u = a.u / b.u;
        else
          o.i = wrap(b.i == -1 ? 0 - a.u : static_cast<uint64_t>(a.i / b.i), s.type);  // -MIN wraps
        break;
      case Code::MOD_I:
        if (b.i == 0 || (b.i == -1 && s.type != DType::U64))
          o.i = 0;
        else if (s.type == DType::U64)
          o.u = a.u % b.u;
        else
          o.i = a.i % b.i;
        break;
      case Code::MAX_I: o = (s.type == DType::U64 ? a.u > b.u : a.i > b.i) ? a : b; break;
      case Code::CMPLT_I: o.i = s.from == DType::U64 ? a.u < b.u : a.i < b.i; break;
      case Code::CMPNE_I: o.i = a.i != b.i; break;
      case Code::AND_I: o.i = a.i & b.i; break;
      case Code::OR_I: o.i = a.i | b.i; break;
      case Code::XOR_I: o.i = a.i ^ b.i; break;
      case Code::SHL_I:
        o.i = wrap(a.u << (b.u & static_cast<uint64_t>(dtype_size(s.type) * 8 - 1)), s.type);
        break;
      case Code::SHR_I: {
        int sh = static_cast<int>(b.u & static_cast<uint64_t>(dtype_size(s.type) * 8 - 1));
        if (s.type == DType::U64)
          o.u = a.u >> sh;
        else
          o.i = a.i >> sh;
        break;
      }
      case Code::MULACC_I: o.i = wrap(a.u * b.u + R[s.c].u, s.type); break;
      case Code::WHERE: o = a.i ? b : R[s.c]; break;
    }
  }
}

}  // namespace kiln::runtime::ref_device
