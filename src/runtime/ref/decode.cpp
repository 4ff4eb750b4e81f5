// Decoding a linear program for the ref interpreter (see program.h). The C renderer
// (codegen/render_base.cpp, render_c.cpp) is the specification: every instruction becomes the steps
// that compute what its C rendering computes, with the same fusions (a * recip(b) is a division,
// exp2(x * log2(e)) is e^x, acc + a * b is one fused multiply-add) and the same register types.
#include <map>
#include <string>
#include <utility>

#include "ir/node.h"
#include "kiln/error.h"
#include "runtime/ref/program.h"

namespace kiln::runtime::ref_device {

namespace {

using codegen::Inst;
using codegen::Program;
using ir::Op;

enum class Kind { F, D, I };  // register kinds: float, double, integer (with bool)

Kind kind_of(DType t) {
  if (t == DType::F64) return Kind::D;
  return is_float(t) ? Kind::F : Kind::I;
}

// An accumulator with one register per lane (DEFINE_ACC {op, lanes, (lane id, size)...}): its
// first register, and each lane loop's id with its stride in the row-major lane index.
struct Laned {
  int32_t base;
  std::vector<std::pair<int64_t, int64_t>> lanes;
};

// How an instruction is computed: as itself, or fused with its source the way the C renderer does.
enum class Form { Plain, Fma, Div, Exp, Dead };

class Decoder {
 public:
  explicit Decoder(const Program& p) : p_(p), form_(p.insts.size(), Form::Plain), reg_(p.insts.size(), -1) {}

  Decoded run() {
    d_.name = p_.name;
    d_.globals = p_.globals;
    d_.start = new_reg();
    d_.end = new_reg();
    one_ = const_reg(1);
    plan();
    for (size_t i = 0; i < p_.insts.size(); i++)
      if (form_[i] != Form::Dead) emit(static_cast<int>(i));
    if (!open_.empty()) fail(static_cast<int>(p_.insts.size()) - 1, "a RANGE is never closed");
    return std::move(d_);
  }

 private:
  const Inst& inst(int i) const { return p_.insts[static_cast<size_t>(i)]; }

  [[noreturn]] void fail(int i, const std::string& why) const {
    const Inst& in = inst(i);
    throw Error("kiln.ref: kernel " + p_.name + ", instruction " + std::to_string(i) + " (" +
                ir::op_name(in.op) + " " + dtype_name(in.dtype) + "): " + why);
  }

  // An accumulate into a DEFINE_ACC (ALU arg {1}): acc = acc op value.
  bool accumulates(const Inst& in) const {
    return ir::is_elementwise(in.op) && in.arg.size() == 1 && in.arg[0] == 1 && !in.src.empty() &&
           inst(in.src[0]).op == Op::DEFINE_ACC;
  }

  // The fusions of the C renderer, then which instructions no store, loop or accumulator needs (the
  // C compiler drops those too: a product folded into a fused multiply-add, a reciprocal in a division).
  // a division's divisor (ir::kDivisor): a product by it is a division, as the C renderer has it
  static bool divisor(const Inst& in) {
    return in.op == Op::RECIP && !in.arg.empty() && in.arg[0] == ir::kDivisor;
  }

