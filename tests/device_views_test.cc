// Views marked as CUDA device memory (TensorView::memory) reach only a backend whose reads_device_memory is set: the
// front end refuses them for host backends by name, never dereferences them while validating, and refuses them
// where it would round them on the host (index_format e4m3). The views here point at host memory, so that a
// backend that wrongly read them would still not crash: the test sees what the front end let through.
#include <gtest/gtest.h>

#include "oracle/cases.h"
#include "oracle/problem.h"

namespace msa {
namespace {

struct DeviceMarked {
  Problem problem = GenerateProblem(CanonicalCases().front().spec);
  Outputs outputs;

  DeviceMarked() { outputs.Allocate(problem); }
  IndexInputs index_inputs() const {
    IndexInputs inputs = problem.index_inputs();
    inputs.index_q.memory = inputs.index_k.memory = Memory::kCudaDevice;
    return inputs;
  }
  AttentionInputs attention_inputs() const {
    AttentionInputs inputs = problem.attention_inputs();
    inputs.v.memory = Memory::kCudaDevice;
    return inputs;
  }
};

TEST(DeviceViews, HostBackendsRefuseThemByName) {
  DeviceMarked marked;
  for (const char* name : {"reference", "simd"}) {
    const Backend& backend = *FindBackend(name);
    const Status select =
        Select(backend, marked.problem.config, marked.index_inputs(), marked.outputs.selection_outputs());
    EXPECT_EQ(select.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(select.message(), std::string("index_q is in CUDA device memory, but backend ") + name +
                                    " reads host memory only: copy it to the host or use a backend that reads "
                                    "device memory");
    ASSERT_TRUE(
        Select(backend, marked.problem.config, marked.problem.index_inputs(), marked.outputs.selection_outputs()).ok());
    const Status attend = Attend(backend, marked.problem.config, marked.attention_inputs(),
                                 SelectionView{marked.outputs.topk_indices.data()}, marked.outputs.attention_outputs());
    EXPECT_EQ(attend.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(attend.message().find("v is in CUDA device memory, but backend"), std::string::npos) << attend.message();
  }
}

TEST(DeviceViews, ValidationLeavesTheirValuesToTheBackend) {
  DeviceMarked marked;
  SetElement(marked.problem.index_q, 1, 0, 2, std::numeric_limits<double>::quiet_NaN());
  IndexInputs host = marked.problem.index_inputs();
  const Status on_host = ValidateIndexInputs(marked.problem.config, host);
  EXPECT_EQ(on_host.message(), "index_q[1, 0, 2] = nan: inputs must be finite");
  EXPECT_TRUE(ValidateIndexInputs(marked.problem.config, marked.index_inputs()).ok());
  EXPECT_EQ(NonFiniteInput("index_q", 1, 0, 2, std::numeric_limits<double>::quiet_NaN()).message(),
            on_host.message());  // the message a device backend gives for the same element
}

TEST(DeviceViews, ABackendThatReadsDeviceMemoryIsHandedThem) {
  DeviceMarked marked;
  Backend reads_device = *FindBackend("reference");  // here the "device" memory is host memory it can read
  reads_device.reads_device_memory = true;
  ASSERT_TRUE(
      Select(reads_device, marked.problem.config, marked.index_inputs(), marked.outputs.selection_outputs()).ok());
  Outputs expected;
  ASSERT_TRUE(RunReference(marked.problem, &expected).ok());
  EXPECT_EQ(marked.outputs.topk_indices, expected.topk_indices);
}

TEST(DeviceViews, E4M3RoundingOfDeviceInputsIsRefused) {
  DeviceMarked marked;
  Backend reads_device = *FindBackend("reference");
  reads_device.reads_device_memory = true;
  Config e4m3 = marked.problem.config;
  e4m3.index_format = IndexFormat::kE4M3;
  const Status status = Select(reads_device, e4m3, marked.index_inputs(), marked.outputs.selection_outputs());
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_EQ(status.message(), "index_q is in CUDA device memory: index_format e4m3 rounds host inputs only");
}

}  // namespace
}  // namespace msa
