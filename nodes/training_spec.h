// The "training" section of a project: epochs, batch, seed, device, execution mode, the
// optimizer, the learning-rate schedule, gradient clipping and early stopping.
//
//   "training": {"epochs": 10, "batch_size": 128, "seed": 0, "device": "cpu", "mode": "static",
//                "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": false,
//                              "weight_decay": 0},
//                "schedule": {"type": "cosine", "eta_min": 0, "warmup_steps": 0},
//                "clip_grad_norm": 0, "clip_grad_value": 0,
//                "early_stopping": {"patience": 3, "monitor": "loss", "min_delta": 0},
//                "precision": "bf16", "activation_checkpointing": "auto"}
//
// optimizer.type: "sgd" (lr 0.01, momentum, nesterov, weight_decay), "adam" and "adamw"
// (lr 0.001, beta1, beta2, eps, weight_decay), "rmsprop" (lr 0.01, alpha, eps,
// weight_decay), "adagrad" (lr 0.01, lr_decay, eps 1e-10, weight_decay).
// schedule.type: "constant"; "step" (step_size, gamma); "exponential" (gamma); "cosine"
// (eta_min; over all epochs); "one_cycle" (max_lr, pct_start, div_factor,
// final_div_factor; over all steps); "plateau" (factor, patience, threshold, min_lr: on the
// validation loss, else the training loss). Every type takes "warmup_steps".
// early_stopping.monitor: a validation metric, "loss", "accuracy" or "macro_f1"
// (classification), "mae", "rmse" or "r2" (regression); needs dataset.validation > 0.
// precision: "f32" (the default, not saved), "bf16" or "f16": mixed precision, matrix
// products in that precision with f32 master weights and dynamic loss scaling
// (engine/train/mixed_precision.h).
// activation_checkpointing: "off" (the default, not saved), "auto" (recompute segments of
// the forward pass in backward instead of storing them: about half the planned activation
// memory for some 20 % more time), or a byte budget for the training step's planned arena
// (the fewest recomputations that fit; an error names the smallest possible).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/train/trainer.h"

namespace mls::nodes {

class FieldReader;

// The limits of epochs and batch size: the .mls reader and the command line's --epochs and
// --batch-size check these same numbers.
constexpr int64_t kMaxEpochs = 10'000'000;
constexpr int64_t kMaxBatchSize = int64_t{1} << 24;

enum class OptimizerType { Sgd, Adam, AdamW, RMSprop, Adagrad };

struct OptimizerSpec {
  OptimizerType type = OptimizerType::Sgd;
  double lr = 0.01;  // 0.001 when an adam/adamw block gives none
  double weight_decay = 0.0;
  // sgd
  double momentum = 0.0;
  bool nesterov = false;
  // adam, adamw (eps also rmsprop and adagrad)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double alpha = 0.99;    // rmsprop
  double lr_decay = 0.0;  // adagrad
  // Compares the fields `type` uses (the ones saved): an adam spec's momentum is moot.
  bool operator==(const OptimizerSpec& o) const;
};

struct TrainingSpec {
  int64_t epochs = 5;
  int64_t batch_size = 128;
  uint64_t seed = 0;
  std::string device = "cpu";  // "cpu", "cuda" or "vulkan"
  ExecMode mode = ExecMode::Static;
  OptimizerSpec optimizer;
  ScheduleConfig schedule;  // its lr is the optimizer's
  double clip_grad_norm = 0.0, clip_grad_value = 0.0;
  EarlyStopConfig early_stopping;
  Precision precision = Precision::F32;
  int64_t activation_checkpointing = -1;  // -1 off, 0 auto, > 0 a byte budget
  bool operator==(const TrainingSpec&) const;
};

// Reads root["training"] (absent: the defaults) into `out`.
Result<void> parse_training(const FieldReader& reader, const nlohmann::json& root, TrainingSpec& out);
// The section as it is saved (keys in the order above; schedule and early stopping only
// when used).
nlohmann::ordered_json training_json(const TrainingSpec& t);
// The engine's configuration for these settings.
TrainConfig train_config(const TrainingSpec& t);

std::string_view to_string(OptimizerType t);  // "sgd", "adam", "adamw", "rmsprop", "adagrad"
std::string_view to_string(ExecMode m);       // "static", "eager"
// "off", "auto" or a byte count (as --activation-checkpointing takes it) -> -1, 0 or bytes.
Result<int64_t> parse_activation_checkpointing(const std::string& text);

}  // namespace mls::nodes
