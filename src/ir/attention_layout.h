// The layout of the kernel-level ATTENTION node (ir/ops.h): where q, k and v lie in memory, as an
// offset, a row stride and a stride per batch dim each, written into the node's args by the
// scheduler (schedule/attention_layout.h) and read back by the flash-attention renderer.
#pragma once
#include <cstdint>
#include <vector>

namespace kiln::ir {

struct AttentionLayout {
  struct Operand {
    int64_t offset = 0, row_stride = 0;
    std::vector<int64_t> batch_strides;
  };
  bool causal = false;
  int64_t tq = 0, tk = 0, d = 0;
  std::vector<int64_t> batch;  // batch dims of q, k, v and the output (equal)
  Operand q, k, v;

  std::vector<int64_t> args() const;
  static AttentionLayout from_args(const std::vector<int64_t>& args);
};

}  // namespace kiln::ir
