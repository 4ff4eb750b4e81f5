// kiln::Error: the one exception type for user mistakes; messages name op, shapes, dtypes, devices.
#pragma once
#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace kiln
