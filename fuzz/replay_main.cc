// The replay driver (DESIGN.md, simdjson's practice): in the normal build every fuzz target links this main
// instead of libFuzzer, so CTest runs the target's checked-in corpus on every `make test` and the corpus
// never rots. Usage: replay_<target> PATH...; each PATH is a file or a directory (walked recursively, in
// name order). Each input's path is printed before it runs, so a crash names its input. Exit 0 when every
// input ran; 1 when a path is missing or no input was found at all (an empty corpus proves nothing).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

// The regular files under `path` (or `path` itself), sorted; false when it does not exist.
bool CollectInputs(const std::filesystem::path& path, std::vector<std::filesystem::path>* inputs) {
  std::error_code error;
  if (std::filesystem::is_regular_file(path, error)) {
    inputs->push_back(path);
    return true;
  }
  if (!std::filesystem::is_directory(path, error)) return false;
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(path, error)) {
    if (entry.is_regular_file()) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  inputs->insert(inputs->end(), found.begin(), found.end());
  return !error;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 1;
  }
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!CollectInputs(argv[i], &inputs)) {
      std::fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
      return 1;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs found under the given paths\n");
    return 1;
  }
  size_t total_bytes = 0;
  for (const std::filesystem::path& input : inputs) {
    std::printf("replay: %s\n", input.c_str());
    std::fflush(stdout);
    std::ifstream stream(input, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
    if (!stream.good() && !stream.eof()) {
      std::fprintf(stderr, "replay: %s: cannot read\n", input.c_str());
      return 1;
    }
    total_bytes += bytes.size();
    // libFuzzer never passes a null pointer; neither do we (an empty input gets a valid, empty buffer).
    static const uint8_t kEmpty[1] = {0};
    LLVMFuzzerTestOneInput(bytes.empty() ? kEmpty : bytes.data(), bytes.size());
  }
  std::printf("replay: ran %zu inputs (%zu bytes)\n", inputs.size(), total_bytes);
  return 0;
}
