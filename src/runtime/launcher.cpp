// Launches of lowered programs and the default replay of a launch list (see launcher.h).
#include "runtime/launcher.h"

namespace kiln::runtime {

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
