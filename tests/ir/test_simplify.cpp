// Tests for the symbolic index simplifier: interval bounds, each rule, and property tests that compare
// random expressions before and after simplify() at every point of their loop ranges.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <unordered_map>

#include "ir/simplify.h"

namespace kiln::ir {
namespace {

NodeRef True() { return const_int(1, DType::Bool); }
NodeRef False() { return const_int(0, DType::Bool); }
NodeRef cmpne(NodeRef a, int64_t b) { return alu(Op::CMPNE, std::move(a), const_int(b)); }
NodeRef max(NodeRef a, NodeRef b) { return alu(Op::MAX, std::move(a), std::move(b)); }
NodeRef where(NodeRef c, NodeRef a, NodeRef b) {
  DType t = a->dtype;
  return make(Op::WHERE, t, {}, {std::move(c), std::move(a), std::move(b)});
}
NodeRef load_i64(NodeRef idx) {
  NodeRef buf = make(Op::DEFINE_GLOBAL, DType::I64, {}, {}, {7});
  return make(Op::LOAD, DType::I64, {}, {buf, std::move(idx)});
}

// ---------------------------------------------------------------------------------------------
// A reference evaluator over one point of the ranges (C semantics). Reports overflow / division by
// zero so that the random tests can skip such expressions.

class Evaluator {
 public:
  explicit Evaluator(const NodeRef& root) : order_(toposort({root})) {
    for (size_t i = 0; i < order_.size(); i++) index_[order_[i].get()] = i;
    vals_.resize(order_.size());
  }
  const std::vector<NodeRef>& order() const { return order_; }
  const std::vector<int64_t>& values() const { return vals_; }
  int64_t result() const { return vals_.back(); }

  // Evaluates at point (RANGE id -> value); false on overflow or division by zero.
  bool run(const std::vector<int64_t>& point) {
    for (size_t i = 0; i < order_.size(); i++) {
      const Node& n = *order_[i];
      auto v = [&](size_t k) { return vals_[index_.at(n.src[k].get())]; };
      int64_t r = 0;
      switch (n.op) {
        case Op::CONST: r = n.ival(); break;
        case Op::RANGE: r = point.at(n.ival()); break;
        case Op::ADD:
          if (__builtin_add_overflow(v(0), v(1), &r)) return false;
          break;
        case Op::MUL:
          if (__builtin_mul_overflow(v(0), v(1), &r)) return false;
          break;
        case Op::IDIV:
          if (v(1) == 0 || (v(1) == -1 && v(0) == INT64_MIN)) return false;
          r = v(0) / v(1);
          break;
        case Op::MOD:
          if (v(1) == 0) return false;
          r = v(1) == -1 ? 0 : v(0) % v(1);
          break;
        case Op::MAX: r = std::max(v(0), v(1)); break;
        case Op::CMPLT: r = v(0) < v(1); break;
        case Op::CMPNE: r = v(0) != v(1); break;
        case Op::AND: r = v(0) & v(1); break;
        case Op::OR: r = v(0) | v(1); break;
        case Op::XOR: r = v(0) ^ v(1); break;
        case Op::WHERE: r = v(0) ? v(1) : v(2); break;
        case Op::CAST: r = n.dtype == DType::Bool ? v(0) != 0 : v(0); break;
        default: ADD_FAILURE() << "evaluator: unexpected op " << n.str(); return false;
      }
      vals_[i] = r;
    }
    return true;
  }

