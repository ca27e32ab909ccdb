# inca._lib: ctypes declarations mirroring include/inca/inca.h (structs, enums, prototypes)
# and the loader that finds libinca.so (INCA_LIB, a build dir next to this checkout, the
# system path). Keep the struct layouts in the exact order of the header: abi_test checks them.
import ctypes
import ctypes.util
import glob
import os

# ---- enums (wire values: never renumber; they follow inca.h) ----------------------------
# begin generated: dtypes and ops (tools/gen_facts.py, from lib/wire/dtype.h)
DTYPES = {
    "int8": 0, "uint8": 1, "int16": 2, "uint16": 3, "int32": 4, "uint32": 5,
    "int64": 6, "uint64": 7, "fp16": 8, "bf16": 9, "fp32": 10, "fp64": 11,
}
DTYPE_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 8, 7: 8, 8: 2, 9: 2, 10: 4, 11: 8}
OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "band": 4, "bor": 5, "bxor": 6}
# end generated: dtypes and ops
ALGOS = {
    "auto": 0, "inc": 1, "ring": 2, "recdbl": 3, "rabenseifner": 4, "binomial": 5,
    "bruck": 6, "pairwise": 7, "linear": 8,
}
COLLS = {
    "allreduce": 0, "reduce": 1, "bcast": 2, "allgather": 3, "reduce_scatter": 4,
    "alltoall": 5, "gather": 6, "scatter": 7, "barrier": 8,
}
INCA_COLL_COUNT = 9
INCA_ALGO_COUNT = 9
# fixed array bounds of struct inca_coll_counts (never change, unlike the counts above)
INCA_COLL_MAX = 32
INCA_ALGO_MAX = 32

# void (*inca_log_fn)(void *ctx, int level, const char *msg)
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)


PEER_HANDLE_BYTES = 32  # INCA_PEER_HANDLE_BYTES


