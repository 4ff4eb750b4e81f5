// kiln: the umbrella header.
#pragma once
#include "kiln/autocast.h"
#include "kiln/data.h"
#include "kiln/debug.h"
#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/functional.h"
#include "kiln/io.h"
#include "kiln/jit.h"
#include "kiln/nn.h"
#include "kiln/optim.h"
#include "kiln/tensor.h"
