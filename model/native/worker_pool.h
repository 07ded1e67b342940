/* A small pool of worker threads for splitting one kernel call's outputs across cores (worker_pool.c; one pool for
every kernel of the library).

OpenMP was used first: between two kernel calls of a generation step (~100 us of numpy in between) its worker went
to sleep, and every other Python thread that had run torch kept a team of its own spinning, so two cores gave a step
little. Here the caller publishes a task (a function over a range of outputs), the caller and the workers take
chunks of it from one atomic counter, and the caller waits for the chunks in flight. Inside a native step (pool_spin)
a worker spins SPIN_NS for the next task, then sleeps on a condition variable (no CPU while generation is idle);
elsewhere it sleeps at once: between the calls a full pass makes from Python (its norms, rotations and attention in
between) a spinning worker only took CPU from the other sessions. A call made while another thread
uses the pool runs alone. How outputs are split never changes an output's arithmetic. */
#ifndef ATLAS_WORKER_POOL_H
#define ATLAS_WORKER_POOL_H

#include <stdint.h>

typedef void (*range_fn)(const void *args, int64_t start, int64_t stop);

/* fn(args, start, stop) over 0..n split across the caller and threads - 1 workers. */
void parallel_range(range_fn fn, const void *args, int64_t n, int threads);

/* fn(args, i, i + 1) for each i in 0..n, the items shared out one at a time (items long enough to be worth a
thread each, such as whole rows of a softmax). */
void parallel_items(range_fn fn, const void *args, int64_t n, int threads);

/* parallel_items on torch's OpenMP team (use_torch_team) where one is registered, else on the pool. For a kernel
called between torch's own operations on several threads (a full pass): that team's threads spin for a while after
each operation, and a pool worker on the same core got half of it (a 256-token trace's attention 24 -> 54 ms); the
spinning team takes the items at once instead. */
void team_items(range_fn fn, const void *args, int64_t n, int threads);

/* parallel_range on torch's OpenMP team where one is registered (see team_items), else on the pool. */
void team_range(range_fn fn, const void *args, int64_t n, int threads);

/* on: the pool's workers spin for the next task (the kernel calls of a native step follow each other within
microseconds); off: they sleep as soon as a task's chunks are taken. */
void pool_spin(int on);

/* Registers the address of the OpenMP runtime's GOMP_parallel that torch loaded (NULL: none). */
void use_torch_team(void *gomp_parallel);

#endif
