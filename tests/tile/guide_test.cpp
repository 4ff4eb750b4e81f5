// docs/tile.md's own-kernel example: the kernel source is taken from the page itself (the ```cpp
// block after "<!-- kernel: scale.cpp -->") and run with the page's host code.
#include <fstream>
#include <sstream>

#include "tile/tile_helpers.h"

namespace kiln::testing {
namespace {

std::string guide_kernel(const std::string& marker) {
  std::ifstream f(std::string(KILN_SOURCE_DIR) + "/docs/tile.md");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string doc = ss.str();
  size_t at = doc.find(marker);
  if (at == std::string::npos) return "";
  size_t begin = doc.find("```cpp\n", at) + 7, end = doc.find("```", begin);
  return doc.substr(begin, end - begin);
}

TEST(TileGuide, OwnKernelSourceRuns) {
  std::string source = guide_kernel("<!-- kernel: scale.cpp -->");
  ASSERT_NE(source.find("void compute()"), std::string::npos) << source;
  Tensor x = tile_input({70, 100}, 81);  // 3 x 4 tiles, edge tiles padded
  tile::Program p("scale", source, tile::Grid::cores(2), "scale.cpp");
  p.input("x", x).output("y", x.shape(), DType::F32);
  p.cb("x_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
  const int64_t col_tiles = (x.size(-1) + 31) / 32, tiles = (x.numel() / x.size(-1) + 31) / 32 * col_tiles;
  p.constant("col_tiles", col_tiles).runtime_args({"first", "count"});
  auto w = tile::split_work(tiles, 2);
  for (int c = 0; c < 2; c++) p.set_runtime_args(c, {w[c].start, w[c].count});
  p.run();
  auto want = x.to_vector<float>();
  for (auto& v : want) v *= 2;
  expect_near_all(p.result("y"), want, 0, 0);
}

}  // namespace
}  // namespace kiln::testing
