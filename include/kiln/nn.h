// kiln::nn: modules (layers with parameters, containers, a GPT-2 model) over kiln::Tensor and
// kiln::F. Each module type Name is a shared handle (ModuleHolder<NameImpl>).
#pragma once
#include "kiln/nn/activation.h"
#include "kiln/nn/container.h"
#include "kiln/nn/conv.h"
#include "kiln/nn/gpt.h"
#include "kiln/nn/init.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/module.h"
#include "kiln/nn/norm.h"
#include "kiln/nn/rnn.h"
#include "kiln/nn/transformer.h"
