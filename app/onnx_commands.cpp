// `mlstudio export P.mls --onnx OUT.onnx [--run ID]` and `mlstudio import MODEL.onnx -o P.mls`.
// Export writes only a file the engine has run back and matched node by node; import
// writes the project and its weights file, or nothing.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/text_out.h"
#include "engine/cpu/cpu_backend.h"
#include "runner/training_run.h"

namespace mls::app {

using runner::bytes_text;

int export_command(const runner::ExportOptions& o, bool json) {
  auto say = [json](const std::string& s) {
    if (!json) std::printf("%s\n", terminal_safe(s).c_str());
  };
  auto r = runner::export_project(o, cpu::backend(), say);
  if (!r) {
    if (json) print_json_failure(r.error().message);
    return fail(r.error().message);
  }
  if (o.run_id) record_artifact(o.db, *o.run_id, "onnx", r->path);
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& c : r->checks) nodes.push_back({{"node", c.node}, {"value", c.value}, {"max_abs_diff", c.max_abs}});
  if (json) {
    nlohmann::json j{{"status", "ok"},
                     {"path", r->path},
                     {"bytes", r->bytes},
                     {"f32_bytes", r->f32_bytes},
                     {"onnx_nodes", r->onnx_nodes},
                     {"initializers", r->initializers},
                     {"parameters", r->parameters},
                     {"checkpoint", r->checkpoint},
                     {"checked_samples", r->checked_samples},
                     {"max_abs_diff", r->max_abs_diff},
                     {"checks", nodes},
                     {"outputs_saved", r->outputs_saved}};
    if (o.int8)
      j.update({{"int8", true},
                {"accuracy_f32", r->accuracy_f32},
                {"accuracy_int8", r->accuracy_int8},
                {"agreement", r->agreement},
                {"accuracy_samples", r->accuracy_samples}});
    std::printf("%s\n", terminal_json(j).c_str());
    return 0;
  }
  if (!r->checkpoint.empty()) std::printf("weights: %s\n", r->checkpoint.c_str());
  std::printf("checked: the file read back and run by the engine on %lld test samples\n",
              static_cast<long long>(r->checked_samples));
  for (const auto& c : r->checks)
    std::printf("  %-16s max |onnx - mlstudio| = %.3g\n", c.node.c_str(), c.max_abs);
  if (o.int8) {
    std::printf("int8: %s, %.1f%% of the f32 model's %s\n", bytes_text(r->bytes).c_str(),
                100.0 * static_cast<double>(r->bytes) / static_cast<double>(r->f32_bytes),
                bytes_text(r->f32_bytes).c_str());
    if (r->accuracy_samples > 0)
      std::printf("accuracy on %lld test samples: f32 %.2f%%, int8 %.2f%% (%+.2f points); the two agree on %.2f%%\n",
                  static_cast<long long>(r->accuracy_samples), 100 * r->accuracy_f32, 100 * r->accuracy_int8,
                  100 * (r->accuracy_int8 - r->accuracy_f32), 100 * r->agreement);
  }
  if (r->outputs_saved > 0)
    std::printf("saved mlstudio's outputs for %lld test samples to %s\n", static_cast<long long>(r->outputs_saved),
                o.save_outputs.c_str());
  std::printf("wrote %s (%s, %lld ONNX nodes, %lld parameters, opset %lld)\n", r->path.c_str(),
              bytes_text(r->bytes).c_str(), static_cast<long long>(r->onnx_nodes),
              static_cast<long long>(r->parameters), static_cast<long long>(o.opset));
  return 0;
}

int import_command(const runner::ImportOptions& o) {
  // The notes quote the model's node names, which its author chose.
  auto r = runner::import_model(o, cpu::backend(), [](const std::string& s) {
    std::printf("%s\n", terminal_safe(s).c_str());
  });
  if (!r) return fail(r.error().message);
  std::printf("wrote %s (%lld nodes, %lld parameters) and its weights %s\n", r->project.c_str(),
              static_cast<long long>(r->nodes), static_cast<long long>(r->parameters), r->weights.c_str());
  return 0;
}

}  // namespace mls::app
