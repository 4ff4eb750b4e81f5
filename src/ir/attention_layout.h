// The parts of attention an ATTENTION node computes (ir/ops.h), and the layout of the kernel-level
// node: where each operand lies in memory, as an offset, a row stride and a stride per batch dim,
// written into the node's args by the scheduler (schedule/attention_layout.h) and read back by the
// flash-attention renderer.
#pragma once
#include <cstdint>
#include <vector>

namespace kiln::ir {

// What an ATTENTION node computes; its args are {causal, part}, its fval the scale. With
// S = q k^T * scale (causal: key j > query i masked), P = softmax(S):
//   Out (sources q, k, v):       P v, (..., Tq, Dv) in q's dtype
//   Lse (sources q, k, v):       logsumexp of S's rows, (..., Tq) f32
//   Dq  (q, k, v, dO, lse, delta): dS k * scale, (..., Tq, D), where P = exp(S - lse),
//                                dS = P * (dO v^T - delta) and delta = rowsum(dO * Out) (f32)
//   Dkv (the same sources):      dK | dV, (..., Tk, D + Dv): dS^T q * scale beside P^T dO
enum class AttentionPart : int64_t { Out = 0, Lse = 1, Dq = 2, Dkv = 3 };

// The part of an ATTENTION node's args (an older node's {causal} alone: the output)
inline AttentionPart attention_part(const std::vector<int64_t>& arg) {
  return static_cast<AttentionPart>(arg.size() > 1 ? arg[1] : 0);
}
inline int attention_sources(AttentionPart p) {
  return p == AttentionPart::Out || p == AttentionPart::Lse ? 3 : 6;
}

struct AttentionLayout {
  struct Operand {
    int64_t offset = 0, row_stride = 0;  // row: a query or key (Tq or Tk); lse and delta: an element
    std::vector<int64_t> batch_strides;
  };
  bool causal = false;
  AttentionPart part = AttentionPart::Out;
  bool with_lse = false;  // the output's kernel also writes the log-sum-exp (its global 1)
  int64_t tq = 0, tk = 0, d = 0;
  std::vector<int64_t> batch;     // batch dims of every operand and the output (equal)
  std::vector<Operand> operands;  // q, k, v and, for the gradients, dO, lse, delta

  std::vector<int64_t> args() const;
  static AttentionLayout from_args(const std::vector<int64_t>& args);
};

}  // namespace kiln::ir
