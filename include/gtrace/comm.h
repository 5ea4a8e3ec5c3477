/* c10d collectives and their waits from uprobes on libtorch, shared by BPF and userspace.
 * Fixed-size fields only. */
#ifndef GTRACE_COMM_H
#define GTRACE_COMM_H

/* X(id, method, shown name, flags): the c10d backend methods probed (ProcessGroupGloo, NCCL, MPI,
 * UCC in torch 1.13; the same names on the Backend subclasses of torch 2.x: Backend.hpp), and the
 * name torch.distributed gives the operation. GT_COLL_RETURNS_VOID: the method returns nothing
 * (every other returns an intrusive_ptr<Work> through a hidden result pointer).
 * DDP_GRADIENTS is not a backend's: c10d::Reducer::finalize_backward, where DistributedDataParallel
 * waits, at the end of backward, on the futures of its gradient buckets' all-reduces (issued from
 * the autograd hooks) — the wait Work::wait never sees (torch 1.13 and 2.x export it). */
#define GT_COLLECTIVE_LIST(X)                                                                  \
	X(ALLREDUCE, "allreduce", "all_reduce", 0)                                             \
	X(ALLREDUCE_COALESCED, "allreduce_coalesced", "all_reduce_coalesced", 0)               \
	X(ALLREDUCE_SPARSE, "allreduce_sparse", "all_reduce_sparse", 0)                        \
	X(BROADCAST, "broadcast", "broadcast", 0)                                              \
	X(REDUCE, "reduce", "reduce", 0)                                                       \
	X(ALLGATHER, "allgather", "all_gather", 0)                                             \
	X(ALLGATHER_BASE, "_allgather_base", "all_gather_into_tensor", 0)                      \
	X(ALLGATHER_COALESCED, "allgather_coalesced", "all_gather_coalesced", 0)               \
	X(ALLGATHER_INTO_TENSOR_COALESCED, "allgather_into_tensor_coalesced",                  \
	  "all_gather_into_tensor_coalesced", 0)                                               \
	X(GATHER, "gather", "gather", 0)                                                       \
	X(SCATTER, "scatter", "scatter", 0)                                                    \
	X(REDUCE_SCATTER, "reduce_scatter", "reduce_scatter", 0)                               \
	X(REDUCE_SCATTER_BASE, "_reduce_scatter_base", "reduce_scatter_tensor", 0)             \
	X(REDUCE_SCATTER_TENSOR_COALESCED, "reduce_scatter_tensor_coalesced",                  \
	  "reduce_scatter_tensor_coalesced", 0)                                                \
	X(ALLTOALL, "alltoall", "all_to_all", 0)                                               \
	X(ALLTOALL_BASE, "alltoall_base", "all_to_all_single", 0)                              \
	X(SEND, "send", "send", 0)                                                             \
	X(RECV, "recv", "recv", 0)                                                             \
	X(RECV_ANYSOURCE, "recvAnysource", "recv", 0)                                          \
	X(BARRIER, "barrier", "barrier", 0)                                                    \
	X(MONITORED_BARRIER, "monitoredBarrier", "monitored_barrier", GT_COLL_RETURNS_VOID)    \
	X(DDP_GRADIENTS, "finalize_backward", "all_reduce (DDP gradients)", GT_COLL_RETURNS_VOID)

#define GT_COLL_RETURNS_VOID 1

/* 0: a wait on a Work whose collective was not seen (issued before the capture, or by code that
 * is not probed). */
enum gt_collective_op {
	GT_COLL_UNKNOWN = 0,
#define GT_COLL_ENUM(id, method, shown, flags) GT_COLL_##id,
	GT_COLLECTIVE_LIST(GT_COLL_ENUM)
#undef GT_COLL_ENUM
	GT_COLL_COUNT,
};

/* The backend classes whose methods are probed. */
#define GT_COMM_BACKEND_LIST(X) \
	X(GLOO, "ProcessGroupGloo", "gloo") \
	X(NCCL, "ProcessGroupNCCL", "nccl") \
	X(MPI, "ProcessGroupMPI", "mpi")    \
	X(UCC, "ProcessGroupUCC", "ucc")

enum gt_comm_backend {
	GT_BACKEND_UNKNOWN = 0,
#define GT_BACKEND_ENUM(id, cls, shown) GT_BACKEND_##id,
	GT_COMM_BACKEND_LIST(GT_BACKEND_ENUM)
#undef GT_BACKEND_ENUM
	GT_BACKEND_COUNT,
};

/* A probe site's BPF cookie: kind | op << 8 | backend << 16 | flags << 24. Exits are probed at
 * the function's own `ret` instructions, never with return probes: a return probe replaces the
 * return address, and a C++ exception thrown through that frame (a gloo timeout, a peer that
 * died) then finds no unwind information and terminates the process. */
enum gt_comm_site {
	GT_COMM_SITE_CALL = 1,      /* a backend's collective method: its entry */
	GT_COMM_SITE_CALL_RET = 2,  /* … one of its ret instructions */
	GT_COMM_SITE_WAIT = 3,      /* Work::wait and its overrides: the entry */
	GT_COMM_SITE_WAIT_RET = 4,  /* … one of its ret instructions */
};

enum gt_comm_phase {
	GT_COMM_ISSUE = 1, /* the collective call itself: enqueues the work (gloo, NCCL) or runs it (MPI's barrier) */
	GT_COMM_WAIT = 2,  /* Work::wait on its result: where a CPU collective blocks */
};

struct gt_collective_event {
	unsigned char cls;     /* GT_EV_COLLECTIVE */
	unsigned char phase;   /* enum gt_comm_phase */
	unsigned char op;      /* enum gt_collective_op */
	unsigned char backend; /* enum gt_comm_backend */
	unsigned int pid;
	unsigned int tid;
	unsigned int pad;
	unsigned long long start_ns;   /* CLOCK_MONOTONIC */
	unsigned long long end_ns;
	unsigned long long issued_ns;  /* wait: its collective's call entry; 0: not seen */
	unsigned long long work;       /* the c10d::Work, to pair a wait with its collective */
	/* The backend object (ProcessGroupGloo, ...: the method's `this`) the collective was issued
	 * on, a wait's from its collective's; 0: not known (DDP's finalize_backward, a wait whose
	 * collective was not seen). Which process group, within one process. */
	unsigned long long group;
};

#endif
