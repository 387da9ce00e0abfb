// What a run needs to know about the job's ranks beyond the collective itself
// (engine/train/collective.h): who a rank is in its messages, which device it trains on, the
// text rank 0 hands the others, and the agreement before the first step. The run session
// (runner/run_session.cpp) and the app (app/main.cpp) use these; each is small enough to test
// without MPI.
//
//   std::string who = runner::rank_prefix(job);                 // "rank 1 (node7): "
//   std::string dev = runner::rank_device("cuda", 3, 2);        // "cuda:1"
//   auto text = runner::share_text(job, job.rank() == 0 ? mine : "");  // rank 0's, everywhere
//   auto late = runner::ranks_not_ready(job, ok);               // {1}: rank 1 could not start
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/train/collective.h"

namespace mls::runner {

// "rank 1 (node7): ", what a rank other than 0 puts before its warnings and errors.
std::string rank_prefix(const Collective& job);
// "rank 1 (node7)": a rank named with its host, as the job's messages name them.
std::string rank_name(const Collective& job, int rank);
// "node7, node8": the job's hosts by rank, each once, in the order the ranks first name them.
std::string hosts_text(const Collective& job);

// The device rank `rank` of a job trains on, given the device asked for and how many devices
// of that kind this host has: each rank its own GPU where there are enough, shared round-robin
// where there are not (rank r takes GPU (first + r) mod count, `first` the index asked for:
// "cuda" is 0, "vulkan:1" is 1). The CPU, an unknown kind or a count below 2 keep the device
// as asked. Index 0 is written plainly ("cuda", not "cuda:0"), as a user writes it.
std::string rank_device(std::string_view device, int rank, int count);

// Why a build without MPI refuses to train when a launcher started it as one of several ranks
// (a build with MPI trains data-parallel there; without, each rank would train its own copy).
std::string no_mpi_message(const LaunchEnv& env);

// Rank 0's `text` on every rank (its length, then its bytes, by Collective::broadcast); the
// other ranks' `text` is ignored. Errors are the collective's (a rank that did not answer).
Result<std::string> share_text(Collective& job, const std::string& text);

// Every rank says whether it is ready to train (blocking, within the collective's timeout): the
// ranks that are not, in order (empty: all are). A rank that failed to start (its data missing
// on its host, a resume rank 0 refused) then stops the others at once, not after the timeout.
Result<std::vector<int>> ranks_not_ready(Collective& job, bool ready);

}  // namespace mls::runner
