#include "oracle/precision.h"

#include <algorithm>
#include <cmath>

#include "msa/tensor.h"

namespace msa {
namespace {

int MinExponent(Precision precision) {  // frexp exponent of the smallest normal number
  switch (precision) {
    case Precision::kExact:
      return -1021;
    case Precision::kFp32:
    case Precision::kBf16:
      return -125;
    case Precision::kFp16:
      return -13;
  }
  return -1021;
}

}  // namespace

double RoundToPrecision(double value, Precision precision) {
  switch (precision) {
    case Precision::kExact:
      return value;
    case Precision::kFp32:
      return double(float(value));
    case Precision::kBf16:
      return BF16ToDouble(DoubleToBF16(value));
    case Precision::kFp16:
      return F16ToDouble(DoubleToF16(value));
  }
  return value;
}

int SignificandBits(Precision precision) {
  switch (precision) {
    case Precision::kExact:
      return 53;
    case Precision::kFp32:
      return 24;
    case Precision::kBf16:
      return 8;
    case Precision::kFp16:
      return 11;
  }
  return 53;
}

double UlpAt(double x, Precision precision) {
  int exponent = MinExponent(precision);
  if (x != 0 && std::isfinite(x)) {
    std::frexp(x, &exponent);
    exponent = std::max(exponent, MinExponent(precision));
  }
  return std::ldexp(1.0, exponent - SignificandBits(precision));
}

}  // namespace msa
