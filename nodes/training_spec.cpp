#include "nodes/training_spec.h"

#include <cerrno>
#include <cstdlib>

#include "nodes/json_fields.h"

namespace mls::nodes {

namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;

const std::vector<std::string> kOptimizers = {"sgd", "adam", "adamw", "rmsprop", "adagrad"};
const std::vector<std::string> kSchedules = {"constant", "step", "exponential", "cosine", "one_cycle", "plateau"};
const std::vector<std::string> kMonitors = {"loss", "accuracy", "macro_f1", "mae", "rmse", "r2"};

Result<void> parse_optimizer(const FieldReader& r, const json& training, const std::string& training_path,
                             OptimizerSpec& out) {
  auto sec = r.section(training, training_path, "optimizer");
  if (!sec) return sec.error();
  if (!*sec) return {};
  const json& o = **sec;
  const std::string path = ptr(training_path, "optimizer");
  std::string type = "sgd";
  if (auto e = r.choice_field(o, path, "type", "optimizer", kOptimizers, type); !e) return e;
  out = OptimizerSpec{};
  out.type = static_cast<OptimizerType>(std::find(kOptimizers.begin(), kOptimizers.end(), type) - kOptimizers.begin());
  const std::string context = " for optimizer '" + type + "'";
  std::vector<std::string> keys = {"type", "lr", "weight_decay"};
  switch (out.type) {
    case OptimizerType::Sgd:
      keys.insert(keys.end(), {"momentum", "nesterov"});
      break;
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
      out.lr = 0.001;
      keys.insert(keys.end(), {"beta1", "beta2", "eps"});
      break;
    case OptimizerType::RMSprop:
      keys.insert(keys.end(), {"alpha", "eps"});
      break;
    case OptimizerType::Adagrad:
      out.eps = 1e-10;  // PyTorch's default for Adagrad
      keys.insert(keys.end(), {"lr_decay", "eps"});
      break;
  }
  if (auto e = r.known_keys(o, path, keys, context); !e) return e;
  if (auto e = r.number_field(o, path, "momentum", kUnitOpen, out.momentum); !e) return e;
  if (auto e = r.bool_field(o, path, "nesterov", out.nesterov); !e) return e;
  if (out.nesterov && out.momentum <= 0) return r.fail(ptr(path, "nesterov"), "Nesterov momentum needs momentum > 0");
  if (auto e = r.number_field(o, path, "beta1", kUnitOpen, out.beta1); !e) return e;
  if (auto e = r.number_field(o, path, "beta2", kUnitOpen, out.beta2); !e) return e;
  if (auto e = r.number_field(o, path, "eps", kPositive, out.eps); !e) return e;
  if (auto e = r.number_field(o, path, "alpha", kUnitOpen, out.alpha); !e) return e;
  if (auto e = r.number_field(o, path, "lr_decay", kNonNegative, out.lr_decay); !e) return e;
  if (auto e = r.number_field(o, path, "lr", kPositive, out.lr); !e) return e;
  return r.number_field(o, path, "weight_decay", kNonNegative, out.weight_decay);
}

Result<void> parse_schedule(const FieldReader& r, const json& training, const std::string& training_path,
                            ScheduleConfig& out) {
  auto sec = r.section(training, training_path, "schedule");
  if (!sec) return sec.error();
  if (!*sec) return {};
  const json& s = **sec;
  const std::string path = ptr(training_path, "schedule");
  out = ScheduleConfig{};
  if (auto e = r.choice_field(s, path, "type", "schedule", kSchedules, out.type); !e) return e;
  std::vector<std::string> keys = {"type", "warmup_steps"};
  const std::string& t = out.type;
  if (t == "step") keys.insert(keys.end(), {"step_size", "gamma"});
  if (t == "exponential") keys.insert(keys.end(), {"gamma"});
  if (t == "cosine") keys.insert(keys.end(), {"eta_min"});
  if (t == "one_cycle") keys.insert(keys.end(), {"max_lr", "pct_start", "div_factor", "final_div_factor"});
  if (t == "plateau") keys.insert(keys.end(), {"factor", "patience", "threshold", "min_lr"});
  if (auto e = r.known_keys(s, path, keys, " for schedule '" + t + "'"); !e) return e;
  if (t == "exponential") out.gamma = 0.95;
  if (auto e = r.int_field(s, path, "warmup_steps", kNonNegative, out.warmup_steps); !e) return e;
  if (auto e = r.int_field(s, path, "step_size", kAtLeastOne, out.step_size); !e) return e;
  if (auto e = r.number_field(s, path, "gamma", kPositive, out.gamma); !e) return e;
  if (auto e = r.number_field(s, path, "eta_min", kNonNegative, out.eta_min); !e) return e;
  if (auto e = r.number_field(s, path, "max_lr", kPositive, out.max_lr); !e) return e;
  if (auto e = r.number_field(s, path, "pct_start", kUnitOpen, out.pct_start); !e) return e;
  if (auto e = r.number_field(s, path, "div_factor", kPositive, out.div_factor); !e) return e;
  if (auto e = r.number_field(s, path, "final_div_factor", kPositive, out.final_div_factor); !e) return e;
  if (auto e = r.number_field(s, path, "factor", kUnitOpen, out.factor); !e) return e;
  if (auto e = r.int_field(s, path, "patience", kNonNegative, out.patience); !e) return e;
  if (auto e = r.number_field(s, path, "threshold", kNonNegative, out.threshold); !e) return e;
  return r.number_field(s, path, "min_lr", kNonNegative, out.min_lr);
}

Result<void> parse_early_stopping(const FieldReader& r, const json& training, const std::string& training_path,
                                  EarlyStopConfig& out) {
  auto sec = r.section(training, training_path, "early_stopping");
  if (!sec) return sec.error();
  if (!*sec) return {};
  const json& s = **sec;
  const std::string path = ptr(training_path, "early_stopping");
  if (auto e = r.known_keys(s, path, {"patience", "monitor", "min_delta"}); !e) return e;
  if (auto e = r.int_field(s, path, "patience", kNonNegative, out.patience); !e) return e;
  if (auto e = r.choice_field(s, path, "monitor", "validation metric", kMonitors, out.monitor); !e) return e;
  return r.number_field(s, path, "min_delta", kNonNegative, out.min_delta);
}

}  // namespace

