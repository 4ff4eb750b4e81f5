// Recurrent layers: RNNCell/GRUCell/LSTMCell (one step) and RNN/GRU/LSTM (a loop over time in
// C++, building one lazy graph), with PyTorch's parameter names, gate order and initialization
// (every weight and bias U(-1/sqrt(hidden), 1/sqrt(hidden))).
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "kiln/nn/module.h"

namespace kiln::nn {

// h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh); x (B, input_size), h (B, hidden_size) (zeros when
// not given). nonlinearity "tanh" or "relu".
class RNNCellImpl : public Module {
 public:
  RNNCellImpl(int64_t input_size, int64_t hidden_size, bool bias = true,
              const std::string& nonlinearity = "tanh");
  Tensor forward(const Tensor& x, const std::optional<Tensor>& h = std::nullopt) const;
  int64_t input_size, hidden_size;
  bool relu;
  Tensor &weight_ih, &weight_hh, &bias_ih, &bias_hh;  // (H, I), (H, H), (H), (H)
};
KILN_MODULE(RNNCell);

// gates r, z, n (weights (3H, I) and (3H, H)); h' = (1 - z) n + z h
class GRUCellImpl : public Module {
 public:
  GRUCellImpl(int64_t input_size, int64_t hidden_size, bool bias = true);
  Tensor forward(const Tensor& x, const std::optional<Tensor>& h = std::nullopt) const;
  int64_t input_size, hidden_size;
  Tensor &weight_ih, &weight_hh, &bias_ih, &bias_hh;
};
KILN_MODULE(GRUCell);

// gates i, f, g, o (weights (4H, I) and (4H, H)); returns (h', c')
class LSTMCellImpl : public Module {
 public:
  LSTMCellImpl(int64_t input_size, int64_t hidden_size, bool bias = true);
  std::pair<Tensor, Tensor> forward(const Tensor& x,
                                    const std::optional<std::pair<Tensor, Tensor>>& hc = std::nullopt) const;
  int64_t input_size, hidden_size;
  Tensor &weight_ih, &weight_hh, &bias_ih, &bias_hh;
};
KILN_MODULE(LSTMCell);

struct RNNOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;           // input (B, T, C) instead of (T, B, C)
  double dropout = 0;                 // on the outputs of every layer but the last, in training mode
  std::string nonlinearity = "tanh";  // RNN only
};

// Shared by RNN, GRU and LSTM: parameters weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k},
// bias_hh_l{k} for layer k.
class RNNBaseImpl : public Module {
 public:
  int64_t input_size, hidden_size;
  RNNOptions options;
  Tensor& weight_ih(int64_t layer) const { return *w_ih_.at(static_cast<size_t>(layer)); }
  Tensor& weight_hh(int64_t layer) const { return *w_hh_.at(static_cast<size_t>(layer)); }
  Tensor& bias_ih(int64_t layer) const { return *b_ih_.at(static_cast<size_t>(layer)); }
  Tensor& bias_hh(int64_t layer) const { return *b_hh_.at(static_cast<size_t>(layer)); }

 protected:
  RNNBaseImpl(const char* name, int64_t gates, int64_t input_size, int64_t hidden_size, RNNOptions o);
  // checks x and an initial state (L, B, H); returns x as (T, B, C)
  Tensor check_input(const Tensor& x, const std::optional<Tensor>& h0, const char* what) const;
  Tensor drop_between_layers(const Tensor& x, int64_t layer) const;
  const char* name_;

 private:
  std::vector<Tensor*> w_ih_, w_hh_, b_ih_, b_hh_;
};

// x (T, B, input_size) or batch_first (B, T, input_size); h0 (num_layers, B, H), zeros when not
// given. Returns (output (T, B, H) of the last layer, h_n (num_layers, B, H)).
class RNNImpl : public RNNBaseImpl {
 public:
  RNNImpl(int64_t input_size, int64_t hidden_size, RNNOptions o = {});
  std::pair<Tensor, Tensor> forward(const Tensor& x, const std::optional<Tensor>& h0 = std::nullopt) const;
};
KILN_MODULE(RNN);

class GRUImpl : public RNNBaseImpl {
 public:
  GRUImpl(int64_t input_size, int64_t hidden_size, RNNOptions o = {});
  std::pair<Tensor, Tensor> forward(const Tensor& x, const std::optional<Tensor>& h0 = std::nullopt) const;
};
KILN_MODULE(GRU);

// Returns (output, (h_n, c_n)).
class LSTMImpl : public RNNBaseImpl {
 public:
  LSTMImpl(int64_t input_size, int64_t hidden_size, RNNOptions o = {});
  std::pair<Tensor, std::pair<Tensor, Tensor>> forward(
      const Tensor& x, const std::optional<std::pair<Tensor, Tensor>>& h0c0 = std::nullopt) const;
};
KILN_MODULE(LSTM);

}  // namespace kiln::nn
