// .npy reading and writing, and the host half-precision conversions behind it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/npy.h"

namespace {

std::string temp_path(const char* name) { return std::string(::testing::TempDir()) + name; }

TEST(Half, KnownValues) {
  EXPECT_EQ(fl::npy::float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(fl::npy::float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(fl::npy::float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(fl::npy::float_to_half(1e6f), 0x7C00);                // overflow -> inf
  EXPECT_EQ(fl::npy::float_to_half(5.9604645e-8f), 0x0001);       // smallest subnormal
  EXPECT_EQ(fl::npy::float_to_half(1.0f + 1.0f / 2048), 0x3C00);  // tie -> even
  EXPECT_EQ(fl::npy::float_to_half(1.0f + 3.0f / 2048), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(fl::npy::half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(fl::npy::half_to_float(0x0001), 5.9604645e-8f);
  EXPECT_TRUE(std::isnan(fl::npy::half_to_float(0xFFFF)));
}

TEST(Half, RoundTripEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fl::npy::half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fl::npy::float_to_half(f), h) << std::hex << h;
  }
}

TEST(Npy, RoundTripFp32) {
  const std::string path = temp_path("rt32.npy");
  std::vector<float> data(2 * 3 * 4 * 8);
  for (size_t i = 0; i < data.size(); ++i) data[i] = 0.25f * static_cast<float>(i) - 7.0f;
  fl::npy::save(path, {2, 3, 4, 8}, data);
  const fl::npy::Array a = fl::npy::load(path);
  EXPECT_EQ(a.dtype, "<f4");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3, 4, 8}));
  EXPECT_EQ(a.data, data);
}

TEST(Npy, RoundTripFp16) {
  const std::string path = temp_path("rt16.npy");
  std::vector<float> data = {1.0f, -0.5f, 3.140625f, 1000.0f, 0.1f};
  fl::npy::save(path, {5}, data, /*as_fp16=*/true);
  const fl::npy::Array a = fl::npy::load(path);
  EXPECT_EQ(a.dtype, "<f2");
  ASSERT_EQ(a.shape, (std::vector<int64_t>{5}));
  EXPECT_EQ(a.data[0], 1.0f);
  EXPECT_EQ(a.data[2], 3.140625f);
  EXPECT_NEAR(a.data[4], 0.1f, 1e-4);
  EXPECT_NE(a.data[4], 0.1f);  // really rounded to half
}

TEST(Npy, HeaderIsAlignedTo64Bytes) {
  const std::string path = temp_path("align.npy");
  fl::npy::save(path, {3, 5}, std::vector<float>(15, 1.0f));
  std::ifstream in(path, std::ios::binary);
  char pre[10];
  in.read(pre, 10);
  const uint16_t len = static_cast<uint8_t>(pre[8]) | (static_cast<uint8_t>(pre[9]) << 8);
  EXPECT_EQ((10 + len) % 64, 0);
}

// A file as NumPy writes it for np.save('x.npy', np.arange(6, dtype=np.float32).reshape(2, 3)).
TEST(Npy, ReadsNumpyWrittenFile) {
  const std::string path = temp_path("numpy.npy");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  const float values[6] = {0, 1, 2, 3, 4, 5};
  out.write(reinterpret_cast<const char*>(values), sizeof(values));
  out.close();
  const fl::npy::Array a = fl::npy::load(path);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.data, (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(Npy, RejectsUnsupportedFiles) {
  const std::string path = temp_path("f8.npy");
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header.push_back('\n');
  {
    std::ofstream out(path, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    const uint16_t len = static_cast<uint16_t>(header.size());
    out.write(reinterpret_cast<const char*>(&len), 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    const double one = 1.0;
    out.write(reinterpret_cast<const char*>(&one), 8);
  }
  EXPECT_THROW(fl::npy::load(path), std::runtime_error);
  EXPECT_THROW(fl::npy::load(temp_path("does_not_exist.npy")), std::runtime_error);
  // Truncated data.
  const std::string cut = temp_path("cut.npy");
  fl::npy::save(cut, {100}, std::vector<float>(100, 2.0f));
  std::ifstream in(cut, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(cut, std::ios::binary).write(all.data(), static_cast<std::streamsize>(all.size() - 40));
  EXPECT_THROW(fl::npy::load(cut), std::runtime_error);
}

}  // namespace
