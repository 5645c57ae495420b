#include "common/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace fl::npy {

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xFFu;
  uint32_t mant = x & 0x7FFFFFu;
  if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0u));  // inf/nan
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow -> inf
  if (e <= 0) {                                                // subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into inf: correct
  return static_cast<uint16_t>(sign | half);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu, x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while ((mant & 0x400u) == 0);
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3FFu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7F800000u | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": " + what);
}

// Value of 'key' in the header dict, e.g. "'descr': '<f2'" -> "'<f2'".
std::string field(const std::string& header, const std::string& key) {
  const size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return "";
  size_t c = header.find(':', k);
  if (c == std::string::npos) return "";
  ++c;
  while (c < header.size() && header[c] == ' ') ++c;
  size_t end = c;
  if (header[c] == '(') {
    end = header.find(')', c) + 1;
  } else if (header[c] == '\'') {
    end = header.find('\'', c + 1) + 1;
  } else {
    end = header.find_first_of(",}", c);
  }
  return header.substr(c, end - c);
}

}  // namespace

Array load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  char magic[8];
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(path, "not a .npy file");
  const int major = static_cast<unsigned char>(magic[6]);
  uint32_t header_len = 0;
  if (major == 1) {
    uint16_t len16 = 0;
    in.read(reinterpret_cast<char*>(&len16), 2);
    header_len = len16;
  } else if (major == 2 || major == 3) {
    in.read(reinterpret_cast<char*>(&header_len), 4);
  } else {
    fail(path, "unsupported .npy version " + std::to_string(major));
  }
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  if (!in) fail(path, "truncated header");

  Array a;
  const std::string descr = field(header, "descr");
  if (descr == "'<f2'") {
    a.dtype = "<f2";
  } else if (descr == "'<f4'") {
    a.dtype = "<f4";
  } else {
    fail(path, "dtype " + descr + " is not supported (use float16 '<f2' or float32 '<f4')");
  }
  if (field(header, "fortran_order") != "False") fail(path, "Fortran order is not supported");
  const std::string shape = field(header, "shape");
  if (shape.size() < 2 || shape.front() != '(') fail(path, "cannot read the shape");
  std::stringstream ss(shape.substr(1, shape.size() - 2));
  std::string item;
  int64_t count = 1;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    const int64_t dim = std::stoll(item);
    if (dim < 0) fail(path, "negative dimension");
    a.shape.push_back(dim);
    count *= dim;
  }
  a.data.resize(static_cast<size_t>(count));
  if (a.dtype == "<f4") {
    in.read(reinterpret_cast<char*>(a.data.data()), count * 4);
  } else {
    std::vector<uint16_t> raw(static_cast<size_t>(count));
    in.read(reinterpret_cast<char*>(raw.data()), count * 2);
    for (int64_t i = 0; i < count; ++i) a.data[i] = half_to_float(raw[i]);
  }
  if (!in) fail(path, "file shorter than its shape says");
  return a;
}

void save(const std::string& path, const std::vector<int64_t>& shape,
          const std::vector<float>& data, bool as_fp16) {
  std::string dims;
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += (i > 0 ? ", " : "") + std::to_string(shape[i]);
    count *= shape[i];
  }
  if (shape.size() == 1) dims += ",";  // a 1-tuple is written "(5,)"
  if (static_cast<int64_t>(data.size()) != count) {
    throw std::runtime_error(path + ": data size does not match the shape");
  }
  std::string header = std::string("{'descr': '") + (as_fp16 ? "<f2" : "<f4") +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Pad with spaces so that magic + length + header + '\n' is a multiple of 64 bytes.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error(path + ": cannot open for writing");
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  if (as_fp16) {
    std::vector<uint16_t> raw(data.size());
    for (size_t i = 0; i < data.size(); ++i) raw[i] = float_to_half(data[i]);
    out.write(reinterpret_cast<const char*>(raw.data()), static_cast<std::streamsize>(raw.size() * 2));
  } else {
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * 4));
  }
  if (!out) throw std::runtime_error(path + ": write failed");
}

}  // namespace fl::npy
