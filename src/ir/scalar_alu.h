// The scalar semantics of the elementwise ops (ir/ops.h): one op on scalar values, exactly as the
// reference interpreter computes each element, so constant folding and the interpreter share one
// implementation. Floats are held as double (rounded to their dtype only by CAST), integers as
// int64 wrapped to their dtype's width (u64 holds its bits; bool is 0/1).
#pragma once
#include <cstdint>
#include <span>

#include "ir/ops.h"
#include "kiln/dtype.h"

namespace kiln::ir {

struct Scalar {
  DType dtype = DType::F32;
  double f = 0;   // the value of a float dtype
  int64_t i = 0;  // the value of an integer or bool dtype
};

int64_t wrap_int(int64_t v, DType t);      // two's complement to t's width; unsigned to its range
double int_to_double(int64_t v, DType t);  // u64 read as unsigned
double round_to(double v, DType t);       // to float dtype t's precision (IEEE nearest-even, inf on overflow)
int64_t float_to_int(double v, DType t);  // toward zero; NaN, inf and out of range -> 0; bool: != 0

// Why the elementwise op with result dtype t cannot take sources of these dtypes (their number,
// mismatched dtypes), or nullptr.
const char* alu_type_error(Op op, DType t, std::span<const DType> src);
// The elementwise op on sources that passed alu_type_error: nullptr with the result in `out`, or
// why the op is not defined on them (IDIV of floats, a shift of bool ...).
const char* eval_alu(Op op, DType t, std::span<const Scalar> src, Scalar& out);

}  // namespace kiln::ir
