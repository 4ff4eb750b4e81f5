// Matmuls for the backend's GEMM library (see library_gemm.h).
#include "engine/library_gemm.h"

#include <mutex>
#include <unordered_map>

#include "kiln/debug.h"
#include "schedule/match_matmul.h"

namespace kiln::engine {

std::shared_ptr<const schedule::MatchedMatmul> library_gemm_match(const schedule::Kernel& k) {
  static std::mutex mu;
  static std::unordered_map<const ir::Node*,
                            std::pair<ir::NodeRef, std::shared_ptr<const schedule::MatchedMatmul>>>
      cache;
  std::shared_ptr<const schedule::MatchedMatmul> m;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(k.ast.get());
    if (it == cache.end()) {
      auto found = schedule::match_matmul(k);
      std::shared_ptr<const schedule::MatchedMatmul> keep;
      if (found) {
        if (schedule::worth_library_gemm(found->desc))
          keep = std::make_shared<const schedule::MatchedMatmul>(*found);
      }
      it = cache.emplace(k.ast.get(), std::make_pair(k.ast, keep)).first;
    }
    m = it->second.second;
  }
  return m;
}

void use_library_gemm(runtime::Launch& l, const schedule::Kernel& k) {
  std::shared_ptr<const schedule::MatchedMatmul> m = library_gemm_match(k);
  if (!m) return;
  l.gemm = m;
  l.tf32 = settings().tf32;
  l.nouts = k.outputs.size();
  auto bytes = [&](int input, int64_t offset) {
    return input < 0 ? 0 : offset * dtype_size(k.inputs[static_cast<size_t>(input)]->dtype);
  };
  l.a_bytes = bytes(m->a_input, m->a_offset);
  l.b_bytes = bytes(m->b_input, m->b_offset);
  l.bias_bytes = bytes(m->bias_input, m->bias_offset);
  l.aux_bytes = bytes(m->aux_input, m->aux_offset);
}

}  // namespace kiln::engine
