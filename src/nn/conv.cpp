// Conv1d, Conv2d and ConvTranspose2d modules over F::conv1d/conv2d/conv_transpose2d.
#include "kiln/nn/conv.h"

#include <cmath>

#include "kiln/functional.h"
#include "kiln/nn/init.h"
#include "nn/util.h"

namespace kiln::nn {

namespace {
// one value for every dim, or one per dim -> one per dim
Ints per_dim(const char* module, const char* what, Ints v, int64_t nd, bool positive_only) {
  if (v.size() == 1) v.assign(static_cast<size_t>(nd), v[0]);
  if (static_cast<int64_t>(v.size()) != nd)
    module_error(module, std::string(what) + " needs 1 or " + std::to_string(nd) + " values, got " +
                             std::to_string(v.size()));
  for (auto x : v)
    if (positive_only ? x <= 0 : x < 0)
      module_error(module, std::string(what) + " must be " + (positive_only ? "positive" : "non-negative") +
                               ", got " + shape_str(v));
  return v;
}
int64_t prod(const Ints& v) {
  int64_t p = 1;
  for (auto x : v) p *= x;
  return p;
}
Shape weight_shape(int64_t a, int64_t b, const Ints& k) {
  Shape s{a, b};
  s.insert(s.end(), k.begin(), k.end());
  return s;
}
void check_groups(const char* module, int64_t in, int64_t out, int64_t groups) {
  detail::positive(module, "in_channels", in);
  detail::positive(module, "out_channels", out);
  detail::positive(module, "groups", groups);
  if (in % groups || out % groups)
    module_error(module, "groups (" + std::to_string(groups) + ") must divide in_channels (" +
                             std::to_string(in) + ") and out_channels (" + std::to_string(out) + ")");
}
void check_input(const char* module, const Tensor& x, int64_t nd, int64_t c) {
  detail::need_float(module, x);
  if (x.dim() != nd + 2 || x.size(1) != c) {
    std::vector<std::string> d{"N", std::to_string(c)};
    for (const char* s : {"L", "H", "W"}) {
      if (static_cast<int64_t>(d.size()) == nd + 2) break;
      if (nd == 1 || std::string(s) != "L") d.push_back(s);
    }
    module_error(module, "expected input of shape " + detail::dims_str(d) + ", got " + shape_str(x.shape()));
  }
}
std::optional<Tensor> opt(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }
}  // namespace

ConvImpl::ConvImpl(const char* name, int64_t nd, int64_t in, int64_t out, Ints kernel, Ints stride_,
                   Ints padding_, Ints dilation_, int64_t groups_, bool with_bias)
    : in_channels((check_groups(name, in, out, groups_), in)),
      out_channels(out),
      kernel_size(per_dim(name, "kernel_size", std::move(kernel), nd, true)),
      stride(per_dim(name, "stride", std::move(stride_), nd, true)),
      padding(per_dim(name, "padding", std::move(padding_), nd, false)),
      dilation(per_dim(name, "dilation", std::move(dilation_), nd, true)),
      groups(groups_),
      weight(register_parameter("weight",
                                init::kaiming_uniform(weight_shape(out, in / groups_, kernel_size),
                                                      in / groups_ * prod(kernel_size), std::sqrt(5.0)))),
      bias(register_parameter(
          "bias", with_bias ? init::fan_in_uniform({out}, in / groups_ * prod(kernel_size)) : Tensor())),
      name_(name),
      nd_(nd) {}

Tensor ConvImpl::forward(const Tensor& x) const {
  check_input(name_, x, nd_, in_channels);
  if (nd_ == 1) return F::conv1d(x, weight, opt(bias), stride, padding, dilation, groups);
  return F::conv2d(x, weight, opt(bias), stride, padding, dilation, groups);
}

ConvTranspose2dImpl::ConvTranspose2dImpl(int64_t in, int64_t out, Ints kernel, Ints stride_, Ints padding_,
                                         Ints output_padding_, int64_t groups_, bool with_bias,
                                         Ints dilation_)
    : in_channels((check_groups("ConvTranspose2d", in, out, groups_), in)),
      out_channels(out),
      kernel_size(per_dim("ConvTranspose2d", "kernel_size", std::move(kernel), 2, true)),
      stride(per_dim("ConvTranspose2d", "stride", std::move(stride_), 2, true)),
      padding(per_dim("ConvTranspose2d", "padding", std::move(padding_), 2, false)),
      output_padding(per_dim("ConvTranspose2d", "output_padding", std::move(output_padding_), 2, false)),
      dilation(per_dim("ConvTranspose2d", "dilation", std::move(dilation_), 2, true)),
      groups(groups_),
      weight(register_parameter("weight",
                                init::kaiming_uniform(weight_shape(in, out / groups_, kernel_size),
                                                      out / groups_ * prod(kernel_size), std::sqrt(5.0)))),
      bias(register_parameter(
          "bias", with_bias ? init::fan_in_uniform({out}, out / groups_ * prod(kernel_size)) : Tensor())) {}

Tensor ConvTranspose2dImpl::forward(const Tensor& x) const {
  check_input("ConvTranspose2d", x, 2, in_channels);
  return F::conv_transpose2d(x, weight, opt(bias), stride, padding, output_padding, groups, dilation);
}

}  // namespace kiln::nn
