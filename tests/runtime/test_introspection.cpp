// KILN_DEBUG levels and KILN_VALIDATE: what a user sees, and that validation catches a bad kernel.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

using namespace kiln;

namespace {
std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
  pclose(f);
  return out;
}
size_t count(const std::string& s, const std::string& what) {
  size_t c = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) c++;
  return c;
}
}  // namespace

TEST(Introspection, DotProductAtDebug5ShowsAstProgramSourceAndResult) {
  std::string out = run("KILN_DEBUG=5 KILN_NOOPT=1 " KILN_BINARY_DIR "/examples/dot_product");
  auto ast = out.substr(out.find("AST:"), out.find("linear program:") - out.find("AST:"));
  // the AST: a store of a sum (REDUCE ADD) of a product of two loads
  EXPECT_EQ(count(ast, "LOAD"), 2u) << ast;
  EXPECT_NE(ast.find("MUL"), std::string::npos);
  EXPECT_NE(ast.find("REDUCE f32 ADD"), std::string::npos);
  EXPECT_NE(ast.find("STORE"), std::string::npos);
  auto prog = out.substr(out.find("linear program:"), out.find("source:") - out.find("linear program:"));
  EXPECT_EQ(count(prog, "DEFINE_GLOBAL"), 3u) << prog;
  for (const char* op : {"DEFINE_ACC", "CONST", "RANGE", "MUL", "ADD", "ENDRANGE", "STORE"})
    EXPECT_NE(prog.find(op), std::string::npos) << op << "\n" << prog;
  EXPECT_EQ(count(prog, "LOAD"), 2u);
  EXPECT_LT(prog.find("RANGE"), prog.find("LOAD"));
  EXPECT_LT(prog.find("ENDRANGE"), prog.find("STORE"));
  EXPECT_NE(out.find("void r_2_"), std::string::npos) << "C source missing";
  EXPECT_NE(out.find("for (int64_t ridx0 = 0; ridx0 < 2; ridx0++)"), std::string::npos);
  EXPECT_NE(out.find("\n11\n"), std::string::npos);
}

TEST(Introspection, DebugLevelsOneToSix) {
  std::string cmd = KILN_BINARY_DIR "/examples/dot_product";
  EXPECT_NE(run("KILN_DEBUG=1 " + cmd).find("kiln: scheduled 1 kernels"), std::string::npos);
  EXPECT_TRUE(std::regex_search(run("KILN_DEBUG=2 " + cmd),
                                std::regex("r_2 +[0-9.]+ ms +[0-9.]+ GB/s +[0-9.]+ GFLOP/s")));
  EXPECT_NE(run("KILN_DEBUG=3 " + cmd).find("opts:"), std::string::npos);
  EXPECT_NE(run("KILN_DEBUG=4 " + cmd).find("acc"), std::string::npos);
  EXPECT_NE(run("KILN_DEBUG=6 " + cmd).find("graph after fold_constants"), std::string::npos);
  EXPECT_EQ(run("KILN_DEBUG=0 " + cmd), "11\n");
}

TEST(Introspection, ValidatePassesOnCorrectKernels) {
  Settings saved = settings();
  settings().validate = true;
  Tensor x = arange(0.0, 24.0).reshape({2, 3, 4});
  EXPECT_NO_THROW(realize({x.softmax(2), x.permute({2, 0, 1}).sum(0), (x.exp() * 2).max(1)}));
  settings() = saved;
}

TEST(Introspection, ValidateReportsTheFirstMismatchWithTheKernelName) {
  // a "compiler" that miscompiles sqrtf: validation must catch the wrong kernel
  Settings saved = settings();
  auto dir = std::filesystem::temp_directory_path() / ("kiln_badexp_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string cc = (dir / "cc").string();
  std::string header = (dir / "bad.h").string();
  {
    std::ofstream h(header);
    h << "#include <math.h>\n#define sqrtf(x) (__builtin_sqrtf(x) + 1.0f)\n";
    std::ofstream f(cc);
    f << "#!/bin/sh\nexec cc \"$@\" -include " << header << "\n";
  }
  std::filesystem::permissions(cc, std::filesystem::perms::owner_all);
  settings().cc = cc;
  settings().cache_dir = (dir / "cache").string();
  settings().validate = true;
  clear_memory_cache();
  try {
    (arange(0.0, 6.0).reshape({2, 3}) * 0.5).sqrt().realize();
    ADD_FAILURE() << "validation did not catch the miscompiled kernel";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("kiln.validate: kernel E_"), std::string::npos) << msg;
    EXPECT_NE(msg.find("element 0: got 1, expected 0"), std::string::npos) << msg;
  }
  settings() = saved;
  clear_memory_cache();
  std::filesystem::remove_all(dir);
}
