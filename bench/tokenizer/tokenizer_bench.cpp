// Tokenizer benchmark: load time and single-thread encode throughput on a text file.
//
//   tokenizer_bench TOKENIZER_DIR TEXT_FILE [PASSES]
//
// TOKENIZER_DIR holds tokenizer.json (+ tokenizer_config.json). Prints the best of 5 loads, the
// first (cold cache) encode pass and the mean of the following passes (warm cache), in MB/s of
// input bytes per second of thread CPU time, plus the token count so runs can be compared with bench/tokenizer/reference.mjs.
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include "text/tokenizer.h"

namespace {

// CPU time of this thread: on a shared machine wall time mostly measures the other processes.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_DIR TEXT_FILE [PASSES]\n", argv[0]);
    return 2;
  }
  int passes = argc > 3 ? std::max(2, std::atoi(argv[3])) : 10;
  std::ifstream in(argv[2], std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  if (text.empty()) {
    std::fprintf(stderr, "%s is empty or unreadable\n", argv[2]);
    return 2;
  }

  double best_load_s = 1e9;
  std::shared_ptr<const flare::text::Tokenizer> tok;
  try {
    for (int i = 0; i < 5; ++i) {
      double start = cpu_seconds();
      tok = flare::text::Tokenizer::load(argv[1]);
      best_load_s = std::min(best_load_s, cpu_seconds() - start);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "load failed: %s\n", e.what());
    return 1;
  }

  double mb = static_cast<double>(text.size()) / 1e6;
  double start = cpu_seconds();
  size_t n_tokens = tok->encode(text, false).size();
  double cold_s = cpu_seconds() - start;
  start = cpu_seconds();
  for (int i = 1; i < passes; ++i) n_tokens = tok->encode(text, false).size();
  double warm_s = (cpu_seconds() - start) / (passes - 1);

  std::printf("vocab %zu, load %.1f ms (best of 5)\n", tok->vocab_size(), best_load_s * 1e3);
  std::printf("input %.3f MB, %zu tokens\n", mb, n_tokens);
  std::printf("encode cold %.1f MB/s, warm %.1f MB/s (mean of %d passes)\n", mb / cold_s, mb / warm_s, passes - 1);
  return 0;
}
