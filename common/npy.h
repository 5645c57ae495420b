// Minimal NumPy .npy reading and writing (format version 1.0/2.0, C order, little endian),
// so that Q, K, V can come from, and O go to, any other attention implementation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fl::npy {

struct Array {
  std::vector<int64_t> shape;
  std::vector<float> data;  // converted to fp32 whatever the file's dtype
  std::string dtype;        // the file's descr: "<f2" or "<f4"
};

// Reads a C-order fp16 ("<f2") or fp32 ("<f4") array; throws std::runtime_error naming the file
// and the problem otherwise.
Array load(const std::string& path);

// Writes `data` with `shape` as "<f4", or as "<f2" when as_fp16 (rounded to nearest even).
void save(const std::string& path, const std::vector<int64_t>& shape,
          const std::vector<float>& data, bool as_fp16 = false);

// IEEE half <-> float on the host (round to nearest even).
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);

}  // namespace fl::npy
