// dtype sizes, names and PyTorch promotion; half/bfloat16 host conversions.
#include "kiln/dtype.h"

#include <cstring>

namespace kiln {

int dtype_size(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::U8:
    case DType::I8: return 1;
    case DType::I16:
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I32:
    case DType::U32:
    case DType::F32: return 4;
    case DType::I64:
    case DType::U64:
    case DType::F64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  static const char* n[] = {"bool", "u8",  "i8",  "i16",  "i32", "i64",
                            "u32",  "u64", "f16", "bf16", "f32", "f64"};
  return n[static_cast<int>(t)];
}
std::string to_string(DType t) { return dtype_name(t); }

bool is_float(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64; }
bool is_int(DType t) { return !is_float(t) && t != DType::Bool; }
bool is_unsigned(DType t) { return t == DType::U8 || t == DType::U32 || t == DType::U64; }

namespace {
int category(DType t) { return t == DType::Bool ? 0 : is_float(t) ? 2 : 1; }
int bits(DType t) { return dtype_size(t) * 8; }
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) return DType::F32;
    return bits(a) >= bits(b) ? a : b;
  }
  // integers: same signedness -> wider; mixed -> a signed type wide enough for both
  bool ua = is_unsigned(a), ub = is_unsigned(b);
  if (ua == ub) return bits(a) >= bits(b) ? a : b;
  DType s = ua ? b : a, u = ua ? a : b;
  if (bits(s) > bits(u)) return s;
  switch (bits(u)) {
    case 8: return DType::I16;
    case 16: return DType::I32;
    case 32: return DType::I64;
    default: return DType::I64;  // u64 with a signed type: torch has no wider; i64
  }
}

DType promote_with_scalar(DType t, bool scalar_is_float) {
  if (scalar_is_float && !is_float(t)) return kDefaultFloat;
  return t;
}

DType float_result(DType t) { return is_float(t) ? t : kDefaultFloat; }

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff);
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
  return static_cast<uint16_t>(sign | h);
}

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      int e = -1;
      do {
        e++;
        mant <<= 1;
      } while (!(mant & 0x400u));
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

float bf16_to_float(uint16_t h) {
  uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace kiln
