// Tests for the reference interpreter (kiln::ref::evaluate): movement ops, reduces, casts, integer
// wrap-around, C division semantics, NaN propagation and realized-buffer reads.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "engine/interpreter.h"
#include "kiln/error.h"
#include "runtime/buffer.h"

namespace kiln {
namespace {

using ir::make;
using ir::NodeRef;
using ir::Op;
using ir::Shape;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

NodeRef buf(DType t, Shape shape, const std::vector<double>& vals) {
  auto b = std::make_shared<Buffer>(t, numel(shape));
  EXPECT_EQ(static_cast<int64_t>(vals.size()), b->numel);
  for (size_t k = 0; k < vals.size(); k++) b->set_f(static_cast<int64_t>(k), vals[k]);
  auto node = make(Op::BUFFER, t, std::move(shape), {}, {b->id});
  node->buffer = b;
  return node;
}

std::vector<double> arange(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; k++) v[k] = static_cast<double>(k);
  return v;
}

std::vector<double> vals(const ref::Array& a) {
  std::vector<double> v;
  for (int64_t k = 0; k < a.numel(); k++) v.push_back(a.at(k));
  return v;
}

NodeRef reduce(Op rop, const NodeRef& x, std::vector<int64_t> axes) {
  Shape s = x->shape;
  for (auto ax : axes) s[ax] = 1;
  std::vector<int64_t> arg{static_cast<int>(rop)};
  arg.insert(arg.end(), axes.begin(), axes.end());
  return make(Op::REDUCE, x->dtype, s, {x}, arg);
}

NodeRef bin(Op op, const NodeRef& a, const NodeRef& b) {
  DType t = ir::is_comparison(op) ? DType::Bool : a->dtype;
  return make(op, t, a->shape, {a, b});
}

NodeRef cast(const NodeRef& x, DType t) { return make(Op::CAST, t, x->shape, {x}); }

TEST(Interpreter, Reshape) {
  auto x = buf(DType::F32, {2, 3}, arange(6));
  auto r = ref::evaluate(make(Op::RESHAPE, DType::F32, {3, 1, 2}, {x}));
  EXPECT_EQ(r.shape, (Shape{3, 1, 2}));
  EXPECT_EQ(r.dtype, DType::F32);
  EXPECT_EQ(vals(r), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  EXPECT_THROW(ref::evaluate(make(Op::RESHAPE, DType::F32, {4}, {x})), Error);
}

TEST(Interpreter, Permute2x3x4) {
  auto x = buf(DType::F32, {2, 3, 4}, arange(24));
  auto r = ref::evaluate(make(Op::PERMUTE, DType::F32, {4, 2, 3}, {x}, {2, 0, 1}));
  EXPECT_EQ(r.shape, (Shape{4, 2, 3}));
  EXPECT_EQ(vals(r), (std::vector<double>{0, 4, 8,  12, 16, 20, 1, 5, 9,  13, 17, 21,
                                          2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23}));
  auto t = ref::evaluate(make(Op::PERMUTE, DType::F32, {3, 2, 4}, {x}, {1, 0, 2}));
  EXPECT_EQ(vals(t), (std::vector<double>{0,  1,  2,  3,  12, 13, 14, 15, 4,  5,  6,  7,
                                          16, 17, 18, 19, 8,  9,  10, 11, 20, 21, 22, 23}));
}

TEST(Interpreter, Expand) {
  auto row = buf(DType::F32, {1, 3}, {1, 2, 3});
  EXPECT_EQ(vals(ref::evaluate(make(Op::EXPAND, DType::F32, {2, 3}, {row}))),
            (std::vector<double>{1, 2, 3, 1, 2, 3}));
  auto col = buf(DType::F32, {2, 1}, {7, 8});
  EXPECT_EQ(vals(ref::evaluate(make(Op::EXPAND, DType::F32, {2, 3}, {col}))),
            (std::vector<double>{7, 7, 7, 8, 8, 8}));
  EXPECT_THROW(ref::evaluate(make(Op::EXPAND, DType::F32, {4, 3}, {col})), Error);
}

TEST(Interpreter, Pad) {
  auto x = buf(DType::F32, {2, 2}, {1, 2, 3, 4});
  auto r = ref::evaluate(make(Op::PAD, DType::F32, {3, 4}, {x}, {1, 0, 0, 2}));
  EXPECT_EQ(r.shape, (Shape{3, 4}));
  EXPECT_EQ(vals(r), (std::vector<double>{0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0}));
  auto y = buf(DType::I32, {3}, {5, 6, 7});
  EXPECT_EQ(vals(ref::evaluate(make(Op::PAD, DType::I32, {6}, {y}, {2, 1}))),
            (std::vector<double>{0, 0, 5, 6, 7, 0}));
}

TEST(Interpreter, Shrink) {
  auto x = buf(DType::F32, {3, 4}, arange(12));
  EXPECT_EQ(vals(ref::evaluate(make(Op::SHRINK, DType::F32, {2, 2}, {x}, {1, 3, 1, 3}))),
            (std::vector<double>{5, 6, 9, 10}));
  EXPECT_EQ(vals(ref::evaluate(make(Op::SHRINK, DType::F32, {3, 1}, {x}, {0, 3, 3, 4}))),
            (std::vector<double>{3, 7, 11}));
  EXPECT_THROW(ref::evaluate(make(Op::SHRINK, DType::F32, {3, 2}, {x}, {0, 3, 3, 5})), Error);
}

TEST(Interpreter, Flip) {
  auto x = buf(DType::F32, {2, 3}, arange(6));
  EXPECT_EQ(vals(ref::evaluate(make(Op::FLIP, DType::F32, {2, 3}, {x}, {1, 0}))),
            (std::vector<double>{3, 4, 5, 0, 1, 2}));
  EXPECT_EQ(vals(ref::evaluate(make(Op::FLIP, DType::F32, {2, 3}, {x}, {0, 1}))),
            (std::vector<double>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(vals(ref::evaluate(make(Op::FLIP, DType::F32, {2, 3}, {x}, {1, 1}))),
            (std::vector<double>{5, 4, 3, 2, 1, 0}));
}

TEST(Interpreter, MovementChainAndContiguous) {
  // pad by one on each side, then shrink back: the identity
  auto x = buf(DType::F32, {2, 3}, arange(6));
  auto p = make(Op::PAD, DType::F32, {4, 5}, {x}, {1, 1, 1, 1});
  auto s = make(Op::SHRINK, DType::F32, {2, 3}, {p}, {1, 3, 1, 4});
  auto c = make(Op::CONTIGUOUS, DType::F32, {2, 3}, {s});
  EXPECT_EQ(vals(ref::evaluate(c)), arange(6));
}

TEST(Interpreter, ReduceOps) {
  auto x = buf(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto sum = ref::evaluate(reduce(Op::ADD, x, {1}));
  EXPECT_EQ(sum.shape, (Shape{2, 1}));
  EXPECT_EQ(vals(sum), (std::vector<double>{6, 15}));
  EXPECT_EQ(vals(ref::evaluate(reduce(Op::MUL, x, {0}))), (std::vector<double>{4, 10, 18}));
  EXPECT_EQ(vals(ref::evaluate(reduce(Op::MAX, x, {0, 1}))), (std::vector<double>{6}));
  auto neg = buf(DType::F32, {3}, {-5, -2, -9});
  EXPECT_EQ(vals(ref::evaluate(reduce(Op::MAX, neg, {0}))), (std::vector<double>{-2}));
  auto ix = buf(DType::I32, {2, 2}, {-7, -3, 4, -1});
  EXPECT_EQ(vals(ref::evaluate(reduce(Op::MAX, ix, {1}))), (std::vector<double>{-3, 4}));
  EXPECT_EQ(vals(ref::evaluate(reduce(Op::ADD, ix, {0}))), (std::vector<double>{-3, -4}));
}

TEST(Interpreter, ReduceSeveralAxes) {
  auto x = buf(DType::F32, {2, 3, 4}, arange(24));
  auto r = ref::evaluate(reduce(Op::ADD, x, {0, 2}));
  EXPECT_EQ(r.shape, (Shape{1, 3, 1}));
  EXPECT_EQ(vals(r), (std::vector<double>{60, 92, 124}));
  auto m = ref::evaluate(reduce(Op::MAX, x, {1}));
  EXPECT_EQ(m.shape, (Shape{2, 1, 4}));
  EXPECT_EQ(vals(m), (std::vector<double>{8, 9, 10, 11, 20, 21, 22, 23}));
  auto all = ref::evaluate(reduce(Op::ADD, x, {0, 1, 2}));
  EXPECT_EQ(all.shape, (Shape{1, 1, 1}));
  EXPECT_EQ(vals(all), (std::vector<double>{276}));
}

TEST(Interpreter, ReduceEmptyAxisGivesIdentity) {
  auto x = buf(DType::F32, {2, 0}, {});
  auto s = ref::evaluate(reduce(Op::ADD, x, {1}));
  EXPECT_EQ(s.shape, (Shape{2, 1}));
  EXPECT_EQ(vals(s), (std::vector<double>{0, 0}));
  EXPECT_EQ(vals(ref::evaluate(reduce(Op::MUL, x, {1}))), (std::vector<double>{1, 1}));
  EXPECT_EQ(vals(ref::evaluate(reduce(Op::MAX, x, {1}))), (std::vector<double>{-kInf, -kInf}));
  auto i8 = buf(DType::I8, {0, 3}, {});
  EXPECT_EQ(vals(ref::evaluate(reduce(Op::MAX, i8, {0}))), (std::vector<double>{-128, -128, -128}));
  auto u8 = buf(DType::U8, {0}, {});
  EXPECT_EQ(vals(ref::evaluate(reduce(Op::MAX, u8, {0}))), (std::vector<double>{0}));
  // reducing a non-empty axis of an empty tensor stays empty
  EXPECT_EQ(ref::evaluate(reduce(Op::ADD, x, {0})).numel(), 0);
}

TEST(Interpreter, Iota) {
  EXPECT_EQ(vals(ref::evaluate(make(Op::IOTA, DType::I32, {2, 3}, {}, {1}))),
            (std::vector<double>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(vals(ref::evaluate(make(Op::IOTA, DType::F32, {2, 3}, {}, {0}))),
            (std::vector<double>{0, 0, 0, 1, 1, 1}));
  EXPECT_THROW(ref::evaluate(make(Op::IOTA, DType::I32, {2, 3}, {}, {2})), Error);
}

TEST(Interpreter, ConstAndScalar) {
  auto c = ref::evaluate(ir::const_float(2.5, DType::F32, {2}));
  EXPECT_EQ(vals(c), (std::vector<double>{2.5, 2.5}));
  auto s = ref::evaluate(ir::const_int(-3, DType::I64));
  EXPECT_EQ(s.shape, Shape{});
  EXPECT_EQ(vals(s), (std::vector<double>{-3}));
}

TEST(Interpreter, CastRoundsToHalfTypes) {
  auto x = buf(DType::F64, {5}, {0.1, 1 + std::ldexp(1.0, -11), 1 + 3 * std::ldexp(1.0, -11), 65519, 65520});
  EXPECT_EQ(vals(ref::evaluate(cast(x, DType::F16))),
            (std::vector<double>{0.0999755859375, 1.0, 1.001953125, 65504, kInf}));
  auto y = buf(DType::F64, {3}, {0.1, 1 + std::ldexp(1.0, -8), 1 + 3 * std::ldexp(1.0, -8)});
  EXPECT_EQ(vals(ref::evaluate(cast(y, DType::BF16))), (std::vector<double>{0.10009765625, 1.0, 1.015625}));
  auto f32 = ref::evaluate(cast(y, DType::F32));
  EXPECT_EQ(f32.f[0], static_cast<double>(0.1f));
  EXPECT_EQ(ref::evaluate(cast(y, DType::F64)).f[0], 0.1);
}

TEST(Interpreter, CastFloatToIntTruncates) {
  auto x = buf(DType::F64, {7}, {2.7, -2.7, -0.5, 0.0, kNaN, kInf, -kInf});
  EXPECT_EQ(vals(ref::evaluate(cast(x, DType::I32))), (std::vector<double>{2, -2, 0, 0, 0, 0, 0}));
  EXPECT_EQ(vals(ref::evaluate(cast(x, DType::Bool))), (std::vector<double>{1, 1, 1, 0, 1, 1, 1}));
  auto i = buf(DType::I32, {3}, {300, -1, 7});
  EXPECT_EQ(vals(ref::evaluate(cast(i, DType::U8))), (std::vector<double>{44, 255, 7}));
  EXPECT_EQ(vals(ref::evaluate(cast(i, DType::F32))), (std::vector<double>{300, -1, 7}));
}

TEST(Interpreter, IntegerWrapAround) {
  auto a = ir::const_int(127, DType::I8, {2});
  auto one = ir::const_int(1, DType::I8, {2});
  EXPECT_EQ(vals(ref::evaluate(bin(Op::ADD, a, one))), (std::vector<double>{-128, -128}));
  auto u = ir::const_int(255, DType::U8, {1});
  EXPECT_EQ(vals(ref::evaluate(bin(Op::ADD, u, ir::const_int(1, DType::U8, {1})))), (std::vector<double>{0}));
  auto s = ir::const_int(16, DType::U8, {1});
  EXPECT_EQ(vals(ref::evaluate(bin(Op::MUL, s, s))), (std::vector<double>{0}));
  auto m = ir::const_int(std::numeric_limits<int32_t>::max(), DType::I32, {1});
  EXPECT_EQ(vals(ref::evaluate(bin(Op::ADD, m, ir::const_int(1, DType::I32, {1})))),
            (std::vector<double>{std::numeric_limits<int32_t>::min()}));
  // u64 is unsigned in comparisons and max
  auto big = ir::const_int(-1, DType::U64, {1});  // 2^64 - 1
  auto small = ir::const_int(1, DType::U64, {1});
  EXPECT_EQ(vals(ref::evaluate(bin(Op::CMPLT, small, big))), (std::vector<double>{1}));
  EXPECT_EQ(ref::evaluate(bin(Op::MAX, small, big)).i[0], -1);
}

TEST(Interpreter, IdivModCSemantics) {
  auto a = buf(DType::I32, {5}, {7, -7, 7, -7, 5});
  auto b = buf(DType::I32, {5}, {2, 2, -2, -2, 0});
  EXPECT_EQ(vals(ref::evaluate(bin(Op::IDIV, a, b))), (std::vector<double>{3, -3, -3, 3, 0}));
  EXPECT_EQ(vals(ref::evaluate(bin(Op::MOD, a, b))), (std::vector<double>{1, -1, 1, -1, 0}));
  auto lo = ir::const_int(-128, DType::I8, {1});
  auto m1 = ir::const_int(-1, DType::I8, {1});
  EXPECT_EQ(vals(ref::evaluate(bin(Op::IDIV, lo, m1))), (std::vector<double>{-128}));
  EXPECT_EQ(vals(ref::evaluate(bin(Op::MOD, lo, m1))), (std::vector<double>{0}));
  auto f = buf(DType::F32, {1}, {1});
  EXPECT_THROW(ref::evaluate(bin(Op::IDIV, f, f)), Error);
}

TEST(Interpreter, MaxPropagatesNaN) {
  auto a = buf(DType::F32, {3}, {kNaN, 1, 2});
  auto b = buf(DType::F32, {3}, {1, kNaN, 3});
  auto r = ref::evaluate(bin(Op::MAX, a, b));
  EXPECT_TRUE(std::isnan(r.f[0]));
  EXPECT_TRUE(std::isnan(r.f[1]));
  EXPECT_EQ(r.f[2], 3);
  auto x = buf(DType::F32, {4}, {1, kNaN, 3, -kInf});
  EXPECT_TRUE(std::isnan(ref::evaluate(reduce(Op::MAX, x, {0})).f[0]));
  auto y = buf(DType::F32, {3}, {3, 1, kNaN});
  EXPECT_TRUE(std::isnan(ref::evaluate(reduce(Op::MAX, y, {0})).f[0]));
}

TEST(Interpreter, WhereAndComparisons) {
  auto a = buf(DType::F32, {4}, {1, 5, 3, kNaN});
  auto b = buf(DType::F32, {4}, {2, 2, 3, 0});
  auto lt = bin(Op::CMPLT, a, b);
  auto ne = bin(Op::CMPNE, a, b);
  EXPECT_EQ(ref::evaluate(lt).dtype, DType::Bool);
  EXPECT_EQ(vals(ref::evaluate(lt)), (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(vals(ref::evaluate(ne)), (std::vector<double>{1, 1, 0, 1}));
  auto w = make(Op::WHERE, DType::F32, {4}, {lt, a, b});
  EXPECT_EQ(vals(ref::evaluate(w)), (std::vector<double>{1, 2, 3, 0}));
  EXPECT_THROW(ref::evaluate(make(Op::WHERE, DType::F32, {4}, {a, a, b})), Error);
}

TEST(Interpreter, UnaryMulaccBitsAndShifts) {
  auto x = buf(DType::F32, {3}, {1, 4, 0.25});
  EXPECT_EQ(vals(ref::evaluate(make(Op::LOG2, DType::F32, {3}, {x}))), (std::vector<double>{0, 2, -2}));
  EXPECT_EQ(vals(ref::evaluate(make(Op::SQRT, DType::F32, {3}, {x}))), (std::vector<double>{1, 2, 0.5}));
  EXPECT_EQ(vals(ref::evaluate(make(Op::RECIP, DType::F32, {3}, {x}))), (std::vector<double>{1, 0.25, 4}));
  EXPECT_EQ(vals(ref::evaluate(make(Op::MULACC, DType::F32, {3}, {x, x, x}))),
            (std::vector<double>{2, 20, 0.3125}));
  EXPECT_EQ(ref::evaluate(make(Op::BITCAST, DType::I32, {3}, {x})).i[0], 0x3f800000);
  EXPECT_EQ(ref::evaluate(make(Op::BITCAST, DType::I16, {1}, {buf(DType::F16, {1}, {1.0})})).i[0], 0x3c00);
  EXPECT_THROW(ref::evaluate(make(Op::BITCAST, DType::I64, {3}, {x})), Error);
  auto v = buf(DType::I8, {3}, {1, -128, 64});
  auto c = buf(DType::I8, {3}, {7, 1, 9});  // 9 is taken modulo 8
  EXPECT_EQ(vals(ref::evaluate(bin(Op::SHL, v, c))), (std::vector<double>{-128, 0, -128}));
  EXPECT_EQ(vals(ref::evaluate(bin(Op::SHR, v, c))), (std::vector<double>{0, -64, 32}));
  EXPECT_EQ(vals(ref::evaluate(bin(Op::XOR, v, c))), (std::vector<double>{6, -127, 73}));
}

TEST(Interpreter, RealizedBuffersAndSharedRoots) {
  auto x = buf(DType::F32, {2}, {1, 2});
  auto y = bin(Op::ADD, x, x);
  auto z = bin(Op::MUL, y, x);
  // realize y with a different value: read back when use_realized, recomputed otherwise
  auto b = std::make_shared<Buffer>(DType::F32, 2);
  b->set_f(0, 10);
  b->set_f(1, 20);
  y->buffer = b;
  EXPECT_EQ(vals(ref::evaluate(z)), (std::vector<double>{10, 40}));
  EXPECT_EQ(vals(ref::evaluate(z, false)), (std::vector<double>{2, 8}));
  y->buffer.reset();
  auto rs = ref::evaluate(std::vector<NodeRef>{z, y, z}, false);
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(vals(rs[0]), (std::vector<double>{2, 8}));
  EXPECT_EQ(vals(rs[1]), (std::vector<double>{2, 4}));
  EXPECT_EQ(vals(rs[2]), vals(rs[0]));
}

TEST(Interpreter, ErrorsNameTheOp) {
  auto x = buf(DType::F32, {2}, {1, 2});
  try {
    ref::evaluate(make(Op::LOAD, DType::F32, {}, {x}));
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LOAD"), std::string::npos) << e.what();
  }
  auto y = buf(DType::F32, {3}, {1, 2, 3});
  try {
    ref::evaluate(bin(Op::ADD, x, y));
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("ADD"), std::string::npos) << m;
    EXPECT_NE(m.find("(3)"), std::string::npos) << m;
    EXPECT_NE(m.find("f32"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace kiln
