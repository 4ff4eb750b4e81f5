// split_work: N units of work over the cores of a tile program.
#include <string>

#include "kiln/error.h"
#include "kiln/tile.h"

namespace kiln::tile {

std::vector<Work> split_work(int64_t units, int cores) {
  if (units < 0 || cores < 1)
    throw Error("kiln.tile: split_work(" + std::to_string(units) + ", " + std::to_string(cores) +
                "): need units >= 0 and cores >= 1");
  std::vector<Work> w(cores);
  int64_t base = units / cores, extra = units % cores, start = 0;
  for (int c = 0; c < cores; c++) {
    w[c] = Work{start, base + (c < extra ? 1 : 0)};
    start += w[c].count;
  }
  return w;
}

}  // namespace kiln::tile
