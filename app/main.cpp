// mlstudio: the command line. `mlstudio --run P.mls` trains headless (`--resume ID`
// continues a run); `graph`, `runs` inspect projects and the experiment database; `eval` and
// `predict` use a trained run.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>

#include "app/cli_validators.h"
#include "app/commands.h"
#include "app/grade_command.h"
#include "app/gradebook_command.h"
#include "app/runs_command.h"
#include "app/sweep_command.h"
#include "engine/core/field_text.h"
#include "engine/core/op.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/onnx/onnx_file.h"
#include "nodes/training_spec.h"
#include "runner/backends.h"
#include "runner/ranks.h"
#ifdef MLS_HAVE_MPI
#include "engine/dist/mpi_collective.h"
#endif
#ifdef MLSTUDIO_WITH_GUI
#include "editor/gui.h"
#endif

namespace {

// Every number a user types is checked before anything runs: a count in its range, a rate
// finite and positive (whole: app/cli_validators.h).
using mls::app::whole;

const CLI::Validator kEpochs = whole<int64_t>(1, mls::nodes::kMaxEpochs);
const CLI::Validator kBatch = whole<int64_t>(1, mls::nodes::kMaxBatchSize);
const CLI::Validator kCount = whole<int64_t>(0, std::numeric_limits<int64_t>::max());
const CLI::Validator kId = whole<int64_t>(1, std::numeric_limits<int64_t>::max());

CLI::Validator finite(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return "'" + text + "' is not a number";
        if (!std::isfinite(v)) return "must be a finite number, got '" + text + "'";
        if (allow_zero ? v < 0 : v <= 0)
          return std::string("must be ") + (allow_zero ? ">= 0" : "> 0") + ", got " + text;
        return {};
      },
      allow_zero ? "FINITE >= 0" : "FINITE > 0");
}

void add_project_overrides(CLI::App& c, mls::app::ProjectOptions& p) {
  c.add_option("--epochs", p.epochs, "Override the project's number of epochs")->check(kEpochs);
  c.add_option("--batch-size", p.batch_size, "Override the training batch size")->check(kBatch);
  c.add_option("--lr", p.lr, "Override the learning rate")->check(finite(false));
  c.add_option("--seed", p.seed, "Override the seed (initialisation and shuffling)")
      ->check(whole<uint64_t>(0, std::numeric_limits<uint64_t>::max()));
  c.add_option("--device", p.device,
               "cpu; vulkan or cuda where this build has them (a second GPU: vulkan:1)");
  c.add_option("--mode", p.mode, "static (compiled graph) or eager (define-by-run)");
  c.add_option(
      "--precision", p.precision,
      "f32, or bf16/f16 mixed precision: matrix products in 16 bits, f32 weights, loss scaling");
  c.add_option(
      "--activation-checkpointing", p.activation_checkpointing,
      "off, auto (recompute forward segments in backward: about half the activation memory), "
      "or a byte budget for the training step's planned memory");
  c.add_option("--set", p.sets,
               "KEY=VALUE: change a setting or a node's parameter before training (lr=0.01, "
               "optimizer=adam, fc1.out_features=64, dataset.validation=0.1); repeat it for more")
      ->allow_extra_args(false);
  c.add_option("--limit", p.limit, "Train on the first N training samples only (0: all)")
      ->check(kCount);
  c.add_option("--test-limit", p.test_limit, "Evaluate on the first N test samples only (0: all)")
      ->check(kCount);
}

// A command given no subcommand, or one it does not have: say which, and list the valid ones.
int unknown_subcommand(CLI::App* cmd) {
  std::vector<std::string> names;
  for (const CLI::App* s : cmd->get_subcommands([](CLI::App*) { return true; }))
    names.push_back(s->get_name());
  std::string given;
  for (const std::string& word : cmd->remaining())
    if (!word.empty() && word[0] != '-') {
      given = word;
      break;
    }
  const std::string valid = mls::quoted_list(names);
  return mls::app::fail(cmd->get_name() + ": " +
                        (given.empty()
                             ? "give a subcommand: " + valid
                             : "unknown subcommand '" + given + "' (expected " + valid + ")"));
}

