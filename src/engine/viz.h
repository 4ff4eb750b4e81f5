// The compiler viewer (KILN_VIZ=1): realize records each schedule here (graphs before and after
// the rewrites, kernels with their fusion reasons, AST, opts, linear program, source and time),
// and the page (viz_page.cpp) is rewritten after every realize. Nothing is recorded otherwise.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "codegen/passes.h"
#include "ir/node.h"
#include "kiln/device.h"
#include "schedule/schedule.h"

namespace kiln::engine::viz {

bool enabled();             // KILN_VIZ is set
std::string output_path();  // KILN_VIZ_OUT, default kiln_viz.html

// One realize being recorded: made before any kernel runs, so the graph shows what was computed.
class Record {
 public:
  Record(const std::vector<ir::NodeRef>& roots, const std::vector<ir::NodeRef>& rewritten,
         const schedule::Schedule& sched, const std::vector<std::shared_ptr<const codegen::Lowered>>& lowered,
         Device device);
  void kernel_time(size_t kernel, double ms, int64_t bytes);  // wall time of one launch
  // Adds the record to the page and rewrites the file (atomically).
  void finish(double schedule_ms);

 private:
  std::string key_;                 // kernel symbols: a realize that repeats one is stored short
  std::string graph_;               // JSON of nodes and kernels, without times
  std::vector<std::string> times_;  // JSON per kernel: {"ms":..,"bytes":..}
  std::string device_;
};

// The HTML page around the recorded data (a JSON array, one object per realize).
std::string page(const std::string& data_json);

}  // namespace kiln::engine::viz
