// Device names (kiln/device.h), parsed where the settings (ir/settings.cpp) and users name a device.
#include "kiln/device.h"

#include <cstdlib>
#include <string>

#include "kiln/error.h"

namespace kiln {

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "ref") return {Kind::REF, 0};
  if (s == "cuda" || s == "gpu") return cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() < 8 &&
      s.find_first_not_of("0123456789", 5) == std::string::npos && std::atoi(s.c_str() + 5) < kMaxIndex)
    return cuda(std::atoi(s.c_str() + 5));
  throw Error("kiln: unknown device '" + s + "' (expected cpu, ref, cuda or cuda:<index> below " +
              std::to_string(kMaxIndex) + ")");
}

}  // namespace kiln
