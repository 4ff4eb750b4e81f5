// The compiler viewer (KILN_VIZ): the page's embedded data holds each realize's graphs, kernels,
// fusion reasons and times; nothing is written when it is off.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <unistd.h>

#include <filesystem>

#include "io/json.h"
#include "ir/graph_rewrite.h"
#include "runtime/file_util.h"
#include "schedule/schedule.h"

using namespace kiln;
namespace json = kiln::io::json;

namespace {

// Turns the viewer on, writing to a fresh file, for one test.
struct VizOn {
  std::string path;
  Settings saved = settings();
  VizOn() {
    path = (std::filesystem::temp_directory_path() / ("kiln_viz_test_" + std::to_string(getpid()) + ".html"))
               .string();
    std::filesystem::remove(path);
    settings().viz = "1";
    settings().viz_out = path;
  }
  ~VizOn() {
    settings() = saved;
    std::filesystem::remove(path);
  }
  // The realizes recorded so far in the page (the data of all realizes of this process).
  json::Value realizes() const {
    auto html = runtime::read_file(path);
    EXPECT_TRUE(html) << path;
    if (!html) return {};
    std::string open = "<script id=\"data\" type=\"application/json\">";
    size_t a = html->find(open), b = html->find("</script>", a);
    EXPECT_NE(a, std::string::npos);
    json::Value v = json::parse(html->substr(a + open.size(), b - a - open.size()));
    return *v.find("realizes");
  }
};

std::string text(const json::Value* v) { return v ? v->text : "(missing)"; }

}  // namespace

TEST(Viz, PageHoldsGraphsKernelsFusionReasonsAndTimes) {
  VizOn viz;
  Tensor x = randn({64, 48}).realize();
  // the row sums are broadcast into a sum over rows: fusing them would recompute each per element
  Tensor y = ((x * 1.0f) - x.sum(1, true)).exp().sum(0);
  y.realize();
  json::Value rs = viz.realizes();
  ASSERT_GE(rs.items.size(), 1u);
  const json::Value& r = rs.items.back();
  const auto& kernels = r.find("kernels")->items;
  const auto& nodes = r.find("nodes")->items;
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(text(&kernels[0].find("why")->items.at(0)).rfind("a reduce", 0), 0u)
      << text(&kernels[0].find("why")->items.at(0));
  EXPECT_EQ(text(&kernels[1].find("why")->items.at(0)), "a root of the realize");
  for (const auto& k : kernels) {
    EXPECT_EQ(text(k.find("name")).rfind("r_", 0), 0u);
    EXPECT_NE(text(k.find("ast")).find("STORE"), std::string::npos);
    EXPECT_NE(text(k.find("program")).find("DEFINE_GLOBAL"), std::string::npos);
    EXPECT_NE(text(k.find("source")).find(text(k.find("symbol"))), std::string::npos);
  }
  for (const auto& t : r.find("times")->items) {
    ASSERT_EQ(t.kind, json::Value::Kind::Object);
    EXPECT_GE(std::stod(t.find("ms")->text), 0.0);
  }
  // x*1 is in the graph before the rewrites only (exp's own MUL is in both); the EXP2 is fused
  // into the second kernel
  bool mul_only_before = false, exp_in_k1 = false;
  for (const auto& n : nodes) {
    int in = std::stoi(n.find("in")->text);
    mul_only_before |= text(n.find("op")) == "MUL" && in == 1;
    if (text(n.find("op")) == "EXP2" && in & 2)
      for (const auto& k : n.find("kernels")->items) exp_in_k1 |= k.text == "1";
  }
  EXPECT_TRUE(mul_only_before);
  EXPECT_TRUE(exp_in_k1);
  // the second kernel reads the first one's output
  std::string out0 = kernels[0].find("outputs")->items.at(0).text;
  bool reads = false;
  for (const auto& i : kernels[1].find("inputs")->items) reads |= i.text == out0;
  EXPECT_TRUE(reads);
}

TEST(Viz, ARealizeOfTheSameKernelsIsStoredAsARepeat) {
  VizOn viz;
  Tensor x = randn({32, 32}).realize();
  (x + 3.0f).realize();
  (x + 3.0f).realize();
  json::Value rs = viz.realizes();
  ASSERT_GE(rs.items.size(), 2u);
  const json::Value& last = rs.items.back();
  ASSERT_NE(last.find("repeat_of"), nullptr);
  EXPECT_EQ(last.find("kernels"), nullptr);
  EXPECT_EQ(last.find("times")->items.size(), 1u);
}

TEST(Viz, OffWritesNothing) {
  std::string path = (std::filesystem::temp_directory_path() / "kiln_viz_off_test.html").string();
  std::filesystem::remove(path);
  Settings saved = settings();
  settings().viz = "";
  settings().viz_out = path;
  Tensor x = randn({16, 16});
  (x.exp() + 1.0f).realize();
  settings() = saved;
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Viz, SchedulesExplainOnlyWhenAsked) {
  Tensor x = randn({16, 16}).realize();
  Tensor y = x - x.max(1, true);
  auto plain = schedule::make_schedule(ir::rewrite_graph({y.node()}));
  auto told = schedule::make_schedule(ir::rewrite_graph({y.node()}), {.explain = true});
  ASSERT_EQ(plain.kernels.size(), told.kernels.size());
  for (auto& k : plain.kernels) EXPECT_TRUE(k.why.empty());
  for (auto& k : told.kernels) EXPECT_EQ(k.why.size(), k.outputs.size());
}

TEST(Viz, AnUnwritablePathIsAnErrorNamingIt) {
  VizOn viz;
  settings().viz_out = "/nonexistent-dir/kiln_viz.html";
  Tensor x = randn({8});
  try {
    (x * 5.0f).realize();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KILN_VIZ_OUT"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/kiln_viz.html"), std::string::npos) << e.what();
  }
}
