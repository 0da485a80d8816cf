// The StepRunner over a real model (see model_runner.h).
#include "engine/model_runner.h"

#include <algorithm>

#include "common/error.h"

namespace flare::engine {

std::unique_ptr<ModelStepRunner> ModelStepRunner::load(std::unique_ptr<helios::Backend> backend,
                                                       const std::filesystem::path& checkpoint_dir,
                                                       const EngineOptions& options, helios::DType kv_dtype) {
  if (!backend) fail(ExitCode::failure, "internal: model runner without a backend");
  auto model = model::Model::load(checkpoint_dir, *backend);
  return std::make_unique<ModelStepRunner>(std::move(backend), std::move(model), options, kv_dtype);
}

ModelStepRunner::ModelStepRunner(std::unique_ptr<helios::Backend> backend, std::unique_ptr<model::Model> model,
                                 const EngineOptions& options, helios::DType kv_dtype)
    : backend_(std::move(backend)), model_(std::move(model)) {
  if (!backend_ || !model_) fail(ExitCode::failure, "internal: model runner without a backend or a model");
  cache_ = backend_->allocate_kv_cache(model_->kv_cache_layout(options.n_pages, options.page_size_tokens, kv_dtype));
}

ModelStepRunner::~ModelStepRunner() {
  model_.reset();  // before the backend it lives on
  cache_.storage.reset();
}

void ModelStepRunner::run(const helios::Step& step, std::span<const helios::PageCopy> copies, std::span<float> logits) {
  if (!copies.empty()) backend_->kv_copy_pages(cache_, copies);
  const std::vector<float> out = model_->forward(step, cache_);
  if (out.size() != logits.size()) {
    fail(ExitCode::failure, "internal: the model returned {} logits where the step wants {}", out.size(), logits.size());
  }
  std::copy(out.begin(), out.end(), logits.begin());
}

}  // namespace flare::engine
