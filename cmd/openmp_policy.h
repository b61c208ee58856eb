// OpenMP's wait policy for ranks that share a node. libgomp's threads spin after each parallel
// region (OMP_WAIT_POLICY unset: up to GOMP_SPINCOUNT iterations, about a millisecond) before
// they sleep. That is the fastest choice while every thread has a core of its own (passive
// waiting made the tiny model 4-7x slower in one process here: every region then wakes its
// threads through the kernel), and a disaster when the ranks of a node ask for more threads than
// it has cores: the spinning threads of one rank take the cores its neighbour needs to compute
// and to answer a collective (tensor 2 with 2 threads per rank on these 2 cores: 5970 ms per
// iteration, 27 ms with passive waiting). libgomp reads the policy once, when it is loaded, so
// mtnlg-train re-executes itself with OMP_WAIT_POLICY=passive in that case, before anything else
// runs. A policy the user set is never changed.
#pragma once

#include <string>

#include "parallel/launcher_env.h"  // launcher_local_ranks

namespace mtnlg {

// True when local_ranks x threads_per_rank exceeds the node's cores and a rank has OpenMP
// workers that could spin (threads_per_rank > 1). threads_per_rank 0: mtnlg-train's default,
// cores / local_ranks (never more).
bool oversubscribed(int local_ranks, int threads_per_rank, int cores);

// If OMP_WAIT_POLICY is unset and this launch oversubscribes the node, sets it to passive (and
// MTNLG_OPENMP_REEXEC to "ranks x threads on cores", for the log) and re-executes this binary
// with the same arguments; returns when there is nothing to do or the exec failed.
void reexec_for_openmp_wait_policy(char** argv, int threads_per_rank);

}  // namespace mtnlg
