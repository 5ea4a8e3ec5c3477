/* Collectives: c10d's calls and the waits on them (uprobes on libtorch), and NCCL's public API
 * (uprobes on libnccl.so.2), shared by BPF and userspace. Fixed-size fields only. */
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
	GT_COMM_SITE_NCCL = 5,      /* an NCCL API function: its entry (cookie: kind | api << 8 | layout << 16) */
	GT_COMM_SITE_NCCL_RET = 6,  /* … one of its ret instructions */
};

enum gt_comm_phase {
	GT_COMM_ISSUE = 1, /* the collective call itself: enqueues the work (gloo, NCCL) or runs it (MPI's barrier) */
	GT_COMM_WAIT = 2,  /* Work::wait on its result: where a CPU collective blocks */
	GT_COMM_NCCL = 3,  /* a call of NCCL's API (op: enum gt_nccl_api), entry to return */
	/* A collective call or wait of this thread that could not be recorded (its per-thread state,
	 * or its Work's entry, could not be had), at start_ns: the thread's counts have a hole from
	 * then until its next record, which user space tells the dump about. */
	GT_COMM_UNRECORDED = 4,
};

/* X(id, name, layout): NCCL's public API (nccl.h, NCCL 2.x), probed as nccl<name> in whatever
 * libnccl.so.2 a process maps (the pip wheel exports each as a weak alias of pnccl<name>, at one
 * address). The layout says which argument (1-6: registers, 7-8: the stack, SysV x86-64; 0: none)
 * holds the count, datatype, reduction op, root or peer, communicator and stream:
 *   ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream)
 *   ncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream)
 *   ncclReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream)
 *   ncclBroadcast(sendbuff, recvbuff, count, datatype, root, comm, stream)
 *   ncclBcast(buff, count, datatype, root, comm, stream)
 *   ncclReduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream)
 *   ncclSend(sendbuff, count, datatype, peer, comm, stream), ncclRecv(recvbuff, …) alike
 *   ncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream): count to each rank (2.28+)
 *   ncclGather(sendbuff, recvbuff, count, datatype, root, comm, stream), ncclScatter alike (2.28+)
 *   ncclCommInitRank(ncclComm_t* comm, nranks, ncclUniqueId commId, rank): the 128-byte id goes
 *     on the stack, so rank is the third register; the communicator is read through the pointer
 *     at the return (GT_NCCL_COMM_OUT), and nranks and rank go in count and peer.
 *   ncclCommInitRankScalable(ncclComm_t* newcomm, nranks, myrank, nId, commIds, config): alike.
 * (PyTorch 2.15's libtorch_cuda.so imports ncclAlltoAll, ncclGather and ncclCommInitRankScalable;
 * ncclCommSplit and ncclCommShrink too, whose new communicator's size is no argument: not probed.)
 * Group calls (ncclGroupStart/End) queue the calls between them; the outermost ncclGroupEnd
 * launches their kernels ("Group Calls", NCCL's user guide). */
#define GT_NCCL_ARGS(count, type, redop, peer, comm, stream) \
	((count) | (type) << 4 | (redop) << 8 | (peer) << 12 | (comm) << 16 | (stream) << 20)
#define GT_NCCL_COMM_OUT (1 << 24)
#define GT_NCCL_API_LIST(X)                                                          \
	X(ALL_REDUCE, "AllReduce", GT_NCCL_ARGS(3, 4, 5, 0, 6, 7))                   \
	X(ALL_GATHER, "AllGather", GT_NCCL_ARGS(3, 4, 0, 0, 5, 6))                   \
	X(REDUCE_SCATTER, "ReduceScatter", GT_NCCL_ARGS(3, 4, 5, 0, 6, 7))           \
	X(BROADCAST, "Broadcast", GT_NCCL_ARGS(3, 4, 0, 5, 6, 7))                    \
	X(BCAST, "Bcast", GT_NCCL_ARGS(2, 3, 0, 4, 5, 6))                            \
	X(REDUCE, "Reduce", GT_NCCL_ARGS(3, 4, 5, 6, 7, 8))                          \
	X(SEND, "Send", GT_NCCL_ARGS(2, 3, 0, 4, 5, 6))                              \
	X(RECV, "Recv", GT_NCCL_ARGS(2, 3, 0, 4, 5, 6))                              \
	X(ALL_TO_ALL, "AlltoAll", GT_NCCL_ARGS(3, 4, 0, 0, 5, 6))                    \
	X(GATHER, "Gather", GT_NCCL_ARGS(3, 4, 0, 5, 6, 7))                          \
	X(SCATTER, "Scatter", GT_NCCL_ARGS(3, 4, 0, 5, 6, 7))                        \
	X(GROUP_START, "GroupStart", 0)                                              \
	X(GROUP_END, "GroupEnd", 0)                                                  \
	X(COMM_INIT_RANK, "CommInitRank", GT_NCCL_ARGS(2, 0, 0, 3, 1, 0) | GT_NCCL_COMM_OUT) \
	X(COMM_INIT_RANK_CONFIG, "CommInitRankConfig", GT_NCCL_ARGS(2, 0, 0, 3, 1, 0) | GT_NCCL_COMM_OUT) \
	X(COMM_INIT_RANK_SCALABLE, "CommInitRankScalable", GT_NCCL_ARGS(2, 0, 0, 3, 1, 0) | GT_NCCL_COMM_OUT)

enum gt_nccl_api {
	GT_NCCL_UNKNOWN = 0,
#define GT_NCCL_ENUM(id, name, layout) GT_NCCL_##id,
	GT_NCCL_API_LIST(GT_NCCL_ENUM)
#undef GT_NCCL_ENUM
	GT_NCCL_COUNT,
};

struct gt_collective_event {
	unsigned char cls;     /* GT_EV_COLLECTIVE; NCCL's calls: GT_EV_NCCL */
	unsigned char phase;   /* enum gt_comm_phase */
	unsigned char op;      /* enum gt_collective_op */
	unsigned char backend; /* enum gt_comm_backend */
	unsigned int pid;
	unsigned int tid;
	int result;                    /* NCCL: the ncclResult_t returned; else 0 */
	unsigned long long start_ns;   /* CLOCK_MONOTONIC */
	unsigned long long end_ns;
	unsigned long long issued_ns;  /* wait: its collective's call entry; 0: not seen */
	unsigned long long work;       /* the c10d::Work, to pair a wait with its collective */
	/* The backend object (ProcessGroupGloo, ...: the method's `this`) the collective was issued
	 * on, a wait's from its collective's; 0: not known (DDP's finalize_backward, a wait whose
	 * collective was not seen). Which process group, within one process. NCCL: the ncclComm_t. */
	unsigned long long group;
	/* NCCL only (0 otherwise): the elements (comm init: nranks), the cudaStream_t, the root or
	 * peer (comm init: rank; -1: none), ncclDataType_t, ncclRedOp_t (255: none), and how many
	 * ncclGroupStart calls were open on the thread at the call (GroupEnd: after it). */
	unsigned long long count;
	unsigned long long stream;
	int peer;
	unsigned char datatype, redop, group_depth, pad;
};

#endif
