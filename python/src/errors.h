// The module's own exceptions, registered as Python types in module.cc.
#ifndef MSA_PYTHON_ERRORS_H_
#define MSA_PYTHON_ERRORS_H_

#include <stdexcept>
#include <string>

namespace msa::python {

// msa_oracle.Unsupported (a RuntimeError): valid, but the chosen backend cannot run it.
struct UnsupportedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// OSError: a file could not be read or written.
struct FileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace msa::python

#endif  // MSA_PYTHON_ERRORS_H_
