// The kernels shipped with kiln (kernels/), looked up in the sources embedded at build time.
#include "kiln/error.h"
#include "tile/program_desc.h"

namespace kiln::tile {

std::string library_kernel(const std::string& path) {
  std::string known;
  for (auto& [p, text] : embedded_kernels()) {
    if (p == path) return text;
    known += (known.empty() ? "" : ", ") + p;
  }
  throw Error("kiln.tile: no kernel '" + path + "' in kernels/ (shipped: " + known + ")");
}

}  // namespace kiln::tile
