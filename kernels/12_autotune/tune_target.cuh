// What tune_12 tunes: rung 12's kernel (autotune.cuh) over the candidates of tune_candidates.h.
// A tunable rung's folder holds a file like this one; the generated candidate_<i>.cu includes it
// before tune_candidate.cuh, which instantiates FL_TUNE_NS::attention_kernel and its launcher.
#pragma once

#include "kernels/12_autotune/autotune.cuh"

#define FL_TUNE_NS ::fl::k12_autotune
