// The scalar ALU (ir/scalar_alu.h) that constant folding and the reference interpreter share: the
// edge cases of its semantics, and folding computing them (ir includes no interpreter).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/interpreter.h"
#include "ir/graph_rewrite.h"
#include "ir/scalar_alu.h"
#include "kiln/error.h"

using namespace kiln;
using ir::Op;
using ir::Scalar;

namespace {

Scalar i(int64_t v, DType t) { return {t, 0, v}; }
Scalar f(double v, DType t = DType::F32) { return {t, v, 0}; }

Scalar alu(Op op, DType t, std::vector<Scalar> src) {
  std::vector<DType> types;
  for (auto& s : src) types.push_back(s.dtype);
  EXPECT_EQ(ir::alu_type_error(op, t, types), nullptr) << ir::op_name(op);
  Scalar r;
  EXPECT_EQ(ir::eval_alu(op, t, src, r), nullptr) << ir::op_name(op);
  return r;
}

// op on constant nodes, folded by the graph rewrites, and the interpreter's value of the same node
ir::NodeRef fold(Op op, DType t, const std::vector<ir::NodeRef>& src) {
  ir::NodeRef n = ir::make(op, t, {}, src);
  ir::NodeRef folded = ir::rewrite_graph({n})[0];
  EXPECT_EQ(folded->op, Op::CONST) << n->str();
  ref::Array want = ref::evaluate(n, false);
  if (is_float(t))
    EXPECT_TRUE(folded->fval == want.f[0] || (std::isnan(folded->fval) && std::isnan(want.f[0])));
  else
    EXPECT_EQ(ir::wrap_int(folded->ival(), t), want.i[0]);
  return folded;
}

}  // namespace

TEST(ScalarAlu, IntegersWrapAtTheirWidth) {
  EXPECT_EQ(alu(Op::ADD, DType::I8, {i(127, DType::I8), i(1, DType::I8)}).i, -128);
  EXPECT_EQ(alu(Op::MUL, DType::U8, {i(16, DType::U8), i(17, DType::U8)}).i, 16);
  EXPECT_EQ(alu(Op::ADD, DType::I64, {i(INT64_MAX, DType::I64), i(1, DType::I64)}).i, INT64_MIN);
  EXPECT_EQ(alu(Op::SHL, DType::I32, {i(1, DType::I32), i(33, DType::I32)}).i, 2);   // count mod width
  EXPECT_EQ(alu(Op::SHR, DType::I32, {i(-8, DType::I32), i(1, DType::I32)}).i, -4);  // arithmetic
}

TEST(ScalarAlu, DivisionTruncatesAsC) {
  EXPECT_EQ(alu(Op::IDIV, DType::I32, {i(-7, DType::I32), i(2, DType::I32)}).i, -3);
  EXPECT_EQ(alu(Op::MOD, DType::I32, {i(-7, DType::I32), i(2, DType::I32)}).i, -1);
  EXPECT_EQ(alu(Op::IDIV, DType::I64, {i(INT64_MIN, DType::I64), i(-1, DType::I64)}).i, INT64_MIN);
  EXPECT_EQ(alu(Op::MOD, DType::I64, {i(INT64_MIN, DType::I64), i(-1, DType::I64)}).i, 0);
  EXPECT_EQ(alu(Op::IDIV, DType::I32, {i(5, DType::I32), i(0, DType::I32)}).i, 0);
  EXPECT_EQ(alu(Op::IDIV, DType::U64, {i(-2, DType::U64), i(2, DType::U64)}).i, INT64_MAX);  // unsigned
}

TEST(ScalarAlu, MaxPropagatesNaNAndCastsRoundAsStored) {
  EXPECT_TRUE(std::isnan(alu(Op::MAX, DType::F32, {f(NAN), f(1)}).f));
  EXPECT_TRUE(std::isnan(alu(Op::MAX, DType::F32, {f(1), f(NAN)}).f));
  EXPECT_EQ(alu(Op::CMPLT, DType::Bool, {f(NAN), f(1)}).i, 0);
  EXPECT_EQ(alu(Op::CAST, DType::F32, {f(1e300, DType::F64)}).f, INFINITY);
  EXPECT_EQ(alu(Op::CAST, DType::F32, {f(0.1, DType::F64)}).f, static_cast<double>(0.1f));
  EXPECT_EQ(alu(Op::CAST, DType::I32, {f(-2.7)}).i, -2);
  EXPECT_EQ(alu(Op::CAST, DType::I32, {f(NAN)}).i, 0);
  EXPECT_EQ(alu(Op::CAST, DType::U8, {i(300, DType::I32)}).i, 44);
  EXPECT_EQ(alu(Op::CAST, DType::Bool, {f(0.5)}).i, 1);
  EXPECT_EQ(alu(Op::BITCAST, DType::I32, {f(1.0)}).i, 0x3f800000);
}

TEST(ScalarAlu, TypeErrorsAndUndefinedOpsAreNamed) {
  std::vector<DType> mixed = {DType::F32, DType::I32};
  EXPECT_STREQ(ir::alu_type_error(Op::ADD, DType::F32, mixed), "binary sources of different dtypes");
  std::vector<DType> one = {DType::F32};
  EXPECT_STREQ(ir::alu_type_error(Op::ADD, DType::F32, one), "wrong number of sources");
  Scalar r;
  std::vector<Scalar> two = {f(1), f(2)};
  EXPECT_STREQ(ir::eval_alu(Op::IDIV, DType::F32, two, r), "op not defined on floats");
}

TEST(ScalarAlu, ConstantFoldingComputesWhatTheInterpreterDoes) {
  using ir::const_float;
  using ir::const_int;
  EXPECT_EQ(fold(Op::ADD, DType::I8, {const_int(127, DType::I8), const_int(1, DType::I8)})->ival(), -128);
  EXPECT_EQ(fold(Op::IDIV, DType::I32, {const_int(-7, DType::I32), const_int(2, DType::I32)})->ival(), -3);
  EXPECT_EQ(fold(Op::MOD, DType::I32, {const_int(-7, DType::I32), const_int(2, DType::I32)})->ival(), -1);
  EXPECT_TRUE(std::isnan(
      fold(Op::MAX, DType::F32, {const_float(NAN, DType::F32), const_float(1, DType::F32)})->fval));
  EXPECT_EQ(fold(Op::CAST, DType::F16, {const_float(1.0 / 3, DType::F64)})->fval,
            static_cast<double>(half_to_float(float_to_half(1.0f / 3))));
  EXPECT_EQ(fold(Op::CAST, DType::I32, {const_float(-2.7, DType::F32)})->ival(), -2);
  // a folded node of malformed dtypes is an error naming the node, not a wrong constant
  ir::NodeRef bad = ir::make(Op::ADD, DType::F32, {}, {const_float(1, DType::F32), const_int(1, DType::I32)});
  try {
    ir::rewrite_graph({bad});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("constant folding: binary sources of different dtypes in ADD"),
              std::string::npos)
        << e.what();
  }
}
