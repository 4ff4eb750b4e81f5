// The lower and load stages (see stages.h).
#include <map>
#include <mutex>
#include <unordered_map>

#include "engine/stages.h"
#include "kiln/debug.h"

namespace kiln::engine {

namespace {

// Lowering is deterministic in the AST (hash-consed), the opt settings and the backend (its target and
// limits): cache it.
std::shared_ptr<const codegen::Lowered> lower_cached(const ir::NodeRef& ast, const runtime::Backend& b) {
  static std::mutex mu;
  using Cache =
      std::unordered_map<const ir::Node*, std::pair<ir::NodeRef, std::shared_ptr<const codegen::Lowered>>>;
  static std::map<std::pair<const runtime::Backend*, int>, Cache> caches;
  std::unique_lock<std::mutex> l(mu);
  Cache& c = caches[{&b, (settings().noopt ? 1 : 0) + (settings().deterministic ? 2 : 0)}];
  if (auto it = c.find(ast.get()); it != c.end() && settings().debug < 4) return it->second.second;
  l.unlock();
  auto low = std::make_shared<const codegen::Lowered>(codegen::lower(ast, b.target(), b.limits()));
  l.lock();
  c[ast.get()] = {ast, low};
  return low;
}

}  // namespace

Lowerings lower(const schedule::Schedule& s, const Runners& r, const runtime::Backend& b) {
  Lowerings lowered;
  for (size_t i = 0; i < s.kernels.size(); i++)
    lowered.push_back(r[i]->lowers()
                          ? lower_cached(s.kernels[i].ast, b)
                          : std::make_shared<const codegen::Lowered>(r[i]->describe(s.kernels[i])));
  if (settings().debug >= 3) describe_runners(r, lowered, b);
  return lowered;
}

std::vector<runtime::Launch> load(const schedule::Schedule& s, const Lowerings& lowered, const Runners& r,
                                  runtime::Backend& b) {
  Lowerings compiled;
  for (size_t i = 0; i < lowered.size(); i++)
    if (r[i]->lowers()) compiled.push_back(lowered[i]);
  std::vector<runtime::Launch> loaded = b.load(compiled), out;
  for (size_t i = 0, j = 0; i < lowered.size(); i++)
    out.push_back(r[i]->lowers() ? std::move(loaded[j++]) : r[i]->load(s.kernels[i], b));
  return out;
}

}  // namespace kiln::engine