Result<void> parse_training(const FieldReader& r, const json& root, TrainingSpec& out) {
  auto sec = r.section(root, "", "training");
  if (!sec) return sec.error();
  if (!*sec) return {};
  const json& t = **sec;
  const std::string path = "/training";
  if (auto e = r.known_keys(t, path,
                            {"epochs", "batch_size", "seed", "device", "mode", "optimizer", "schedule",
                             "clip_grad_norm", "clip_grad_value", "early_stopping", "precision",
                             "activation_checkpointing"});
      !e)
    return e;
  const Range epochs{1.0, static_cast<double>(kMaxEpochs)},
      batch{1.0, static_cast<double>(kMaxBatchSize)};
  if (auto e = r.int_field(t, path, "epochs", epochs, out.epochs); !e) return e;
  if (auto e = r.int_field(t, path, "batch_size", batch, out.batch_size); !e) return e;
  if (auto e = r.int_field(t, path, "seed", kNonNegative, out.seed); !e) return e;
  if (auto e = r.choice_field(t, path, "device", "device", {"cpu", "cuda", "vulkan"}, out.device); !e) return e;
  std::string mode = std::string(to_string(out.mode));
  if (auto e = r.choice_field(t, path, "mode", "mode", {"static", "eager"}, mode); !e) return e;
  out.mode = mode == "eager" ? ExecMode::Eager : ExecMode::Static;
  std::string precision = std::string(precision_name(out.precision));
  if (auto e = r.choice_field(t, path, "precision", "precision", {"f32", "bf16", "f16"}, precision); !e) return e;
  out.precision = *parse_precision(precision);
  if (auto it = t.find("activation_checkpointing"); it != t.end()) {
    const std::string where = ptr(path, "activation_checkpointing");
    if (it->is_number_integer() && it->get<double>() > 0) {
      out.activation_checkpointing = it->get<int64_t>();
    } else if (it->is_string()) {
      auto v = parse_activation_checkpointing(it->get<std::string>());
      if (!v) return r.fail(where, v.error().message);
      out.activation_checkpointing = *v;
    } else {
      return r.fail(where, "must be \"off\", \"auto\" or a positive byte budget, got " + it->dump());
    }
  }
  if (auto e = r.number_field(t, path, "clip_grad_norm", kNonNegative, out.clip_grad_norm); !e) return e;
  if (auto e = r.number_field(t, path, "clip_grad_value", kNonNegative, out.clip_grad_value); !e) return e;
  if (auto e = parse_optimizer(r, t, path, out.optimizer); !e) return e;
  if (auto e = parse_schedule(r, t, path, out.schedule); !e) return e;
  return parse_early_stopping(r, t, path, out.early_stopping);
}

