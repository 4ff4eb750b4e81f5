// The CPU backend as a kernel sees it: the abi::Runtime table every backend call goes through
// (KILN_TILE_RT). The GPU's counterpart is cuda_device.h. Part of kernel.h.
#pragma once
#include "kiln/tile/abi.h"

namespace kiln::tile::detail {

static const abi::Runtime* rt = nullptr;  // set by the generated entry point

}  // namespace kiln::tile::detail
