// kiln_fuzz's op graphs: building them into kiln tensors and writing them out as C++ repro programs.
#include "graph.h"

#include <cstdio>
#include <sstream>

namespace kiln::fuzz {

namespace {

std::string list(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t k = 0; k < v.size(); k++) s += (k ? ", " : "") + std::to_string(v[k]);
  return s + "}";
}

std::string name(int i) { return "t" + std::to_string(i); }

std::string values_code(const std::vector<double>& v, DType t) {
  std::string s = "{";
  for (size_t k = 0; k < v.size(); k++) {
    s += (k ? ", " : "") + format_value(v[k], t);
    if (k % 8 == 7 && k + 1 < v.size()) s += "\n      ";
  }
  return s + "}";
}

// tensor() makes 1-d tensors from an empty shape: a 0-d one is reshaped
std::string tensor_code(const std::vector<double>& v, DType t, const Shape& shape) {
  const char* elem = t == DType::F64 ? "double" : "float";
  return std::string("tensor(std::vector<") + elem + ">" + values_code(v, t) + ", " +
         (shape.empty() ? "{1}).reshape({})" : list(shape) + ")");
}

}  // namespace

std::string format_value(double v, DType t) {
  char buf[40];
  std::snprintf(buf, sizeof buf, t == DType::F64 ? "%.17g" : "%.9g", v);
  std::string s = buf;
  if (s == "inf" || s == "-inf" || s == "nan")
    return s[0] == '-' ? "-INFINITY" : s == "inf" ? "INFINITY" : "NAN";
  return s;
}

const char* dtype_code(DType t) {
  switch (t) {
    case DType::Bool: return "DType::Bool";
    case DType::U8: return "DType::U8";
    case DType::I8: return "DType::I8";
    case DType::I16: return "DType::I16";
    case DType::I32: return "DType::I32";
    case DType::I64: return "DType::I64";
    case DType::U32: return "DType::U32";
    case DType::U64: return "DType::U64";
    case DType::F16: return "DType::F16";
    case DType::BF16: return "DType::BF16";
    case DType::F32: return "DType::F32";
    case DType::F64: return "DType::F64";
  }
  return "?";
}

std::vector<int> input_ids(const Graph& g) {
  std::vector<int> ids;
  for (size_t i = 0; i < g.nodes.size(); i++)
    if (g.nodes[i].op == Op::Input) ids.push_back(static_cast<int>(i));
  return ids;
}

Tensor make_input(const Node& n, bool as_f64) {
  Shape flat = {static_cast<int64_t>(n.values.size())};
  if (as_f64 || n.dtype == DType::F64) return tensor(n.values, flat).reshape(n.ints);
  return tensor(std::vector<float>(n.values.begin(), n.values.end()), flat).reshape(n.ints);
}

Tensor apply_node(const Node& n, const std::vector<Tensor>& a, bool as_f64) {
  switch (n.op) {
    case Op::Input: return make_input(n, as_f64);
    case Op::Neg: return a[0].neg();
    case Op::Exp: return a[0].exp();
    case Op::Log: return a[0].log();
    case Op::Sqrt: return a[0].sqrt();
    case Op::Tanh: return a[0].tanh();
    case Op::Sigmoid: return a[0].sigmoid();
    case Op::Relu: return a[0].relu();
    case Op::Abs: return a[0].abs();
    case Op::AddScalar: return a[0] + n.scalar;
    case Op::MulScalar: return a[0] * n.scalar;
    case Op::Add: return a[0] + a[1];
    case Op::Sub: return a[0] - a[1];
    case Op::Mul: return a[0] * a[1];
    case Op::Div: return a[0] / a[1];
    case Op::Maximum: return a[0].maximum(a[1]);
    case Op::Minimum: return a[0].minimum(a[1]);
    case Op::Less: return a[0] < a[1];
    case Op::Greater: return a[0] > a[1];
    case Op::Equal: return a[0] == a[1];
    case Op::Where: return where(a[0], a[1], a[2]);
    case Op::Sum: return a[0].sum(n.ints, n.keepdim);
    case Op::Max: return a[0].max(n.ints, n.keepdim);
    case Op::Mean: return a[0].mean(n.ints, n.keepdim);
    case Op::Reshape: return a[0].reshape(n.ints);
    case Op::Permute: return a[0].permute(n.ints);
    case Op::Pad: return a[0].pad(n.ints, n.scalar);
    case Op::Flip: return a[0].flip(n.ints);
    case Op::Slice: return a[0].slice(n.ints[0], n.ints[1], n.ints[2], n.ints[3]);
    case Op::Cat: return cat({a[0], a[1]}, n.ints[0]);
    case Op::Expand: return a[0].expand(n.ints);
    case Op::Matmul: return a[0].matmul(a[1]);
    case Op::Cast: return a[0].to(as_f64 && is_float(n.dtype) ? DType::F64 : n.dtype);
  }
  return {};
}

