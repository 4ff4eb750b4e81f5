// Which ops any node was ever made with in this process: stages that only matter where an op
// occurs (symbolic sizes, in-place writes) skip their walk of the graph when it never did.
#pragma once
#include "ir/ops.h"

namespace kiln::ir {

bool ever_made(Op op);

}  // namespace kiln::ir
