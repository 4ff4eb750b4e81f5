// Convolution and pooling layers: Conv1d, Conv2d, ConvTranspose2d, MaxPool2d, AvgPool2d,
// AdaptiveAvgPool2d. Sizes are one value for every spatial dim or one per dim
// (nn::Conv2d(3, 8, 3) or nn::Conv2d(3, 8, Ints{3, 5})).
#pragma once
#include <initializer_list>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

using Ints = std::vector<int64_t>;

// Conv1d/Conv2d: weight (out, in / groups, k...), bias (out), both U(-1/sqrt(fan_in), ..) with
// fan_in = in / groups * prod(k).
class ConvImpl : public Module {
 public:
  Tensor forward(const Tensor& x) const;
  int64_t in_channels, out_channels;
  Ints kernel_size, stride, padding, dilation;
  int64_t groups;
  Tensor& weight;
  Tensor& bias;

 protected:
  ConvImpl(const char* name, int64_t nd, int64_t in, int64_t out, Ints kernel, Ints stride, Ints padding,
           Ints dilation, int64_t groups, bool bias);

 private:
  const char* name_;
  int64_t nd_;
};

class Conv1dImpl : public ConvImpl {
 public:
  Conv1dImpl(int64_t in_channels, int64_t out_channels, Ints kernel_size, Ints stride = {1},
             Ints padding = {0}, Ints dilation = {1}, int64_t groups = 1, bool bias = true)
      : ConvImpl("Conv1d", 1, in_channels, out_channels, std::move(kernel_size), std::move(stride),
                 std::move(padding), std::move(dilation), groups, bias) {}
  Conv1dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
             int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1, bool bias = true)
      : Conv1dImpl(in_channels, out_channels, Ints{kernel_size}, Ints{stride}, Ints{padding}, Ints{dilation},
                   groups, bias) {}
};
KILN_MODULE(Conv1d);

class Conv2dImpl : public ConvImpl {
 public:
  Conv2dImpl(int64_t in_channels, int64_t out_channels, Ints kernel_size, Ints stride = {1},
             Ints padding = {0}, Ints dilation = {1}, int64_t groups = 1, bool bias = true)
      : ConvImpl("Conv2d", 2, in_channels, out_channels, std::move(kernel_size), std::move(stride),
                 std::move(padding), std::move(dilation), groups, bias) {}
  Conv2dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
             int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1, bool bias = true)
      : Conv2dImpl(in_channels, out_channels, Ints{kernel_size}, Ints{stride}, Ints{padding}, Ints{dilation},
                   groups, bias) {}
};
KILN_MODULE(Conv2d);

// weight (in, out / groups, kh, kw); fan_in for the init is out / groups * kh * kw, as in PyTorch.
class ConvTranspose2dImpl : public Module {
 public:
  ConvTranspose2dImpl(int64_t in_channels, int64_t out_channels, Ints kernel_size, Ints stride = {1},
                      Ints padding = {0}, Ints output_padding = {0}, int64_t groups = 1, bool bias = true,
                      Ints dilation = {1});
  ConvTranspose2dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
                      int64_t padding = 0, int64_t output_padding = 0, int64_t groups = 1, bool bias = true,
                      int64_t dilation = 1)
      : ConvTranspose2dImpl(in_channels, out_channels, Ints{kernel_size}, Ints{stride}, Ints{padding},
                            Ints{output_padding}, groups, bias, Ints{dilation}) {}
  Tensor forward(const Tensor& x) const;
  int64_t in_channels, out_channels;
  Ints kernel_size, stride, padding, output_padding, dilation;
  int64_t groups;
  Tensor& weight;
  Tensor& bias;
};
KILN_MODULE(ConvTranspose2d);

// stride defaults to kernel_size
class MaxPool2dImpl : public Module {
 public:
  explicit MaxPool2dImpl(Ints kernel_size, Ints stride = {}, Ints padding = {0}, Ints dilation = {1})
      : kernel_size(std::move(kernel_size)),
        stride(std::move(stride)),
        padding(std::move(padding)),
        dilation(std::move(dilation)) {}
  explicit MaxPool2dImpl(int64_t kernel_size) : MaxPool2dImpl(Ints{kernel_size}) {}
  MaxPool2dImpl(int64_t kernel_size, int64_t stride, int64_t padding = 0, int64_t dilation = 1)
      : MaxPool2dImpl(Ints{kernel_size}, Ints{stride}, Ints{padding}, Ints{dilation}) {}
  Tensor forward(const Tensor& x) const;
  Ints kernel_size, stride, padding, dilation;
};
KILN_MODULE(MaxPool2d);

class AvgPool2dImpl : public Module {
 public:
  explicit AvgPool2dImpl(Ints kernel_size, Ints stride = {}, Ints padding = {0},
                         bool count_include_pad = true)
      : kernel_size(std::move(kernel_size)),
        stride(std::move(stride)),
        padding(std::move(padding)),
        count_include_pad(count_include_pad) {}
  explicit AvgPool2dImpl(int64_t kernel_size) : AvgPool2dImpl(Ints{kernel_size}) {}
  AvgPool2dImpl(int64_t kernel_size, int64_t stride, int64_t padding = 0, bool count_include_pad = true)
      : AvgPool2dImpl(Ints{kernel_size}, Ints{stride}, Ints{padding}, count_include_pad) {}
  Tensor forward(const Tensor& x) const;
  Ints kernel_size, stride, padding;
  bool count_include_pad;
};
KILN_MODULE(AvgPool2d);

class AdaptiveAvgPool2dImpl : public Module {
 public:
  explicit AdaptiveAvgPool2dImpl(Ints output_size) : output_size(std::move(output_size)) {}
  explicit AdaptiveAvgPool2dImpl(int64_t output_size) : output_size{output_size, output_size} {}
  Tensor forward(const Tensor& x) const;
  Ints output_size;
};
KILN_MODULE(AdaptiveAvgPool2d);

}  // namespace kiln::nn
