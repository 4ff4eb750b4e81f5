// The part of rendering a linear program that C and CUDA C++ share: names, literals, loads,
// arithmetic and accumulators. Each renderer overrides what differs: the function signature, how
// loops map onto threads, math functions, and 16-bit float conversions.
#pragma once
#include <sstream>
#include <string>
#include <vector>

#include "codegen/program.h"

namespace kiln::codegen {

bool is_half(DType t);
const char* value_type(DType t);    // type of a value in registers (halves compute in float)
const char* storage_type(DType t);  // type of an element in memory
std::string literal(const Inst& in);

class RendererBase {
 public:
  explicit RendererBase(const Program& p);
  virtual ~RendererBase() = default;

 protected:
  const std::string& v(int i) const { return names_[static_cast<size_t>(i)]; }
  void out(const std::string& s) { os_ << std::string(2 * static_cast<size_t>(indent_), ' ') << s << "\n"; }
  void def(int i, const std::string& prefix, const std::string& expr);
  DType global_dtype(const Inst& in) const {  // dtype of the buffer a LOAD or STORE addresses
    return p_.globals[static_cast<size_t>(p_.insts[static_cast<size_t>(in.src[0])].arg[0])];
  }
  std::string load_expr(const Inst& in);
  std::string store_value(const Inst& in);  // the value of a STORE, converted to storage
  std::string alu(const Inst& in);
  // Renders instruction i; RANGE, ENDRANGE and STORE go through the hooks below.
  void line(int i);
  // true: the instruction is an accumulate into a DEFINE_ACC (ALU arg {1})
  bool accumulates(const Inst& in) const;
  // The new value of an accumulator: acc + a*b of floats as one fused multiply-add (dot products).
  std::string accumulate(const Inst& in);

  // --- what differs between targets ---
  virtual void load(int i) { def(i, "val", load_expr(p_.insts[static_cast<size_t>(i)])); }
  virtual void range(int i) = 0;
  virtual void end_range(int i) = 0;
  virtual void store(int i) = 0;
  virtual std::string exp2(const std::string& x, bool f64) = 0;
  virtual std::string expf(const std::string& x) = 0;  // e^x for exp2(x * log2(e)) in f32
  virtual std::string log2(const std::string& x, bool f64) = 0;
  // a * b + c rounded once: the only fused multiply-adds kernels get (compilers contract nothing,
  // so a value recomputed in two kernels rounds the same in both)
  virtual std::string fma(const std::string& a, const std::string& b, const std::string& c, bool f64) = 0;
  virtual std::string half_to_float(DType t, const std::string& raw) = 0;
  virtual std::string float_to_half(DType t, const std::string& val) = 0;
  virtual std::string bitcast(DType to, DType from, const std::string& x) = 0;

  // a * recip(b) renders as the division a / b where the reciprocal is a division's divisor
  // (ir::kDivisor), as a product elsewhere: decided by the nodes alone, never by the kernel
  bool divides(const Inst& mul, int k) const;

  const Program& p_;
  std::vector<std::string> names_;
  std::string suffix_;  // appended to the names def() gives (a lane's copy of a value: "_2")
  std::ostringstream os_;
  int indent_ = 0;
};

}  // namespace kiln::codegen
