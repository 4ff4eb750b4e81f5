// load_safetensors_into: a safetensors file's tensors assigned (assign_) to existing tensors of the
// same names, after checking names, shapes and dtypes; all are realized in one schedule.
#include <string>
#include <vector>

#include "kiln/io.h"

namespace kiln::io {

namespace {
std::string join(const std::vector<std::string>& items, bool quote) {
  std::string s;
  for (auto& n : items) s += (s.empty() ? "" : ", ") + (quote ? "'" + n + "'" : n);
  return s;
}
}  // namespace

LoadReport load_safetensors_into(const std::string& path, std::map<std::string, Tensor>& targets,
                                 bool strict) {
  SafetensorsFile file = load_safetensors(path);
  LoadReport report;
  std::vector<std::string> mismatched;
  for (auto& [name, t] : targets) {
    auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      report.missing.push_back(name);
      continue;
    }
    if (!t.defined()) {
      mismatched.push_back("'" + name + "' (target undefined)");
      continue;
    }
    const Tensor& v = it->second;
    if (v.shape() != t.shape() || v.dtype() != t.dtype())
      mismatched.push_back("'" + name + "' (file " + shape_str(v.shape()) + " " + to_string(v.dtype()) +
                           ", target " + shape_str(t.shape()) + " " + to_string(t.dtype()) + ")");
  }
  for (auto& [name, v] : file.tensors)
    if (!targets.count(name)) report.unexpected.push_back(name);
  std::string problems;
  if (!mismatched.empty()) problems += "; mismatched: " + join(mismatched, false);
  if (strict && !report.missing.empty()) problems += "; missing from the file: " + join(report.missing, true);
  if (strict && !report.unexpected.empty())
    problems += "; unexpected in the file: " + join(report.unexpected, true);
  if (!problems.empty()) throw Error("kiln::io: " + path + ": cannot load into the given tensors" + problems);
  std::vector<Tensor> assigned;
  for (auto& [name, t] : targets) {
    auto it = file.tensors.find(name);
    if (it == file.tensors.end()) continue;
    t.assign_(it->second);
    assigned.push_back(t);
  }
  realize(assigned);
  return report;
}

}  // namespace kiln::io