 private:
  std::vector<NodeRef> order_;
  std::unordered_map<const Node*, size_t> index_;
  std::vector<int64_t> vals_;
};

// ---------------------------------------------------------------------------------------------
// Bounds

TEST(SimplifyBounds, Leaves) {
  NodeRef x = range(0, 8, false);
  EXPECT_EQ(vmin(x), 0);
  EXPECT_EQ(vmax(x), 7);
  EXPECT_EQ(vmin(const_int(-5)), -5);
  EXPECT_EQ(vmax(const_int(-5)), -5);
  EXPECT_EQ(vmin(True()), 1);
  EXPECT_EQ(vmax(False()), 0);
  NodeRef ld = make(Op::LOAD, DType::I32, {}, {make(Op::DEFINE_GLOBAL, DType::I32, {}, {}, {0}), x});
  EXPECT_EQ(vmin(ld), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(vmax(ld), std::numeric_limits<int32_t>::max());
  NodeRef lb = make(Op::LOAD, DType::Bool, {}, {make(Op::DEFINE_GLOBAL, DType::Bool, {}, {}, {1}), x});
  EXPECT_EQ(vmin(lb), 0);
  EXPECT_EQ(vmax(lb), 1);
  EXPECT_TRUE(x->has_bounds);
}

TEST(SimplifyBounds, Arithmetic) {
  NodeRef x = range(0, 8, false), y = range(1, 4, false);
  EXPECT_EQ(vmin(x + y), 0);
  EXPECT_EQ(vmax(x + y), 10);
  EXPECT_EQ(vmax(x * y), 21);
  EXPECT_EQ(vmin(x * -2 + 3), -11);
  EXPECT_EQ(vmax(x * -2 + 3), 3);
  EXPECT_EQ(vmin(idiv(x, 3)), 0);
  EXPECT_EQ(vmax(idiv(x, 3)), 2);
  EXPECT_EQ(vmin(idiv(x, -3)), -2);
  EXPECT_EQ(vmax(idiv(x * -1, 3)), 0);
  EXPECT_EQ(vmin(idiv(x * -1, 3)), -2);
  EXPECT_EQ(vmin(mod(x, 3)), 0);
  EXPECT_EQ(vmax(mod(x, 3)), 2);
  EXPECT_EQ(vmax(mod(x, 100)), 7);
  EXPECT_EQ(vmin(mod(x + 12, 4)), 0);  // 12..19 spans buckets
  NodeRef z = range(2, 2, false);
  EXPECT_EQ(vmin(mod(z + 9, 4)), 1);  // 9..10: one bucket
  EXPECT_EQ(vmax(mod(z + 9, 4)), 2);
  EXPECT_EQ(vmin(mod(x * -1, 3)), -2);  // sign of the dividend
  EXPECT_EQ(vmax(mod(x * -1, 3)), 0);
  EXPECT_EQ(vmin(max(x, y * 3 + 1)), 1);
  EXPECT_EQ(vmax(max(x, y * 3 + 1)), 10);
  EXPECT_EQ(vmin(alu(Op::AND, x, const_int(3))), 0);
  EXPECT_EQ(vmax(alu(Op::AND, x, const_int(3))), 3);
  EXPECT_EQ(vmax(alu(Op::OR, x, const_int(8))), 15);
  EXPECT_EQ(vmin(alu(Op::IDIV, x, y + 1)), 0);
  EXPECT_EQ(vmax(alu(Op::IDIV, x, y + 1)), 7);
  EXPECT_EQ(vmin(alu(Op::IDIV, x, y)), -7);           // the divisor may be 0: only |x / y| <= |x| is known
  EXPECT_EQ(vmax(alu(Op::IDIV, x * -1, y + -5)), 3);  // corners: -7 / -2
  EXPECT_EQ(vmin(alu(Op::IDIV, x * -1, y + -5)), 0);
  EXPECT_EQ(vmax(where(lt(x, 4), y, x * 2)), 14);
}

TEST(SimplifyBounds, Comparisons) {
  NodeRef x = range(0, 8, false);
  EXPECT_EQ(vmin(lt(x, 8)), 1);
  EXPECT_EQ(vmax(lt(x, 0)), 0);
  EXPECT_EQ(vmin(lt(x, 4)), 0);
  EXPECT_EQ(vmax(lt(x, 4)), 1);
  EXPECT_EQ(vmin(cmpne(x, 9)), 1);
  EXPECT_EQ(vmin(ge(x, 0)), 1);
}

TEST(SimplifyBounds, SaturatesInsteadOfOverflowing) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  NodeRef big = range(0, kMax, false);
  EXPECT_EQ(vmax(big * 4), kMax);
  EXPECT_EQ(vmin(big * -4), kMin);
  EXPECT_EQ(vmax(big + big), kMax);
  NodeRef ld = load_i64(const_int(0));
  EXPECT_EQ(vmin(ld), kMin);
  EXPECT_EQ(vmax(ld * ld), kMax);
  EXPECT_EQ(vmin(ld * ld), kMin);
  EXPECT_EQ(vmax(idiv(ld, -1)), kMax);
  EXPECT_EQ(vmax(mod(ld, 10)), 9);
  EXPECT_EQ(vmin(mod(ld, 10)), -9);
}

// ---------------------------------------------------------------------------------------------
// Rules

TEST(SimplifyRules, ConstantFolding) {
  EXPECT_EQ(simplify(const_int(7) + const_int(5)), const_int(12));
  EXPECT_EQ(simplify(const_int(7) * const_int(-5)), const_int(-35));
  EXPECT_EQ(simplify(idiv(const_int(-7), 2)), const_int(-3));
  EXPECT_EQ(simplify(mod(const_int(-7), 2)), const_int(-1));
  EXPECT_EQ(simplify(mod(const_int(7), -2)), const_int(1));
  EXPECT_EQ(simplify(max(const_int(-7), const_int(2))), const_int(2));
  EXPECT_EQ(simplify(lt(const_int(3), 4)), True());
  EXPECT_EQ(simplify(cmpne(const_int(3), 3)), False());
  EXPECT_EQ(simplify(alu(Op::AND, True(), False())), False());
  EXPECT_EQ(simplify(alu(Op::OR, False(), True())), True());
  EXPECT_EQ(simplify(alu(Op::XOR, True(), True())), False());
  EXPECT_EQ(simplify(alu(Op::AND, const_int(12), const_int(10))), const_int(8));
  EXPECT_EQ(simplify(where(True(), const_int(1), const_int(2))), const_int(1));
  EXPECT_EQ(simplify(make(Op::CAST, DType::Bool, {}, {const_int(5)})), True());
  // a division by a constant zero is left alone
  NodeRef z = idiv(const_int(5), 0);
  EXPECT_EQ(simplify(z), z);
}

TEST(SimplifyRules, Identities) {
  NodeRef x = range(0, 10, false);
  NodeRef m = lt(range(1, 10, false), 5);
  EXPECT_EQ(simplify(x + 0), x);
  EXPECT_EQ(simplify(x * 1), x);
  EXPECT_EQ(simplify(x * 0), const_int(0));
  NodeRef ld = load_i64(x);
  EXPECT_EQ(simplify(ld * 0), const_int(0));
  EXPECT_EQ(simplify(idiv(x, 1)), x);
  EXPECT_EQ(simplify(mod(x, 1)), const_int(0));
  EXPECT_EQ(simplify(mod(ld, 1)), const_int(0));
  EXPECT_EQ(simplify(land(m, True())), m);
  EXPECT_EQ(simplify(land(True(), m)), m);
  EXPECT_EQ(simplify(land(m, False())), False());
  EXPECT_EQ(simplify(alu(Op::OR, m, True())), True());
  EXPECT_EQ(simplify(alu(Op::OR, m, False())), m);
  EXPECT_EQ(simplify(alu(Op::XOR, m, False())), m);
  EXPECT_EQ(simplify(alu(Op::XOR, alu(Op::XOR, m, True()), True())), m);  // not(not(m))
  EXPECT_EQ(simplify(alu(Op::XOR, m, m)), False());
}

TEST(SimplifyRules, CanonicalForm) {
  NodeRef x = range(0, 10, false), y = range(1, 10, false);
  NodeRef ld = load_i64(x);
  EXPECT_EQ(simplify(const_int(3) + x), x + 3);
  EXPECT_EQ(simplify(const_int(3) * x), x * 3);
  EXPECT_EQ(simplify((x + 3) + 5), x + 8);
  EXPECT_EQ(simplify((x + 3) + (y + -3)), x + y);
  EXPECT_EQ(simplify(x * 2 + x * 3), x * 5);
  EXPECT_EQ(simplify(x * 2 + y + x * 3 + 1), x * 5 + y + 1);
  EXPECT_EQ(simplify(x * 2 + y + x * -2), y);
  EXPECT_EQ(simplify(x + x), x * 2);
  EXPECT_EQ(simplify((ld * 2) * 3), ld * 6);
  EXPECT_EQ(simplify((x + 2) * 3), x * 3 + 6);
  EXPECT_EQ(simplify(max(const_int(3), ld)), max(ld, const_int(3)));
  EXPECT_EQ(simplify(alu(Op::CMPNE, const_int(3), ld)), alu(Op::CMPNE, ld, const_int(3)));
}

TEST(SimplifyRules, DivModOfSums) {
  NodeRef x = range(0, 8, false), y = range(1, 4, false), z = range(2, 3, false);
  EXPECT_EQ(simplify(idiv(x * 4 + y, 4)), x);
  EXPECT_EQ(simplify(mod(x * 4 + y, 4)), y);
  EXPECT_EQ(simplify(idiv(y + x * 4, 4)), x);
  EXPECT_EQ(simplify(idiv(x * 12 + y * 3 + z, 3)), x * 4 + y);
  EXPECT_EQ(simplify(mod(x * 12 + y * 3 + z, 3)), z);
  EXPECT_EQ(simplify(idiv(x * 4 + y + 8, 4)), x + 2);
  EXPECT_EQ(simplify(idiv(x * 4 + 7, 4)), x + 1);
  EXPECT_EQ(simplify(mod(x * 4 + 7, 4)), const_int(3));
  // the remainder y + 2 reaches 5 >= 4: only partly folds, and stays exact
  EXPECT_EQ(simplify(idiv(x * 4 + y + 2, 4)), x + idiv(y + 2, 4));
  // x may be negative (a LOAD): (x*c)//c and (x*c)%c are still exact
  NodeRef ld = load_i64(x);
  EXPECT_EQ(simplify(idiv(ld * 4, 4)), ld);
  EXPECT_EQ(simplify(mod(ld * 4, 4)), const_int(0));
  EXPECT_EQ(simplify(idiv(ld * 8, 4)), ld * 2);
  EXPECT_EQ(simplify(mod(ld * 6 + 3, 9)), mod(ld * 2 + 1, 3) * 3);
  // but the split needs nonnegative values
  NodeRef neg = idiv(ld * 4 + y, 4);
  EXPECT_EQ(simplify(neg), neg);
  // and a nonnegative remainder: (x*4 + 8 - y)//4 is x + 2 + floor(-y/4), not x + 2 + (-y)//4
  NodeRef negr = idiv(x * 4 + y * -1 + 8, 4);
  EXPECT_EQ(simplify(negr), negr);
}

// a factor of the divisor that divides part of the sum: (b*v + j)//(k*v) == b//k for 0 <= j < v
TEST(SimplifyRules, DivModByAMultipleOfAPartsFactor) {
  NodeRef b = range(0, 16384, false), j = range(1, 50304, false), y = range(2, 3, false);
  EXPECT_EQ(simplify(idiv(b * 50304 + j, 1024 * 50304)), idiv(b, 1024));
  EXPECT_EQ(simplify(mod(b * 50304 + j, 1024 * 50304)), mod(b, 1024) * 50304 + j);
  EXPECT_EQ(simplify(idiv(b * 6 + y * 2 + 1, 12)), idiv(b, 2));  // y*2 + 1 < 6
  // the rest may reach the factor: no split
  NodeRef over = idiv(b * 50304 + j + 1, 1024 * 50304);
  EXPECT_EQ(simplify(over), over);
}

// A gated load's index is simplified where its gate holds: a padded view's (c - 1536)//64 with
// c = g*64 + j and the gate c >= 1536 is g - 24; points outside the gate are never loaded.
TEST(SimplifyRules, AGatedLoadsIndexIsSimplifiedWhereTheGateHolds) {
  NodeRef g = range(0, 36, false), j = range(1, 64, false);
  NodeRef c = g * 64 + j + -1536;
  NodeRef buf = make(Op::DEFINE_GLOBAL, DType::F32, {}, {}, {3});
  NodeRef gate = ge(g * 64 + j, 1536);
  NodeRef load = make(Op::LOAD, DType::F32, {}, {buf, idiv(c, 64) * 1000 + mod(c, 64), gate});
  NodeRef s = simplify(load);
  ASSERT_EQ(s->op, Op::LOAD);
  EXPECT_EQ(s->src[1], simplify(g * 1000 + j + -24000));
  EXPECT_EQ(s->src[2], simplify(gate));
  // both sides of a window: 8 <= g*64 + j < 16 leaves g = 0
  NodeRef window =
      make(Op::LOAD, DType::F32, {}, {buf, idiv(g * 64 + j, 4), land(ge(g * 64 + j, 8), lt(g * 64 + j, 16))});
  EXPECT_EQ(simplify(window)->src[1], simplify(idiv(j, 4)));
  // without a gate the index stays
  NodeRef plain = make(Op::LOAD, DType::F32, {}, {buf, idiv(c, 64)});
  EXPECT_EQ(simplify(plain)->src[1], simplify(idiv(c, 64)));
}

TEST(SimplifyRules, DivModByBounds) {
  NodeRef x = range(0, 8, false), y = range(1, 4, false);
  EXPECT_EQ(simplify(idiv(x, 8)), const_int(0));
  EXPECT_EQ(simplify(idiv(x, 9)), const_int(0));
  EXPECT_EQ(simplify(mod(x, 8)), x);
  EXPECT_EQ(simplify(mod(x, -8)), x);
  EXPECT_EQ(simplify(idiv(y + 8, 4)), const_int(2));  // one bucket: 8..11
  EXPECT_EQ(simplify(mod(y + 8, 4)), y);
  EXPECT_EQ(simplify(mod(x * -1, 8)), x * -1);  // -7..0 lies in bucket 0
  NodeRef keep = mod(x, 5);
  EXPECT_EQ(simplify(keep), keep);
}

TEST(SimplifyRules, NestedDivMod) {
  NodeRef x = range(0, 100, false), y = range(1, 4, false);
  EXPECT_EQ(simplify(idiv(idiv(x, 4), 5)), idiv(x, 20));
  EXPECT_EQ(simplify(mod(mod(x, 12), 4)), mod(x, 4));
  EXPECT_EQ(simplify(mod(mod(x, 12), 5)), mod(mod(x, 12), 5));  // 5 does not divide 12
  EXPECT_EQ(simplify(idiv(mod(x, 12), 4)), mod(idiv(x, 4), 3));
  EXPECT_EQ(simplify(idiv(mod(x * 4 + y, 64), 4)), mod(x, 16));
  EXPECT_EQ(simplify(mod(mod(x, 4), 12)), mod(x, 4));  // bounds: x%4 < 12
}

TEST(SimplifyRules, Comparisons) {
  NodeRef x = range(0, 8, false);
  EXPECT_EQ(simplify(lt(x, 8)), True());
  EXPECT_EQ(simplify(lt(x, 100)), True());
  EXPECT_EQ(simplify(lt(x, 0)), False());
  EXPECT_EQ(simplify(lt(x * 2 + 3, 3)), False());
  EXPECT_EQ(simplify(ge(x, 0)), True());
  EXPECT_EQ(simplify(ge(x, 8)), False());
  EXPECT_EQ(simplify(cmpne(x, -1)), True());
  EXPECT_EQ(simplify(cmpne(x, 8)), True());
  EXPECT_EQ(simplify(lt(x + 3, 5)), lt(x, 2));
  EXPECT_EQ(simplify(cmpne(x + 3, 5)), cmpne(x, 2));
  NodeRef keep = lt(x, 4);
  EXPECT_EQ(simplify(keep), keep);
}

TEST(SimplifyRules, Masks) {
  NodeRef x = range(0, 8, false), y = range(1, 6, false);
  NodeRef my = lt(y, 3);
  EXPECT_EQ(simplify(land(lt(x, 8), my)), my);  // a mask that is always true is dropped
  EXPECT_EQ(simplify(land(my, my)), my);
  EXPECT_EQ(simplify(land(land(my, lt(x, 4)), my)), land(my, lt(x, 4)));
  EXPECT_EQ(simplify(land(lt(x, -1), my)), False());
  NodeRef v = load_i64(x);
  NodeRef m63 = const_int(63);
  EXPECT_EQ(simplify(alu(Op::AND, alu(Op::AND, v, m63), m63)), alu(Op::AND, v, m63));
  EXPECT_EQ(simplify(alu(Op::AND, alu(Op::AND, v, m63), const_int(15))), alu(Op::AND, v, const_int(15)));
  EXPECT_EQ(simplify(alu(Op::AND, x, m63)), x);
  EXPECT_EQ(simplify(alu(Op::AND, x, const_int(7))), x);
  NodeRef keep = alu(Op::AND, x, const_int(3));
  EXPECT_EQ(simplify(keep), keep);
  NodeRef keep2 = alu(Op::AND, x, const_int(9));  // 9 + 1 is not a power of two
  EXPECT_EQ(simplify(keep2), keep2);
  EXPECT_EQ(simplify(alu(Op::AND, range(2, 100, false), m63)), alu(Op::AND, range(2, 100, false), m63));
}

TEST(SimplifyRules, MaxAndWhere) {
  NodeRef x = range(0, 8, false), y = range(1, 4, false);
  EXPECT_EQ(simplify(max(x + 4, y)), x + 4);
  EXPECT_EQ(simplify(max(y, x + 4)), x + 4);
  EXPECT_EQ(simplify(max(x, x)), x);
  NodeRef keep = max(x, y);
  EXPECT_EQ(simplify(keep), keep);
  NodeRef c = lt(x, 4);
  EXPECT_EQ(simplify(where(lt(x, 9), x, y)), x);
  EXPECT_EQ(simplify(where(lt(x, 0), x, y)), y);
  EXPECT_EQ(simplify(where(c, y + 1, const_int(1) + y)), y + 1);
  NodeRef w = where(c, x, y);
  EXPECT_EQ(simplify(w), w);
}

TEST(SimplifyRules, RecursesIntoOpaqueNodes) {
  NodeRef x = range(0, 8, false), y = range(1, 4, false);
  NodeRef buf = make(Op::DEFINE_GLOBAL, DType::F32, {}, {}, {0});
  NodeRef ld = make(Op::LOAD, DType::F32, {}, {buf, idiv(x * 4 + y, 4)});
  EXPECT_EQ(simplify(ld), make(Op::LOAD, DType::F32, {}, {buf, x}));
  // float arithmetic is not touched
  NodeRef f = make(Op::ADD, DType::F32, {}, {ld, const_float(0, DType::F32)});
  EXPECT_EQ(simplify(f), make(Op::ADD, DType::F32, {},
                              {make(Op::LOAD, DType::F32, {}, {buf, x}), const_float(0, DType::F32)}));
  // neither is tensor-level (shaped) integer arithmetic
  NodeRef t = make(Op::ADD, DType::I64, {4}, {const_int(1, DType::I64, {4}), const_int(0, DType::I64, {4})});
  EXPECT_EQ(simplify(t), t);
}

TEST(SimplifyRules, RulesAreIndexedByOp) {
  const RuleSet& rs = symbolic_rules();
  EXPECT_EQ(&rs, &symbolic_rules());
  EXPECT_FALSE(rs.rules_for(Op::IDIV).empty());
  EXPECT_TRUE(rs.rules_for(Op::EXP2).empty());
  EXPECT_EQ(rs.rules_for(Op::LOAD).size(), 1u);  // a gated load's index (load_given_gate)
}

// ---------------------------------------------------------------------------------------------
// Property tests over random expressions

class RandomExpr {
 public:
  RandomExpr(uint32_t seed) : rng_(seed) {}