  void plan() {
    const size_t n = p_.insts.size();
    std::vector<std::vector<int>> reads(n);
    for (size_t i = 0; i < n; i++) {
      const Inst& in = p_.insts[i];
      reads[i] = in.src;
      Kind k = kind_of(in.dtype);
      if (accumulates(in) && in.op == Op::ADD && k != Kind::I) {
        const Inst& m = inst(in.src[1]);
        if (m.op == Op::MUL && m.dtype == in.dtype && (in.dtype == DType::F32 || in.dtype == DType::F64) &&
            !divisor(inst(m.src[0])) && !divisor(inst(m.src[1]))) {
          form_[i] = Form::Fma;
          reads[i] = {in.src[0], m.src[0], m.src[1]};
        }
      } else if (in.op == Op::MUL && k != Kind::I) {
        for (int s = 0; s < 2 && form_[i] == Form::Plain; s++)
          if (divisor(inst(in.src[static_cast<size_t>(s)]))) {
            form_[i] = Form::Div;
            reads[i] = {in.src[static_cast<size_t>(1 - s)], inst(in.src[static_cast<size_t>(s)]).src[0]};
          }
      } else if (in.op == Op::EXP2 && k == Kind::F && inst(in.src[0]).op == Op::MUL) {
        const Inst& m = inst(in.src[0]);
        for (int s = 0; s < 2 && form_[i] == Form::Plain; s++) {
          const Inst& c = inst(m.src[static_cast<size_t>(s)]);
          if (c.op == Op::CONST && static_cast<float>(c.fval) == static_cast<float>(1.4426950408889634)) {
            form_[i] = Form::Exp;
            reads[i] = {m.src[static_cast<size_t>(1 - s)]};
          }
        }
      }
    }
    std::vector<bool> needed(n, false);
    for (size_t j = n; j-- > 0;) {
      const Inst& in = p_.insts[j];
      bool effect = in.op == Op::STORE || in.op == Op::RANGE || in.op == Op::ENDRANGE || accumulates(in);
      if (!effect && !needed[j]) {
        form_[j] = Form::Dead;
        continue;
      }
      needed[j] = true;
      for (int s : reads[j]) {
        if (s < 0 || static_cast<size_t>(s) >= j)
          fail(static_cast<int>(j), "a source is not an earlier instruction");
        needed[static_cast<size_t>(s)] = true;
      }
    }
    reads_ = std::move(reads);
  }

  int32_t new_reg(Value v = {.i = 0}) {
    d_.registers.push_back(v);
    return static_cast<int32_t>(d_.registers.size() - 1);
  }
  int32_t const_reg(int64_t v) { return new_reg({.i = v}); }
  void add(Code c, DType type, int32_t dst, int32_t a = 0, int32_t b = 0, int32_t cc = 0, int32_t imm = 0,
           DType from = DType::I64) {
    d_.steps.push_back({c, type, from, dst, a, b, cc, imm});
  }

  // A register set to x - offset clamped to [0, size] (min(y, size) as -max(-y, -size)).
  int32_t segment_bound(int32_t x, int64_t offset, int64_t size) {
    int32_t r = new_reg(), minus_one = const_reg(-1);
    add(Code::ADD_I, DType::I64, r, x, const_reg(-offset));
    add(Code::MAX_I, DType::I64, r, r, const_reg(0));
    add(Code::MUL_I, DType::I64, r, r, minus_one);
    add(Code::MAX_I, DType::I64, r, r, const_reg(-size));
    add(Code::MUL_I, DType::I64, r, r, minus_one);
    return r;
  }

  // The register holding instruction i's value here; a laned accumulator's lane is copied out first.
  int32_t value(int user, int i) {
    if (inst(i).op == Op::DEFINE_GLOBAL) fail(user, "a buffer is used as a value");
    if (inst(i).op == Op::RANGE) return loop_var(user, inst(i).arg[2], inst(i).arg[0]);
    int32_t r = reg_[static_cast<size_t>(i)];
    if (r < 0) fail(user, "source " + std::to_string(i) + " has no value here");
    auto l = laned_.find(i);
    if (l != laned_.end())
      add(Code::LANE_READ, inst(i).dtype, r, l->second.base, 0, 0, lane_index(user, l->second));
    return r;
  }

  // A loop variable by its C name (gidx3, uidx5): the innermost open loop of that kind and id (a lane
  // loop opened again inside one of the same id shadows it, as in C).
  int32_t loop_var(int user, int64_t kind, int64_t id) {
    auto it = loops_.find({kind, id});
    if (it == loops_.end() || it->second.empty()) fail(user, "uses a loop variable outside its loop");
    return it->second.back();
  }

