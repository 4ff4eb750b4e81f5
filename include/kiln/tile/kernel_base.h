// The kernel language's basic types: the tile size, bf16 storage, how accessors count, a kernel
// call's source position, and the grid's shape as a compile-time flag. Part of kernel.h.
#pragma once
#include "kiln/tile/abi.h"

namespace kiln::tile {

inline constexpr int kTile = 32;

// bfloat16 storage: 16 bits in memory, computed in f32.
struct bf16 {
  unsigned short bits;
};

enum class Indexing { Tiles, Elements };

namespace detail {

inline abi::Loc loc(int line, const char* file) { return abi::Loc{file, line}; }
// Where a scoped block's implicit push/pop happens: the end of the scope opened at `taken`.
inline abi::Loc scope_end(abi::Loc taken) { return abi::Loc{taken.file, -taken.line}; }

inline float to_f32(float x) { return x; }
template <class T>
inline T from_f32(float x);
template <>
inline float from_f32<float>(float x) {
  return x;
}

// Grid flags as dependent values, so a static_assert fires only when the op is used.
template <class T>
inline constexpr bool kGrid2D = KILN_TILE_GRID_2D != 0;

}  // namespace detail

}  // namespace kiln::tile
