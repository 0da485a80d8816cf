// A compiled chat template: parse once, render many times with different variables.
// Rendering is bounded by RenderLimits (steps, nesting, output size, list sizes).
// A Template is immutable after compile() and may be rendered from several threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/interpreter.h"
#include "text/jinja/value.h"

namespace flare::text::jinja {

struct CompileLimits {
  size_t max_source_bytes = 1u << 20;
  int max_depth = 256;
};

class Template {
 public:
  // Throws flare::Error ("chat template syntax error at line L, column C: ...").
  static Template compile(std::string source, const CompileLimits& limits = {});

  // Variables are bound in the global scope beside true/false/none, range, namespace,
  // raise_exception and strftime_now. Throws flare::Error with line and column.
  std::string render(const std::vector<std::pair<std::string, Value>>& variables,
                     const RenderLimits& limits = {}) const;

  const std::string& source() const { return *source_; }

 private:
  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const NodeList> program_;
};

}  // namespace flare::text::jinja
