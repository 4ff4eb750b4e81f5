// Printing of linear programs (KILN_DEBUG=5).
#include "codegen/program.h"

#include <sstream>

namespace kiln::codegen {

std::string to_string(const Program& p) {
  std::ostringstream os;
  for (size_t i = 0; i < p.insts.size(); i++) {
    const Inst& in = p.insts[i];
    os << "  " << i << ": " << ir::op_name(in.op) << " " << dtype_name(in.dtype);
    if (!in.src.empty()) {
      os << " (";
      for (size_t k = 0; k < in.src.size(); k++) os << (k ? ", " : "") << in.src[k];
      os << ")";
    }
    if (in.op == ir::Op::CONST && is_float(in.dtype))
      os << " " << in.fval;
    else if (!in.arg.empty()) {
      os << " [";
      for (size_t k = 0; k < in.arg.size(); k++) os << (k ? ", " : "") << in.arg[k];
      os << "]";
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace kiln::codegen
