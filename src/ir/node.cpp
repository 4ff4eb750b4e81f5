// Hash-consing table and small constructors for IR nodes.
#include "ir/node.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ir/made_ops.h"
#include "ir/simplify.h"
#include "ir/symbolic.h"
#include "kiln/device.h"
#include "kiln/error.h"

namespace kiln {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); i++) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

}  // namespace kiln

namespace kiln::ir {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  v *= 0x9e3779b97f4a7c15ull;
  v ^= v >> 31;
  h ^= v + 0x7f4a7c159e3779b9ull + (h << 6) + (h >> 2);
  return h;
}

uint64_t content_hash(const Node& n) {
  uint64_t h = mix(static_cast<uint64_t>(n.op), static_cast<uint64_t>(n.dtype) + 1);
  h = mix(h, n.shape.size());
  for (auto d : n.shape) h = mix(h, static_cast<uint64_t>(d));
  h = mix(h, n.arg.size());
  for (auto a : n.arg) h = mix(h, static_cast<uint64_t>(a));
  uint64_t fb;
  std::memcpy(&fb, &n.fval, 8);
  h = mix(h, fb);
  for (auto& s : n.src) h = mix(h, s->hash);
  for (auto& s : n.sym) h = mix(h, s ? s->hash : 1);
  if (n.op == Op::CONST) h = mix(h, static_cast<uint64_t>(n.device + 1));
  return h;
}

bool same_content(const Node& a, const Node& b) {
  if (a.op != b.op || a.dtype != b.dtype || a.shape != b.shape || a.arg != b.arg ||
      a.src.size() != b.src.size())
    return false;
  if (std::memcmp(&a.fval, &b.fval, 8) != 0 || a.device != b.device) return false;
  for (size_t i = 0; i < a.src.size(); i++)
    if (a.src[i].get() != b.src[i].get()) return false;
  if (a.sym.size() != b.sym.size()) return false;
  for (size_t i = 0; i < a.sym.size(); i++)
    if (a.sym[i].get() != b.sym[i].get()) return false;
  return true;
}

// The interned nodes by content hash. The entries of nodes gone are dropped in a sweep once they
// could be a third of the table (each keeps its node's memory: make_shared allocates both at once):
// amortized O(1) per node, and no sweeps while a large graph stays alive.
struct Table {
  std::mutex mu;
  std::unordered_multimap<uint64_t, std::weak_ptr<const Node>> map;
  std::atomic<int64_t> dead{0};  // interned nodes destroyed since the last sweep (~Node counts)
};

std::atomic<uint64_t> g_made{0};  // a bit per op (ir/made_ops.h)
static_assert(static_cast<int>(Op::COUNT_) <= 64);

Table& table() {
  static Table* t = new Table();  // never destroyed: nodes may outlive static destructors
  return *t;
}

}  // namespace

