// The e4m3 index kernels called directly (gpu/kernels.h): RoundToE4M3 against a host rounding of the test's own (the
// nearest e4m3, ties to the even code, from every input type), E4M3ToLowp widening every code exactly, and
// BlockMaxScoresFp8 against exact block maxima and against BlockMaxScores on the bf16 widening (within its bound, the
// same entries written, the same first bad row). The host rounding is checked without a device; the kernel tests skip
// without a usable CUDA device (BlockMaxScoresFp8's without an sm_90 one) saying why.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "msa/tensor.h"
#include "oracle/random.h"
#include "tests/gpu_test_support.h"

#if defined(MSA_HAVE_CUDA)  // the CUDA build: the kernels are called directly
#include "gpu/common/device_buffer.h"
#include "gpu/common/device_query.h"
#include "gpu/kernels.h"
#endif

namespace msa::gpu_test {
namespace {

// The value of e4m3 byte `code` from the format's definition (OCP E4M3FN: sign, 4 exponent bits with bias 7,
// 3 mantissa bits; exponent 0: subnormals m * 2^-9; 0x7F and 0xFF: NaN), independent of the device code.
double E4M3Value(int code) {
  const int exponent = (code >> 3) & 15, mantissa = code & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
  return (code & 0x80) ? -magnitude : magnitude;
}

// Round to the nearest e4m3, ties to the even code, by search over the finite non-negative codes (ascending values);
// magnitudes from 448 up saturate to 448, NaN gives 0x7F. The sign is x's (a negative x that rounds to 0 gives -0).
// The distances are exact: the two nearest codes lie within a factor 2 of |x| (Sterbenz) or one is 0.
uint8_t NearestE4M3(double x) {
  if (std::isnan(x)) return 0x7F;
  const double magnitude = std::fabs(x);
  int best = 0x7E;
  if (magnitude < 448.0) {
    best = 0;
    for (int c = 1; c <= 0x7E; ++c) {
      const double error = std::fabs(E4M3Value(c) - magnitude), best_error = std::fabs(E4M3Value(best) - magnitude);
      if (error < best_error || (error == best_error && c % 2 == 0)) best = c;
    }
  }
  return uint8_t((std::signbit(x) ? 0x80 : 0x00) | best);
}

// The test's own reference, without a device: every finite code is its own nearest e4m3, NaN codes give 0x7F, and
// the points halfway between neighbours go to the even code (one double ulp either side: to the nearer one).
TEST(E4M3Reference, EveryCodeIsItsOwnNearestAndHalfwayPointsGoToTheEvenCode) {
  for (int c = 0; c < 256; ++c) {
    const double v = E4M3Value(c);
    EXPECT_EQ(NearestE4M3(v), std::isnan(v) ? 0x7F : c) << "code " << c;
  }
  for (int c = 0; c < 0x7E; ++c) {
    const double mid = (E4M3Value(c) + E4M3Value(c + 1)) / 2;  // exact: both have 4 significant bits
    const int even = c % 2 == 0 ? c : c + 1;
    EXPECT_EQ(NearestE4M3(mid), even) << "halfway above code " << c;
    EXPECT_EQ(NearestE4M3(-mid), 0x80 | even) << "halfway below code " << (0x80 | c);
    EXPECT_EQ(NearestE4M3(std::nextafter(mid, 0.0)), c) << "just below halfway above code " << c;
    EXPECT_EQ(NearestE4M3(std::nextafter(mid, 1e9)), c + 1) << "just above halfway above code " << c;
  }
  EXPECT_EQ(NearestE4M3(464.0), 0x7E);  // past the largest finite: saturated
  EXPECT_EQ(NearestE4M3(-std::numeric_limits<double>::infinity()), 0xFE);
  EXPECT_EQ(NearestE4M3(-1e-300), 0x80);
}

// Inputs of the rounding test: every e4m3 value, the halfway points between neighbours and one double ulp either
// side (both signs), specials (zeros, infinities, NaN, past 448, far below 2^-9), and random magnitudes in
// [2^-12, 2^10) of either sign.
std::vector<double> E4M3RoundingInputs() {
  std::vector<double> x;
  for (int c = 0; c < 256; ++c) x.push_back(E4M3Value(c));
  for (int c = 0; c < 0x7E; ++c) {
    const double mid = (E4M3Value(c) + E4M3Value(c + 1)) / 2;
    for (const double v : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e9)}) {
      x.push_back(v);
      x.push_back(-v);
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  for (const double v : {0.0, -0.0, inf, -inf, std::numeric_limits<double>::quiet_NaN(), 448.0, -448.0, 449.0, 464.0,
                         -465.0, 1e10, 1e-300, -5e-324, std::ldexp(1.0, -10), std::ldexp(3.0, -10)}) {
    x.push_back(v);
  }
  RandomStream rng(0xe4, 3);
  for (int i = 0; i < 20000; ++i) {
    const double magnitude = std::ldexp(1.0 + rng.Uniform(), int(rng.Below(22)) - 12);
    x.push_back(rng.Below(2) ? -magnitude : magnitude);
  }
  return x;
}

// A chunk of one sequence for the fp8 block-max test: the sequence's k_len keys follow pad_keys keys of another
// sequence, the chunk's nq queries (positions pos0..pos0+nq-1) follow t0 queries of others.
struct Fp8Chunk {
  const char* name;
  int hidx, di, bk;
  int64_t pad_keys, k_len, t0, nq, pos0;
};

// Prefill 300 and 1000 (partial last blocks), a chunk of a prefill with a prefix, decode with 4 rows (one warpgroup),
// 64 rows over Bk 256, 68 rows (two warpgroups) at Di 16 with Bk 64, one index head over 129 keys at Di 32.
std::vector<Fp8Chunk> Fp8Chunks() {
  return {{"prefill_300", 4, 128, 128, 0, 300, 0, 300, 0},        {"prefill_1000", 4, 128, 128, 0, 1000, 0, 1000, 0},
          {"prefix_chunk", 4, 64, 64, 77, 1000, 13, 136, 864},    {"decode_1", 4, 128, 128, 5, 5000, 3, 1, 4999},
          {"decode_16_bk256", 4, 128, 256, 0, 4133, 0, 16, 4117}, {"decode_17_di16", 4, 16, 64, 0, 2049, 0, 17, 2032},
          {"one_head_129", 1, 32, 64, 0, 129, 0, 129, 0}};
}

// Random e4m3 codes: normal values times 2 rounded to e4m3 (about -8..8, subnormals and zeros included).
std::vector<uint8_t> RandomE4M3(int64_t n, uint64_t seed) {
  RandomStream rng(seed, 0);
  std::vector<uint8_t> codes(static_cast<size_t>(n));
  for (uint8_t& c : codes) c = NearestE4M3(2.0 * rng.Normal());
  return codes;
}

#if defined(MSA_HAVE_CUDA)
// Skips the calling test unless a device runs BlockMaxScoresFp8 (compute capability 9.0).
#define MSA_REQUIRE_FP8_INDEX_KERNEL()                                         \
  do {                                                                         \
    MSA_REQUIRE_GPU();                                                         \
    if (!gpu::BlockMaxScoresFp8Fits(128, 128, 1.0f, gpu::CurrentDeviceCaps())) \
      GTEST_SKIP() << "BlockMaxScoresFp8 needs an sm_90 device";               \
  } while (false)

// The chunk's geometry; its sequence's queries after the chunk are 2 more rows of index_q.
gpu::ChunkGeometry Fp8Geometry(const Fp8Chunk& c) {
  gpu::ChunkGeometry g;
  g.t0 = c.t0;
  g.nq = c.nq;
  g.pos0 = c.pos0;
  g.key_begin = c.pad_keys;
  g.k_len = c.k_len;
  g.total_q = c.t0 + c.nq + 2;
  g.hidx = c.hidx;
  g.di = c.di;
  g.bk = c.bk;
  g.top_k = 16;
  g.max_blocks = (c.k_len + c.bk - 1) / c.bk;
  return g;
}

// Host vector -> new device buffer; false (and a test failure) on a CUDA error.
template <typename T>
bool Upload(const std::vector<T>& host, gpu::DeviceBuffer<T>* device) {
  const Status status = device->Allocate(int64_t(host.size()), "test input");
  EXPECT_TRUE(status.ok()) << status.message();
  if (!status.ok()) return false;
  const cudaError_t error = cudaMemcpy(device->get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  EXPECT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
  return error == cudaSuccess;
}

template <typename T>
bool Download(const gpu::DeviceBuffer<T>& device, std::vector<T>* host) {
  host->resize(size_t(device.size()));
  const cudaError_t error = cudaMemcpy(host->data(), device.get(), host->size() * sizeof(T), cudaMemcpyDeviceToHost);
  EXPECT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
  return error == cudaSuccess;
}

// BlockMaxScoresFp8 on the e4m3 codes and BlockMaxScores on their bf16 widening (exact), each into block scores
// poisoned with all-ones bits, with their first bad rows (all ones: none).
struct Fp8AndMma {
  std::vector<float> fp8, mma;  // [nq * Hidx, max_blocks]
  unsigned long long fp8_bad = 0, mma_bad = 0;
};

bool RunFp8AndMma(const gpu::ChunkGeometry& g, const std::vector<uint8_t>& index_q, const std::vector<uint8_t>& index_k,
                  float scale, Fp8AndMma* result) {
  std::vector<uint16_t> q16(index_q.size()), k16(index_k.size());
  for (size_t i = 0; i < index_q.size(); ++i) q16[i] = DoubleToBF16(E4M3Value(index_q[i]));
  for (size_t i = 0; i < index_k.size(); ++i) k16[i] = DoubleToBF16(E4M3Value(index_k[i]));
  gpu::DeviceBuffer<uint8_t> q8_d, k8_d;
  gpu::DeviceBuffer<uint16_t> q16_d, k16_d;
  gpu::DeviceBuffer<float> fp8_d, mma_d;
  gpu::DeviceBuffer<unsigned long long> bad_d;
  const std::vector<float> poison(size_t(g.nq * g.hidx * g.max_blocks), std::bit_cast<float>(0xffffffffu));
  const std::vector<unsigned long long> no_bad_row(2, ~0ull);
  if (!Upload(index_q, &q8_d) || !Upload(index_k, &k8_d) || !Upload(q16, &q16_d) || !Upload(k16, &k16_d) ||
      !Upload(poison, &fp8_d) || !Upload(poison, &mma_d) || !Upload(no_bad_row, &bad_d)) {
    return false;
  }
  cudaError_t error = gpu::BlockMaxScoresFp8(q8_d.get(), k8_d.get(), g, scale, fp8_d.get(), bad_d.get());
  EXPECT_EQ(error, cudaSuccess) << "BlockMaxScoresFp8: " << cudaGetErrorString(error);
  if (error == cudaSuccess) {
    error = gpu::BlockMaxScores(gpu::kLowpBF16, q16_d.get(), k16_d.get(), g, scale, mma_d.get(), bad_d.get() + 1);
    EXPECT_EQ(error, cudaSuccess) << "BlockMaxScores: " << cudaGetErrorString(error);
  }
  if (error == cudaSuccess) {
    error = cudaDeviceSynchronize();
    EXPECT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
  }
  std::vector<unsigned long long> bad;
  if (error != cudaSuccess || !Download(fp8_d, &result->fp8) || !Download(mma_d, &result->mma) ||
      !Download(bad_d, &bad)) {
    return false;
  }
  result->fp8_bad = bad[0];
  result->mma_bad = bad[1];
  return true;
}
#endif  // MSA_HAVE_CUDA

// RoundToE4M3 gives the nearest e4m3 with ties to the even code (NearestE4M3) from every input type: the inputs
// stored as F64 (rounded once from the double: the halfway points +- one double ulp go to the nearer code), F32,
// BF16 and F16 (the inputs rounded to the type first, on the host). E4M3ToLowp widens every code exactly.
TEST(GpuKernels, RoundToE4M3IsTheNearestE4M3WithTiesToEven) {
  MSA_REQUIRE_GPU();
  const std::vector<double> inputs = E4M3RoundingInputs();
#if defined(MSA_HAVE_CUDA)
  const int64_t n = int64_t(inputs.size());
  for (const DType dtype : {DType::kF64, DType::kF32, DType::kBF16, DType::kF16}) {
    std::vector<unsigned char> stored(size_t(n * DTypeSize(dtype)));
    std::vector<uint8_t> expected(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      double v = inputs[size_t(i)];
      unsigned char* at = stored.data() + i * DTypeSize(dtype);
      if (dtype == DType::kF64) {
        std::memcpy(at, &v, 8);
      } else if (dtype == DType::kF32) {
        const float f = static_cast<float>(v);
        std::memcpy(at, &f, 4);
      } else {
        const uint16_t bits = dtype == DType::kBF16 ? DoubleToBF16(v) : DoubleToF16(v);
        std::memcpy(at, &bits, 2);
      }
      v = LoadAsDouble(stored.data(), dtype, i);
      expected[size_t(i)] = NearestE4M3(v);
    }
    gpu::DeviceBuffer<unsigned char> src;
    gpu::DeviceBuffer<uint8_t> dst;
    ASSERT_TRUE(Upload(stored, &src));
    ASSERT_TRUE(dst.Allocate(n, "e4m3 output").ok());
    ASSERT_EQ(gpu::RoundToE4M3(src.get(), static_cast<int>(dtype), n, dst.get()), cudaSuccess);
    std::vector<uint8_t> got;
    ASSERT_TRUE(Download(dst, &got));
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (got[size_t(i)] == expected[size_t(i)]) continue;
      if (wrong++ < 5) {
        ADD_FAILURE() << DTypeName(dtype) << " input " << LoadAsDouble(stored.data(), dtype, i) << " (index " << i
                      << "): RoundToE4M3 gives code " << int(got[size_t(i)]) << ", the nearest e4m3 is code "
                      << int(expected[size_t(i)]);
      }
    }
    EXPECT_EQ(wrong, 0) << DTypeName(dtype) << ": codes that differ from the nearest e4m3";
  }
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[size_t(c)] = uint8_t(c);
  gpu::DeviceBuffer<uint8_t> codes_d;
  ASSERT_TRUE(Upload(codes, &codes_d));
  for (const int lowp : {gpu::kLowpBF16, gpu::kLowpF16}) {
    gpu::DeviceBuffer<uint16_t> wide_d;
    ASSERT_TRUE(wide_d.Allocate(256, "widened codes").ok());
    ASSERT_EQ(gpu::E4M3ToLowp(codes_d.get(), 256, lowp, wide_d.get()), cudaSuccess);
    std::vector<uint16_t> wide;
    ASSERT_TRUE(Download(wide_d, &wide));
    for (int c = 0; c < 256; ++c) {
      const double got = lowp == gpu::kLowpBF16 ? BF16ToDouble(wide[size_t(c)]) : F16ToDouble(wide[size_t(c)]);
      const double want = E4M3Value(c);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << "code " << c;
      } else {
        EXPECT_EQ(std::memcmp(&got, &want, 8), 0) << "code " << c << ": " << got << " instead of " << want;
      }
    }
  }
#endif
}

// BlockMaxScoresFp8 against the exact block maxima of the same e4m3 values (double: their products and sums are
// exact) and against BlockMaxScores on the bf16 widening, on prefill, prefix-chunk and decode shapes with partial last
// blocks and causal edges: the same entries written (blk <= the row's local block, nothing else), every entry within
// kFp8IndexRelBound * its magnitude (scale * the largest sum_i |q_i k_i| over the block's visible keys) of the exact
// value and of BlockMaxScores', no bad row. BlockMaxScores (fp32 accumulation of exact products) is within
// 2^-16 of the magnitude (128 fp32 adds lose at most about 2^-17): the yardstick.
TEST(GpuKernels, Fp8BlockMaxIsWithinItsBoundOfTheExactBlockMax) {
#if defined(MSA_HAVE_CUDA)
  MSA_REQUIRE_FP8_INDEX_KERNEL();
#else
  MSA_REQUIRE_GPU();
#endif
  uint64_t seed = 900;
  for (const Fp8Chunk& c : Fp8Chunks()) {
    const int64_t total_q = c.t0 + c.nq + 2, total_k = c.pad_keys + c.k_len;
    const std::vector<uint8_t> index_q = RandomE4M3(total_q * c.hidx * c.di, ++seed);  // [total_q, Hidx, Di]
    const std::vector<uint8_t> index_k = RandomE4M3(total_k * c.di, ++seed);           // [total_k, Di]
    const double scale = 1.0 / std::sqrt(double(c.di));
    const int64_t rows = c.nq * c.hidx, max_blocks = (c.k_len + c.bk - 1) / c.bk;
    // Exact block maxima and magnitudes, [rows, max_blocks] (NaN where not visible).
    std::vector<double> exact(size_t(rows * max_blocks), std::numeric_limits<double>::quiet_NaN());
    std::vector<double> magnitude(exact.size(), 0.0);
    std::vector<double> q_values(index_q.size()), k_values(index_k.size());
    for (size_t i = 0; i < index_q.size(); ++i) q_values[i] = E4M3Value(index_q[i]);
    for (size_t i = 0; i < index_k.size(); ++i) k_values[i] = E4M3Value(index_k[i]);
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t t = c.t0 + row / c.hidx, r = row % c.hidx, pos = c.pos0 + row / c.hidx;
      const double* q = q_values.data() + (t * c.hidx + r) * c.di;
      for (int64_t s = 0; s <= pos; ++s) {
        const double* k = k_values.data() + (c.pad_keys + s) * c.di;
        double dot = 0, abs_dot = 0;
        for (int d = 0; d < c.di; ++d) {
          const double product = q[d] * k[d];
          dot += product;
          abs_dot += std::fabs(product);
        }
        double& best = exact[size_t(row * max_blocks + s / c.bk)];
        best = std::isnan(best) ? dot * scale : std::max(best, dot * scale);
        double& mag = magnitude[size_t(row * max_blocks + s / c.bk)];
        mag = std::max(mag, abs_dot * scale);
      }
    }
#if defined(MSA_HAVE_CUDA)
    const gpu::ChunkGeometry g = Fp8Geometry(c);
    Fp8AndMma run;
    ASSERT_TRUE(RunFp8AndMma(g, index_q, index_k, float(scale), &run)) << c.name;
    EXPECT_EQ(run.fp8_bad, ~0ull) << c.name << ": BlockMaxScoresFp8 flagged a bad row";
    EXPECT_EQ(run.mma_bad, ~0ull) << c.name << ": BlockMaxScores flagged a bad row";
    double max_rel = 0, max_rel_mma = 0;
    int64_t failures = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      const bool visible = !std::isnan(exact[i]);
      const bool fp8_written = std::bit_cast<uint32_t>(run.fp8[i]) != 0xffffffffu;
      const bool mma_written = std::bit_cast<uint32_t>(run.mma[i]) != 0xffffffffu;
      const double fp8_error = std::fabs(double(run.fp8[i]) - exact[i]);
      const double mma_error = std::fabs(double(run.mma[i]) - exact[i]);
      const double fp8_vs_mma = std::fabs(double(run.fp8[i]) - double(run.mma[i]));
      const double bound = double(gpu::kFp8IndexRelBound) * magnitude[i];
      const bool ok = fp8_written == visible && mma_written == visible &&
                      (!visible || (fp8_error <= bound && fp8_vs_mma <= bound && mma_error <= 0x1p-16 * magnitude[i]));
      if (visible && magnitude[i] > 0) {
        max_rel = std::max(max_rel, fp8_error / magnitude[i]);
        max_rel_mma = std::max(max_rel_mma, mma_error / magnitude[i]);
      }
      if (!ok && failures++ < 5) {
        ADD_FAILURE() << c.name << ": row " << i / size_t(max_blocks) << ", block " << i % size_t(max_blocks)
                      << (visible ? " (visible)" : " (not visible)") << ": fp8 " << run.fp8[i] << ", mma " << run.mma[i]
                      << ", exact " << exact[i] << ", magnitude " << magnitude[i];
      }
    }
    EXPECT_EQ(failures, 0) << c.name;
    std::printf("%s: max |fp8 - exact| / magnitude = %.3g (bound %.3g), max |mma - exact| / magnitude = %.3g\n", c.name,
                max_rel, double(gpu::kFp8IndexRelBound), max_rel_mma);
#endif
  }
}