  // The lane of accumulator `a` here: a lane index over the lane loops open at this point.
  int32_t lane_index(int user, const Laned& a) {
    if (a.lanes.size() > 2) fail(user, "an accumulator with more than two lane loops");
    LaneIndex li;
    for (size_t k = 0; k < a.lanes.size(); k++)
      (k ? li.r1 : li.r0) = loop_var(user, ir::kUpcastRange, a.lanes[k].first),
                   (k ? li.s1 : li.s0) = a.lanes[k].second;
    d_.lane_indices.push_back(li);
    return static_cast<int32_t>(d_.lane_indices.size() - 1);
  }

  int global(int user, int src) {
    const Inst& g = inst(src);
    if (g.op != Op::DEFINE_GLOBAL || g.arg.empty() || g.arg[0] < 0 ||
        static_cast<size_t>(g.arg[0]) >= p_.globals.size())
      fail(user, "does not address a buffer argument");
    return static_cast<int>(g.arg[0]);
  }

  void emit(int i) {
    const Inst& in = inst(i);
    const size_t ui = static_cast<size_t>(i);
    switch (in.op) {
      case Op::DEFINE_GLOBAL: global(i, i); return;
      case Op::CONST: {
        Value v{.i = 0};
        if (kind_of(in.dtype) == Kind::F)
          v.f = static_cast<float>(in.fval);
        else if (kind_of(in.dtype) == Kind::D)
          v.d = in.fval;
        else
          v.i = wrap(static_cast<uint64_t>(in.arg.empty() ? 0 : in.arg[0]), in.dtype);
        reg_[ui] = new_reg(v);
        return;
      }
      case Op::RANGE: {
        if (in.arg.size() < 4) fail(i, "a RANGE needs {id, size, kind, outer}");
        int32_t var = new_reg();
        int32_t lo = in.arg[3] ? d_.start : const_reg(0), hi = in.arg[3] ? d_.end : const_reg(in.arg[1]);
        if (in.arg[2] == ir::kSegmentRange) {  // the part [start, end) of the flat loop in the segment
          if (in.arg.size() < 6) fail(i, "a segment RANGE needs {id, size, kind, outer, 0, offset}");
          lo = segment_bound(d_.start, in.arg[5], in.arg[1]);
          hi = segment_bound(d_.end, in.arg[5], in.arg[1]);
        }
        if (!in.src.empty()) {  // symbolic: its trip count, within the split's end for the outer loop
          int32_t e = value(i, in.src[0]);
          if (in.arg[3]) {
            int32_t c = new_reg(), h = new_reg();
            add(Code::CMPLT_I, DType::Bool, c, d_.end, e);
            add(Code::WHERE, DType::I64, h, c, d_.end, e);
            e = h;
          }
          hi = e;
        }
        open_.push_back({d_.steps.size(), var, hi, {in.arg[2], in.arg[0]}});  // its exit is set at ENDRANGE
        loops_[{in.arg[2], in.arg[0]}].push_back(var);
        add(Code::RANGE, DType::I64, var, lo, hi);
        reg_[ui] = var;
        return;
      }
      case Op::ENDRANGE: {
        if (open_.empty()) fail(i, "closes no RANGE");
        Open o = open_.back();
        open_.pop_back();
        loops_[o.name].pop_back();
        add(Code::ENDRANGE, DType::I64, o.var, 0, o.hi, 0, static_cast<int32_t>(o.step + 1));
        d_.steps[o.step].imm = static_cast<int32_t>(d_.steps.size());
        return;
      }
      case Op::VAR: {  // element arg[1] of argument arg[0]
        int g = static_cast<int>(in.arg.at(0));
        if (g < 0 || static_cast<size_t>(g) >= p_.globals.size() ||
            p_.globals[static_cast<size_t>(g)] != DType::I64)
          fail(i, "reads its value from no I64 argument");
        reg_[ui] = new_reg();
        add(Code::LOAD, DType::I64, reg_[ui], const_reg(in.arg.at(1)), one_, 0, g);
        return;
      }
      case Op::LOAD: {
        int g = global(i, in.src[0]);
        if (kind_of(in.dtype) != kind_of(p_.globals[static_cast<size_t>(g)]))
          fail(i, "loads a " + std::string(dtype_name(p_.globals[static_cast<size_t>(g)])) + " buffer");
        int32_t idx = value(i, in.src[1]), gate = in.src.size() > 2 ? value(i, in.src[2]) : one_;
        reg_[ui] = new_reg();
        add(Code::LOAD, p_.globals[static_cast<size_t>(g)], reg_[ui], idx, gate, 0, g);
        return;
      }
      case Op::STORE: {
        int g = global(i, in.src[0]);
        DType t = p_.globals[static_cast<size_t>(g)];
        bool add_into = !in.arg.empty() && in.arg[0] == 1;
        if (add_into && (t == DType::F16 || t == DType::BF16))
          fail(i, "adds into a " + std::string(dtype_name(t)) + " buffer (16-bit stores only assign)");
        int32_t idx = value(i, in.src[1]), v = value(i, in.src[2]);
        int32_t gate = in.src.size() > 3 ? value(i, in.src[3]) : one_;
        if (kind_of(inst(in.src[2]).dtype) != kind_of(t)) fail(i, "stores a value of another kind");
        add(add_into ? Code::STORE_ADD : Code::STORE, t, 0, idx, v, gate, g);
        return;
      }
      case Op::DEFINE_ACC: {
        int32_t init = value(i, in.src.at(0));
        reg_[ui] = new_reg();
        if (in.arg.size() >= 4) {  // {op, lane count, (lane range id, lane size)...}: one per lane
          int64_t lanes = in.arg[1];
          if (in.arg.size() % 2 != 0 || lanes < 1) fail(i, "its lanes are not {count, (id, size)...}");
          int32_t base = static_cast<int32_t>(d_.registers.size());
          d_.registers.resize(d_.registers.size() + static_cast<size_t>(lanes), Value{.i = 0});
          Laned a{base, {}};
          int64_t stride = 1;
          for (size_t k = in.arg.size() - 2; k >= 2; k -= 2) {
            a.lanes.insert(a.lanes.begin(), {in.arg[k], stride});
            stride *= in.arg[k + 1];
          }
          if (stride != lanes) fail(i, "its lane sizes do not multiply to its lane count");
          laned_[i] = std::move(a);
          add(Code::LANE_FILL, in.dtype, base, init, 0, 0, static_cast<int32_t>(lanes));
        } else {
          add(Code::COPY, in.dtype, reg_[ui], init);
        }
        return;
      }
      default: break;
    }
    if (!ir::is_elementwise(in.op)) fail(i, "no interpretation for this op");
    if (accumulates(in)) {  // acc = acc op value, in the accumulator's register (or its lane)
      int acc = in.src[0];
      int32_t r = reg_[static_cast<size_t>(acc)];
      reg_[ui] = r;
      auto l = laned_.find(acc);
      if (l == laned_.end()) return alu(i, r);
      laned_[i] = l->second;
      alu(i, l->second.base, lane_index(i, l->second));  // on the lane in place
      return;
    }
    reg_[ui] = new_reg();
    alu(i, reg_[ui]);
  }

