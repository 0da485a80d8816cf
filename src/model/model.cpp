// A loaded model (see model.h).
#include "model/model.h"

#include "common/error.h"

namespace flare::model {

std::unique_ptr<Model> Model::load(const std::filesystem::path& dir, helios::Backend& backend) {
  ModelSpec spec = model_spec_load(dir);
  LoadedWeights weights = weights_load(spec, dir, backend);
  return std::make_unique<Model>(std::move(spec), backend, std::move(weights));
}

Model::Model(ModelSpec spec, helios::Backend& backend, LoadedWeights weights)
    : spec_(std::move(spec)),
      architecture_(architecture_of(spec_)),
      backend_(backend),
      weights_(std::move(weights)),
      history_(architecture_.history(spec_)) {
  program_ = architecture_.program(spec_, backend_, weights_);
  executor_ = std::make_unique<helios::StepExecutor>(backend_, *program_);
}

helios::HistoryLayout Model::kv_cache_layout(std::int32_t n_pages, std::int32_t page_size, helios::DType dtype) const {
  return helios::history_kv_layout(history_, n_pages, page_size, dtype);
}

helios::HistoryLayout Model::kv_cache_layout(std::span<const std::int32_t> n_pages, std::int32_t page_size,
                                             helios::DType dtype) const {
  return helios::history_kv_layout(history_, n_pages, page_size, dtype);
}

bool Model::capture_decode_graph(std::int32_t n_rows, helios::HistoryCaches& cache,
                                 std::vector<std::int32_t> scratch_pages) {
  if (n_rows < 1) fail(ExitCode::failure, "internal: a decode graph of {} rows", n_rows);
  return executor_->capture({n_rows, 1, 1, cache.groups.front().layout.dtype}, cache, std::move(scratch_pages));
}

bool Model::capture_prefill_graph(std::int32_t n_tokens, std::int32_t n_logits, helios::HistoryCaches& cache,
                                  std::vector<std::int32_t> scratch_pages) {
  if (n_tokens < 2 || n_logits < 0 || n_logits > 1) {
    fail(ExitCode::failure, "internal: a prefill graph of {} tokens and {} logits rows", n_tokens, n_logits);
  }
  return executor_->capture({1, n_tokens, n_logits, cache.groups.front().layout.dtype}, cache, std::move(scratch_pages));
}

bool Model::capture_verify_graph(std::int32_t n_rows, std::int32_t n_tokens, helios::HistoryCaches& cache,
                                 std::vector<std::int32_t> scratch_pages) {
  if (n_rows < 1 || n_tokens < 2) fail(ExitCode::failure, "internal: a verify graph of {} rows x {} tokens", n_rows, n_tokens);
  return executor_->capture({n_rows, n_tokens, n_tokens, cache.groups.front().layout.dtype}, cache,
                            std::move(scratch_pages));
}

bool Model::capture_graph(const helios::StepShape& shape, helios::HistoryCaches& cache,
                          std::vector<std::int32_t> scratch_pages) {
  if (shape.is_decode()) return capture_decode_graph(shape.n_rows, cache, std::move(scratch_pages));
  if (shape.is_verify()) return capture_verify_graph(shape.n_rows, shape.tokens_per_row, cache, std::move(scratch_pages));
  if (shape.n_rows != 1) fail(ExitCode::failure, "internal: a graph of {}", shape.describe());
  return capture_prefill_graph(shape.tokens_per_row, shape.logits_per_row, cache, std::move(scratch_pages));
}

std::int32_t Model::n_verify_graphs() const {
  std::int32_t n = 0;
  for (const helios::StepShape& shape : executor_->graph_shapes()) n += shape.is_verify() ? 1 : 0;
  return n;
}

std::int32_t Model::n_decode_graphs() const {
  std::int32_t n = 0;
  for (const helios::StepShape& shape : executor_->graph_shapes()) n += shape.is_decode() ? 1 : 0;
  return n;
}

std::int32_t Model::n_prefill_graphs() const {
  return std::int32_t(executor_->graph_shapes().size()) - n_decode_graphs() - n_verify_graphs();
}

std::size_t Model::n_decode_graph_nodes() const {
  std::size_t n = 0;
  for (const helios::StepShape& shape : executor_->graph_shapes()) {
    if (shape.is_decode()) n += executor_->graph_nodes(shape);
  }
  return n;
}

std::size_t Model::n_prefill_graph_nodes() const {
  std::size_t n = 0;
  for (const helios::StepShape& shape : executor_->graph_shapes()) {
    if (!shape.is_decode()) n += executor_->graph_nodes(shape);
  }
  return n;
}

}  // namespace flare::model
