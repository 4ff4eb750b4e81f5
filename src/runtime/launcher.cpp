// Launches of lowered programs and the default replay of a launch list (see launcher.h).
#include "runtime/launcher.h"

#include <algorithm>

#include "kiln/error.h"

namespace kiln::runtime {

namespace {

// The value of instruction i of a symbolic trip count: constants, sizes and their sums and products.
int64_t evaluate(const std::vector<codegen::Inst>& insts, int i, void* const* args) {
  const codegen::Inst& in = insts[static_cast<size_t>(i)];
  switch (in.op) {
    case ir::Op::CONST: return in.arg.empty() ? 0 : in.arg[0];
    case ir::Op::VAR: return static_cast<const int64_t*>(args[in.arg[0]])[in.arg[1]];
    case ir::Op::ADD: return evaluate(insts, in.src[0], args) + evaluate(insts, in.src[1], args);
    case ir::Op::MUL: return evaluate(insts, in.src[0], args) * evaluate(insts, in.src[1], args);
    default: throw Error(std::string("kiln.launch: a loop's trip count computes ") + ir::op_name(in.op));
  }
}

}  // namespace

Launch Launch::of(const codegen::Lowered& l, Device d, void* program) {
  Launch out;
  out.program = program;
  out.name = l.program.name;
  out.device = d;
  out.zero_bytes = l.program.zero_bytes;
  out.outer_size = l.program.outer_size;
  out.scratch_bytes = l.program.scratch_bytes;
  out.nargs = l.program.globals.size() - (out.scratch_bytes > 0 ? 1 : 0);
  out.cuda = l.launch;
  for (auto& in : l.program.insts)
    if (in.op == ir::Op::RANGE && in.arg.size() > 3 && in.arg[3] && !in.src.empty()) {
      auto insts = std::make_shared<const std::vector<codegen::Inst>>(l.program.insts);
      int at = in.src[0];
      int64_t most = out.outer_size;
      out.outer_extent = [insts, at, most](void* const* args) {
        return std::max<int64_t>(0, std::min(most, evaluate(*insts, at, args)));
      };
    }
  return out;
}

void Launcher::replay(const std::vector<SlotLaunch>& list, const std::vector<void*>& slots,
                      std::unique_ptr<ReplayState>&) {
  std::vector<void*> args;
  for (const SlotLaunch& s : list) {
    args.clear();
    for (int32_t a : s.args) args.push_back(slots[static_cast<size_t>(a)]);
    launch(s.launch, args.data());
  }
}

}  // namespace kiln::runtime
