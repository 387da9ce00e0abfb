// The Lua REPL driven as a person would, through tmux: type an expression, see the tensor;
// make an error, see the message and the traceback; carry on; complete a name with Tab.
// And `mlstudio lua FILE` from the command line: the exit code and the message of a failure.
#include <chrono>
#include <thread>

#include "tests/e2e/cli_util.h"

using namespace mls::e2e;

namespace {

std::string sh(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

// Waits until the pane shows `what` (or 10 s pass); returns the pane.
std::string wait_for(const std::string& session, const std::string& what) {
  std::string pane;
  for (int i = 0; i < 100; ++i) {
    pane = sh("tmux capture-pane -p -t " + session);
    if (pane.find(what) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pane;
}

}  // namespace

TEST_CASE("The Lua REPL in a terminal: results, errors with a traceback, recovery, completion", "[e2e][lua]") {
  if (std::system("command -v tmux >/dev/null 2>&1") != 0) {
    WARN("tmux is not installed: the REPL test is skipped (scripts/setup installs it)");
    return;
  }
  const std::string s = "mls_repl_" + std::to_string(::getpid());
  const std::string home = (temp_dir() / "home").string();
  fs::create_directories(home);
  REQUIRE(std::system(("tmux new-session -d -x 160 -y 50 -s " + s + " 'HOME=" + home + " " + MLS_EXE + " lua'").c_str()) == 0);
  auto type = [&](const std::string& keys) { std::system(("tmux send-keys -t " + s + " " + keys).c_str()); };
  std::string pane = wait_for(s, "Ctrl-D quits");
  REQUIRE(pane.find("Ctrl-D quits") != std::string::npos);

  type("'mls.tensor{{1, 2}, {3, 4}} * 2' Enter");
  pane = wait_for(s, "[6.0000, 8.0000]");
  CHECK(pane.find("tensor([[2.0000, 4.0000],") != std::string::npos);

  type("'x = mls.ones{2, 3}:matmul(mls.ones{4, 5})' Enter");
  pane = wait_for(s, "stack traceback");
  CHECK(pane.find("stdin:1: matmul: inner dimensions differ") != std::string::npos);
  CHECK(pane.find("f32[2,3], f32[4,5]") != std::string::npos);

  type("'for i = 1, 3 do' Enter 'y = (y or 0) + i' Enter 'end -- of the loop' Enter 'y * 10' Enter");
  pane = wait_for(s, "\n60");
  CHECK(pane.find(">> ") != std::string::npos);  // the open block asked for more
  CHECK(pane.find("\n60") != std::string::npos);

  type("'mls.zer' Tab");
  pane = wait_for(s, "mls.zeros");
  CHECK(pane.find("mls.zeros") != std::string::npos);
  type("'{3}' Enter");
  pane = wait_for(s, "tensor([0.0000, 0.0000, 0.0000])");
  CHECK(pane.find("tensor([0.0000, 0.0000, 0.0000])") != std::string::npos);

  type("C-d");
  for (int i = 0; i < 50 && std::system(("tmux has-session -t " + s + " 2>/dev/null").c_str()) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(std::system(("tmux has-session -t " + s + " 2>/dev/null").c_str()) != 0);  // Ctrl-D ended it
  std::system(("tmux kill-session -t " + s + " 2>/dev/null").c_str());
  CHECK(fs::exists(fs::path(home) / ".mlstudio_history"));
}

TEST_CASE("mlstudio lua FILE: a failing script exits 1 with file:line, a sandboxed one cannot escape", "[e2e][lua]") {
  const fs::path script = temp_dir() / "bad.lua";
  std::ofstream(script) << "local a = mls.ones{3}\nlocal b = a + mls.ones{4}\n";
  Output o = run("lua " + script.string());
  CHECK(o.code == 1);
  CHECK(o.err.find("bad.lua:2: add") != std::string::npos);
  CHECK(o.err.find("stack traceback") != std::string::npos);

  const fs::path esc = temp_dir() / "escape.lua";
  std::ofstream(esc) << "os.execute('echo pwned')\n";
  o = run("lua " + esc.string());
  CHECK(o.code == 1);
  CHECK(o.err.find("os.execute is not allowed in a sandboxed script") != std::string::npos);
  CHECK(o.out.find("pwned") == std::string::npos);

  const fs::path loop = temp_dir() / "loop.lua";
  std::ofstream(loop) << "while true do end\n";
  o = run("lua --instruction-limit 1000000 " + loop.string());
  CHECK(o.code == 1);
  CHECK(o.err.find("limit of 1000000 instructions") != std::string::npos);

  const fs::path ok = temp_dir() / "args.lua";
  std::ofstream(ok) << "print(#arg, arg[1], (mls.ones{2} * 3):sum():item())\n";
  o = run("lua --trust " + ok.string() + " hello");
  CHECK(o.code == 0);
  CHECK(o.out == "1\thello\t6.0\n");
}
