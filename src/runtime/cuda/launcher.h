// The CUDA launcher (runtime/launcher.h): kernels and cuBLASLt matmuls queued on the device's
// stream; replayed launch lists run as CUDA graphs (runtime/cuda/graph.h).
#pragma once
#include "runtime/launcher.h"

namespace kiln::runtime::cuda {

Launcher& launcher();  // one for every device: each launch names its own

}  // namespace kiln::runtime::cuda
