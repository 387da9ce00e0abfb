// Which process a run belongs to, so a run left 'running' by a process that is gone (killed,
// crashed, aborted) can be told from one that is still training.
//
//   std::string me = this_process();        // "host/boot-id/pid/start-ticks"
//   if (owner_gone(owner_of_some_run)) ...   // mark that run interrupted
//
// Linux: /proc gives each process's start time, so a recycled pid does not pass for the
// old process, and the boot id tells a reboot apart.
#pragma once

#include <string>

namespace mls::store {

std::string this_process();
// True only when `owner` names a process on this machine (same host, same boot) that no
// longer runs. Another host's process, or an owner that cannot be read, is not known gone.
bool owner_gone(const std::string& owner);

}  // namespace mls::store
