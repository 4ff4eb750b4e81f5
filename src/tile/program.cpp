// tile::Program: the host-side declarations of a tile program (tensors, CBs, semaphores, args).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <utility>

#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/backend.h"
#include "tile/cuda/launch_state.h"
#include "tile/program_desc.h"

namespace kiln::tile {

namespace {

[[noreturn]] void fail(const Program::Desc& d, const std::string& msg) {
  throw Error("kiln.tile: program '" + d.name + "': " + msg);
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// Every name becomes a C++ identifier in the generated prelude; they share one scope.
void check_new_name(const Program::Desc& d, const std::string& name, bool rebinding_ok = false) {
  if (!is_identifier(name)) fail(d, "'" + name + "' is not a valid C++ identifier");
  bool taken = false;
  for (auto& t : d.tensors) taken |= t.name == name;
  if (taken && rebinding_ok) return;
  for (auto& c : d.cbs) taken |= c.name == name;
  for (auto& s : d.semaphores) taken |= s == name;
  for (auto& c : d.constants) taken |= c.first == name;
  for (auto& a : d.arg_names) taken |= a == name;
  if (taken) fail(d, "the name '" + name + "' is declared twice");
}

// `what` ("Grid::cores(n)") unless rows x cols is 1 to kMaxCores cores.
void check_grid(const std::string& what, int64_t rows, int64_t cols) {
  if (rows < 1 || cols < 1) throw Error("kiln.tile: " + what + ": need at least one core in each dimension");
  if (rows * cols > kMaxCores)
    throw Error("kiln.tile: " + what + ": " + std::to_string(rows * cols) + " cores, more than the " +
                std::to_string(kMaxCores) + " a program may have; give each core more work");
}

// An output's shape: no negative dims, and few enough elements that their bytes fit in 63 bits (a
// size that wrapped would make a small buffer the kernel's DMA then writes past).
void check_output_shape(const Program::Desc& d, const std::string& name, const Shape& shape, DType t) {
  int64_t n = 1;
  for (int64_t dim : shape) {
    if (dim < 0) fail(d, "output '" + name + "' has a negative dimension: shape " + shape_str(shape));
    if (__builtin_mul_overflow(n, dim, &n) || n > INT64_MAX / static_cast<int64_t>(dtype_size(t)))
      fail(d,
           "output '" + name + "' of shape " + shape_str(shape) + " has more bytes than memory can address");
  }
}

void check_dtype(const Program::Desc& d, const std::string& what, DType t) {
  if (t != DType::F32 && t != DType::BF16)
    fail(d, what + " has dtype " + dtype_name(t) + "; tile kernels support f32 and bf16");
}

}  // namespace

Grid Grid::cores(int n) {
  if (n < 1) throw Error("kiln.tile: Grid::cores(" + std::to_string(n) + "): need at least one core");
  check_grid("Grid::cores(" + std::to_string(n) + ")", 1, n);
  return Grid{.is_2d = false, .rows = 1, .cols = n};
}

Grid Grid::grid2d(int rows, int cols) {
  check_grid("Grid::grid2d(" + std::to_string(rows) + ", " + std::to_string(cols) + ")", rows, cols);
  return Grid{.is_2d = true, .rows = rows, .cols = cols};
}

Program::Program(std::string name, std::string source, Grid grid, std::string file)
    : d_(std::make_shared<Desc>()) {
  check_grid("program '" + name + "': a grid of " + std::to_string(grid.rows) + " x " +
                 std::to_string(grid.cols) + " cores",
             grid.rows, grid.cols);
  d_->name = std::move(name);
  d_->file = file.empty() ? d_->name + ".cpp" : std::move(file);
  d_->source = std::move(source);
  d_->grid = grid;
}

Program Program::from_library(const std::string& path, Grid grid) {
  std::string name = path.substr(0, path.rfind('.'));
  for (char& c : name)
    if (c == '/') c = '_';
  return Program(name, library_kernel(path), grid, "kernels/" + path);
}

Program& Program::input(const std::string& name, const Tensor& t, Indexing indexing) {
  check_new_name(*d_, name, true);
  check_dtype(*d_, "input '" + name + "'", t.dtype());
  for (auto& x : d_->tensors)
    if (x.name == name) {
      if (x.output) fail(*d_, "'" + name + "' is an output, not an input");
      if (x.dtype != t.dtype() || x.indexing != indexing) d_->changed();  // another accessor type
      x = TensorDecl{name, t.dtype(), indexing, false, t, t.shape()};
      return *this;
    }
  d_->changed();
  d_->tensors.push_back(TensorDecl{name, t.dtype(), indexing, false, t, t.shape()});
  return *this;
}

Program& Program::bind(const std::string& name, const Tensor& t) {
  for (auto& x : d_->tensors) {
    if (x.name != name) continue;
    if (x.output) fail(*d_, "bind('" + name + "'): '" + name + "' is an output, not an input");
    if (t.dtype() != x.dtype)
      fail(*d_, "bind('" + name + "'): a tensor of dtype " + dtype_name(t.dtype()) +
                    " for an input declared " + dtype_name(x.dtype) +
                    " (declare it again with input() to change its dtype)");
    x.value = t;
    x.shape = t.shape();
    return *this;
  }
  fail(*d_, "bind('" + name + "'): no input of that name");
}

Program& Program::release() {
  for (auto& t : d_->tensors) t.value = Tensor();
  return *this;
}

Program& Program::output(const std::string& name, Shape shape, DType dtype, Indexing indexing, Fill fill) {
  check_new_name(*d_, name);
  check_dtype(*d_, "output '" + name + "'", dtype);
  check_output_shape(*d_, name, shape, dtype);
  d_->changed();
  d_->tensors.push_back(TensorDecl{name, dtype, indexing, true, Tensor(), std::move(shape), fill});
  return *this;
}

Program& Program::cb(const std::string& name, int rows, int cols, DType dtype, int buffer_factor,
                     int tile_rows) {
  check_new_name(*d_, name);
  check_dtype(*d_, "CB '" + name + "'", dtype);
  if (rows < 1 || cols < 1 || buffer_factor < 1)
    fail(*d_, "CB '" + name +
                  "' needs a block of at least 1x1 tiles and a buffer factor of at least 1 (got " +
                  std::to_string(rows) + "x" + std::to_string(cols) + ", factor " +
                  std::to_string(buffer_factor) + ")");
  if (tile_rows < 1 || tile_rows > 32 || (tile_rows & (tile_rows - 1)) != 0)
    fail(*d_, "CB '" + name + "' has tiles of " + std::to_string(tile_rows) +
                  " rows; tiles have 1, 2, 4, 8, 16 or 32 rows (of 32 elements)");
  d_->changed();
  d_->cbs.push_back(CBDecl{name, rows, cols, dtype, buffer_factor, tile_rows});
  return *this;
}

Program& Program::semaphore(const std::string& name) {
  check_new_name(*d_, name);
  d_->changed();
  d_->semaphores.push_back(name);
  return *this;
}

Program& Program::constant(const std::string& name, int64_t value) {
  check_new_name(*d_, name);
  d_->changed();
  d_->constants.emplace_back(name, value);
  return *this;
}

Program& Program::runtime_args(std::vector<std::string> names) {
  for (auto& n : names) check_new_name(*d_, n);
  d_->changed();
  d_->arg_names = std::move(names);
  d_->args.assign(static_cast<size_t>(d_->grid.size()) * d_->arg_names.size(), 0);
  return *this;
}

Program& Program::set_runtime_args(int core, const std::vector<int64_t>& values) {
  return set_runtime_args(core, values.data(), values.size());
}
Program& Program::set_runtime_args(int core, std::initializer_list<int64_t> values) {
  return set_runtime_args(core, values.begin(), values.size());
}

Program& Program::set_runtime_args(int core, const int64_t* values, size_t n) {
  if (core < 0 || core >= d_->grid.size())
    fail(*d_, "set_runtime_args: core " + std::to_string(core) + " is outside the grid of " +
                  std::to_string(d_->grid.size()) + " cores");
  if (n != d_->arg_names.size())
    fail(*d_, "set_runtime_args: core " + std::to_string(core) + " got " + std::to_string(n) +
                  " values for " + std::to_string(d_->arg_names.size()) + " declared runtime args");
  std::copy(values, values + n,
            d_->args.begin() + static_cast<std::ptrdiff_t>(core) * static_cast<std::ptrdiff_t>(n));
  return *this;
}

Program& Program::roles(std::vector<std::string> data_movement, std::string compute) {
  for (auto& r : data_movement)
    if (!is_identifier(r)) fail(*d_, "role '" + r + "' is not a valid C++ identifier");
  if (!is_identifier(compute)) fail(*d_, "role '" + compute + "' is not a valid C++ identifier");
  d_->changed();
  d_->dm_roles = std::move(data_movement);
  d_->compute_role = std::move(compute);
  return *this;
}

namespace {
bool valid_warps(int n) { return n == 1 || n == 2 || n == 4 || n == 8 || n == 16; }
}  // namespace

Program& Program::gpu_compute_warps(int warps) {
  if (!valid_warps(warps))
    fail(*d_,
         "gpu_compute_warps(" + std::to_string(warps) + "): the compute role takes 1, 2, 4, 8 or 16 warps");
  d_->changed();
  d_->compute_warps = warps;
  return *this;
}

int cuda_compute_warps(const Program::Desc& d) {
  return d.compute_warps ? d.compute_warps : settings().tile_compute_warps;
}

int trace_core() { return settings().tile_trace; }

std::string source_position(const std::string& file, int line) {
  std::string at = (file.empty() ? "?" : file) + ":" + std::to_string(line < 0 ? -line : line);
  return line < 0 ? "the end of the scope of the block taken at " + at : at;
}

long long watchdog_ms(long long fallback) {
  const int ms = settings().tile_timeout_ms;
  return ms > 0 ? ms : fallback;
}

int64_t Program::cb_bytes() const { return static_cast<int64_t>(layout_cbs(*d_).total); }

int64_t Program::cb_bytes_limit() {
  return cb_memory_limit(runtime::backend(Device::cpu()).limits().tile_core_bytes);
}

// The program runs where its inputs are: all on one GPU, or else on the CPU (CPU inputs are then
// the only kind allowed; outputs land on the same device). Other devices (ref) run no tile programs.
void Program::run() {
  std::optional<Device> gpu;
  bool cpu_input = false;
  for (auto& t : d_->tensors) {
    if (t.output) continue;
    if (!t.value.defined()) fail(*d_, "run(): input '" + t.name + "' is not bound (released; bind it again)");
    Device dev = t.value.device();
    if (dev.is_cpu()) {
      cpu_input = true;
    } else if (!dev.is_cuda()) {
      fail(*d_, "input '" + t.name + "' is on " + dev.str() +
                    ": a program runs on the CPU or a CUDA GPU (move it with Tensor::to)");
    } else if (gpu && *gpu != dev) {
      fail(*d_, "inputs on " + gpu->str() + " and " + dev.str() + ": a program runs on one device");
    } else {
      gpu = dev;
    }
  }
  if (gpu && cpu_input)
    fail(*d_, "inputs on the CPU and on " + gpu->str() + ": move them to one device (Tensor::to)");
  if (gpu)
    cuda::launch(d_, gpu->index);
  else
    cpu::launch(*d_);
}

Tensor Program::result(const std::string& name) const {
  for (auto& t : d_->tensors)
    if (t.name == name) {
      if (!t.output) fail(*d_, "result('" + name + "'): '" + name + "' is an input");
      if (!t.value.defined())
        fail(*d_,
             "result('" + name + "'): no result (the program has not run since it was declared or released)");
      return t.value;
    }
  fail(*d_, "result('" + name + "'): no output of that name");
}

std::string Program::generated_source() const { return generate_source(*d_); }

std::string Program::generated_cuda_source() const { return cuda::cuda_source(*d_); }

}  // namespace kiln::tile
