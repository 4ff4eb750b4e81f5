// Everything a tile Program declares; the host API fills it, codegen and the backends read it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/tile.h"

namespace kiln::tile {

struct TensorDecl {
  std::string name;
  DType dtype;
  Indexing indexing;
  bool output;
  Tensor value;  // inputs: the bound tensor; outputs: the result after run()
  Shape shape;   // outputs
};

struct CBDecl {
  std::string name;
  int rows, cols;
  DType dtype;
  int buffer_factor;
};

struct Program::Desc {
  std::string name, file, source;
  Grid grid;
  std::vector<TensorDecl> tensors;
  std::vector<CBDecl> cbs;
  std::vector<std::string> semaphores;
  std::vector<std::pair<std::string, int64_t>> constants;
  std::vector<std::string> arg_names;
  std::vector<std::vector<int64_t>> args;  // per core
  std::vector<std::string> dm_roles{"reader", "writer"};
  std::string compute_role = "compute";
};

// The C++ source the compiler sees for `d` (src/tile/codegen.cpp).
std::string generate_source(const Program::Desc& d);
// Embedded at build time (cmake/embed_tile_sources.cmake): kernel-facing headers as (path under
// include/, text) and shipped kernels as (path under kernels/, text).
const std::vector<std::pair<std::string, std::string>>& embedded_headers();
const std::vector<std::pair<std::string, std::string>>& embedded_kernels();

namespace cpu {
// Compiles (cached) and runs the program on the CPU (src/tile/cpu/launch.cpp).
void launch(Program::Desc& d);
}  // namespace cpu

}  // namespace kiln::tile
