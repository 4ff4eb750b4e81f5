// RNN/GRU/LSTM cells and their multi-layer sequence versions; one step function per cell type is
// shared by the cell module and the loop over time.
#include "kiln/nn/rnn.h"

#include <cmath>

#include "kiln/functional.h"
#include "kiln/nn/init.h"
#include "nn/util.h"

namespace kiln::nn {

namespace {

Tensor affine(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor y = x.matmul(w.t());
  return b.defined() ? y + b : y;
}

// one step from the input projection xw = x W_ih^T + b_ih (B, gates * H)
Tensor rnn_step(const Tensor& xw, const Tensor& h, const Tensor& w_hh, const Tensor& b_hh, bool relu) {
  Tensor a = xw + affine(h, w_hh, b_hh);
  return relu ? a.relu() : a.tanh();
}

Tensor gru_step(const Tensor& xw, const Tensor& h, const Tensor& w_hh, const Tensor& b_hh) {
  auto x = xw.chunk(3, -1), g = affine(h, w_hh, b_hh).chunk(3, -1);
  Tensor r = (x[0] + g[0]).sigmoid(), z = (x[1] + g[1]).sigmoid();
  Tensor n = (x[2] + r * g[2]).tanh();
  return (1.0 - z) * n + z * h;
}

std::pair<Tensor, Tensor> lstm_step(const Tensor& xw, const Tensor& h, const Tensor& c, const Tensor& w_hh,
                                    const Tensor& b_hh) {
  auto g = (xw + affine(h, w_hh, b_hh)).chunk(4, -1);
  Tensor i = g[0].sigmoid(), f = g[1].sigmoid(), gg = g[2].tanh(), o = g[3].sigmoid();
  Tensor c2 = f * c + i * gg;
  return {o * c2.tanh(), c2};
}

Tensor& param(Module& m, const std::string& name, Shape s, int64_t hidden, bool on = true) {
  return m.register_parameter(name, on ? init::fan_in_uniform(std::move(s), hidden) : Tensor());
}

void check_cell_input(const char* module, const Tensor& x, int64_t in) {
  detail::need_float(module, x);
  if (x.dim() != 2 || x.size(1) != in)
    module_error(module,
                 "expected input of shape (B, " + std::to_string(in) + "), got " + shape_str(x.shape()));
}
Tensor cell_state(const char* module, const char* what, const Tensor& x, const std::optional<Tensor>& h,
                  int64_t hidden) {
  if (!h) return zeros({x.size(0), hidden}, {.dtype = x.dtype()});
  if (h->shape() != Shape{x.size(0), hidden})
    module_error(module, std::string("expected ") + what + " of shape (" + std::to_string(x.size(0)) + ", " +
                             std::to_string(hidden) + "), got " + shape_str(h->shape()));
  return *h;
}

}  // namespace

// --- cells ---

RNNCellImpl::RNNCellImpl(int64_t in, int64_t hidden, bool bias, const std::string& nonlinearity)
    : input_size(detail::positive("RNNCell", "input_size", in)),
      hidden_size(detail::positive("RNNCell", "hidden_size", hidden)),
      relu(nonlinearity == "relu"),
      weight_ih(param(*this, "weight_ih", {hidden, in}, hidden)),
      weight_hh(param(*this, "weight_hh", {hidden, hidden}, hidden)),
      bias_ih(param(*this, "bias_ih", {hidden}, hidden, bias)),
      bias_hh(param(*this, "bias_hh", {hidden}, hidden, bias)) {
  if (nonlinearity != "tanh" && nonlinearity != "relu")
    module_error("RNNCell", "nonlinearity must be \"tanh\" or \"relu\", got \"" + nonlinearity + "\"");
}

Tensor RNNCellImpl::forward(const Tensor& x, const std::optional<Tensor>& h) const {
  check_cell_input("RNNCell", x, input_size);
  Tensor h0 = cell_state("RNNCell", "hidden state", x, h, hidden_size);
  return rnn_step(affine(x, weight_ih, bias_ih), h0, weight_hh, bias_hh, relu);
}

GRUCellImpl::GRUCellImpl(int64_t in, int64_t hidden, bool bias)
    : input_size(detail::positive("GRUCell", "input_size", in)),
      hidden_size(detail::positive("GRUCell", "hidden_size", hidden)),
      weight_ih(param(*this, "weight_ih", {3 * hidden, in}, hidden)),
      weight_hh(param(*this, "weight_hh", {3 * hidden, hidden}, hidden)),
      bias_ih(param(*this, "bias_ih", {3 * hidden}, hidden, bias)),
      bias_hh(param(*this, "bias_hh", {3 * hidden}, hidden, bias)) {}

Tensor GRUCellImpl::forward(const Tensor& x, const std::optional<Tensor>& h) const {
  check_cell_input("GRUCell", x, input_size);
  Tensor h0 = cell_state("GRUCell", "hidden state", x, h, hidden_size);
  return gru_step(affine(x, weight_ih, bias_ih), h0, weight_hh, bias_hh);
}

LSTMCellImpl::LSTMCellImpl(int64_t in, int64_t hidden, bool bias)
    : input_size(detail::positive("LSTMCell", "input_size", in)),
      hidden_size(detail::positive("LSTMCell", "hidden_size", hidden)),
      weight_ih(param(*this, "weight_ih", {4 * hidden, in}, hidden)),
      weight_hh(param(*this, "weight_hh", {4 * hidden, hidden}, hidden)),
      bias_ih(param(*this, "bias_ih", {4 * hidden}, hidden, bias)),
      bias_hh(param(*this, "bias_hh", {4 * hidden}, hidden, bias)) {}

std::pair<Tensor, Tensor> LSTMCellImpl::forward(const Tensor& x,
                                                const std::optional<std::pair<Tensor, Tensor>>& hc) const {
  check_cell_input("LSTMCell", x, input_size);
  Tensor h0 = cell_state("LSTMCell", "hidden state", x, hc ? std::optional<Tensor>(hc->first) : std::nullopt,
                         hidden_size);
  Tensor c0 = cell_state("LSTMCell", "cell state", x, hc ? std::optional<Tensor>(hc->second) : std::nullopt,
                         hidden_size);
  return lstm_step(affine(x, weight_ih, bias_ih), h0, c0, weight_hh, bias_hh);
}

// --- sequences ---

RNNBaseImpl::RNNBaseImpl(const char* name, int64_t gates, int64_t in, int64_t hidden, RNNOptions o)
    : input_size(detail::positive(name, "input_size", in)),
      hidden_size(detail::positive(name, "hidden_size", hidden)),
      options(std::move(o)),
      name_(name) {
  detail::positive(name, "num_layers", options.num_layers);
  if (!(options.dropout >= 0 && options.dropout <= 1))
    module_error(name, "dropout must be in [0, 1], got " + std::to_string(options.dropout));
  for (int64_t l = 0; l < options.num_layers; l++) {
    std::string k = "_l" + std::to_string(l);
    int64_t lin = l == 0 ? in : hidden;
    w_ih_.push_back(&param(*this, "weight_ih" + k, {gates * hidden, lin}, hidden));
    w_hh_.push_back(&param(*this, "weight_hh" + k, {gates * hidden, hidden}, hidden));
    b_ih_.push_back(&param(*this, "bias_ih" + k, {gates * hidden}, hidden, options.bias));
    b_hh_.push_back(&param(*this, "bias_hh" + k, {gates * hidden}, hidden, options.bias));
  }
}

Tensor RNNBaseImpl::check_input(const Tensor& x, const std::optional<Tensor>& h0, const char* what) const {
  detail::need_float(name_, x);
  if (x.dim() != 3 || x.size(2) != input_size)
    module_error(name_, std::string("expected input of shape ") +
                            (options.batch_first ? "(B, T, " : "(T, B, ") + std::to_string(input_size) +
                            "), got " + shape_str(x.shape()));
  Tensor xs = options.batch_first ? x.transpose(0, 1) : x;
  Shape hs{options.num_layers, xs.size(1), hidden_size};
  if (h0 && h0->shape() != hs)
    module_error(name_, std::string("expected ") + what + " of shape " + shape_str(hs) + ", got " +
                            shape_str(h0->shape()));
  return xs;
}

Tensor RNNBaseImpl::drop_between_layers(const Tensor& x, int64_t layer) const {
  if (layer + 1 == options.num_layers || options.dropout == 0) return x;
  return F::dropout(x, options.dropout, is_training());
}

RNNImpl::RNNImpl(int64_t in, int64_t hidden, RNNOptions o) : RNNBaseImpl("RNN", 1, in, hidden, std::move(o)) {
  if (options.nonlinearity != "tanh" && options.nonlinearity != "relu")
    module_error("RNN", "nonlinearity must be \"tanh\" or \"relu\", got \"" + options.nonlinearity + "\"");
}

std::pair<Tensor, Tensor> RNNImpl::forward(const Tensor& x, const std::optional<Tensor>& h0) const {
  Tensor seq = check_input(x, h0, "h0");
  int64_t T = seq.size(0), B = seq.size(1);
  std::vector<Tensor> hn;
  for (int64_t l = 0; l < options.num_layers; l++) {
    Tensor xw = affine(seq, weight_ih(l), bias_ih(l));
    Tensor h = h0 ? h0->index({l}) : zeros({B, hidden_size}, {.dtype = x.dtype()});
    std::vector<Tensor> outs;
    for (int64_t t = 0; t < T; t++)
      outs.push_back(
          h = rnn_step(xw.index({t}), h, weight_hh(l), bias_hh(l), options.nonlinearity == "relu"));
    hn.push_back(h);
    seq = drop_between_layers(stack(outs, 0), l);
  }
  return {options.batch_first ? seq.transpose(0, 1) : seq, stack(hn, 0)};
}

GRUImpl::GRUImpl(int64_t in, int64_t hidden, RNNOptions o)
    : RNNBaseImpl("GRU", 3, in, hidden, std::move(o)) {}

std::pair<Tensor, Tensor> GRUImpl::forward(const Tensor& x, const std::optional<Tensor>& h0) const {
  Tensor seq = check_input(x, h0, "h0");
  int64_t T = seq.size(0), B = seq.size(1);
  std::vector<Tensor> hn;
  for (int64_t l = 0; l < options.num_layers; l++) {
    Tensor xw = affine(seq, weight_ih(l), bias_ih(l));
    Tensor h = h0 ? h0->index({l}) : zeros({B, hidden_size}, {.dtype = x.dtype()});
    std::vector<Tensor> outs;
    for (int64_t t = 0; t < T; t++) outs.push_back(h = gru_step(xw.index({t}), h, weight_hh(l), bias_hh(l)));
    hn.push_back(h);
    seq = drop_between_layers(stack(outs, 0), l);
  }
  return {options.batch_first ? seq.transpose(0, 1) : seq, stack(hn, 0)};
}

LSTMImpl::LSTMImpl(int64_t in, int64_t hidden, RNNOptions o)
    : RNNBaseImpl("LSTM", 4, in, hidden, std::move(o)) {}

std::pair<Tensor, std::pair<Tensor, Tensor>> LSTMImpl::forward(
    const Tensor& x, const std::optional<std::pair<Tensor, Tensor>>& h0c0) const {
  Tensor seq = check_input(x, h0c0 ? std::optional<Tensor>(h0c0->first) : std::nullopt, "h0");
  if (h0c0) check_input(x, h0c0->second, "c0");
  int64_t T = seq.size(0), B = seq.size(1);
  std::vector<Tensor> hn, cn;
  for (int64_t l = 0; l < options.num_layers; l++) {
    Tensor xw = affine(seq, weight_ih(l), bias_ih(l));
    Tensor h = h0c0 ? h0c0->first.index({l}) : zeros({B, hidden_size}, {.dtype = x.dtype()});
    Tensor c = h0c0 ? h0c0->second.index({l}) : zeros({B, hidden_size}, {.dtype = x.dtype()});
    std::vector<Tensor> outs;
    for (int64_t t = 0; t < T; t++) {
      std::tie(h, c) = lstm_step(xw.index({t}), h, c, weight_hh(l), bias_hh(l));
      outs.push_back(h);
    }
    hn.push_back(h);
    cn.push_back(c);
    seq = drop_between_layers(stack(outs, 0), l);
  }
  return {options.batch_first ? seq.transpose(0, 1) : seq, {stack(hn, 0), stack(cn, 0)}};
}

}  // namespace kiln::nn
