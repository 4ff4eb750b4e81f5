// Devices kiln can place tensors on.
#pragma once
#include <string>

namespace kiln {

struct Device {
  enum class Kind { CPU } kind = Kind::CPU;
  static Device cpu() { return {}; }
  bool operator==(const Device&) const = default;
  std::string str() const { return "cpu"; }
};

}  // namespace kiln
