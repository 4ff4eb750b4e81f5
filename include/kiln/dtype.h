// Element types and PyTorch's type-promotion rules; used by every stage of kiln.
#pragma once
#include <cstdint>
#include <string>

namespace kiln {

enum class DType : uint8_t { Bool, U8, I8, I16, I32, I64, U32, U64, F16, BF16, F32, F64 };

inline constexpr DType kDefaultFloat = DType::F32;

int dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "bf16", ...
bool is_float(DType t);
bool is_int(DType t);       // integer types, not bool
bool is_unsigned(DType t);  // u8, u32, u64 (not bool)
// Result type of a binary op between two tensors (torch.result_type rules).
DType promote_types(DType a, DType b);
// Result type of tensor (dtype t) op python-style scalar (is_float_scalar / bool scalar).
DType promote_with_scalar(DType t, bool scalar_is_float);
// The dtype a float op (exp, /, mean) returns for input t: t if float, else the default float.
DType float_result(DType t);
std::string to_string(DType t);

// Host-side conversions for half types (round to nearest even).
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);

}  // namespace kiln
