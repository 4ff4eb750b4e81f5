// The attention kernel's layout args (see attention_layout.h).
#include "ir/attention_layout.h"

#include <cstddef>

namespace kiln::ir {

std::vector<int64_t> AttentionLayout::args() const {
  std::vector<int64_t> a{causal ? 1 : 0,
                         static_cast<int64_t>(part),
                         with_lse ? 1 : 0,
                         tq,
                         tk,
                         d,
                         static_cast<int64_t>(batch.size()),
                         static_cast<int64_t>(operands.size())};
  a.insert(a.end(), batch.begin(), batch.end());
  for (const Operand& o : operands) {
    a.insert(a.end(), {o.offset, o.row_stride});
    a.insert(a.end(), o.batch_strides.begin(), o.batch_strides.end());
  }
  return a;
}

AttentionLayout AttentionLayout::from_args(const std::vector<int64_t>& a) {
  AttentionLayout l;
  size_t i = 0;
  l.causal = a.at(i++) != 0;
  l.part = static_cast<AttentionPart>(a.at(i++));
  l.with_lse = a.at(i++) != 0;
  l.tq = a.at(i++);
  l.tk = a.at(i++);
  l.d = a.at(i++);
  size_t rank = static_cast<size_t>(a.at(i++)), n = static_cast<size_t>(a.at(i++));
  for (size_t j = 0; j < rank; j++) l.batch.push_back(a.at(i++));
  l.operands.resize(n);
  for (Operand& o : l.operands) {
    o.offset = a.at(i++);
    o.row_stride = a.at(i++);
    for (size_t j = 0; j < rank; j++) o.batch_strides.push_back(a.at(i++));
  }
  return l;
}

}  // namespace kiln::ir