namespace {

ordered optimizer_json(const OptimizerSpec& o) {
  ordered out = ordered::object();
  out["type"] = std::string(to_string(o.type));
  out["lr"] = o.lr;
  switch (o.type) {
    case OptimizerType::Sgd:
      out["momentum"] = o.momentum;
      out["nesterov"] = o.nesterov;
      break;
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
      out["beta1"] = o.beta1;
      out["beta2"] = o.beta2;
      out["eps"] = o.eps;
      break;
    case OptimizerType::RMSprop:
      out["alpha"] = o.alpha;
      out["eps"] = o.eps;
      break;
    case OptimizerType::Adagrad:
      out["lr_decay"] = o.lr_decay;
      out["eps"] = o.eps;
      break;
  }
  out["weight_decay"] = o.weight_decay;
  return out;
}

ordered schedule_json(const ScheduleConfig& s) {
  ordered out = ordered::object();
  out["type"] = s.type;
  if (s.type == "step") {
    out["step_size"] = s.step_size;
    out["gamma"] = s.gamma;
  } else if (s.type == "exponential") {
    out["gamma"] = s.gamma;
  } else if (s.type == "cosine") {
    out["eta_min"] = s.eta_min;
  } else if (s.type == "one_cycle") {
    out["max_lr"] = s.max_lr;
    out["pct_start"] = s.pct_start;
    out["div_factor"] = s.div_factor;
    out["final_div_factor"] = s.final_div_factor;
  } else if (s.type == "plateau") {
    out["factor"] = s.factor;
    out["patience"] = s.patience;
    out["threshold"] = s.threshold;
    out["min_lr"] = s.min_lr;
  }
  if (s.warmup_steps) out["warmup_steps"] = s.warmup_steps;
  return out;
}

// The fields a schedule type uses (the ones saved), as OptimizerSpec::operator== does.
bool same_schedule(const ScheduleConfig& a, const ScheduleConfig& b) {
  return schedule_json(a) == schedule_json(b);
}

}  // namespace

ordered training_json(const TrainingSpec& t) {
  ordered out = {{"epochs", t.epochs},
                 {"batch_size", t.batch_size},
                 {"seed", t.seed},
                 {"device", t.device},
                 {"mode", std::string(to_string(t.mode))},
                 {"optimizer", optimizer_json(t.optimizer)}};
  if (t.schedule.type != "constant" || t.schedule.warmup_steps) out["schedule"] = schedule_json(t.schedule);
  if (t.clip_grad_norm > 0) out["clip_grad_norm"] = t.clip_grad_norm;
  if (t.clip_grad_value > 0) out["clip_grad_value"] = t.clip_grad_value;
  if (t.early_stopping.patience > 0)
    out["early_stopping"] = {{"patience", t.early_stopping.patience},
                             {"monitor", t.early_stopping.monitor},
                             {"min_delta", t.early_stopping.min_delta}};
  if (t.precision != Precision::F32) out["precision"] = std::string(precision_name(t.precision));
  if (t.activation_checkpointing == 0) out["activation_checkpointing"] = "auto";
  if (t.activation_checkpointing > 0) out["activation_checkpointing"] = t.activation_checkpointing;
  return out;
}

bool OptimizerSpec::operator==(const OptimizerSpec& o) const {
  return optimizer_json(*this) == optimizer_json(o);
}

bool TrainingSpec::operator==(const TrainingSpec& o) const {
  return epochs == o.epochs && batch_size == o.batch_size && seed == o.seed && device == o.device &&
         mode == o.mode && optimizer == o.optimizer && same_schedule(schedule, o.schedule) &&
         clip_grad_norm == o.clip_grad_norm && clip_grad_value == o.clip_grad_value &&
         early_stopping.patience == o.early_stopping.patience &&
         (early_stopping.patience == 0 || (early_stopping.monitor == o.early_stopping.monitor &&
                                           early_stopping.min_delta == o.early_stopping.min_delta)) &&
         precision == o.precision && activation_checkpointing == o.activation_checkpointing;
}

TrainConfig train_config(const TrainingSpec& t) {
  TrainConfig c;
  c.epochs = t.epochs;
  c.batch_size = t.batch_size;
  c.seed = t.seed;
  c.mode = t.mode;
  const OptimizerSpec& o = t.optimizer;
  c.opt.type = std::string(to_string(o.type));
  c.opt.lr = o.lr;
  c.opt.momentum = o.momentum;
  c.opt.nesterov = o.nesterov;
  c.opt.weight_decay = o.weight_decay;
  c.opt.beta1 = o.beta1;
  c.opt.beta2 = o.beta2;
  c.opt.eps = o.eps;
  c.opt.alpha = o.alpha;
  c.opt.lr_decay = o.lr_decay;
  c.schedule = t.schedule;
  c.clip_grad_norm = t.clip_grad_norm;
  c.clip_grad_value = t.clip_grad_value;
  c.early_stop = t.early_stopping;
  c.precision = t.precision;
  c.checkpoint_budget_bytes = t.activation_checkpointing;
  return c;
}

std::string_view to_string(OptimizerType t) {
  static const char* names[] = {"sgd", "adam", "adamw", "rmsprop", "adagrad"};
  return names[static_cast<int>(t)];
}

std::string_view to_string(ExecMode m) {
  return m == ExecMode::Eager ? "eager" : "static";
}

Result<int64_t> parse_activation_checkpointing(const std::string& text) {
  if (text == "off") return int64_t{-1};
  if (text == "auto") return int64_t{0};
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (!text.empty() && *end == '\0' && errno == 0 && v > 0) return static_cast<int64_t>(v);
  return make_error("expected \"off\", \"auto\" or a positive byte budget, got '" + text + "'");
}

}  // namespace mls::nodes