  // Fresh variables: 2 or 3 ranges of sizes 1..17.
  void new_vars() {
    vars_.clear();
    sizes_.clear();
    int n = pick(2, 3);
    for (int i = 0; i < n; i++) {
      sizes_.push_back(pick(1, 17));
      vars_.push_back(range(i, sizes_.back(), false));
    }
  }
  const std::vector<int64_t>& sizes() const { return sizes_; }

  NodeRef gen_int(int depth) {
    if (depth == 0) return leaf();
    switch (pick(0, 12)) {
      case 0: return leaf();
      case 1:
      case 2: return gen_int(depth - 1) + gen_int(depth - 1);
      case 3: return gen_int(depth - 1) * const_int(small());
      case 4: return gen_int(depth - 1) * gen_int(depth - 1);
      case 5: return idiv(gen_int(depth - 1), divisor());
      case 6: return mod(gen_int(depth - 1), divisor());
      case 7: return max(gen_int(depth - 1), gen_int(depth - 1));
      case 8: return where(gen_bool(depth - 1), gen_int(depth - 1), gen_int(depth - 1));
      case 9: return pick(0, 1) ? idiv(index_sum(), pick(1, 9)) : mod(index_sum(), pick(1, 9));
      case 10: return alu(Op::AND, gen_int(depth - 1), const_int(pick_of({1, 3, 7, 15, 63, 5, -4})));
      case 11:
        return alu(Op::IDIV, gen_int(depth - 1), var() + pick(1, 3));  // a nonzero non-constant divisor
      default: {  // nested div/mod as produced by reshapes
        NodeRef s = index_sum();
        int64_t a = pick(1, 6), b = pick(1, 6);
        switch (pick(0, 3)) {
          case 0: return idiv(idiv(s, a), b);
          case 1: return mod(mod(s, a * b), pick(0, 1) ? b : pick(1, 9));
          case 2: return idiv(mod(s, a * b), a);
          default: return mod(idiv(s, a), b);
        }
      }
    }
  }

