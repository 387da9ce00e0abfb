#include "scripting/repl.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include <readline/history.h>
#include <readline/readline.h>

#include "scripting/pretty.h"

namespace mls::lua {

namespace {

LuaHost* g_host = nullptr;  // readline's completion callbacks take no context pointer
std::vector<std::string> g_matches;

char* generator(const char* text, int state) {
  static size_t at = 0;
  if (state == 0) {
    g_matches = g_host->completions(text);
    at = 0;
  }
  if (at < g_matches.size()) return strdup(g_matches[at++].c_str());
  return nullptr;
}

char** complete(const char* text, int, int) {
  rl_attempted_completion_over = 1;  // no file-name completion
  return rl_completion_matches(text, generator);
}

// Ctrl-C while an entry runs stops that entry (the prompt comes back); at the prompt it
// quits as usual.
std::atomic<bool> g_interrupt{false};
extern "C" void on_interrupt(int) {
  g_interrupt.store(true);
}

}  // namespace

int run_repl(LuaHost& host, const std::string& history_file) {
  const bool tty = isatty(STDIN_FILENO) != 0;
  g_host = &host;
  // print() of a table shows its tree here, as results do (tostring stays standard).
  lua_pushcfunction(host.state(), pretty_print);
  lua_setglobal(host.state(), "print");
  if (tty) {
    rl_readline_name = "mlstudio";
    // '.' and ':' stay inside a word, so "mls.ze" completes as one.
    rl_basic_word_break_characters = const_cast<char*>(" \t\n\"\\'`@$><=;|&{(,+-*/^%#~[]");
    rl_attempted_completion_function = complete;
    using_history();
    if (read_history(history_file.c_str()) != 0) write_history(history_file.c_str());  // creates it
    std::printf(
        "mlstudio lua (Lua 5.4) - tensors: mls.randn{2, 3}; help(mls), help(mls.zeros), help(). "
        "Ctrl-D quits.\n");
  }
  std::string pending;
  for (;;) {
    const char* prompt = pending.empty() ? "> " : ">> ";
    std::string line;
    if (tty) {
      char* l = readline(prompt);
      if (l == nullptr) {
        std::printf("\n");
        break;
      }
      line = l;
      std::free(l);
    } else if (!std::getline(std::cin, line)) {
      break;
    }
    if (pending.empty() && line.empty()) continue;
    pending += pending.empty() ? line : "\n" + line;
    std::string out;
    g_interrupt.store(false);
    host.set_interrupt(&g_interrupt);
    struct sigaction on {
    }, before{};
    on.sa_handler = on_interrupt;
    sigemptyset(&on.sa_mask);
    sigaction(SIGINT, &on, &before);
    const LuaHost::Status s = host.eval(pending, &out);
    sigaction(SIGINT, &before, nullptr);
    host.set_interrupt(nullptr);
    if (s == LuaHost::Status::Incomplete) continue;
    if (tty && !pending.empty()) {
      add_history(pending.c_str());
      append_history(1, history_file.c_str());
    }
    pending.clear();
    if (s == LuaHost::Status::Error) {
      std::fprintf(stderr, "%s\n", out.c_str());
    } else if (!out.empty()) {
      std::printf("%s\n", out.c_str());
    }
    std::fflush(stdout);
    std::fflush(stderr);
  }
  if (tty) history_truncate_file(history_file.c_str(), 1000);
  return 0;
}

}  // namespace mls::lua
