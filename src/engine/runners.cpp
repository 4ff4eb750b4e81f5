// The runner registry and the built-in runners (see runners.h): generated code, the flash-attention
// kernel and the backend's GEMM library.
#include "engine/runners.h"

#include <iostream>
#include <mutex>

#include "engine/library_gemm.h"
#include "kiln/debug.h"
#include "kiln/error.h"

namespace kiln::engine {

namespace {

// The program the lowering renders, compiled by the backend: every kernel no other runner takes.
class Generated : public Runner {
 public:
  std::string name(const runtime::Backend&) const override { return "generated"; }
  bool takes(const schedule::Kernel& k, const runtime::Backend&) const override { return !special_op(k); }
};

// The hand-written flash-attention kernel (codegen/flash_attention.h) where the backend supports it:
// lowered and compiled like a generated kernel.
class FlashAttention : public Runner {
 public:
  std::string name(const runtime::Backend&) const override { return "flash attention"; }
  bool takes_node(const ir::Node& n, const runtime::Backend& b) const override {
    return n.op == ir::Op::ATTENTION && b.supports(n);
  }
  bool takes(const schedule::Kernel& k, const runtime::Backend&) const override {
    const ir::Node* n = special_op(k);
    return n && n->op == ir::Op::ATTENTION;
  }
};

// A matmul the backend's GEMM library runs (cuBLASLt), the generated kernel compiled as its fallback.
class LibraryGemm : public Runner {
 public:
  std::string name(const runtime::Backend& b) const override {
    return b.gemm_library() + " (the generated kernel is the fallback)";
  }
  bool takes(const schedule::Kernel& k, const runtime::Backend& b) const override {
    return !b.gemm_library().empty() && !special_op(k) && library_gemm_match(k) != nullptr;
  }
  void bind(runtime::Launch& l, const schedule::Kernel& k) const override { use_library_gemm(l, k); }
};

struct Registry {
  std::mutex mu;
  std::vector<const Runner*> registered;
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// Registered runners first, then the built-in ones; generated code last.
std::vector<const Runner*> runners() {
  static const FlashAttention flash;
  static const LibraryGemm gemm;
  static const Generated generated;
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  std::vector<const Runner*> all = r.registered;
  all.insert(all.end(), {&flash, &gemm, &generated});
  return all;
}

}  // namespace

const ir::Node* special_op(const schedule::Kernel& k) {
  if (k.ast->src.empty()) return nullptr;
  const ir::Node* n = k.ast->src[0].get();
  return n->op == ir::Op::ATTENTION || n->op == ir::Op::LAYER_NORM ? n : nullptr;
}

codegen::Lowered Runner::describe(const schedule::Kernel& k) const {
  throw Error("kiln.realize: the kernel computing " + k.outputs[0]->str() +
              " is lowered; its runner has no description of its own");
}

runtime::Launch Runner::load(const schedule::Kernel&, runtime::Backend& b) const {
  throw Error("kiln.realize: the runner " + name(b) + " lowers its kernels; the backend loads them");
}

bool register_runner(const Runner* r) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> l(reg.mu);
  reg.registered.push_back(r);
  return true;
}

std::vector<const Runner*> choose_runners(const schedule::Schedule& s, const runtime::Backend& b) {
  std::vector<const Runner*> all = runners(), out;
  for (const schedule::Kernel& k : s.kernels) {
    const Runner* chosen = nullptr;
    for (const Runner* r : all)
      if (r->takes(k, b)) {
        chosen = r;
        break;
      }
    if (!chosen)
      throw Error("kiln.realize: no runner of " + b.name() + " runs the kernel computing " +
                  k.outputs[0]->str() + " (its composite should have replaced it)");
    out.push_back(chosen);
  }
  return out;
}

void describe_runners(const std::vector<const Runner*>& runners,
                      const std::vector<std::shared_ptr<const codegen::Lowered>>& lowered,
                      const runtime::Backend& b) {
  for (size_t i = 0; i < runners.size(); i++)
    std::cerr << "kiln: runner " << lowered[i]->program.name << " -> " << runners[i]->name(b) << "\n";
}

bool node_runs(const ir::Node& n) {
  if (n.device < 0) return false;
  const runtime::Backend& b = runtime::backend(Device::from_code(n.device));
  for (const Runner* r : runners())
    if (r->takes_node(n, b)) return true;
  return false;
}

}  // namespace kiln::engine
