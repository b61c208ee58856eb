/* The reference for mtnlg-bench-collective: Open MPI's own MPI_Allreduce (float sum),
 * MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast (root 0) and a send/recv ping-pong
 * (MPI_Send + MPI_Recv, half a round trip per transfer, as mtnlg-bench-collective --op send_recv
 * times ours), by message size (the larger buffer, as ours counts it), in the same columns.
 * bench/comm_bench.sh builds it with mpicc and runs it with the transport pinned
 * (--mca btl self,tcp or self,vader) beside ours. Not part of the CMake build: our binaries do
 * not link MPI.
 * Usage: mpirun -np N mpi_collective_ref OP MIN_BYTES MAX_BYTES ITERS [WARMUP], OP one of allreduce,
 * reduce_scatter, allgather, broadcast, sendrecv */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 5 && argc != 6) {
    if (rank == 0) fprintf(stderr, "usage: %s OP MIN MAX ITERS [WARMUP]\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char* op = argv[1];
  const int allreduce = strcmp(op, "allreduce") == 0;
  const int sendrecv = strcmp(op, "sendrecv") == 0;
  const long min_bytes = atol(argv[2]), max_bytes = atol(argv[3]);
  const int iters = atoi(argv[4]), warmup = argc == 6 ? atoi(argv[5]) : 5;
  float* a = calloc((size_t)max_bytes / 4 + 1, sizeof(float));
  float* b = calloc((size_t)max_bytes / 4 + 1, sizeof(float));
  /* Written, not just calloc'ed: untouched pages all map the kernel's zero page, which a
     single-copy transport (vader's process_vm_readv) reads about twice as fast as real memory. */
  for (long i = 0; i <= max_bytes / 4; ++i) a[i] = b[i] = (float)(i % 7);
  if (rank == 0)
    printf("%s over %d ranks (Open MPI), %d calls per size after %d warm-up\n%12s %12s\n", op,
           size, iters, warmup, "bytes", "us/call");
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const int n = (int)(bytes / 4 / size * size); /* floats, a multiple of the ranks */
    double t0 = 0;
    for (int i = -warmup; i < iters; ++i) {
      if (i == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
      }
      if (allreduce) {
        MPI_Allreduce(a, b, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      } else if (strcmp(op, "reduce_scatter") == 0) {
        MPI_Reduce_scatter_block(a, b, n / size, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      } else if (strcmp(op, "allgather") == 0) {
        MPI_Allgather(a, n / size, MPI_FLOAT, b, n / size, MPI_FLOAT, MPI_COMM_WORLD);
      } else if (strcmp(op, "broadcast") == 0) {
        MPI_Bcast(a, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
      } else if (!sendrecv) {
        if (rank == 0) fprintf(stderr, "unknown op %s\n", op);
        MPI_Abort(MPI_COMM_WORLD, 2);
      } else if (rank == 0) {
        MPI_Send(a, n, MPI_FLOAT, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(b, n, MPI_FLOAT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        MPI_Recv(b, n, MPI_FLOAT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(a, n, MPI_FLOAT, 0, 0, MPI_COMM_WORLD);
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double per = (MPI_Wtime() - t0) / iters / (sendrecv ? 2 : 1);
    if (rank == 0) printf("%12ld %12.1f\n", (long)n * 4, per * 1e6);
  }
  free(a);
  free(b);
  MPI_Finalize();
  return 0;
}
