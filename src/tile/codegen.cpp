// Turns a tile Program's declarations into the C++ the compiler sees: a prelude of constexpr
// handles (CBs, accessors, semaphores, constants) and typed runtime args, the kernel source under
// #line, and the entry point that hands the runtime table in and the role functions out.
#include <string>

#include "tile/program_desc.h"

namespace kiln::tile {

namespace {

const char* element_type(DType t) { return t == DType::BF16 ? "kiln::tile::bf16" : "float"; }

std::string quoted(const std::string& s) {
  std::string r = "\"";
  for (char c : s) r += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return r + "\"";
}

}  // namespace

std::string generate_source(const Program::Desc& d) {
  std::string s = "// kiln tile program '" + d.name + "' (generated)\n";
  s += "#define KILN_TILE_GRID_2D " + std::string(d.grid.is_2d ? "1" : "0") + "\n";
  s += "#define KILN_TILE_GRID_ROWS " + std::to_string(d.grid.rows) + "\n";
  s += "#define KILN_TILE_GRID_COLS " + std::to_string(d.grid.cols) + "\n";
  s += "#include <kiln/tile/kernel.h>\nusing namespace kiln::tile;\n";
  for (auto& [name, v] : d.constants)
    s += "constexpr long long " + name + " = " + std::to_string(v) + "LL;\n";
  for (size_t i = 0; i < d.tensors.size(); i++) {
    auto& t = d.tensors[i];
    s += "constexpr Accessor<" + std::string(element_type(t.dtype)) +
         ", Indexing::" + (t.indexing == Indexing::Tiles ? "Tiles" : "Elements") + "> " + t.name + "{" +
         std::to_string(i) + "};\n";
  }
  for (size_t i = 0; i < d.cbs.size(); i++) {
    auto& c = d.cbs[i];
    s += "constexpr CB<" + std::string(element_type(c.dtype)) + ", " + std::to_string(c.rows) + ", " +
         std::to_string(c.cols) + "> " + c.name + "{" + std::to_string(i) + "};\n";
  }
  for (size_t i = 0; i < d.semaphores.size(); i++)
    s += "constexpr Semaphore " + d.semaphores[i] + "{" + std::to_string(i) + "};\n";
  // runtime args: one long long each, in declaration order (the backend passes an array)
  s += "struct KilnArgs {\n";
  for (auto& a : d.arg_names) s += "  long long " + a + ";\n";
  s += "};\nstatic const KilnArgs& args() { return *reinterpret_cast<const "
       "KilnArgs*>(kiln::tile::detail::rt->args()); "
       "}\n";
  s += "#line 1 " + quoted(d.file) + "\n" + d.source + "\n";
  s += "#line 1 \"<kiln tile entry>\"\n";
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
