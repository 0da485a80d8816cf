// Capacity errors in the form of spec cli-design section 6: what is needed (a sum of terms),
// what is available (free memory minus deductions), and options that each satisfy the need.
//
//   needs 68.3 GiB weights + 7.0 GiB graphs + 5.2 GiB live state + 0.9 GiB prefix cache
//          + 0.8 GiB minimum pages (4 × 8,192 tokens) = 82.2 GiB;
//          has 95.6 GiB free − 1.0 GiB headroom − 21.0 GiB reserve = 73.6 GiB.
//          Options: [memory] reserve = "12G".
//
// The text starts after "error: "; continuation lines are indented to align under it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"

namespace flare {

struct CapacityTerm {
  std::uint64_t bytes = 0;
  std::string label;   // "weights", "minimum pages"
  std::string detail;  // optional, shown in parentheses: "4 × 8,192 tokens"
};

struct CapacityShortfall {
  std::vector<CapacityTerm> needed;      // summed
  CapacityTerm available;                // e.g. {95.6 GiB, "free"}
  std::vector<CapacityTerm> deductions;  // subtracted from available
  std::vector<std::string> options;      // each satisfies the requirement on its own
};

inline constexpr int kCapacityWrapColumns = 90;
inline constexpr const char* kErrorIndent = "       ";  // width of "error: "

std::string format_capacity_shortfall(const CapacityShortfall& shortfall);

// The GPU-selection form: "needs 2 GPUs with 95.0 GiB; 1 selected; use --gpus 0-1".
std::string format_gpu_shortfall(int n_needed, std::uint64_t bytes_per_gpu, int n_selected,
                                 const std::string& option);

[[noreturn]] void fail_capacity(const CapacityShortfall& shortfall);

}  // namespace flare