std::optional<int64_t> checked_numel(const Shape& s) {
  int64_t n = 1;
  bool empty = false;
  for (int64_t d : s) {
    if (d < 0) return std::nullopt;
    empty |= d == 0;
    if (d && __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return empty ? 0 : n;
}

int64_t Node::numel() const { return *checked_numel(shape); }

namespace {
uint32_t depth_from_sources(const Node& n) {
  uint32_t d = 0;
  for (auto& s : n.src) d = std::max(d, s->depth.load(std::memory_order_relaxed) + 1);
  return d;
}
}  // namespace

Node::~Node() {
  if (interned) table().dead.fetch_add(1, std::memory_order_relaxed);
  // Freeing the last reference to a long chain would recurse once per node and overflow the
  // stack: the outermost ~Node on this thread frees, one by one, the sources of all nodes freed
  // under it.
  thread_local std::vector<NodeRef>* pending = nullptr;
  if (src.empty()) return;
  if (pending) {
    for (auto& s : src) pending->push_back(std::move(s));
    return;
  }
  std::vector<NodeRef> work = std::move(src);
  pending = &work;
  while (!work.empty()) {
    NodeRef n = std::move(work.back());
    work.pop_back();
    n.reset();  // if this was the last reference, its ~Node adds its sources to `work`
  }
  pending = nullptr;
}

void set_buffer(const Node& n, std::shared_ptr<Buffer> b) {
  n.depth.store(b ? 0 : depth_from_sources(n), std::memory_order_relaxed);
  n.buffer = std::move(b);
}

std::string Node::str() const {
  std::ostringstream os;
  os << op_name(op) << " " << dtype_name(dtype);
  if (!shape.empty()) {
    os << " (";
    for (size_t i = 0; i < shape.size(); i++) os << (i ? "," : "") << shape[i];
    os << ")";
  }
  if (op == Op::CONST) {
    if (is_float(dtype))
      os << " " << fval;
    else
      os << " " << ival();
  } else if ((op == Op::REDUCE || op == Op::DEFINE_ACC) && !arg.empty()) {
    os << " " << op_name(static_cast<Op>(arg[0]));
    for (size_t i = 1; i < arg.size(); i++) os << (i == 1 ? " axes " : ",") << arg[i];
  } else if (!arg.empty()) {
    os << " [";
    for (size_t i = 0; i < arg.size(); i++) os << (i ? "," : "") << arg[i];
    os << "]";
  }
  return os.str();
}

namespace {

NodeRef make_on(int8_t device, Op op, DType dtype, Shape shape, std::vector<NodeRef> src,
                std::vector<int64_t> arg, double fval, std::vector<NodeRef> sym = {}) {
  if (!checked_numel(shape)) {
    std::string dims;
    for (int64_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    throw Error(std::string("kiln.") + op_name(op) + ": shape (" + dims +
                ") has a negative dimension or more elements than int64 can count");
  }
  uint64_t bit = uint64_t{1} << static_cast<int>(op);
  if (!(g_made.load(std::memory_order_relaxed) & bit)) g_made.fetch_or(bit, std::memory_order_relaxed);
  auto n = std::make_shared<Node>();
  n->op = op;
  n->dtype = dtype;
  n->shape = std::move(shape);
  n->src = std::move(src);
  n->arg = std::move(arg);
  n->fval = fval;
  n->sym = std::move(sym);
  n->device = op == Op::BUFFER ? static_cast<int8_t>(n->arg.size() > 1 ? n->arg[1] : 0) : device;
  n->hash = content_hash(*n);
  n->depth.store(depth_from_sources(*n), std::memory_order_relaxed);
  for (auto& s : n->src) {
    if (s->device < 0 || s->device == n->device) continue;
    if (n->device >= 0) {
      std::string a, b;
      for (auto& x : n->src)
        if (x->device >= 0) (x->device == n->device ? a : b) = x->str();
      throw Error(std::string("kiln.") + op_name(op) +
                  ": inputs on different devices: " + Device::from_code(n->device).str() + " (" + a +
                  ") and " + Device::from_code(s->device).str() + " (" + b + "); move one with .to(device)");
    }
    n->device = s->device;
  }
  Table& t = table();
  std::vector<NodeRef> others;  // released after the lock: the last reference runs ~Node, which locks
  std::lock_guard<std::mutex> lock(t.mu);
  auto [lo, hi] = t.map.equal_range(n->hash);
  for (auto it = lo; it != hi;) {
    if (NodeRef alive = it->second.lock()) {
      if (same_content(*alive, *n)) return alive;
      others.push_back(std::move(alive));
      ++it;
    } else {
      it = t.map.erase(it);
    }
  }
  t.map.emplace(n->hash, n);
  n->interned = true;
  if (t.dead.load(std::memory_order_relaxed) > static_cast<int64_t>(t.map.size() / 3) + 1024) {
    for (auto it = t.map.begin(); it != t.map.end();)
      it = it->second.expired() ? t.map.erase(it) : std::next(it);
    t.dead.store(0, std::memory_order_relaxed);
  }
  return n;
}

}  // namespace

NodeRef make(Op op, DType dtype, Shape shape, std::vector<NodeRef> src, std::vector<int64_t> arg,
             double fval) {
  std::vector<NodeRef> sym = infer_sym(op, shape, src, arg);
  return make_on(-1, op, dtype, std::move(shape), std::move(src), std::move(arg), fval, std::move(sym));
}

NodeRef make_sym(Op op, DType dtype, Shape shape, std::vector<NodeRef> src, std::vector<int64_t> arg,
                 std::vector<NodeRef> sym, double fval) {
  if (std::none_of(sym.begin(), sym.end(), [](const NodeRef& s) { return s != nullptr; })) sym.clear();
  if (!sym.empty() && sym.size() != shape.size())
    throw Error(std::string("kiln.") + op_name(op) + ": symbolic dims do not match the shape's rank");
  return make_on(-1, op, dtype, std::move(shape), std::move(src), std::move(arg), fval, std::move(sym));
}

NodeRef pinned_const(const NodeRef& c, int8_t device) {
  if (c->op != Op::CONST) throw Error("kiln.pinned_const: " + c->str() + " is not a constant");
  return make_on(device, Op::CONST, c->dtype, c->shape, {}, c->arg, c->fval);
}

bool ever_made(Op op) { return (g_made.load(std::memory_order_relaxed) >> static_cast<int>(op)) & 1; }

size_t live_nodes() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  size_t k = 0;
  for (auto& [h, w] : t.map) k += !w.expired();
  return k;
}

NodeRef const_int(int64_t v, DType t, Shape shape) {
  if (is_float(t)) return const_float(static_cast<double>(v), t, std::move(shape));
  if (t == DType::Bool) v = v != 0;
  return make(Op::CONST, t, std::move(shape), {}, {v});
}

NodeRef const_float(double v, DType t, Shape shape) {
  if (!is_float(t)) {
    int64_t i = std::isfinite(v) && std::fabs(v) < 9.2e18 ? static_cast<int64_t>(v) : 0;
    return const_int(i, t, std::move(shape));
  }
  return make(Op::CONST, t, std::move(shape), {}, {}, v);
}

NodeRef const_like(const NodeRef& like, double v) { return const_float(v, like->dtype, like->shape); }

double const_value(const NodeRef& n) { return is_float(n->dtype) ? n->fval : static_cast<double>(n->ival()); }

bool is_const_value(const NodeRef& n, double v) { return n->op == Op::CONST && const_value(n) == v; }

NodeRef range(int64_t id, int64_t size, bool reduce) {
  return range_of_kind(id, size, reduce ? kReduceRange : kGlobalRange);
}
NodeRef range_of_kind(int64_t id, int64_t size, RangeKind kind) {
  return make(Op::RANGE, DType::I64, {}, {}, {id, size, kind});
}
NodeRef segment_range(int64_t id, int64_t size, int64_t offset) {
  return make(Op::RANGE, DType::I64, {}, {}, {id, size, kSegmentRange, offset});
}
NodeRef symbolic_range(int64_t id, const NodeRef& extent, RangeKind kind) {
  if (extent->op == Op::CONST) return range_of_kind(id, extent->ival(), kind);
  return make(Op::RANGE, DType::I64, {}, {extent}, {id, vmax(extent), kind});
}
NodeRef range_like(const NodeRef& r, int64_t id, RangeKind kind) {
  return is_symbolic_range(*r) ? symbolic_range(id, r->src[0], kind) : range_of_kind(id, r->arg[1], kind);
}

NodeRef alu(Op op, NodeRef a, NodeRef b) {
  DType t = is_comparison(op) ? DType::Bool : a->dtype;
  return make(op, t, {}, {std::move(a), std::move(b)});
}
NodeRef operator+(NodeRef a, NodeRef b) { return alu(Op::ADD, std::move(a), std::move(b)); }
NodeRef operator*(NodeRef a, NodeRef b) { return alu(Op::MUL, std::move(a), std::move(b)); }
NodeRef operator+(NodeRef a, int64_t b) { return alu(Op::ADD, std::move(a), const_int(b)); }
NodeRef operator*(NodeRef a, int64_t b) { return alu(Op::MUL, std::move(a), const_int(b)); }
NodeRef idiv(NodeRef a, int64_t b) { return alu(Op::IDIV, std::move(a), const_int(b)); }
NodeRef mod(NodeRef a, int64_t b) { return alu(Op::MOD, std::move(a), const_int(b)); }
NodeRef lt(NodeRef a, int64_t b) { return alu(Op::CMPLT, std::move(a), const_int(b)); }
NodeRef ge(NodeRef a, int64_t b) {  // a >= b  <=>  !(a < b)  <=>  (a < b) xor true
  return alu(Op::XOR, lt(std::move(a), b), const_int(1, DType::Bool));
}
NodeRef land(NodeRef a, NodeRef b) {
  if (!a) return b;
  if (!b) return a;
  return alu(Op::AND, std::move(a), std::move(b));
}

bool reaches(const NodeRef& n, const Node* target) {
  for (auto& x : toposort({n}))
    if (x.get() == target) return true;
  return false;
}

std::vector<NodeRef> toposort(const std::vector<NodeRef>& roots, bool below_realized) {
  std::vector<NodeRef> order;
  std::unordered_set<const Node*> seen;
  std::vector<std::pair<NodeRef, size_t>> stack;
  for (auto& r : roots) {
    if (!r || seen.count(r.get())) continue;
    stack.push_back({r, 0});
    seen.insert(r.get());
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->src.size() && (below_realized || !n->buffer)) {
        NodeRef s = n->src[i++];
        if (seen.insert(s.get()).second) stack.push_back({s, 0});
      } else {
        order.push_back(n);
        stack.pop_back();
      }
    }
  }
  return order;
}

std::string dump(const std::vector<NodeRef>& roots) {
  auto order = toposort(roots);
  std::unordered_map<const Node*, size_t> id;
  std::ostringstream os;
  for (auto& n : order) {
    id[n.get()] = id.size();
    os << "  %" << id[n.get()] << " = " << n->str();
    for (auto& s : n->src) os << " %" << id[s.get()];
    os << "\n";
  }
  return os.str();
}

}  // namespace kiln::ir