std::vector<Tensor> build(const Graph& g, const std::vector<Tensor>& leaves, bool as_f64) {
  std::vector<Tensor> t;
  size_t next_leaf = 0;
  for (const Node& n : g.nodes) {
    if (n.op == Op::Input) {
      t.push_back(leaves.at(next_leaf++));
      continue;
    }
    std::vector<Tensor> args;
    for (int k : n.args) args.push_back(t[k]);
    t.push_back(apply_node(n, args, as_f64));
  }
  return t;
}

Tensor loss_of(const Graph& g, const std::vector<Tensor>& nodes, bool as_f64) {
  const Tensor& out = nodes[g.outputs[0]];
  Tensor w = tensor(g.weights, {static_cast<int64_t>(g.weights.size())}).reshape(out.shape());
  return (out * w.to(as_f64 ? DType::F64 : out.dtype())).sum();
}

std::string node_code(const Graph& g, int i) {
  const Node& n = g.nodes[i];
  auto a = [&](int k) { return name(n.args[k]); };
  auto un = [&](const char* f) { return a(0) + "." + f + "()"; };
  auto bin = [&](const char* o) { return "(" + a(0) + " " + o + " " + a(1) + ")"; };
  auto reduce = [&](const char* f) {
    return a(0) + "." + f + "(std::vector<int64_t>" + list(n.ints) + ", " + (n.keepdim ? "true" : "false") +
           ")";
  };
  switch (n.op) {
    case Op::Input: return "";
    case Op::Neg: return un("neg");
    case Op::Exp: return un("exp");
    case Op::Log: return un("log");
    case Op::Sqrt: return un("sqrt");
    case Op::Tanh: return un("tanh");
    case Op::Sigmoid: return un("sigmoid");
    case Op::Relu: return un("relu");
    case Op::Abs: return un("abs");
    case Op::AddScalar: return "(" + a(0) + " + " + format_value(n.scalar, DType::F64) + ")";
    case Op::MulScalar: return "(" + a(0) + " * " + format_value(n.scalar, DType::F64) + ")";
    case Op::Add: return bin("+");
    case Op::Sub: return bin("-");
    case Op::Mul: return bin("*");
    case Op::Div: return bin("/");
    case Op::Maximum: return a(0) + ".maximum(" + a(1) + ")";
    case Op::Minimum: return a(0) + ".minimum(" + a(1) + ")";
    case Op::Less: return bin("<");
    case Op::Greater: return bin(">");
    case Op::Equal: return bin("==");
    case Op::Where: return "where(" + a(0) + ", " + a(1) + ", " + a(2) + ")";
    case Op::Sum: return reduce("sum");
    case Op::Max: return reduce("max");
    case Op::Mean: return reduce("mean");
    case Op::Reshape: return a(0) + ".reshape(" + list(n.ints) + ")";
    case Op::Permute: return a(0) + ".permute(" + list(n.ints) + ")";
    case Op::Pad: return a(0) + ".pad(" + list(n.ints) + ", " + format_value(n.scalar, DType::F64) + ")";
    case Op::Flip: return a(0) + ".flip(" + list(n.ints) + ")";
    case Op::Slice:
      return a(0) + ".slice(" + std::to_string(n.ints[0]) + ", " + std::to_string(n.ints[1]) + ", " +
             std::to_string(n.ints[2]) + ", " + std::to_string(n.ints[3]) + ")";
    case Op::Cat: return "cat({" + a(0) + ", " + a(1) + "}, " + std::to_string(n.ints[0]) + ")";
    case Op::Expand: return a(0) + ".expand(" + list(n.ints) + ")";
    case Op::Matmul: return a(0) + ".matmul(" + a(1) + ")";
    case Op::Cast: return a(0) + ".to(" + dtype_code(n.dtype) + ")";
  }
  return "";
}

