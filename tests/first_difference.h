// Bit-for-bit comparison of two output vectors for the tests' messages.
#ifndef MSA_TESTS_FIRST_DIFFERENCE_H_
#define MSA_TESTS_FIRST_DIFFERENCE_H_

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace msa {

// "" when equal bit for bit, else where they first differ ("out[12]: got 0.5, expected 0.25").
template <typename T>
std::string FirstDifference(const char* name, const std::vector<T>& got, const std::vector<T>& expected) {
  if (got.size() != expected.size()) return std::string(name) + ": sizes differ";
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &expected[i], sizeof(T)) != 0) {
      std::ostringstream text;
      text.precision(17);
      text << name << "[" << i << "]: got " << got[i] << ", expected " << expected[i];
      return text.str();
    }
  }
  return "";
}

}  // namespace msa

#endif  // MSA_TESTS_FIRST_DIFFERENCE_H_
