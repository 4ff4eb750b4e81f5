// The primitive op set shared by every IR level: tensor graph, kernel AST and linear program.
#pragma once
#include <cstdint>

namespace kiln::ir {

enum class Op : uint8_t {
  // sources
  BUFFER,
  CONST,
  IOTA,
  // elementwise unary
  EXP2,
  LOG2,
  SIN,
  SQRT,
  RECIP,  // arg {kDivisor}: the divisor of a division, x * RECIP(y) renders as x / y (see below)
  TRUNC,
  CAST,
  BITCAST,
  // elementwise binary
  ADD,
  MUL,
  MAX,
  IDIV,
  MOD,
  CMPLT,
  CMPNE,
  AND,
  OR,
  XOR,
  SHL,
  SHR,
  // elementwise ternary
  WHERE,
  MULACC,
  // reduce (arg: reduce op, axes)
  REDUCE,
  // movement: free views, become index arithmetic at scheduling time
  RESHAPE,
  PERMUTE,
  EXPAND,
  PAD,
  SHRINK,
  FLIP,
  // realization points
  CONTIGUOUS,
  // autograd marker: the value of its source, through which no gradient flows (removed before scheduling)
  DETACH,
  // a value computed outside the compiler (a tile kernel) by frontend/external.cpp: created already
  // realized, so the scheduler reads it as a buffer; arg {id}: the id of its gradient callback
  EXTERNAL,
  // scaled dot-product attention softmax(q k^T * scale (+ causal mask)) v or a part of its forward or
  // backward (ir/attention_layout.h), sources q, k, v (, dO, lse, delta) with equal batch dims, arg
  // {causal, part}, fval = scale. Where no attention kernel runs it, graph rewrites replace it with
  // its composite (frontend/attention.h); in a kernel AST, the kernel's one op, its layout in args
  // (ir/attention_layout.h, schedule/attention_layout.h)
  ATTENTION,
  // kernel level
  DEFINE_GLOBAL,
  RANGE,
  LOAD,
  STORE,
  DEFINE_ACC,
  ENDRANGE,
  SINK,
  // layer norm over the last dim of a 2D (N, C) input, or a part of its backward (ir/layer_norm_parts.h):
  // arg {part}, fval = eps. Where no runner of the device computes it (engine/runners.h), graph
  // rewrites replace it with its composite (frontend/layer_norm.h); in a kernel AST, the kernel's ops
  // (last in the enum so that the ops above keep their numbers, which kernel hashes include)
  LAYER_NORM,
  // dst with slices replaced, sources (dst, index, src), arg {dim}: dst[.., index[t], ..] = src[.., t, ..]
  // along dim for each t of the 1-D integer index; an index outside [0, dst.size(dim)) writes
  // nothing, and of duplicates one write wins (which one is unspecified). Its kernel writes the
  // slices into dst's buffer in place (engine/in_place.h) where nothing else reads dst; elsewhere
  // graph rewrites replace it with its composite (frontend/index_copy.cpp). Last, like LAYER_NORM.
  INDEX_COPY,
  // a symbolic dimension's value (ir/symbolic.h): an I64 scalar, arg {name id, min, max}; bound per
  // realize to the size of the dims it stands for, passed to kernels at launch
  VAR,
  COUNT_
};
// RECIP's arg when it is a division's divisor (a / b): a product by it is the correctly rounded
// quotient, in every kernel. A RECIP without it is a reciprocal that products multiply by (sigmoid,
// rsqrt, softmax's 1 / sum). The choice is the node's own, so a value has the same bits in every
// kernel that computes it (a max's gradient compares a recomputed value with the max).
constexpr int64_t kDivisor = 2;  // (1 marks an accumulation in the linear program)

const char* op_name(Op op);
bool is_unary(Op op);
bool is_binary(Op op);
bool is_elementwise(Op op);  // unary, binary, ternary
bool is_movement(Op op);
bool is_commutative(Op op);
bool is_comparison(Op op);  // CMPLT, CMPNE: result is bool

}  // namespace kiln::ir

// Tensor-level semantics (the reference interpreter implements exactly this):
// - every elementwise node's sources have the node's shape (the frontend inserts EXPANDs);
//   binary sources share one dtype; comparisons return bool; WHERE(cond: bool, a, b).
// - CONST: the value (fval for floats, arg[0] for ints/bool) everywhere in its shape.
// - IOTA arg {d}: the element's index along dim d.
// - BUFFER arg {id, device code}: node->buffer holds the data, contiguous row-major.
// - REDUCE arg {reduce op (ADD, MUL or MAX as int), axes...}: output keeps reduced dims as 1.
// - RESHAPE: node shape is the new shape. PERMUTE arg = perm (out dim i is in dim perm[i]).
//   EXPAND: size-1 dims grow to the node shape. PAD arg {before0, after0, before1, ...} fills 0.
//   SHRINK arg {start0, end0, ...}. FLIP arg {0/1 per dim}.
// - CAST converts values (float->int truncates, ->bool is != 0, ->f16/bf16 rounds); BITCAST
//   reinterprets bits of a same-size type. IDIV/MOD truncate toward zero (C); MAX propagates NaN;
//   integer arithmetic wraps at the dtype's width.
