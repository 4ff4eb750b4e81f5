// The kernel-facing headers the run-time compilers see: every header under include/kiln/tile is
// embedded in the library (the C++ compiler gets them back as files, NVRTC pasted into the source),
// and the CUDA source of a program has the headers it includes pasted in once each, with no
// #include left over.
#include <filesystem>
#include <set>
#include <sstream>

#include "example_kernels.h"
#include "tile/program_desc.h"
#include "tile/tile_helpers.h"

namespace kiln::testing {
namespace {

TEST(TileEmbeddedHeaders, EveryKernelHeaderIsEmbedded) {
  const std::filesystem::path root = std::filesystem::path(KILN_SOURCE_DIR) / "include";
  std::set<std::string> on_disk, embedded;
  for (auto& e : std::filesystem::recursive_directory_iterator(root / "kiln" / "tile"))
    if (e.is_regular_file()) on_disk.insert(std::filesystem::relative(e.path(), root).generic_string());
  for (auto& [path, text] : tile::embedded_headers()) embedded.insert(path);
  EXPECT_FALSE(on_disk.empty());
  EXPECT_EQ(on_disk, embedded);
}

TEST(TileEmbeddedHeaders, CudaSourcePastesEachIncludedHeaderOnce) {
  Tensor x = tile_input({96, 96}, 1);
  std::istringstream in(tile_examples::exchange_program(x).generated_cuda_source());
  std::multiset<std::string> pasted;
  std::string line;
  while (std::getline(in, line)) {
    EXPECT_NE(line.rfind("#include", 0), 0u) << "not pasted: " << line;
    if (line.rfind("#line 1 \"", 0) == 0) pasted.insert(line.substr(9, line.size() - 10));
  }
  for (auto& [path, text] : tile::embedded_headers()) EXPECT_LE(pasted.count(path), 1u) << path;
  EXPECT_EQ(pasted.count("kiln/tile/kernel.h"), 1u);
  EXPECT_EQ(pasted.count("kiln/tile/cuda_device.h"), 1u);
}

}  // namespace
}  // namespace kiln::testing
