// Devices kiln can place tensors on: the CPU, CUDA GPUs, and ref (host memory whose kernels are
// interpreted, the codegen oracle: src/runtime/ref).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace kiln {

namespace runtime {
class Timer;  // the device backend's (src/runtime/backend.h)
}

struct Device {
  enum class Kind { CPU, CUDA, REF } kind = Kind::CPU;
  int index = 0;
  static constexpr int kMaxIndex = 32;  // devices of one kind (a node keeps its device in 8 bits)
  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {Kind::CUDA, index}; }
  bool is_cpu() const { return kind == Kind::CPU; }
  bool is_cuda() const { return kind == Kind::CUDA; }
  bool operator==(const Device&) const = default;
  // "cpu", "cuda:1", "ref": the kinds with one device (cpu, ref) print no index 0
  std::string str() const {
    static const char* const names[] = {"cpu", "cuda", "ref"};
    int k = static_cast<int>(kind);
    if (k < 0 || k > static_cast<int>(Kind::REF))
      return "kind" + std::to_string(k) + ":" + std::to_string(index);
    return names[k] + (is_cuda() || index != 0 ? ":" + std::to_string(index) : std::string());
  }
  // "cpu", "ref", "cuda", "cuda:1"; throws kiln::Error on anything else
  static Device parse(const std::string& s);
  // a small code for graph nodes: kind * kMaxIndex + index (0 = cpu)
  int code() const { return static_cast<int>(kind) * kMaxIndex + index; }
  static Device from_code(int c) {
    return c <= 0 ? cpu() : Device{static_cast<Kind>(c / kMaxIndex), c % kMaxIndex};
  }
};

// Where tensors that name no device go: KILN_DEVICE (default cpu), or set_default_device().
Device default_device();
void set_default_device(Device d);
// Whether a CUDA GPU with its driver and NVRTC can be used; `why` says why not.
bool cuda_available(std::string* why = nullptr);
// Waits until all work queued on the device has finished (a no-op on the CPU).
void synchronize(Device d = default_device());

// Device memory of a GPU as kiln's caching allocator counts it, in bytes: held by tensors, arenas
// and scratch (in_use, as torch.cuda.memory_allocated), the most ever held since the start or the
// last reset_peak_memory (peak, as max_memory_allocated) and freed blocks kept for reuse (cached).
struct MemoryStats {
  int64_t in_use = 0, peak = 0, cached = 0;
};
// A kiln::Error for the CPU, whose memory is not counted.
MemoryStats memory_stats(Device d = default_device());
void reset_peak_memory(Device d = default_device());  // peak = in_use

// The time a device spends on the work queued between start() and stop_ms(), as PyTorch times GPU
// code: on a GPU, two events recorded on kiln's stream (a launch returns once it is queued, so the
// host's clock alone says little); on the CPU, whose work runs when it is called, the wall clock.
// stop_ms() waits for the device (and reports a failed launch); a timer may be started again.
class DeviceTimer {
 public:
  explicit DeviceTimer(Device d = default_device());
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;
  void start();
  double stop_ms();

 private:
  Device device_;
  std::unique_ptr<runtime::Timer> timer_;
  bool started_ = false;
};

}  // namespace kiln
