// Linearize: kernel AST -> linear program. Output loops open first (the outermost is split over
// threads), each reduce becomes DEFINE_ACC + RANGE ... ENDRANGE, loop-invariant values are hoisted.
#pragma once
#include "codegen/program.h"
#include "ir/node.h"

namespace kiln::codegen {

Program linearize(const ir::NodeRef& ast);

}  // namespace kiln::codegen
