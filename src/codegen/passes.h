// The lowering pass list, in one place: kernel AST -> optimized AST -> linear program -> C source.
#pragma once
#include <string>
#include <vector>

#include "codegen/program.h"
#include "ir/node.h"

namespace kiln::codegen {

struct Lowered {
  Program program;
  std::string source;             // C source of this kernel (without the shared prelude)
  std::vector<std::string> opts;  // optimizations applied (KILN_DEBUG=3)
};

Lowered lower(const ir::NodeRef& ast);
std::string kernel_name(const ir::NodeRef& ast);  // E_<sizes> or r_<output sizes>_<reduce sizes>

}  // namespace kiln::codegen
