// The table of supported architectures (see family.h).
#include <array>
#include <string>

#include "model/families/family.h"

namespace flare::model {
namespace {

constexpr std::array<Family, 4> kFamilies = {{
    {"LlamaForCausalLM", configure_llama},
    {"Qwen3ForCausalLM", configure_qwen3},
    {"Qwen2ForCausalLM", configure_qwen2},
    {"MistralForCausalLM", configure_mistral},
}};

}  // namespace

const Family* family_find(std::string_view architecture) {
  for (const Family& family : kFamilies) {
    if (family.architecture == architecture) return &family;
  }
  return nullptr;
}

std::string family_list() {
  std::string out;
  for (const Family& family : kFamilies) {
    if (!out.empty()) out += ", ";
    out += family.architecture;
  }
  return out;
}

}  // namespace flare::model
