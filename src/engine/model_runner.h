// ModelStepRunner: the StepRunner over a real model (src/model) on a backend (src/helios). It owns
// the backend, the loaded model and the KV cache sized to the engine's page pool; run() performs the
// step's copy-on-write page copies, the forward pass, and hands back the FP32 logits. Owned and
// called by the engine thread only.
#pragma once

#include <filesystem>
#include <memory>

#include "engine/engine.h"
#include "engine/engine_options.h"
#include "helios/backend.h"
#include "model/model.h"

namespace flare::engine {

class ModelStepRunner final : public StepRunner {
 public:
  // Loads `checkpoint_dir` onto `backend` and allocates KV storage for options.n_pages pages of
  // options.page_size_tokens tokens in `kv_dtype`.
  static std::unique_ptr<ModelStepRunner> load(std::unique_ptr<helios::Backend> backend,
                                               const std::filesystem::path& checkpoint_dir,
                                               const EngineOptions& options, helios::DType kv_dtype);
  ModelStepRunner(std::unique_ptr<helios::Backend> backend, std::unique_ptr<model::Model> model,
                  const EngineOptions& options, helios::DType kv_dtype);
  ~ModelStepRunner() override;

  std::int32_t vocab_size() const override { return model_->spec().vocab_size; }
  void run(const helios::Step& step, std::span<const helios::PageCopy> copies, std::span<float> logits) override;
  const model::Model& model() const { return *model_; }

 private:
  std::unique_ptr<helios::Backend> backend_;
  std::unique_ptr<model::Model> model_;  // refers to *backend_
  helios::KvCache cache_;
};

}  // namespace flare::engine
