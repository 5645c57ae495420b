// Shared by the GPU tests: skip cleanly (with the reason) where there is no GPU.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "common/cuda_check.h"

#define FL_REQUIRE_GPU()                                   \
  do {                                                     \
    std::string fl_why_no_gpu;                             \
    if (!::fl::gpu_available(&fl_why_no_gpu)) {            \
      GTEST_SKIP() << "needs a GPU: " << fl_why_no_gpu;    \
    }                                                      \
  } while (0)
