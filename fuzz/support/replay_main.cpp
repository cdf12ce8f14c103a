// main() for the fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput once on each
// input named on the command line (a directory: every file in it, in name order), as
// libFuzzer does for a corpus with -runs=0. `make test` builds every target this way in
// its ASan + UBSan build (g++) and replays fuzz/corpus/<target> (ctest fuzz_replay_*), so a
// regression of any fixed finding, or a broken property on a seed, fails the test suite
// without a clang build; `make fuzz-smoke` / `make fuzz` mutate beyond the seeds.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const fs::path p(argv[i]);
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file()) inputs.push_back(e.path());
    } else {
      inputs.push_back(p);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::fprintf(stderr, "usage: %s <corpus dir or input file>...: no inputs found\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  for (const fs::path& p : inputs) {
    std::ifstream f(p, std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "cannot read %s\n", p.c_str());
      return 2;
    }
    const std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)),
                                    std::istreambuf_iterator<char>());
    std::printf("input %s (%zu bytes)\n", p.filename().c_str(), data.size());
    std::fflush(stdout);  // a trap names the input that caused it
    LLVMFuzzerTestOneInput(data.data(), data.size());
  }
  std::printf("replayed %zu inputs: no finding\n", inputs.size());
  return 0;
}
