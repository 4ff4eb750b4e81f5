// Names and classes of the primitive ops.
#include "ir/ops.h"

namespace kiln::ir {

const char* op_name(Op op) {
  static const char* names[] = {
      "BUFFER",     "CONST",    "IOTA",     "EXP2",       "LOG2",          "SIN",   "SQRT",   "RECIP",
      "TRUNC",      "CAST",     "BITCAST",  "ADD",        "MUL",           "MAX",   "IDIV",   "MOD",
      "CMPLT",      "CMPNE",    "AND",      "OR",         "XOR",           "SHL",   "SHR",    "WHERE",
      "MULACC",     "REDUCE",   "RESHAPE",  "PERMUTE",    "EXPAND",        "PAD",   "SHRINK", "FLIP",
      "CONTIGUOUS", "DETACH",   "EXTERNAL", "ATTENTION",  "DEFINE_GLOBAL", "RANGE", "LOAD",   "STORE",
      "DEFINE_ACC", "ENDRANGE", "SINK",     "LAYER_NORM", "INDEX_COPY",    "VAR"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<int>(Op::COUNT_));
  return names[static_cast<int>(op)];
}

bool is_unary(Op op) { return op >= Op::EXP2 && op <= Op::BITCAST; }
bool is_binary(Op op) { return op >= Op::ADD && op <= Op::SHR; }
bool is_elementwise(Op op) { return op >= Op::EXP2 && op <= Op::MULACC; }
bool is_movement(Op op) { return op >= Op::RESHAPE && op <= Op::FLIP; }
bool is_commutative(Op op) {
  return op == Op::ADD || op == Op::MUL || op == Op::MAX || op == Op::CMPNE || op == Op::AND ||
         op == Op::OR || op == Op::XOR;
}
bool is_comparison(Op op) { return op == Op::CMPLT || op == Op::CMPNE; }

}  // namespace kiln::ir
