// What tune_16 tunes: rung 16's kernel (final.cuh) over the candidates of tune_candidates.h
// (scripts/autotune.py --rungs 16). The generated candidate_<i>.cu includes this file before
// common/tune/tune_candidate.cuh.
#pragma once

#include "kernels/16_final/final.cuh"

#define FL_TUNE_NS ::fl::k16_final