  NodeRef gen_bool(int depth) {
    if (depth == 0) return pick(0, 1) ? lt(leaf(), small()) : cmpne(leaf(), small());
    switch (pick(0, 7)) {
      case 0: return lt(gen_int(depth - 1), small());
      case 1: return alu(Op::CMPLT, gen_int(depth - 1), gen_int(depth - 1));
      case 2: return alu(Op::CMPNE, gen_int(depth - 1), gen_int(depth - 1));
      case 3: return land(gen_bool(depth - 1), gen_bool(depth - 1));
      case 4: return alu(Op::OR, gen_bool(depth - 1), gen_bool(depth - 1));
      case 5: return alu(Op::XOR, gen_bool(depth - 1), True());  // logical not
      case 6: return pick(0, 1) ? True() : False();
      default: return land(gen_bool(depth - 1), pick(0, 1) ? True() : ge(var(), pick(0, 3)));
    }
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  int64_t pick_of(std::initializer_list<int64_t> xs) {
    return xs.begin()[pick(0, static_cast<int>(xs.size()) - 1)];
  }
  int64_t small() { return pick(-9, 9); }
  int64_t divisor() {  // nonzero, mostly positive
    int64_t d = pick(-3, 9);
    return d == 0 ? 4 : d;
  }
  NodeRef var() { return vars_[pick(0, static_cast<int>(vars_.size()) - 1)]; }
  NodeRef leaf() { return pick(0, 2) ? var() : const_int(small()); }
  // sum of var*const terms plus a constant, in random order, like a strided index
  NodeRef index_sum() {
    NodeRef s;
    for (auto& v : vars_) {
      if (!pick(0, 3)) continue;
      NodeRef t = pick(0, 2) ? v * pick_of({1, 2, 3, 4, 8, 12, 16, 17, -1, -4}) : v;
      s = s ? (pick(0, 1) ? s + t : t + s) : t;
    }
    if (!s) s = var();
    return pick(0, 2) ? s : s + pick(-9, 40);
  }

  std::mt19937 rng_;
  std::vector<NodeRef> vars_;
  std::vector<int64_t> sizes_;
};

// Calls f(point) for every point of the domain of the ranges.
template <class F>
void for_each_point(const std::vector<int64_t>& sizes, F f) {
  std::vector<int64_t> p(sizes.size(), 0);
  while (true) {
    f(p);
    size_t d = 0;
    while (d < p.size() && ++p[d] == sizes[d]) p[d++] = 0;
    if (d == p.size()) return;
  }
}

struct PropertyStats {
  int checked = 0, skipped = 0, changed = 0;
};

// simplify(e) equals e at every point, every node of both lies within its bounds, and simplify is
// idempotent.
void check_expr(const NodeRef& e, const std::vector<int64_t>& sizes, PropertyStats& st) {
  NodeRef s = simplify(e);
  Evaluator ev(e), es(s);
  bool valid = true;
  for_each_point(sizes, [&](const std::vector<int64_t>& p) { valid = valid && ev.run(p); });
  if (!valid) {  // overflow or division by zero somewhere: not a meaningful index expression
    st.skipped++;
    return;
  }
  st.checked++;
  st.changed += s != e;
  ASSERT_EQ(simplify(s), s) << "not idempotent:\n" << dump({e}) << "->\n" << dump({s});
  int failures = 0;
  auto check_bounds = [&](const Evaluator& x, const std::vector<int64_t>& p) {
    for (size_t i = 0; i < x.order().size(); i++) {
      const NodeRef& n = x.order()[i];
      int64_t v = x.values()[i];
      if ((v < vmin(n) || v > vmax(n)) && failures++ < 3)
        ADD_FAILURE() << "value " << v << " outside [" << vmin(n) << ", " << vmax(n) << "] at point " << p[0]
                      << "," << p[1] << " for node " << n->str() << " in\n"
                      << dump({x.order().back()});
    }
  };
  for_each_point(sizes, [&](const std::vector<int64_t>& p) {
    if (failures > 3) return;
    ASSERT_TRUE(ev.run(p));
    ASSERT_TRUE(es.run(p)) << "simplified expression overflows:\n" << dump({s});
    if (ev.result() != es.result() && failures++ < 3)
      ADD_FAILURE() << "value mismatch at point " << p[0] << "," << p[1] << ": " << ev.result() << " vs "
                    << es.result() << "\n"
                    << dump({e}) << "->\n"
                    << dump({s});
    check_bounds(ev, p);
    check_bounds(es, p);
  });
  ASSERT_EQ(failures, 0);
}

TEST(SimplifyProperty, RandomIntegerExpressions) {
  RandomExpr gen(12345);
  PropertyStats st;
  for (int i = 0; i < 4000 && !HasFatalFailure(); i++) {
    if (i % 20 == 0) gen.new_vars();
    check_expr(gen.gen_int(1 + i % 4), gen.sizes(), st);
  }
  EXPECT_GT(st.checked, 3000);
  EXPECT_GT(st.changed, st.checked / 4);
  std::printf("integer expressions: %d checked, %d simplified, %d skipped\n", st.checked, st.changed,
              st.skipped);
}

TEST(SimplifyProperty, RandomBoolExpressions) {
  RandomExpr gen(777);
  PropertyStats st;
  for (int i = 0; i < 3000 && !HasFatalFailure(); i++) {
    if (i % 20 == 0) gen.new_vars();
    check_expr(gen.gen_bool(1 + i % 4), gen.sizes(), st);
  }
  EXPECT_GT(st.checked, 2500);
  EXPECT_GT(st.changed, st.checked / 4);
  std::printf("bool expressions: %d checked, %d simplified, %d skipped\n", st.checked, st.changed,
              st.skipped);
}

}  // namespace
}  // namespace kiln::ir
