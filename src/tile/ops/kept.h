// Programs kept between calls of the shipped kernels' entry points. A program is declared once per
// thread for what shapes it (the kernel, sizes, dtypes, grid, device: the key); a later call with
// the same key binds its tensors to the kept program and runs it: nothing is declared, laid out,
// generated or looked up again, which on a GPU is most of a call's host time.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kiln/tile.h"

namespace kiln::tile::ops {

// A program's inputs by name, as its builder declares them and a later call binds them.
using Inputs = std::vector<std::pair<const char*, Tensor>>;

// The shipped kernels, as keys name them.
enum class Kernel { MulAddTanh, LayerNormForward, LayerNormBackward, LayerNormWgradCols };

// This thread's kept programs.
inline std::map<std::vector<int64_t>, Program>& kept_programs() {
  thread_local std::map<std::vector<int64_t>, Program> kept;
  return kept;
}

// The program kept for `key` (made by make() at the first call), run on `inputs`; returns the
// outputs named in `results` and drops its hold on every tensor (Program::release).
template <class Make>
std::vector<Tensor> run_kept(const std::vector<int64_t>& key, Make make, const Inputs& inputs,
                             std::initializer_list<const char*> results) {
  auto& kept = kept_programs();
  auto it = kept.find(key);
  if (it == kept.end()) {
    it = kept.emplace(key, make()).first;
  } else {
    for (auto& [name, t] : inputs) it->second.bind(name, t);
  }
  Program& p = it->second;
  std::vector<Tensor> out;
  try {
    p.run();
    for (const char* r : results) out.push_back(p.result(r));
  } catch (...) {
    p.release();
    throw;
  }
  p.release();
  return out;
}

// What every key starts with: the kernel, the device and the data's dtype.
inline std::vector<int64_t> key_of(Kernel kernel, const Tensor& x) {
  return {static_cast<int64_t>(kernel), x.device().code(), static_cast<int64_t>(x.dtype())};
}

}  // namespace kiln::tile::ops
