// Turns a tile Program's declarations into the C++ the compiler sees: a prelude of constant
// handles (CBs, accessors, semaphores, constants) and typed runtime args, the kernel source under
// #line, and the entry point: on the CPU a function that hands the runtime table in and the role
// functions out; on CUDA a __global__ kernel that runs each role on its warps (cuda_device.h).
#include <algorithm>
#include <string>

#include "tile/program_desc.h"

namespace kiln::tile {

namespace {

const char* element_type(DType t) { return t == DType::BF16 ? "kiln::tile::bf16" : "float"; }

std::string in_quotes(const std::string& s) {
  std::string r = "\"";
  for (char c : s) r += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return r + "\"";
}

}  // namespace

std::string generate_source(const Program::Desc& d, Target target) {
  const bool cuda = target == Target::Cuda;
  std::string s = "// kiln tile program '" + d.name + "' (generated)\n";
  s += "#define KILN_TILE_GRID_2D " + std::string(d.grid.is_2d ? "1" : "0") + "\n";
  s += "#define KILN_TILE_GRID_ROWS " + std::to_string(d.grid.rows) + "\n";
  s += "#define KILN_TILE_GRID_COLS " + std::to_string(d.grid.cols) + "\n";
  if (cuda) {
    s += "#define KILN_TILE_CUDA 1\n";
    s += "#define KILN_TILE_COMPUTE_WARPS " + std::to_string(cuda_compute_warps(d)) + "\n";
    s += "#define KILN_TILE_DM_ROLES " + std::to_string(d.dm_roles.size()) + "\n";
    if (int core = trace_core(); core >= 0)
      s += "#define KILN_TILE_TRACE_CORE " + std::to_string(core) + "\n";
    // the CB layout as constants (cuda_cb_layout.h: cb_layout)
    const CBLayout l = layout_cbs(d);
    s += "#define KILN_TILE_NCBS " + std::to_string(d.cbs.size()) + "\n#define KILN_TILE_CB_LAYOUT(X)";
    // id, ring offset, block bytes, slots, barrier offset, rows, cols, box shape, tile rows
    for (size_t i = 0; i < d.cbs.size(); i++)
      s += " X(" + std::to_string(i) + ", " + std::to_string(l.cbs[i].data_offset) + "u, " +
           std::to_string(l.cbs[i].block_bytes) + "u, " + std::to_string(d.cbs[i].buffer_factor) + "u, " +
           std::to_string(l.cbs[i].barrier_offset) + "u, " + std::to_string(d.cbs[i].rows) + ", " +
           std::to_string(d.cbs[i].cols) + ", " + std::to_string(l.cbs[i].shape) + ", " +
           std::to_string(d.cbs[i].tile_rows) + ")";
    s += "\n";
  }
  s += "#include <kiln/tile/kernel.h>\nusing namespace kiln::tile;\n";
  // handles are objects kernels call members on: device code may only name device variables
  const std::string handle = cuda ? "__device__ const " : "constexpr ";
  for (auto& [name, v] : d.constants)
    s += "constexpr long long " + name + " = " + std::to_string(v) + "LL;\n";
  for (size_t i = 0; i < d.tensors.size(); i++) {
    auto& t = d.tensors[i];
    s += handle + "Accessor<" + std::string(element_type(t.dtype)) +
         ", Indexing::" + (t.indexing == Indexing::Tiles ? "Tiles" : "Elements") + ", " + std::to_string(i) +
         "> " + t.name + "{};\n";
  }
  for (size_t i = 0; i < d.cbs.size(); i++) {
    auto& c = d.cbs[i];
    s += handle + "CB<" + std::string(element_type(c.dtype)) + ", " + std::to_string(c.rows) + ", " +
         std::to_string(c.cols) + ", " + std::to_string(i) + ", " + std::to_string(c.tile_rows) + "> " +
         c.name + "{};\n";
  }
  for (size_t i = 0; i < d.semaphores.size(); i++)
    s += handle + "Semaphore<" + std::to_string(i) + "> " + d.semaphores[i] + "{};\n";
  // runtime args: one long long each, in declaration order (the backend passes an array)
  s += "struct KilnArgs {\n";
  for (auto& a : d.arg_names) s += "  long long " + a + ";\n";
  s += "};\nstatic const KilnArgs& args() { return *reinterpret_cast<const KilnArgs*>(";
  s += cuda ? "kiln::tile::cuda::args()" : "kiln::tile::detail::rt->args()";
  s += "); }\n";
  // on CUDA the roles are inlined into the kernel: called, a role keeps its values within the call
  // ABI's registers (the layernorm backward's compute spilled at 64 registers; inlined it takes 96
  // and spills nothing)
  if (cuda) {
    for (auto& r : d.dm_roles) s += "__forceinline__ void " + r + "();\n";
    s += "__forceinline__ void " + d.compute_role + "();\n";
  }
  s += "#line 1 " + in_quotes(d.file) + "\n" + d.source + "\n";
  s += "#line 1 \"<kiln tile entry>\"\n";
  if (cuda) {
    // as many cores per multiprocessor as their shared memory lets share one, so ptxas spends
    // the registers that leaves (by default it aims at more blocks and spills)
    const int64_t per_core =
        static_cast<int64_t>(layout_cbs(d).total) + kStaticSharedReserve + kSharedKeptPerBlock;
    const int64_t cores_per_sm = std::clamp<int64_t>(kSharedPerSM / per_core, 1, 2048 / cuda_threads(d));
    s += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(cuda_threads(d)) + ", " +
         std::to_string(cores_per_sm) + ") " + std::string(kCudaEntry) +
         "(const __grid_constant__ kiln::tile::cuda_abi::Params params, "
         "const __grid_constant__ kiln::tile::cuda_abi::TensorMaps maps) {\n";
    s += "  kiln::tile::cuda::block_start(params, &maps);\n";
    // each role's branch tells the compiler which threads run it, so the runtime's role tests
    // (is_compute) fold away inside the inlined role
    s += "  const int role = kiln::tile::cuda::role();\n";
    for (size_t r = 0; r < d.dm_roles.size(); r++)
      s += "  if (role == " + std::to_string(r) +
           ") { __builtin_assume(threadIdx.x / 32 == KILN_TILE_COMPUTE_WARPS + " + std::to_string(r) + "); " +
           d.dm_roles[r] + "(); }\n";
    s += "  if (role == " + std::to_string(d.dm_roles.size()) +
         ") { __builtin_assume(threadIdx.x < kiln::tile::cuda::kComputeThreads); " + d.compute_role +
         "(); }\n";
    s += "  kiln::tile::cuda::role_end();\n}\n";
    return s;
  }
  s += "extern \"C\" int kiln_tile_entry(const kiln::tile::abi::Runtime* rt, kiln::tile::abi::RoleFn* roles) "
       "{\n";
  s += "  kiln::tile::detail::rt = rt;\n";
  int n = 0;
  for (auto& r : d.dm_roles) s += "  roles[" + std::to_string(n++) + "] = &" + r + ";\n";
  s += "  roles[" + std::to_string(n++) + "] = &" + d.compute_role + ";\n";
  s += "  return " + std::to_string(n) + ";\n}\n";
  return s;
}

}  // namespace kiln::tile
