// Matmuls for the backend's GEMM library (see library_gemm.h).
#include "engine/library_gemm.h"

#include <map>
#include <mutex>
#include <utility>

#include "ir/symbolic.h"
#include "kiln/debug.h"
#include "schedule/match_matmul.h"

namespace kiln::engine {

namespace {

using Match = std::shared_ptr<const schedule::MatchedMatmul>;

// The match of a kernel AST with its VARs at `values` (none for a concrete kernel), when it is one
// worth the library. Kept per AST and values for the process: a replayed CUDA graph is keyed by the
// match's address (runtime/cuda/launcher.cpp), so a kept one is never freed and never reused.
Match match_at(const ir::NodeRef& ast, size_t nouts, const std::vector<ir::NodeRef>& vars,
               const std::vector<int64_t>& values) {
  static std::mutex mu;
  static std::map<std::pair<const ir::Node*, std::vector<int64_t>>, std::pair<ir::NodeRef, Match>> kept;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(ast.get(), values);
  if (auto it = kept.find(key); it != kept.end()) return it->second.second;
  ir::Bindings b;
  for (size_t i = 0; i < vars.size() && i < values.size(); i++) b[vars[i].get()] = values[i];
  Match m;
  if (auto found = schedule::match_matmul_at(ast, nouts, b);
      found && schedule::worth_library_gemm(found->desc))
    m = std::make_shared<const schedule::MatchedMatmul>(*found);
  kept.emplace(std::move(key), std::make_pair(ast, m));
  return m;
}

bool symbolic(const schedule::Kernel& k) { return k.ast->op == ir::Op::SINK && !k.ast->arg.empty(); }

// Points l at match m (nullptr: the generated kernel runs); in_sizes: the bytes of an element of each
// kernel input.
void set_match(runtime::Launch& l, Match m, const std::vector<int64_t>& in_sizes) {
  l.gemm = std::move(m);
  if (!l.gemm) return;
  auto bytes = [&](int input, int64_t offset) {
    return input < 0 ? 0 : offset * in_sizes[static_cast<size_t>(input)];
  };
  l.a_bytes = bytes(l.gemm->a_input, l.gemm->a_offset);
  l.b_bytes = bytes(l.gemm->b_input, l.gemm->b_offset);
  l.bias_bytes = bytes(l.gemm->bias_input, l.gemm->bias_offset);
  l.aux_bytes = bytes(l.gemm->aux_input, l.gemm->aux_offset);
}

}  // namespace

std::shared_ptr<const schedule::MatchedMatmul> library_gemm_match(const schedule::Kernel& k) {
  if (!symbolic(k)) return match_at(k.ast, k.outputs.size(), {}, {});
  std::vector<ir::NodeRef> vars = ir::vars_of(k.ast);
  std::vector<int64_t> largest;
  for (auto& v : vars) largest.push_back(v->arg.at(2));
  return match_at(k.ast, k.outputs.size(), vars, largest);
}

void use_library_gemm(runtime::Launch& l, const schedule::Kernel& k) {
  std::vector<int64_t> in_sizes;
  for (auto& in : k.inputs) in_sizes.push_back(dtype_size(in->dtype));
  const size_t nouts = k.outputs.size();
  l.tf32 = settings().tf32;
  l.nouts = nouts;
  if (!symbolic(k)) return set_match(l, match_at(k.ast, nouts, {}, {}), in_sizes);
  auto vars = l.vars ? l.vars : std::make_shared<const std::vector<ir::NodeRef>>(ir::vars_of(k.ast));
  set_match(l, match_at(k.ast, nouts, *vars, k.var_values), in_sizes);
  l.rebind = [ast = k.ast, nouts, vars, in_sizes](runtime::Launch& l, const int64_t* values) {
    set_match(l, match_at(ast, nouts, *vars, std::vector<int64_t>(values, values + vars->size())), in_sizes);
  };
}

}  // namespace kiln::engine