// What a launcher's environment makes of this process: nothing (one rank, no MPI cost: `job`
// stays null), a rank of a data-parallel job (a build with MPI), or a refusal before anything
// is trained (a build without MPI would train N copies, each its own run). Returns 0, or the
// exit status of the refusal.
int start_job([[maybe_unused]] double timeout_s, [[maybe_unused]] int* argc,
              [[maybe_unused]] char*** argv,
              [[maybe_unused]] std::unique_ptr<mls::Collective>& job) {
  const mls::LaunchEnv env = mls::launch_env();
  if (env.size <= 1) return 0;
#ifdef MLS_HAVE_MPI
  auto c = mls::MpiCollective::init(argc, argv, timeout_s);
  if (!c) return mls::app::fail(c.error().message);
  // After a rank dies mpirun sends the others SIGTERM and SIGKILL a second later: the signal
  // cuts a wait short, so rank 0 names the dead rank and records the run as failed in time.
  (*c)->set_cancel_flag(&mls::app::run_stop_flag());
  job = std::move(*c);
  return 0;
#else
  mls::app::fail(mls::runner::no_mpi_message(env));
  return 2;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mlstudio " MLSTUDIO_VERSION
      " - build, train and inspect neural networks.\n"
      "Train a project headless:  mlstudio --run resources/examples/fashion-mnist-mlp.mls\n"
      "Data-parallel on N ranks:  mpirun -np N mlstudio --run P.mls (batch size per rank; "
      "rank 0 records the run)"};
  app.set_version_flag("--version", "mlstudio " MLSTUDIO_VERSION);
  app.require_subcommand(0, 1);

  mls::app::RunOptions run;
  std::string run_path;
  int threads = 0;
  auto* run_opt = app.add_option("--run", run_path, "Train the project P.mls headless")
                      ->check(CLI::ExistingFile);
  add_project_overrides(app, run.project);
  app.add_option("--db", run.db, "The run database (SQLite)")->capture_default_str();
  app.add_flag("--json", run.json, "End with one JSON line of results on stdout");
  app.add_flag("--quiet,-q", run.quiet, "No progress output");
  app.add_option("--threads", threads, "CPU threads (default: all cores)")
      ->check(whole<int64_t>(1, 1 << 16));
  app.add_option("--resume", run.resume,
                 "Continue run ID from its last checkpoint, up to its planned epochs (or --epochs, "
                 "the total)")
      ->check(kId);
  app.add_option("--profile", run.profile,
                 "With --run: write a Chrome trace of every training step (kernel spans, memory "
                 "counters) to FILE.json; open it in ui.perfetto.dev");
  app.add_option("--stop-after-epochs", run.stop_after_epochs,
                 "Stop after N of the planned epochs and keep the checkpoint, to --resume later")
      ->check(kEpochs);
  app.add_option("--experiment", run.experiment,
                 "File the run under this experiment (created when new; default: Default)");
  std::string sweep_trial;
  app.add_option("--sweep-trial", sweep_trial, "SWEEP:TRIAL (set by `mlstudio sweep` for its workers)")
      ->group("");  // hidden: the sweep's coordinator passes it
  app.add_option("--break", run.breaks,
                 "Pause the run when a step goes wrong, before its update, naming the first node "
                 "at fault: nan, spike[:K] (loss above K x its running median), "
                 "dead-relu[:SHARE], grad-norm[:MAX[:MIN]], window:STEPS, comma-separated "
                 "(e.g. nan,spike:3); the state is kept to --resume or fork; exit status 3");
  app.add_option("--health-every", run.health_every,
                 "Measure the health instruments every N steps (per-layer gradient norm, update "
                 "ratio, distance from initialisation, dead ReLUs, gradient SNR) as health/... "
                 "metrics")
      ->check(whole<int64_t>(1, 1'000'000'000));
  double dist_timeout = 30;
  app.add_option("--dist-timeout", dist_timeout,
                 "Under mpirun (mpirun -np N mlstudio --run P.mls trains data-parallel: each rank "
                 "its shard of every batch, the gradients averaged): seconds a rank waits for the "
                 "others before the job stops, naming the rank that did not answer")
      ->capture_default_str()
      ->check(finite(false));
  app.add_flag("--no-memory-check", run.no_memory_check,
               "Start the run even when the pre-flight estimate says a step will not fit in "
               "free memory (by default it is refused, with the largest batch that fits)");

  mls::app::GraphOptions graph;
  auto* graph_cmd = app.add_subcommand("graph", "Print a project's engine IR");
  graph_cmd->add_option("project", graph.project.path, "The project (.mls)")
      ->required()
      ->check(CLI::ExistingFile);
  graph_cmd->add_flag("--ir", graph.ir, "The forward graph in SSA text form (the default)");
  graph_cmd->add_flag("--backward", graph.backward,
                      "Append the backward graph (gradients of every parameter)");
  graph_cmd->add_flag("--plan", graph.plan, "The compiled training step: schedule and memory plan");
  graph_cmd->add_option("--ranks", graph.ranks,
                        "With --plan: the step of one rank of N in data-parallel training, with "
                        "its all-reduce steps")
      ->check(CLI::Range(1, 4096));
  graph_cmd->add_flag(
      "--passes", graph.passes,
      "The training step after every optimisation pass, with node counts and planned bytes");
  graph_cmd
      ->add_option(
          "--profile", graph.profile,
          "Train N steps on the project's data with every kernel timed; print time per op and node")
      ->check(whole<int64_t>(1, 1'000'000));
  graph_cmd->add_option("--batch", graph.batch, "Batch size (default: the project's)")
      ->check(kBatch);
  graph_cmd->add_option(
      "--device", graph.project.device,
      "The device whose step --plan, --passes and --profile show (default: the project's)");
  graph_cmd->add_option(
      "--precision", graph.project.precision,
      "f32, bf16 or f16: the forward as mixed-precision training compiles it, its matrix "
      "products as matmul_lowp (default: the project's)");
  graph_cmd->add_option("--activation-checkpointing", graph.project.activation_checkpointing,
                        "With --passes: off, auto or a byte budget (default: the project's)");
  graph_cmd
      ->add_option("--limit", graph.project.limit,
                   "With --profile: load only the first N training samples")
      ->check(kCount);

  mls::app::RunsOptions runs;
  CLI::App* runs_cmd = mls::app::add_runs_command(app, runs);

  mls::app::EvalOptions eval;
  auto* eval_cmd = app.add_subcommand(
      "eval", "Score a trained run on the test split: metrics and confusion matrix");
  eval_cmd->add_option("project", eval.project.path, "The project (.mls)")
      ->required()
      ->check(CLI::ExistingFile);
  eval_cmd->add_option("--run", eval.run_id, "The trained run's id")->required()->check(kId);
  eval_cmd->add_option("--db", eval.db, "The run database (SQLite)")->capture_default_str();
  eval_cmd
      ->add_option("--checkpoint", eval.checkpoint, "best, last or auto (best if the run kept one)")
      ->capture_default_str();
  eval_cmd->add_option("--split", eval.split, "test or validation")->capture_default_str();
  eval_cmd
      ->add_option("--test-limit", eval.project.test_limit,
                   "Evaluate on the first N test samples only")
      ->check(kCount);
  eval_cmd->add_flag("--json", eval.json, "JSON output");

  mls::app::PredictOptions predict;
  auto* predict_cmd = app.add_subcommand(
      "predict", "A trained run's predictions for an image, CSV rows or an NPY file");
  predict_cmd->add_option("project", predict.project.path, "The project (.mls)")
      ->required()
      ->check(CLI::ExistingFile);
  predict_cmd->add_option("--run", predict.run_id, "The trained run's id")->required()->check(kId);
  predict_cmd->add_option("--input", predict.input, "The file to predict for")
      ->required()
      ->check(CLI::ExistingFile);
  predict_cmd->add_option("--db", predict.db, "The run database (SQLite)")->capture_default_str();
  predict_cmd->add_option("--checkpoint", predict.checkpoint, "best, last or auto")
      ->capture_default_str();
  predict_cmd->add_option("--top", predict.top, "How many classes to list per sample")
      ->capture_default_str()
      ->check(whole<int64_t>(1, 1'000'000));
  predict_cmd->add_flag("--json", predict.json, "JSON output");

  mls::runner::ExportOptions exp;
  exp.version = MLSTUDIO_VERSION;
  bool export_json = false;
  auto* export_cmd = app.add_subcommand(
      "export", "Write a trained model as ONNX, checked against the engine node by node");
  export_cmd->add_option("project", exp.project.path, "The project (.mls)")
      ->required()
      ->check(CLI::ExistingFile);
  export_cmd->add_option("--onnx", exp.out, "The ONNX file to write")->required();
  export_cmd
      ->add_option("--run", exp.run_id,
                   "The trained run whose weights to export (none: the project's initial weights)")
      ->check(kId);
  export_cmd->add_option("--db", exp.db, "The run database (SQLite)")->capture_default_str();
  export_cmd->add_option("--checkpoint", exp.checkpoint, "best, last or auto")
      ->capture_default_str();
  export_cmd->add_option("--opset", exp.opset, "ONNX operator set")
      ->capture_default_str()
      ->check(whole<int64_t>(13, mls::onnx::kNewestOpset));
  export_cmd
      ->add_option("--check-samples", exp.check_samples,
                   "Test samples the written file is run on and compared")
      ->capture_default_str()
      ->check(whole<int64_t>(1, 100000));
  export_cmd->add_flag("--int8", exp.int8,
                       "Post-training int8 quantization (QDQ): int8 weights, uint8 activations "
                       "calibrated on training batches");
  export_cmd
      ->add_option("--calibration-batches", exp.calibration_batches,
                   "With --int8: batches of 64 to calibrate on")
      ->capture_default_str()
      ->check(whole<int64_t>(1, 100000));
  export_cmd->add_option("--save-outputs", exp.save_outputs,
                         "Also write mlstudio's outputs on the test split to this NPY file (to "
                         "compare other runtimes)");
  export_cmd
      ->add_option("--test-limit", exp.project.test_limit, "Use the first N test samples only")
      ->check(kCount);
  export_cmd->add_option("--limit", exp.project.limit, "Load only the first N training samples")
      ->check(kCount);
  export_cmd->add_flag("--json", export_json, "JSON output");

  mls::runner::ImportOptions imp;
  auto* import_cmd =
      app.add_subcommand("import", "Turn an ONNX model into an editable, trainable project");
  import_cmd->add_option("model", imp.model, "The ONNX file")->required()->check(CLI::ExistingFile);
  import_cmd
      ->add_option("-o,--output", imp.out, "The project to write (.mls); its weights go beside it")
      ->required();
  import_cmd->add_option(
      "--dataset", imp.dataset,
      "The data to train on, SOURCE[:PATH] (default: what an mlstudio export recorded)");
  import_cmd->add_flag("--force", imp.force, "Replace an existing project");

  auto* devices_cmd = app.add_subcommand(
      "devices",
      "List the devices this build and machine have (for --device and the editor's picker)");

  mls::app::LuaOptions lua;
  auto* lua_cmd =
      app.add_subcommand("lua", "Run a Lua script with the mls module, or open the Lua REPL");
  lua_cmd->add_option("file", lua.file, "The script (none: the interactive REPL)")
      ->check(CLI::ExistingFile);
  lua_cmd->add_option("args", lua.args, "Arguments for the script (its `arg` table)");
  lua_cmd->add_flag(
      "--trust", lua.trust,
      "Run the script unsandboxed (your own script: os.execute, io.popen, any file, C modules)");
  lua_cmd->add_option("--root", lua.root,
                      "Sandbox: the folder the script may read and write (default: its own)");
  lua_cmd
      ->add_option("--instruction-limit", lua.instruction_limit,
                   "Stop the script after N Lua VM instructions (0: no limit)")
      ->check(kCount);
  lua_cmd
      ->add_option("--time-limit", lua.time_limit, "Stop the script after S seconds (0: no limit)")
      ->check(finite(true));
  lua_cmd
      ->add_option("--memory-limit", lua.memory_limit_mib,
                   "Sandbox: the memory a script may hold (Lua heap and tensors), in MiB; the jail "
                   "lets it map as much beyond start-up (0: no limit)")
      ->capture_default_str()
      ->check(kCount);
  lua_cmd
      ->add_option("--file-limit", lua.file_limit_mib,
                   "Sandbox: the largest file the script may write, in MiB (0: no limit)")
      ->capture_default_str()
      ->check(kCount);
  lua_cmd->add_option("--db", lua.db, "The run database that mls.train and mls.log write to")
      ->capture_default_str();
  lua_cmd
      ->add_option("--resume", lua.resume,
                   "Continue run ID: the script's first mls.train resumes it from its last "
                   "checkpoint (the script must build the same model and data)")
      ->check(kCount);
  lua_cmd->prefix_command(false);
  lua_cmd->allow_extras(false);

  mls::app::NotebookOptions nbo;
  auto* nb_cmd = app.add_subcommand("notebook", "Run, check or export a project's notebook cells");
  nb_cmd->require_subcommand(1);
  for (const char* action : {"run", "check", "export"}) {
    auto* c = nb_cmd->add_subcommand(
        action, std::string(action) == "run"
                    ? "Run every cell in dependency order and save the outputs"
                : std::string(action) == "check"
                    ? "Run again in a fresh state and compare with the saved outputs"
                    : "Write the notebook as a self-contained HTML page or a Lua script");
    c->add_option("project", nbo.project, "The project (.mls)")->required();
    c->add_option("--html", nbo.html, "Write the notebook with its outputs as an HTML page");
    if (std::string(action) == "export")
      c->add_option("--lua", nbo.lua, "Write the code cells as a Lua script");
    if (std::string(action) != "export") {
      c->add_option(
          "--param", nbo.params,
          "name=value: a widget of that name takes the value, and the global is set before the "
          "cells run (number, true/false or string)");
      c->add_flag("--trust", nbo.trust,
                  "Lift the sandbox (the cells may read and write outside the project's folder)");
      c->add_option("--db", nbo.db, "The run database that mls.train writes to");
    }
    if (std::string(action) == "run") {
      auto* figures = c->add_option("--figures", nbo.figures, "Write each figure as DIR/ID-N.svg");
      c->add_flag("--png", nbo.png,
                  "With --figures: each figure as DIR/ID-N.png too, at the SVG's size")
          ->needs(figures);
    }
    if (std::string(action) == "check")
      c->add_option("--tolerance", nbo.tolerance,
                    "Relative tolerance of numbers in outputs (default 1e-6)");
    c->callback([&nbo, action] { nbo.action = action; });
  }

  mls::app::GradeOptions grade;
  CLI::App* grade_cmd = mls::app::add_grade_command(app, grade);
  mls::app::LabOptions lab;
  CLI::App* lab_cmd = mls::app::add_lab_command(app, lab);
  mls::app::GradebookOptions gbo;
  CLI::App* gb_cmd = mls::app::add_gradebook_command(app, gbo);
  mls::app::SweepOptions swo;
  CLI::App* sweep_cmd = mls::app::add_sweep_command(app, swo);
  mls::app::CompareDevicesOptions cdo;
  CLI::App* cd_cmd = mls::app::add_compare_devices_command(app, cdo);

  std::string gui_path;
  app.add_option("project", gui_path, "Open this project (.mls) in the editor")
      ->check(CLI::ExistingFile);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 1, as the README promises (CLI11's
    // own codes run 100-115). With --json, the last stdout line is still a JSON object.
    const int code = app.exit(e);
    if (code == 0) return 0;
    for (int i = 1; i < argc; ++i)
      if (std::string_view(argv[i]) == "--json") mls::app::print_json_failure(e.what());
    return 1;
  }

  // More threads than a few per core only adds contention (and thousands abort at start-up).
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (threads > 4 * cores) {
    std::fprintf(stderr, "mlstudio: warning: --threads %d is more than 4 per core; using %d\n",
                 threads, 4 * cores);
    threads = 4 * cores;
  }
  if (threads > 0) mls::cpu::set_default_threads(threads);
  // The CPU and the GPU backends this build has; each opens its device on first use.
  mls::runner::init_backends();

  if (*devices_cmd) {
    for (const auto& d : mls::runner::describe_devices())
      std::printf("%-10s %s%s\n", d.name.c_str(), d.available ? "" : "(unavailable) ",
                  d.detail.c_str());
    return 0;
  }
  if (*lua_cmd) return mls::app::lua_command(lua);
  if (*nb_cmd) return mls::app::notebook_command(nbo);
  if (*grade_cmd) return mls::app::grade_command(grade);
  if (*lab_cmd) return mls::app::lab_command(lab);
  if (*gb_cmd) return mls::app::gradebook_command(gbo);
  if (*sweep_cmd) {
    // Under mpirun the sweep's trials go to the job's ranks; rank 0 alone records them
    // (app/sweep_ranks.h).
    std::unique_ptr<mls::Collective> job;
    if (int refused = start_job(dist_timeout, &argc, &argv, job)) return refused;
#ifdef MLS_HAVE_MPI
    // The sweep's own signal flag cuts its waits short (start_job set the run's).
    if (job) static_cast<mls::MpiCollective&>(*job).set_cancel_flag(&mls::app::sweep_stop_flag());
#endif
    return mls::app::sweep_command(swo, job.get());
  }
  if (*cd_cmd) return mls::app::compare_devices_command(cdo);
  if (*graph_cmd) return mls::app::graph_command(graph);
  if (*eval_cmd) return mls::app::eval_command(eval);
  if (*predict_cmd) return mls::app::predict_command(predict);
  if (*export_cmd) return mls::app::export_command(exp, export_json);
  if (*import_cmd) return mls::app::import_command(imp);
  if (*runs_cmd) {
    if (runs_cmd->get_subcommands().empty()) return unknown_subcommand(runs_cmd);
    return mls::app::runs_main(runs_cmd, runs);
  }
  if (*run_opt) {
    run.project.path = run_path;
    // Launched as one of several ranks (mpirun -np N, srun): one data-parallel job, rank 0
    // speaking for it; its status is the job's.
    // A sweep's worker (--sweep-trial) is a child its coordinator started, never a rank of its
    // own, even where it inherited a rank's environment.
    std::unique_ptr<mls::Collective> job;
    if (sweep_trial.empty())
      if (int refused = start_job(dist_timeout, &argc, &argv, job)) return refused;
    run.collective = job.get();
    if (!sweep_trial.empty()) {
      long long sw = 0, tr = -1;
      char tail = 0;
      if (std::sscanf(sweep_trial.c_str(), "%lld:%lld%c", &sw, &tr, &tail) != 2 || sw < 1 || tr < 0)
        return mls::app::fail("--sweep-trial must be SWEEP:TRIAL (e.g. 3:0), got '" + sweep_trial + "'");
      run.sweep_trial = mls::runner::RunOptions::SweepTrial{sw, tr};
    }
    const int code = mls::app::run_command(run);
    return run.collective && run.collective->rank() != 0 ? 0 : code;
  }
  if (!run.profile.empty())
    return mls::app::fail("--profile FILE.json traces a headless run: add --run P.mls");
#ifdef MLSTUDIO_WITH_GUI
  return mls::editor::run_gui(argc, argv, gui_path);
#else
  // A build without the editor (MLSTUDIO_BUILD_GUI=OFF): show what the CLI does.
  std::fputs(app.help().c_str(), stdout);
  return gui_path.empty() ? 0 : 1;
#endif
}
