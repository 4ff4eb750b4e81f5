// Copies between host memory and a CUDA device, through pinned staging buffers so the transfer
// runs at the bus's speed and host memory need not be pinned. Both calls return when the copy is done.
#pragma once
#include <cstddef>

#include "runtime/cuda/api.h"

namespace kiln::runtime::cuda {

void upload(int ordinal, CUdeviceptr dst, const void* src, size_t bytes);
void download(int ordinal, void* dst, CUdeviceptr src, size_t bytes);
void zero_device(int ordinal, CUdeviceptr dst, size_t bytes);                   // queued on the stream
void copy_device(int ordinal, CUdeviceptr dst, CUdeviceptr src, size_t bytes);  // queued on the stream

}  // namespace kiln::runtime::cuda