std::string repro_program(const Graph& g, uint64_t seed, const std::vector<Expected>& forward,
                          const std::vector<Expected>& gradients) {
  std::ostringstream os;
  os << "// kiln_fuzz seed " << seed << ": builds the graph, realizes it and compares with the float64\n"
     << "// reference values; exits 1 on a mismatch.\n"
     << "#include <kiln/kiln.h>\n\n#include <cmath>\n#include <cstdio>\n#include <vector>\n\n"
     << "using namespace kiln;\n\n"
     << "static bool check(const char* what, const Tensor& t, const std::vector<double>& want,\n"
     << "                  const std::vector<double>& tol) {\n"
     << "  std::vector<double> got = t.to_vector<double>();\n"
     << "  double worst = 0;\n"
     << "  size_t at = 0, bad = 0;\n"
     << "  for (size_t k = 0; k < want.size(); k++) {\n"
     << "    double e = std::isnan(want[k]) ? (std::isnan(got[k]) ? 0 : INFINITY) : std::fabs(got[k] - "
        "want[k]);\n"
     << "    if (e > tol[k]) bad++;\n"
     << "    if (e > worst || std::isnan(e)) worst = e, at = k;\n"
     << "  }\n"
     << "  std::printf(\"%s: %zu of %zu elements differ, max error %.3g at [%zu] (got %.9g, want %.9g)\\n\", "
        "what,\n"
     << "              bad, want.size(), worst, at, got[at], want[at]);\n"
     << "  return bad == 0;\n"
     << "}\n\n"
     << "int main() {\n";
  for (size_t i = 0; i < g.nodes.size(); i++) {
    const Node& n = g.nodes[i];
    if (n.op == Op::Input)
      os << "  Tensor " << name(static_cast<int>(i)) << " = " << tensor_code(n.values, n.dtype, n.ints)
         << ";\n";
    else
      os << "  Tensor " << name(static_cast<int>(i)) << " = " << node_code(g, static_cast<int>(i)) << ";\n";
  }
  os << "  bool ok = true;\n";
  if (!gradients.empty()) {
    std::string leaves;
    for (int id : input_ids(g)) leaves += (leaves.empty() ? "" : ", ") + name(id);
    os << "  Tensor w = " << tensor_code(g.weights, DType::F64, {static_cast<int64_t>(g.weights.size())})
       << ".reshape(" << name(g.outputs[0]) << ".shape()).to(" << name(g.outputs[0]) << ".dtype());\n"
       << "  std::vector<Tensor> g = grad({(" << name(g.outputs[0]) << " * w).sum()}, {" << leaves << "});\n";
  }
  std::string outs;
  for (int o : g.outputs) outs += (outs.empty() ? "" : ", ") + name(o);
  os << "  realize({" << outs << "});\n";
  for (const Expected& e : forward)
    os << "  ok &= check(\"" << name(e.node) << "\", " << name(e.node) << ",\n      "
       << values_code(e.values, DType::F64) << ",\n      " << values_code(e.tol, DType::F32) << ");\n";
  for (size_t k = 0; k < gradients.size(); k++) {
    const Expected& e = gradients[k];
    os << "  ok &= check(\"gradient of " << name(e.node) << "\", g[" << k << "],\n      "
       << values_code(e.values, DType::F64) << ",\n      " << values_code(e.tol, DType::F32) << ");\n";
  }
  os << "  return ok ? 0 : 1;\n}\n";
  return os.str();
}

}  // namespace kiln::fuzz
