// Cross-core operations on 2D grids: multicast of blocks and semaphores (local and remote). Part of
// kernel.h, which defines the macros it uses (KILN_TILE_RT, KILN_TILE_LOC).
#pragma once
#include "kiln/tile/kernel_cb.h"
#include "kiln/tile/kernel_dma.h"
#include "kiln/tile/kernel_grid.h"

namespace kiln::tile {

// ---- cross-core (2D grids only) ----
// Copies `src` into the block each core of `range` (this core excluded) reserved in `dst` and
// handed to mcast_receive(); waits until every receiver is ready.
template <class T, int R, int C, int TH, int Id, bool W>
Transfer mcast(const Block<T, R, C, TH, W>& src, const CB<T, R, C, Id, TH>& dst, CoreRange range,
               KILN_TILE_LOC) {
  static_assert(detail::kGrid2D<T>,
                "kiln.tile: multicast needs a 2D grid (Grid::grid2d); this program runs on a "
                "plain core count without topology");
  return Transfer{KILN_TILE_RT(mcast)(src.ref(), dst.id, range, detail::loc(line, file))};
}
// Marks a reserved block as the destination of a multicast; wait() returns when it arrived.
template <class T, int R, int C, int TH, bool W>
Transfer mcast_receive(const Block<T, R, C, TH, W>& dst, KILN_TILE_LOC) {
  static_assert(detail::kGrid2D<T>,
                "kiln.tile: multicast needs a 2D grid (Grid::grid2d); this program runs on a "
                "plain core count without topology");
  return Transfer{KILN_TILE_RT(mcast_receive)(dst.ref(), detail::loc(line, file))};
}

// A per-core counter; remote_inc and mcast_set reach other cores of a 2D grid. Id: its index in
// the program.
template <int Id>
struct Semaphore {
  static constexpr int id = Id;
  void set(long long v, KILN_TILE_LOC) const { KILN_TILE_RT(sem_set)(id, v, detail::loc(line, file)); }
  void inc(long long n = 1, KILN_TILE_LOC) const { KILN_TILE_RT(sem_inc)(id, n, detail::loc(line, file)); }
  // Blocks until this core's value is at least v.
  void wait(long long v, KILN_TILE_LOC) const { KILN_TILE_RT(sem_wait)(id, v, detail::loc(line, file)); }
  long long value(KILN_TILE_LOC) const { return KILN_TILE_RT(sem_value)(id, detail::loc(line, file)); }
  template <class T = void>
  void remote_inc(int x, int y, long long n = 1, KILN_TILE_LOC) const {
    static_assert(detail::kGrid2D<T>, "kiln.tile: remote semaphore ops need a 2D grid (Grid::grid2d)");
    KILN_TILE_RT(sem_remote_inc)(id, x, y, n, detail::loc(line, file));
  }
  template <class T = void>
  void mcast_set(CoreRange range, long long v, KILN_TILE_LOC) const {
    static_assert(detail::kGrid2D<T>,
                  "kiln.tile: multicast needs a 2D grid (Grid::grid2d); this program runs on "
                  "a plain core count without topology");
    KILN_TILE_RT(sem_mcast_set)(id, range, v, detail::loc(line, file));
  }
  // Adds n to the value on every core of the range (this one included, where it lies inside): a
  // barrier in one step, each core adding to all and waiting for its own value to reach the count.
  template <class T = void>
  void mcast_inc(CoreRange range, long long n = 1, KILN_TILE_LOC) const {
    static_assert(detail::kGrid2D<T>,
                  "kiln.tile: multicast needs a 2D grid (Grid::grid2d); this program runs on "
                  "a plain core count without topology");
    KILN_TILE_RT(sem_mcast_inc)(id, range, n, detail::loc(line, file));
  }
};

}  // namespace kiln::tile