class CommOpts(ctypes.Structure):
    """struct inca_comm_opts. struct_size must be set to ctypes.sizeof(CommOpts) (what
    inca_comm_opts_init does in C); fields are only ever appended (inca.h "ABI rule")."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("rank", ctypes.c_int),
        ("size", ctypes.c_int),
        ("bootstrap_addr", ctypes.c_char_p),
        ("host_ip", ctypes.c_char_p),
        ("switch_addr", ctypes.c_char_p),
        ("data_addr", ctypes.c_char_p),
        ("tree_id", ctypes.c_uint16),
        ("key", ctypes.c_uint32),
        ("switch_qpn", ctypes.c_uint32),
        ("qpn", ctypes.c_uint32),
        ("bfr_id", ctypes.c_uint16),
        ("bsl_bits", ctypes.c_uint16),
        ("nslots", ctypes.c_uint16),
        ("mtu", ctypes.c_uint16),
        ("rto_us", ctypes.c_uint32),
        ("rto_max_us", ctypes.c_uint32),
        ("retx_limit", ctypes.c_uint32),
        ("timeout_ms", ctypes.c_uint32),
        ("drop_rate", ctypes.c_double),
        ("seed", ctypes.c_uint64),
        ("log_fn", LOG_FN),
        ("log_ctx", ctypes.c_void_p),
        ("log_level", ctypes.c_int),
        # Aggregation Manager
        ("am_addr", ctypes.c_char_p),
        ("job_id", ctypes.c_char_p),
        ("job_credential", ctypes.c_char_p),
        ("group_name", ctypes.c_char_p),
        ("host_name", ctypes.c_char_p),
        ("am_attach_hint", ctypes.c_char_p),
        ("am_tls_ca", ctypes.c_char_p),
        ("am_timeout_ms", ctypes.c_uint32),
        # INC window
        ("window", ctypes.c_uint16),
        # reproducible reductions (AM groups)
        ("deterministic", ctypes.c_int),
        # packet authentication (docs/protocol.md §14)
        ("auth_key", ctypes.c_char_p),  # 32 bytes
        ("auth_key_id", ctypes.c_uint32),
        ("no_auth", ctypes.c_int),
        # external bootstrap (inca_peer_listen)
        ("peer_table", ctypes.c_char_p),  # size * PEER_HANDLE_BYTES
        ("peer_listener", ctypes.c_void_p),
        # AM transport: plaintext gRPC (docs/am.md)
        ("am_insecure", ctypes.c_int),
    ]


class AuthStats(ctypes.Structure):
    """struct inca_auth_stats."""
    _fields_ = [("enabled", ctypes.c_int), ("key_id", ctypes.c_uint32)] + [
        (n, ctypes.c_uint64) for n in ("tx_signed", "rx_verified", "rx_missing",
                                       "rx_bad_key_id", "rx_bad_ctx", "rx_bad_mac",
                                       "rx_replay", "rx_epoch")] + [
        ("epoch", ctypes.c_uint32), ("opted_out", ctypes.c_int)]


class CommStats(ctypes.Structure):
    """struct inca_comm_stats."""
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "tx_pkts", "tx_bytes", "rx_pkts", "rx_bytes", "retransmits", "timeouts",
        "rx_dup_results", "rx_bad", "injected_drops", "inc_calls", "ring_calls", "rx_nacks")]


class IoStats(ctypes.Structure):
    """struct inca_io_stats."""
    _fields_ = [("gso", ctypes.c_int), ("gro", ctypes.c_int)] + [(n, ctypes.c_uint64) for n in (
        "tx_syscalls", "tx_msgs", "gso_sends", "gso_failed", "rx_syscalls", "rx_bufs",
        "rx_gro_bufs")]


class AmInfo(ctypes.Structure):
    """struct inca_am_info."""
    _fields_ = [
        ("group_id", ctypes.c_uint64),
        ("inc_enabled", ctypes.c_int),
        ("state", ctypes.c_int),
        ("tree_id", ctypes.c_uint16),
        ("generation", ctypes.c_uint32),
        ("reconnects", ctypes.c_uint64),
        ("reason", ctypes.c_char * 128),
    ]


class CollCounts(ctypes.Structure):
    """struct inca_coll_counts."""
    _fields_ = [
        ("calls", (ctypes.c_uint64 * INCA_ALGO_MAX) * INCA_COLL_MAX),
        ("failovers", ctypes.c_uint64),
    ]


class CollArgs(ctypes.Structure):
    """struct inca_coll_args (enums are int-sized in the C ABI used here)."""
    _fields_ = [
        ("coll", ctypes.c_int),
        ("sendbuf", ctypes.c_void_p),
        ("recvbuf", ctypes.c_void_p),
        ("count", ctypes.c_size_t),
        ("dt", ctypes.c_int),
        ("op", ctypes.c_int),
        ("root", ctypes.c_int),
        ("algo", ctypes.c_int),
    ]


STRUCTS = {
    "inca_comm_opts": CommOpts,
    "inca_comm_stats": CommStats,
    "inca_io_stats": IoStats,
    "inca_auth_stats": AuthStats,
    "inca_am_info": AmInfo,
    "inca_coll_counts": CollCounts,
    "inca_coll_args": CollArgs,
}


def _candidates():
    """Where libinca.so may be, in order of preference."""
    env = os.environ.get("INCA_LIB")
    if env:
        # A file, or a directory holding libinca.so (a build dir or its lib/client).
        if os.path.isdir(env):
            for sub in ("libinca.so", "lib/client/libinca.so"):
                yield os.path.join(env, sub)
        else:
            yield env
        return
    # A build dir of this checkout: python/inca/_lib.py -> repo root. "build" first, then
    # the most recently built other build-* dir.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    first = os.path.join(root, "build", "lib", "client", "libinca.so")
    if os.path.exists(first):
        yield first
    others = glob.glob(os.path.join(root, "build*", "lib", "client", "libinca.so"))
    others.sort(key=lambda p: os.path.getmtime(p), reverse=True)
    yield from others
    found = ctypes.util.find_library("inca")
    if found:
        yield found
    yield "libinca.so.0"
    yield "libinca.so"


def _declare(lib):
    c_int, c_size_t, c_void_p, c_char_p = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p
    comm_p = c_void_p
    protos = {
        "inca_dtype_size": (c_size_t, [c_int]),
        "inca_dtype_name": (c_char_p, [c_int]),
        "inca_op_name": (c_char_p, [c_int]),
        "inca_dtype_parse": (c_int, [c_char_p]),
        "inca_op_parse": (c_int, [c_char_p]),
        "inca_op_valid": (c_int, [c_int, c_int]),
        "inca_strerror": (c_char_p, [c_int]),
        "inca_comm_create": (c_int, [ctypes.POINTER(CommOpts), ctypes.POINTER(comm_p)]),
        "inca_comm_destroy": (None, [comm_p]),
        "inca_comm_rank": (c_int, [comm_p]),
        "inca_comm_size": (c_int, [comm_p]),
        "inca_allreduce": (c_int, [comm_p, c_void_p, c_void_p, c_size_t, c_int, c_int]),
        "inca_allreduce_algo": (c_int, [comm_p, c_void_p, c_void_p, c_size_t, c_int, c_int,
                                        c_int]),
        "inca_barrier": (c_int, [comm_p]),
        "inca_comm_get_stats": (c_int, [comm_p, ctypes.POINTER(CommStats), c_size_t]),
        "inca_comm_am_info": (c_int, [comm_p, ctypes.POINTER(AmInfo), c_size_t]),
        "inca_comm_get_io_stats": (c_int, [comm_p, ctypes.POINTER(IoStats), c_size_t]),
        "inca_comm_get_auth_stats": (c_int, [comm_p, ctypes.POINTER(AuthStats), c_size_t]),
        # may be missing from an older library: declared only when present
        "inca_coll": (c_int, [comm_p, ctypes.POINTER(CollArgs)]),
        "inca_bcast": (c_int, [comm_p, c_void_p, c_size_t, c_int, c_int]),
        "inca_allgather": (c_int, [comm_p, c_void_p, c_void_p, c_size_t, c_int]),
        "inca_comm_get_coll_counts": (c_int, [comm_p, ctypes.POINTER(CollCounts), c_size_t]),
        "inca_comm_set_tuning": (c_int, [comm_p, c_int]),
        "inca_coll_name": (c_char_p, [c_int]),
        "inca_algo_name": (c_char_p, [c_int]),
        "inca_iallreduce": (c_int, [comm_p, c_void_p, c_void_p, c_size_t, c_int, c_int,
                                    ctypes.POINTER(c_void_p)]),
        "inca_test": (c_int, [ctypes.POINTER(c_void_p), ctypes.POINTER(c_int)]),
        "inca_wait": (c_int, [ctypes.POINTER(c_void_p)]),
        "inca_peer_listen": (c_int, [c_char_p, ctypes.POINTER(c_void_p), c_char_p]),
        "inca_peer_listener_close": (None, [c_void_p]),
    }
    have = set()
    for name, (res, args) in protos.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            continue
        fn.restype = res
        fn.argtypes = args
        have.add(name)
    return have


class Library:
    """A loaded libinca with its prototypes declared; `has(name)` tells optional symbols."""

    def __init__(self, path):
        self.path = path
        self.dll = ctypes.CDLL(path)
        self.symbols = _declare(self.dll)
        for need in ("inca_comm_create", "inca_allreduce", "inca_strerror"):
            if need not in self.symbols:
                raise OSError(f"{path}: not libinca (no {need})")

    def has(self, name):
        return name in self.symbols

    def __getattr__(self, name):
        return getattr(self.dll, name)


_LIB = None


def load(path=None):
    """Load libinca once (path overrides the search). Raises OSError listing what was tried."""
    global _LIB
    if path is not None:
        _LIB = Library(path)
        return _LIB
    if _LIB is not None:
        return _LIB
    tried = []
    for cand in _candidates():
        if os.path.sep in cand and not os.path.exists(cand):
            tried.append(cand + " (missing)")
            continue
        try:
            _LIB = Library(cand)
            return _LIB
        except OSError as e:
            tried.append(f"{cand} ({e})")
    raise OSError("libinca.so not found; set INCA_LIB. Tried: " + "; ".join(tried))