// A NaN byte in a key makes every row that sees the key bad, a NaN byte in a query its row: BlockMaxScoresFp8 names
// the same first bad row (t * Hidx + r) as BlockMaxScores and as the definition.
TEST(GpuKernels, Fp8BlockMaxFlagsTheBadRowsTheMmaKernelFlags) {
#if defined(MSA_HAVE_CUDA)
  MSA_REQUIRE_FP8_INDEX_KERNEL();
#else
  MSA_REQUIRE_GPU();
#endif
  const Fp8Chunk c = Fp8Chunks().front();  // prefill 300, Hidx 4
  std::vector<uint8_t> index_q = RandomE4M3((c.t0 + c.nq + 2) * c.hidx * c.di, 71);
  std::vector<uint8_t> index_k = RandomE4M3((c.pad_keys + c.k_len) * c.di, 72);
  index_k[size_t(150 * c.di + 7)] = 0x7F;  // key 150: rows of queries 150.. see it; first (query 150, group 0)
  const unsigned long long key_nan_row = 150 * 4 + 0;
  index_q[size_t((40 * c.hidx + 3) * c.di)] = 0xFF;  // query 40, group 3
  const unsigned long long query_nan_row = 40 * 4 + 3;
  for (const bool with_query_nan : {false, true}) {
    std::vector<uint8_t> q = index_q;
    if (!with_query_nan) q[size_t((40 * c.hidx + 3) * c.di)] = 0;
#if defined(MSA_HAVE_CUDA)
    Fp8AndMma run;
    ASSERT_TRUE(RunFp8AndMma(Fp8Geometry(c), q, index_k, 1.0f / std::sqrt(float(c.di)), &run));
    const unsigned long long expected = with_query_nan ? query_nan_row : key_nan_row;
    EXPECT_EQ(run.mma_bad, expected) << "BlockMaxScores, query NaN " << with_query_nan;
    EXPECT_EQ(run.fp8_bad, expected) << "BlockMaxScoresFp8, query NaN " << with_query_nan;
#else
    (void)q, (void)key_nan_row, (void)query_nan_row;
#endif
  }
}

}  // namespace
}  // namespace msa::gpu_test
