// Running the mlstudio executable from tests, as a user would, and reading what it says.
//
//   Output o = run("--run " + example() + " --epochs 1 --json --db " + db);
//   REQUIRE(o.code == 0);
//   double acc = json_number(last_line(o.out), "test_accuracy");
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace mls::e2e {

namespace fs = std::filesystem;

struct Output {
  int code = -1;
  std::string out, err;
};

inline fs::path temp_dir() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("mls-e2e-" + std::to_string(::getpid()));
    fs::remove_all(d);  // fresh: an earlier run's process may have had this pid
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Runs a shell command line: its stdout and exit code, and its stderr through the file `err`.
inline Output run_shell(const std::string& command, const fs::path& err) {
  const std::string cmd = command + " 2>" + err.string();
  Output o;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) o.out.append(buf, n);
  int status = ::pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err);
  std::stringstream ss;
  ss << in.rdbuf();
  o.err = ss.str();
  return o;
}

// Runs mlstudio with `args`; with `kill_after_s` > 0 under timeout(1), so a command that
// blocks (on a FIFO, say) is killed (exit 137) instead of hanging the test.
inline Output run(const std::string& args, int kill_after_s = 0) {
  const std::string bound = kill_after_s > 0 ? "timeout -s KILL " + std::to_string(kill_after_s) + " " : "";
  return run_shell(bound + std::string(MLS_EXE) + " " + args, temp_dir() / "stderr.txt");
}

inline std::string example() {
  return std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls";
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The example with one piece of text replaced, written to the temp dir.
inline std::string variant(const std::string& name, const std::string& from,
                           const std::string& to) {
  std::string text = read_file(example());
  auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  fs::path p = temp_dir() / name;
  std::ofstream(p) << text;
  return p.string();
}

inline std::string last_line(const std::string& s) {
  auto end = s.find_last_not_of('\n');
  auto start = s.rfind('\n', end);
  return s.substr(start == std::string::npos ? 0 : start + 1,
                  end - (start == std::string::npos ? 0 : start + 1) + 1);
}

inline double json_number(const std::string& json, const std::string& key) {
  auto at = json.find("\"" + key + "\":");
  REQUIRE(at != std::string::npos);
  return std::stod(json.substr(at + key.size() + 3));
}

// A JSON array of numbers: json_array(line, "step_losses").
inline std::vector<double> json_array(const std::string& json, const std::string& key) {
  const std::string head = "\"" + key + "\":[";
  auto at = json.find(head);
  REQUIRE(at != std::string::npos);
  std::vector<double> out;
  std::stringstream ss(json.substr(at + head.size(), json.find(']', at) - at - head.size()));
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stod(item));
  return out;
}

// Starts mlstudio with `args` in a child process, stderr to `err`, stdout discarded;
// `before_exec` runs in the child first (limits, signal dispositions).
inline pid_t spawn(const std::vector<std::string>& args, const fs::path& err,
                   const std::function<void()>& before_exec = {}) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::freopen(err.c_str(), "w", stderr);
    std::freopen("/dev/null", "w", stdout);
    if (before_exec) before_exec();
    std::vector<std::string> all = {MLS_EXE};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(MLS_EXE, argv.data());
    std::_Exit(127);
  }
  return pid;
}

// Starts `mlstudio --run` on the MLP example in a child process, stderr to `err`.
inline pid_t start_run(const fs::path& db, const fs::path& err, const std::string& epochs,
                       const std::string& limit, const std::vector<std::string>& more = {}) {
  std::vector<std::string> args = {"--run", example(),      "--epochs", epochs, "--limit",
                                   limit,   "--test-limit", "100",      "--db", db.string()};
  args.insert(args.end(), more.begin(), more.end());
  return spawn(args, err);
}

inline void wait_for(const fs::path& err, const std::string& text) {
  for (int i = 0; i < 400 && read_file(err.string()).find(text) == std::string::npos; ++i)
    ::usleep(50 * 1000);
  INFO(read_file(err.string()));
  REQUIRE(read_file(err.string()).find(text) != std::string::npos);
}

}  // namespace mls::e2e
