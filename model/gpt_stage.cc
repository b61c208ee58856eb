#include "model/gpt_stage.h"

#include "model/dropout_streams.h"
#include "model/gpt_params.h"
#include "parallel/mappings.h"

namespace mtnlg {

GPTStage::GPTStage(const GPTConfig& config, const StageSpec& stage, Backend& backend, DType dtype,
                   uint64_t seed, Communicator* tensor, int64_t grad_pad_multiple)
    : config_(config),
      stage_(stage),
      backend_(backend),
      dtype_(dtype),
      seed_(seed),
      tensor_(tensor),
      train_config_(config) {
  MTNLG_CHECK_EQ(config_.hidden % config_.heads, 0);
  MTNLG_CHECK_EQ(tensor_ == nullptr ? int64_t{1} : int64_t{tensor_->size()}, config_.tp_size);
  MTNLG_CHECK(tensor_ == nullptr || tensor_->rank() == config_.tp_rank);
  MTNLG_CHECK_EQ(config_.heads % config_.tp_size, 0);
  MTNLG_CHECK_EQ(config_.padded_vocab % config_.tp_size, 0);
  vocab_shard_ = {config_.tp_rank * config_.local_vocab(), config_.local_vocab(), config_.vocab};
  register_gpt_params(params_, config_, stage_);
  // bf16: bf16 weights, fp32 main gradients (acc_dtype).
  params_.allocate(backend_, dtype_, acc_dtype(dtype_), grad_pad_multiple);
  if (config_.fp8) {
    std::vector<int64_t> global;
    for (int64_t chunk = 0; chunk < stage_.num_chunks; ++chunk)
      for (int64_t i = stage_.chunk_first(chunk); i < stage_.chunk_last(chunk); ++i)
        global.push_back(i);
    fp8_ = std::make_unique<Fp8Linears>(config_.fp8_options, std::move(global), tensor_);
  }
  for (int64_t chunk = 0; chunk < stage_.num_chunks; ++chunk)
    for (int64_t i = stage_.chunk_first(chunk); i < stage_.chunk_last(chunk); ++i) {
      layers_.emplace_back(config_, i, params_, tensor_, fp8_.get());
      // The trailing dot keeps "layers.1." from matching "layers.10.".
      const std::string prefix = layer_param(i, "");
      std::vector<const Param*>& owned = layer_params_.emplace_back();
      for (auto it = params_.params().rbegin(); it != params_.params().rend(); ++it)
        if (it->spec.name.starts_with(prefix)) owned.push_back(&*it);
    }
  // GradReadyHook reports every parameter: the layers', plus the ones backward names.
  size_t reported = (stage_.pre_process || stage_.post_process ? 1 : 0) +
                    (stage_.pre_process ? 1 : 0) + (stage_.post_process ? 2 : 0);
  for (const auto& owned : layer_params_) reported += owned.size();
  MTNLG_CHECK_EQ(reported, params_.params().size());
}

void GPTStage::init_weights(uint64_t seed) {
  params_.init_values(backend_, seed);
}

void GPTStage::set_training(bool training) {
  training_ = training;
  config_.hidden_dropout = training ? train_config_.hidden_dropout : 0.0;
  config_.attention_dropout = training ? train_config_.attention_dropout : 0.0;
  for (auto& layer : layers_) layer.set_dropout(config_.hidden_dropout, config_.attention_dropout);
  if (fp8_) fp8_->set_recording(training);
}

void GPTStage::set_sequence_length(int64_t s) {
  MTNLG_CHECK_MSG(1 <= s && s <= config_.max_positions,
                  "sequence length " << s << " outside [1, " << config_.max_positions << "]");
  if (s == config_.seq) return;
  config_.seq = train_config_.seq = s;
  for (auto& layer : layers_) layer.set_sequence_length(s);
  // The buffers sized by the length are made again at the new one when next used.
  scratch_batch_ = sp_batch_ = recompute_batch_ = 0;
}

Shape GPTStage::activation_shape(int64_t b) const {
  if (config_.sequence_parallel) return {config_.local_rows(b), config_.hidden};
  return {b, config_.seq, config_.hidden};
}

StageActivations GPTStage::make_activations(int64_t b, int64_t chunk, bool head) const {
  MTNLG_CHECK(0 <= chunk && chunk < stage_.num_chunks);
  const int64_t s = config_.seq, h = config_.hidden, rows = config_.local_rows(b);
  MTNLG_CHECK_MSG(!config_.sequence_parallel || b * s % config_.tp_size == 0,
                  "sequence parallelism: " << b << " x " << s << " tokens do not divide by tensor "
                                           << config_.tp_size);
  const auto layers = static_cast<size_t>(stage_.layers_per_chunk());
  StageActivations a;
  a.batch = b;
  a.chunk = chunk;
  a.head = head;
  if (has_embedding(chunk)) a.tokens = backend_.alloc({b, s}, DType::kI32);
  for (size_t k = 0; k <= layers; ++k)
    a.residual.push_back(backend_.alloc(activation_shape(b), dtype_));
  const size_t saved = config_.activation_checkpointing ? 0 : layers;
  for (size_t k = 0; k < saved; ++k)
    a.layers.push_back(LayerActivations::allocate(backend_, config_, b, dtype_));
  if (has_head(chunk)) {
    a.targets = backend_.alloc({b, s}, DType::kI32);
    a.lnf_out = backend_.alloc({b, s, h}, dtype_);
    a.lnf_mean = backend_.alloc({rows}, acc_dtype(dtype_));
    a.lnf_rstd = backend_.alloc({rows}, acc_dtype(dtype_));
    if (head) {
      a.logits = backend_.alloc({b * s, config_.local_vocab()}, dtype_);
      if (config_.tp_size > 1) a.ce = vocab_parallel_ce_allocate(backend_, b * s);
    }
  }
  return a;
}

LayerActivations& GPTStage::layer_acts(StageActivations& acts, size_t k) {
  if (!config_.activation_checkpointing) return acts.layers[k];
  ensure_recompute(acts.batch);
  return recompute_;
}

void GPTStage::ensure_recompute(int64_t b) {
  if (recompute_batch_ == b) return;
  recompute_ = LayerActivations::allocate(backend_, config_, b, dtype_);
  recompute_batch_ = b;
}

void GPTStage::ensure_scratch(int64_t b) {
  if (scratch_batch_ == b) return;
  scratch_ = LayerScratch::allocate(backend_, config_, b, dtype_);
  dres_ = backend_.alloc(activation_shape(b), dtype_);
  scratch_batch_ = b;
}

void GPTStage::ensure_sequence_parallel(int64_t b) {
  if (!config_.sequence_parallel || sp_batch_ == b) return;
  sp_ = SequenceParallelBuffers::allocate(backend_, config_, b, dtype_, acc_dtype(dtype_));
  sp_batch_ = b;
}

RngStream GPTStage::embedding_stream(uint64_t micro_batch_id, int64_t b) const {
  RngStream r = embedding_dropout_stream(seed_, micro_batch_id);
  r.offset += static_cast<uint64_t>(config_.first_row(b) * config_.hidden);
  return r;
}

double GPTStage::forward(StageActivations& acts, const Tensor& input, const Tensor& targets,
                         uint64_t micro_batch_id) {
  if (!forward_to_logits(acts, input, micro_batch_id)) return 0.0;
  Backend& be = backend_;
  be.copy(acts.targets, targets);
  const Tensor flat = acts.targets.view({acts.targets.numel()});
  if (config_.tp_size > 1)
    return vocab_parallel_cross_entropy_forward(be, acts.ce, acts.logits, flat, vocab_shard_,
                                                tensor_);
  return be.cross_entropy_forward(acts.logits, flat, config_.vocab);
}

void GPTStage::forward(StageActivations& acts, const Tensor& input, const Tensor& targets,
                       uint64_t micro_batch_id, LossSum& loss) {
  if (!forward_to_logits(acts, input, micro_batch_id)) return;
  Backend& be = backend_;
  be.copy(acts.targets, targets);
  const Tensor flat = acts.targets.view({acts.targets.numel()});
  if (config_.tp_size > 1) {
    // Its all-reduces bring the statistics to the host anyway.
    loss.add_on_host(vocab_parallel_cross_entropy_forward(be, acts.ce, acts.logits, flat,
                                                          vocab_shard_, tensor_));
    return;
  }
  be.cross_entropy_forward_add(loss.device_total(), acts.logits, flat, config_.vocab);
}

bool GPTStage::forward_to_logits(StageActivations& acts, const Tensor& input,
                                 uint64_t micro_batch_id) {
  Backend& be = backend_;
  acts.micro_batch_id = micro_batch_id;
  ensure_sequence_parallel(acts.batch);
  if (fp8_) fp8_->reserve(be, config_, acts.batch);  // FP8's cast buffers, kept from here
  SequenceParallelBuffers* sp = config_.sequence_parallel ? &sp_ : nullptr;
  const Param* wte = stage_.pre_process || stage_.post_process
                         ? &params_.get("embedding.word_embeddings.weight")
                         : nullptr;
  const int64_t chunk = acts.chunk;
  if (has_embedding(chunk)) {
    MTNLG_CHECK_MSG(input.shape() == acts.tokens.shape(), "tokens " << input.str());
    be.copy(acts.tokens, input);
    const Tensor& wpe = params_.get("embedding.position_embeddings.weight").value;
    if (sp != nullptr) {
      // Each rank's partial sum (its vocabulary rows; rank 0 adds the positions), reduce-scattered
      // to this rank's token rows.
      vocab_parallel_embedding_forward(be, sp->partial, acts.tokens, wte->value, wpe, vocab_shard_,
                                       config_.tp_rank == 0, nullptr);
      reduce_scatter_rows(be, acts.residual[0], sp->partial, tensor_);
    } else if (config_.tp_size > 1) {
      // Rank 0 adds the positions; the all-reduce makes the sum replicated.
      vocab_parallel_embedding_forward(be, acts.residual[0], acts.tokens, wte->value, wpe,
                                       vocab_shard_, config_.tp_rank == 0, tensor_);
    } else {
      be.embedding_forward(acts.residual[0], acts.tokens, wte->value, wpe);
    }
    if (config_.hidden_dropout > 0)
      be.dropout_forward(acts.residual[0], acts.residual[0], config_.hidden_dropout,
                         embedding_stream(micro_batch_id, acts.batch));
  } else {
    be.copy(acts.residual[0], input);
  }
  for (size_t k = 0; k + 1 < acts.residual.size(); ++k)
    layers_[layer_index(chunk, k)].forward(be, layer_acts(acts, k), acts.residual[k + 1],
                                           acts.residual[k], seed_, micro_batch_id, sp);
  if (!has_head(chunk)) return false;

  const Param& lnf_w = params_.get("final_layernorm.weight");
  const Param& lnf_b = params_.get("final_layernorm.bias");
  if (sp != nullptr) {
    // This rank's rows normalised into the first rows of the partial buffer, then all-gathered:
    // the LM head (column-parallel over the vocabulary) takes every row.
    Tensor local = sp->partial.as_2d().slice(0, config_.local_rows(acts.batch));
    be.layernorm_forward(local, acts.lnf_mean, acts.lnf_rstd, acts.residual.back(), lnf_w.value,
                         lnf_b.value, config_.ln_eps);
    all_gather_rows(be, acts.lnf_out, local, tensor_);
  } else {
    be.layernorm_forward(acts.lnf_out, acts.lnf_mean, acts.lnf_rstd, acts.residual.back(),
                         lnf_w.value, lnf_b.value, config_.ln_eps);
  }
  if (!acts.head) return false;
  // Tied LM head: logits = lnf_out @ wte^T (column-parallel over the vocabulary). Padded
  // vocabulary columns are computed but the loss ignores them.
  be.gemm_weight(acts.logits, acts.lnf_out.as_2d(), wte->value, true, 1.0, 0.0);
  return true;
}

Tensor GPTStage::backward(StageActivations& acts, const Tensor& doutput, double grad_scale,
                          const GradReadyHook& on_grad_ready) {
  Backend& be = backend_;
  ensure_scratch(acts.batch);
  ensure_sequence_parallel(acts.batch);
  SequenceParallelBuffers* sp = config_.sequence_parallel ? &sp_ : nullptr;
  Param* wte = stage_.pre_process || stage_.post_process
                   ? &params_.get("embedding.word_embeddings.weight")
                   : nullptr;
  const int64_t chunk = acts.chunk;
  MTNLG_CHECK_MSG(acts.head, "backward of activations made without the LM head");
  if (has_head(chunk)) {
    Param& lnf_w = params_.get("final_layernorm.weight");
    Param& lnf_b = params_.get("final_layernorm.bias");
    const Tensor targets = acts.targets.view({acts.targets.numel()});
    if (config_.tp_size > 1) {
      vocab_parallel_cross_entropy_backward(be, acts.logits, acts.ce, acts.logits, targets,
                                            vocab_shard_, grad_scale);
    } else {
      be.cross_entropy_backward(acts.logits, acts.logits, targets, config_.vocab, grad_scale);
    }
    if (sp != nullptr) {
      // dL/d(lnf_out) of every row from this rank's vocabulary columns, reduce-scattered to its
      // rows (the backward of the all-gather).
      Tensor dlnf = sp->partial.as_2d();
      be.gemm_weight(dlnf, acts.logits, wte->value, false, 1.0, 0.0);
      reduce_scatter_rows(be, scratch_.dln, sp->partial, tensor_);
    } else {
      Tensor dlnf = scratch_.dln.as_2d();
      be.gemm_weight(dlnf, acts.logits, wte->value, false, 1.0, 0.0);
      copy_to_tensor_region_backward(be, dlnf, tensor_);
    }
    be.gemm(wte->grad, acts.logits, true, acts.lnf_out.as_2d(), false, 1.0, 1.0);
    be.fill(dres_, 0.0);
    if (sp != nullptr) {
      layernorm_backward_sequence_parallel(be, dres_, lnf_w, lnf_b, scratch_.dln,
                                           acts.residual.back(), acts.lnf_mean, acts.lnf_rstd,
                                           sp->ln_grads, tensor_);
    } else {
      be.layernorm_backward(dres_, lnf_w.grad, lnf_b.grad, scratch_.dln, acts.residual.back(),
                            lnf_w.value, acts.lnf_mean, acts.lnf_rstd);
    }
    if (on_grad_ready) {
      on_grad_ready(lnf_w);
      on_grad_ready(lnf_b);
      // The head's copy is final here unless this stage also holds the input embedding.
      if (!stage_.pre_process) on_grad_ready(*wte);
    }
  } else {
    be.copy(dres_, doutput);
  }
  for (size_t k = acts.residual.size() - 1; k-- > 0;) {
    TransformerLayer& layer = layers_[layer_index(chunk, k)];
    if (config_.activation_checkpointing) {
      // Recompute this layer's forward from its saved input; the dropout streams are keyed by
      // micro-batch and layer, so the masks are the same ones the first forward drew.
      layer.forward(be, layer_acts(acts, k), acts.residual[k + 1], acts.residual[k], seed_,
                    acts.micro_batch_id, sp);
    }
    layer.backward(be, scratch_, dres_, layer_acts(acts, k), acts.residual[k], seed_,
                   acts.micro_batch_id, sp);
    if (on_grad_ready)
      for (const Param* p : layer_params_[layer_index(chunk, k)]) on_grad_ready(*p);
  }
  if (!has_embedding(chunk)) return dres_;

  if (config_.hidden_dropout > 0) {
    be.dropout_backward(scratch_.dh, dres_, config_.hidden_dropout,
                        embedding_stream(acts.micro_batch_id, acts.batch));
  } else {
    be.copy(scratch_.dh, dres_);
  }
  Tensor& dwpe = params_.get("embedding.position_embeddings.weight").grad;
  if (sp != nullptr) {
    // Every row's gradient (the backward of the reduce-scatter), as without sequence parallelism.
    all_gather_rows(be, sp->gathered, scratch_.dh, tensor_);
    vocab_parallel_embedding_backward(be, wte->grad, dwpe, sp->gathered, acts.tokens, vocab_shard_);
  } else if (config_.tp_size > 1) {
    vocab_parallel_embedding_backward(be, wte->grad, dwpe, scratch_.dh, acts.tokens, vocab_shard_);
  } else {
    be.embedding_backward(wte->grad, dwpe, scratch_.dh, acts.tokens);
  }
  if (on_grad_ready) {
    on_grad_ready(params_.get("embedding.position_embeddings.weight"));
    on_grad_ready(*wte);
  }
  return Tensor();
}

}  // namespace mtnlg