  // Instruction i's operation into register dst.
  // With `lane` (an accumulate into a laned accumulator), dst and the first source are that lane.
  void alu(int i, int32_t dst, int32_t lane = -1) {
    const Inst& in = inst(i);
    const std::vector<int>& src = reads_[static_cast<size_t>(i)];
    std::vector<int32_t> r;
    for (size_t k = 0; k < src.size(); k++) r.push_back(k == 0 && lane >= 0 ? dst : value(i, src[k]));
    r.resize(3, 0);
    struct SetLane {  // marks the step alu adds, whichever branch adds it
      Decoded& d;
      int32_t lane;
      ~SetLane() {
        if (lane >= 0 && !d.steps.empty()) d.steps.back().lane = lane;
      }
    } set_lane{d_, lane};
    const Form form = form_[static_cast<size_t>(i)];
    const DType t = in.dtype, from = inst(src.at(0)).dtype;
    const Kind k = kind_of(t), kf = kind_of(from);
    auto pick = [&](Code f, Code d, Code n) {
      Code c = k == Kind::F ? f : k == Kind::D ? d : n;
      if (c == Code::RANGE) fail(i, "no interpretation for this op on this dtype");
      add(c, t, dst, r[0], r[1], r[2], 0, from);
    };
    const Code none = Code::RANGE;  // marks a kind the C renderer cannot compile
    if (form == Form::Fma) return pick(Code::FMA_F, Code::FMA_D, none);
    if (form == Form::Div) return pick(Code::DIV_F, Code::DIV_D, none);
    if (form == Form::Exp) return pick(Code::EXP_F, none, none);
    switch (in.op) {
      case Op::EXP2: return pick(Code::EXP2_F, Code::EXP2_D, none);
      case Op::LOG2: return pick(Code::LOG2_F, Code::LOG2_D, none);
      case Op::SIN: return pick(Code::SIN_F, Code::SIN_D, none);
      case Op::SQRT: return pick(Code::SQRT_F, Code::SQRT_D, none);
      case Op::TRUNC: return pick(Code::TRUNC_F, Code::TRUNC_D, none);
      case Op::RECIP: return pick(Code::RECIP_F, Code::RECIP_D, none);
      case Op::CAST:
        add(kf == Kind::F   ? Code::CAST_F
            : kf == Kind::D ? Code::CAST_D
                            : Code::CAST_I,
            t, dst, r[0], 0, 0, 0, from);
        return;
      case Op::BITCAST:
        if (t == DType::F16 || t == DType::BF16 || from == DType::F16 || from == DType::BF16)
          fail(i, "BITCAST of half types is not supported");
        if (dtype_size(t) != dtype_size(from)) fail(i, "BITCAST from a type of another size");
        add(Code::BITCAST, t, dst, r[0], 0, 0, 0, from);
        return;
      case Op::ADD: return pick(Code::ADD_F, Code::ADD_D, Code::ADD_I);
      case Op::MUL: return pick(Code::MUL_F, Code::MUL_D, Code::MUL_I);
      case Op::MAX: return pick(Code::MAX_F, Code::MAX_D, Code::MAX_I);
      case Op::IDIV: return pick(Code::IDIV_F, Code::IDIV_D, Code::IDIV_I);
      case Op::MOD: return pick(none, none, Code::MOD_I);
      case Op::CMPLT:
      case Op::CMPNE: {
        bool lt = in.op == Op::CMPLT;
        Code c = kf == Kind::F   ? (lt ? Code::CMPLT_F : Code::CMPNE_F)
                 : kf == Kind::D ? (lt ? Code::CMPLT_D : Code::CMPNE_D)
                                 : (lt ? Code::CMPLT_I : Code::CMPNE_I);
        add(c, t, dst, r[0], r[1], 0, 0, from);
        return;
      }
      case Op::AND: return pick(none, none, Code::AND_I);
      case Op::OR: return pick(none, none, Code::OR_I);
      case Op::XOR: return pick(none, none, Code::XOR_I);
      case Op::SHL: return pick(none, none, Code::SHL_I);
      case Op::SHR: return pick(none, none, Code::SHR_I);
      case Op::WHERE: add(Code::WHERE, t, dst, r[0], r[1], r[2]); return;
      case Op::MULACC: return pick(Code::MULACC_F, Code::MULACC_D, Code::MULACC_I);
      default: fail(i, "no interpretation for this op");
    }
  }

  struct Open {
    size_t step;  // the RANGE step
    int32_t var, hi;
    std::pair<int64_t, int64_t> name;  // {kind, id}
  };

  const Program& p_;
  Decoded d_;
  std::vector<Form> form_;
  std::vector<std::vector<int>> reads_;  // the sources each instruction's steps read
  std::vector<int32_t> reg_;             // each instruction's register (-1: none yet)
  std::map<int, Laned> laned_;           // by DEFINE_ACC (and its accumulates)
  std::map<std::pair<int64_t, int64_t>, std::vector<int32_t>> loops_;  // {kind, id}: open loops' variables
  std::vector<Open> open_;
  int32_t one_ = 0;  // a register holding 1: the gate of an ungated load
};

}  // namespace

Decoded decode(const Program& p) { return Decoder(p).run(); }

}  // namespace kiln::runtime::ref_device
