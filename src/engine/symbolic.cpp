// The symbolic sizes' stage (see stages.h).
#include "ir/symbolic.h"

#include <algorithm>

#include "engine/stages.h"
#include "kiln/error.h"
#include "runtime/buffer.h"

namespace kiln::engine {

void bind_symbolic(schedule::Schedule& s, const std::vector<ir::NodeRef>& rewritten, Device device) {
  auto symbolic = [](const schedule::Kernel& k) { return k.ast->op == ir::Op::SINK && !k.ast->arg.empty(); };
  if (std::none_of(s.kernels.begin(), s.kernels.end(), symbolic)) return;
  ir::Bindings b = ir::bind_vars(ir::toposort(rewritten, false));
  for (auto& k : s.kernels) {
    if (!symbolic(k)) continue;
    if (static_cast<int64_t>(k.outputs.size() + k.inputs.size()) != k.ast->arg[0])
      throw Error("kiln.realize: a kernel with symbolic sizes reads them from argument " +
                  std::to_string(k.ast->arg[0]) + " but has " +
                  std::to_string(k.outputs.size() + k.inputs.size()) + " buffers");
    std::vector<int64_t>& values = k.var_values;
    values.clear();
    for (auto& v : ir::vars_of(k.ast)) values.push_back(ir::eval_index(v, b));
    auto buf = std::make_shared<Buffer>(DType::I64, static_cast<int64_t>(values.size()), device);
    upload(*buf, values.data());
    ir::NodeRef n = ir::make(ir::Op::BUFFER, DType::I64, {static_cast<int64_t>(values.size())}, {},
                             {buf->id, device.code()});
    ir::set_buffer(*n, buf);
    k.inputs.push_back(n);
  }
}

}  // namespace kiln::engine
