"""Program section names as libbpf 1.x reads them: ``section_defs`` of ``libbpf.c``.

A program's ELF section says its program type, expected attach type and load
flags. libbpf 1.x matches a section name against one table, first match wins
(``sec_def_matches``):

* a definition ending in ``/`` matches any name with that prefix;
* one ending in ``+`` matches the name itself or the name followed by
  ``/extras`` (``tp_btf/xdp_exception``, ``fentry/do_xdp_generic``); the
  extras name the attach target of ``SEC_ATTACH_BTF`` definitions;
* any other matches exactly.

libbpf 1.x dropped the pre-1.0 sloppy prefixes: ``xdp_devmap/``,
``xdp_cpumap/``, ``xdp_pass`` and ``xdp/foo`` match nothing. libbpf then
knows no program type for them and a loader names one (libxdp, ``bpftool
prog load ... type xdp``); pyxdp reads a section beginning with ``xdp``
that matches nothing as such a plain XDP program (:data:`LEGACY_XDP`):
``BPF_XDP``, never a devmap or cpumap program, no frags.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyxdp.uapi.bpf import BpfAttachType as A
from pyxdp.uapi.bpf import BpfProgType as P

__all__ = ["LEGACY_XDP", "SecDef", "find_sec_def", "prog_type_name"]

# libbpf's sec_def_flags.
SEC_ATTACHABLE = 1 << 1
SEC_ATTACH_BTF = 1 << 2
SEC_SLEEPABLE = 1 << 3
SEC_XDP_FRAGS = 1 << 4

# BPF_PROG_LOAD prog_flags.
BPF_F_SLEEPABLE = 1 << 4
BPF_F_XDP_HAS_FRAGS = 1 << 5


@dataclass(frozen=True, slots=True)
class SecDef:
    """One ``section_defs`` entry: what a matching section name loads as."""

    sec: str
    prog_type: int
    attach_type: int
    flags: int = 0

    def matches(self, name: str) -> bool:
        """libbpf's ``sec_def_matches``."""
        if self.sec.endswith("/"):
            return name.startswith(self.sec)
        if self.sec.endswith("+"):
            base = self.sec[:-1]
            return name == base or name.startswith(base + "/")
        return name == self.sec

    @property
    def prog_flags(self) -> int:
        """``prog_flags`` libbpf's ``libbpf_prepare_prog_load`` sets."""
        return ((BPF_F_SLEEPABLE if self.flags & SEC_SLEEPABLE else 0)
                | (BPF_F_XDP_HAS_FRAGS if self.flags & SEC_XDP_FRAGS else 0))

    def attach_target(self, name: str) -> str:
        """The BTF attach target a ``SEC_ATTACH_BTF`` section names (after its ``/``)."""
        if not self.flags & SEC_ATTACH_BTF or "/" not in name:
            return ""
        return name.split("/", 1)[1]


def _d(sec: str, prog_type: int, attach_type: int = 0, flags: int = 0) -> SecDef:
    return SecDef(sec, int(prog_type), int(attach_type), flags)


_ATT = SEC_ATTACHABLE
_BTF = SEC_ATTACH_BTF
_SLP = SEC_SLEEPABLE
# The table in libbpf 1.x's order (order decides: "xdp.frags/devmap" before "xdp").
SECTION_DEFS: tuple[SecDef, ...] = (
    _d("socket", P.BPF_PROG_TYPE_SOCKET_FILTER),
    _d("sk_reuseport/migrate", P.BPF_PROG_TYPE_SK_REUSEPORT,
       A.BPF_SK_REUSEPORT_SELECT_OR_MIGRATE, _ATT),
    _d("sk_reuseport", P.BPF_PROG_TYPE_SK_REUSEPORT, A.BPF_SK_REUSEPORT_SELECT, _ATT),
    _d("kprobe+", P.BPF_PROG_TYPE_KPROBE),
    _d("uprobe+", P.BPF_PROG_TYPE_KPROBE),
    _d("uprobe.s+", P.BPF_PROG_TYPE_KPROBE, 0, _SLP),
    _d("kretprobe+", P.BPF_PROG_TYPE_KPROBE),
    _d("uretprobe+", P.BPF_PROG_TYPE_KPROBE),
    _d("uretprobe.s+", P.BPF_PROG_TYPE_KPROBE, 0, _SLP),
    _d("kprobe.multi+", P.BPF_PROG_TYPE_KPROBE, A.BPF_TRACE_KPROBE_MULTI),
    _d("kretprobe.multi+", P.BPF_PROG_TYPE_KPROBE, A.BPF_TRACE_KPROBE_MULTI),
    _d("kprobe.session+", P.BPF_PROG_TYPE_KPROBE, A.BPF_TRACE_KPROBE_SESSION),
    _d("uprobe.multi+", P.BPF_PROG_TYPE_KPROBE, A.BPF_TRACE_UPROBE_MULTI),
    _d("uretprobe.multi+", P.BPF_PROG_TYPE_KPROBE, A.BPF_TRACE_UPROBE_MULTI),
    _d("uprobe.session+", P.BPF_PROG_TYPE_KPROBE, A.BPF_TRACE_UPROBE_SESSION),
    _d("ksyscall+", P.BPF_PROG_TYPE_KPROBE),
    _d("kretsyscall+", P.BPF_PROG_TYPE_KPROBE),
    _d("usdt+", P.BPF_PROG_TYPE_KPROBE),
    _d("tc/ingress", P.BPF_PROG_TYPE_SCHED_CLS, A.BPF_TCX_INGRESS),
    _d("tc/egress", P.BPF_PROG_TYPE_SCHED_CLS, A.BPF_TCX_EGRESS),
    _d("tcx/ingress", P.BPF_PROG_TYPE_SCHED_CLS, A.BPF_TCX_INGRESS),
    _d("tcx/egress", P.BPF_PROG_TYPE_SCHED_CLS, A.BPF_TCX_EGRESS),
    _d("tc", P.BPF_PROG_TYPE_SCHED_CLS),
    _d("classifier", P.BPF_PROG_TYPE_SCHED_CLS),
    _d("action", P.BPF_PROG_TYPE_SCHED_ACT),
    _d("netkit/primary", P.BPF_PROG_TYPE_SCHED_CLS, A.BPF_NETKIT_PRIMARY),
    _d("netkit/peer", P.BPF_PROG_TYPE_SCHED_CLS, A.BPF_NETKIT_PEER),
    _d("tracepoint+", P.BPF_PROG_TYPE_TRACEPOINT),
    _d("tp+", P.BPF_PROG_TYPE_TRACEPOINT),
    _d("tracepoint.s+", P.BPF_PROG_TYPE_TRACEPOINT, 0, _SLP),
    _d("tp.s+", P.BPF_PROG_TYPE_TRACEPOINT, 0, _SLP),
    _d("raw_tracepoint+", P.BPF_PROG_TYPE_RAW_TRACEPOINT),
    _d("raw_tp+", P.BPF_PROG_TYPE_RAW_TRACEPOINT),
    _d("raw_tracepoint.s+", P.BPF_PROG_TYPE_RAW_TRACEPOINT, 0, _SLP),
    _d("raw_tp.s+", P.BPF_PROG_TYPE_RAW_TRACEPOINT, 0, _SLP),
    _d("raw_tracepoint.w+", P.BPF_PROG_TYPE_RAW_TRACEPOINT_WRITABLE),
    _d("raw_tp.w+", P.BPF_PROG_TYPE_RAW_TRACEPOINT_WRITABLE),
    _d("tp_btf+", P.BPF_PROG_TYPE_TRACING, A.BPF_TRACE_RAW_TP, _BTF),
    _d("tp_btf.s+", P.BPF_PROG_TYPE_TRACING, A.BPF_TRACE_RAW_TP, _BTF | _SLP),
    _d("fentry+", P.BPF_PROG_TYPE_TRACING, A.BPF_TRACE_FENTRY, _BTF),
    _d("fmod_ret+", P.BPF_PROG_TYPE_TRACING, A.BPF_MODIFY_RETURN, _BTF),
    _d("fexit+", P.BPF_PROG_TYPE_TRACING, A.BPF_TRACE_FEXIT, _BTF),
    _d("fentry.s+", P.BPF_PROG_TYPE_TRACING, A.BPF_TRACE_FENTRY, _BTF | _SLP),
    _d("fmod_ret.s+", P.BPF_PROG_TYPE_TRACING, A.BPF_MODIFY_RETURN, _BTF | _SLP),
    _d("fexit.s+", P.BPF_PROG_TYPE_TRACING, A.BPF_TRACE_FEXIT, _BTF | _SLP),
    _d("freplace+", P.BPF_PROG_TYPE_EXT, 0, _BTF),
    _d("lsm+", P.BPF_PROG_TYPE_LSM, A.BPF_LSM_MAC, _BTF),
    _d("lsm.s+", P.BPF_PROG_TYPE_LSM, A.BPF_LSM_MAC, _BTF | _SLP),
    _d("lsm_cgroup+", P.BPF_PROG_TYPE_LSM, A.BPF_LSM_CGROUP, _BTF),
    _d("iter+", P.BPF_PROG_TYPE_TRACING, A.BPF_TRACE_ITER, _BTF),
    _d("iter.s+", P.BPF_PROG_TYPE_TRACING, A.BPF_TRACE_ITER, _BTF | _SLP),
    _d("syscall", P.BPF_PROG_TYPE_SYSCALL, 0, _SLP),
    _d("xdp.frags/devmap", P.BPF_PROG_TYPE_XDP, A.BPF_XDP_DEVMAP, SEC_XDP_FRAGS),
    _d("xdp/devmap", P.BPF_PROG_TYPE_XDP, A.BPF_XDP_DEVMAP, _ATT),
    _d("xdp.frags/cpumap", P.BPF_PROG_TYPE_XDP, A.BPF_XDP_CPUMAP, SEC_XDP_FRAGS),
    _d("xdp/cpumap", P.BPF_PROG_TYPE_XDP, A.BPF_XDP_CPUMAP, _ATT),
    _d("xdp.frags", P.BPF_PROG_TYPE_XDP, A.BPF_XDP, SEC_XDP_FRAGS),
    _d("xdp", P.BPF_PROG_TYPE_XDP, A.BPF_XDP, _ATT),
    _d("perf_event", P.BPF_PROG_TYPE_PERF_EVENT),
    _d("lwt_in", P.BPF_PROG_TYPE_LWT_IN),
    _d("lwt_out", P.BPF_PROG_TYPE_LWT_OUT),
    _d("lwt_xmit", P.BPF_PROG_TYPE_LWT_XMIT),
    _d("lwt_seg6local", P.BPF_PROG_TYPE_LWT_SEG6LOCAL),
    _d("sockops", P.BPF_PROG_TYPE_SOCK_OPS, A.BPF_CGROUP_SOCK_OPS, _ATT),
    _d("sk_skb/stream_parser", P.BPF_PROG_TYPE_SK_SKB, A.BPF_SK_SKB_STREAM_PARSER, _ATT),
    _d("sk_skb/stream_verdict", P.BPF_PROG_TYPE_SK_SKB, A.BPF_SK_SKB_STREAM_VERDICT, _ATT),
    _d("sk_skb/verdict", P.BPF_PROG_TYPE_SK_SKB, A.BPF_SK_SKB_VERDICT, _ATT),
    _d("sk_skb", P.BPF_PROG_TYPE_SK_SKB),
    _d("sk_msg", P.BPF_PROG_TYPE_SK_MSG, A.BPF_SK_MSG_VERDICT, _ATT),
    _d("lirc_mode2", P.BPF_PROG_TYPE_LIRC_MODE2, A.BPF_LIRC_MODE2, _ATT),
    _d("flow_dissector", P.BPF_PROG_TYPE_FLOW_DISSECTOR, A.BPF_FLOW_DISSECTOR, _ATT),
    _d("cgroup_skb/ingress", P.BPF_PROG_TYPE_CGROUP_SKB, A.BPF_CGROUP_INET_INGRESS, _ATT),
    _d("cgroup_skb/egress", P.BPF_PROG_TYPE_CGROUP_SKB, A.BPF_CGROUP_INET_EGRESS, _ATT),
    _d("cgroup/skb", P.BPF_PROG_TYPE_CGROUP_SKB),
    _d("cgroup/sock_create", P.BPF_PROG_TYPE_CGROUP_SOCK, A.BPF_CGROUP_INET_SOCK_CREATE, _ATT),
    _d("cgroup/sock_release", P.BPF_PROG_TYPE_CGROUP_SOCK, A.BPF_CGROUP_INET_SOCK_RELEASE,
       _ATT),
    _d("cgroup/sock", P.BPF_PROG_TYPE_CGROUP_SOCK, A.BPF_CGROUP_INET_SOCK_CREATE, _ATT),
    _d("cgroup/post_bind4", P.BPF_PROG_TYPE_CGROUP_SOCK, A.BPF_CGROUP_INET4_POST_BIND, _ATT),
    _d("cgroup/post_bind6", P.BPF_PROG_TYPE_CGROUP_SOCK, A.BPF_CGROUP_INET6_POST_BIND, _ATT),
    _d("cgroup/bind4", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR, A.BPF_CGROUP_INET4_BIND, _ATT),
    _d("cgroup/bind6", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR, A.BPF_CGROUP_INET6_BIND, _ATT),
    _d("cgroup/connect4", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR, A.BPF_CGROUP_INET4_CONNECT, _ATT),
    _d("cgroup/connect6", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR, A.BPF_CGROUP_INET6_CONNECT, _ATT),
    _d("cgroup/connect_unix", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR, A.BPF_CGROUP_UNIX_CONNECT,
       _ATT),
    _d("cgroup/sendmsg4", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR, A.BPF_CGROUP_UDP4_SENDMSG, _ATT),
    _d("cgroup/sendmsg6", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR, A.BPF_CGROUP_UDP6_SENDMSG, _ATT),
    _d("cgroup/sendmsg_unix", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR, A.BPF_CGROUP_UNIX_SENDMSG,
       _ATT),
    _d("cgroup/recvmsg4", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR, A.BPF_CGROUP_UDP4_RECVMSG, _ATT),
    _d("cgroup/recvmsg6", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR, A.BPF_CGROUP_UDP6_RECVMSG, _ATT),
    _d("cgroup/recvmsg_unix", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR, A.BPF_CGROUP_UNIX_RECVMSG,
       _ATT),
    _d("cgroup/getpeername4", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
       A.BPF_CGROUP_INET4_GETPEERNAME, _ATT),
    _d("cgroup/getpeername6", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
       A.BPF_CGROUP_INET6_GETPEERNAME, _ATT),
    _d("cgroup/getpeername_unix", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
       A.BPF_CGROUP_UNIX_GETPEERNAME, _ATT),
    _d("cgroup/getsockname4", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
       A.BPF_CGROUP_INET4_GETSOCKNAME, _ATT),
    _d("cgroup/getsockname6", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
       A.BPF_CGROUP_INET6_GETSOCKNAME, _ATT),
    _d("cgroup/getsockname_unix", P.BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
       A.BPF_CGROUP_UNIX_GETSOCKNAME, _ATT),
    _d("cgroup/sysctl", P.BPF_PROG_TYPE_CGROUP_SYSCTL, A.BPF_CGROUP_SYSCTL, _ATT),
    _d("cgroup/getsockopt", P.BPF_PROG_TYPE_CGROUP_SOCKOPT, A.BPF_CGROUP_GETSOCKOPT, _ATT),
    _d("cgroup/setsockopt", P.BPF_PROG_TYPE_CGROUP_SOCKOPT, A.BPF_CGROUP_SETSOCKOPT, _ATT),
    _d("cgroup/dev", P.BPF_PROG_TYPE_CGROUP_DEVICE, A.BPF_CGROUP_DEVICE, _ATT),
    _d("struct_ops+", P.BPF_PROG_TYPE_STRUCT_OPS),
    _d("struct_ops.s+", P.BPF_PROG_TYPE_STRUCT_OPS, 0, _SLP),
    _d("sk_lookup", P.BPF_PROG_TYPE_SK_LOOKUP, A.BPF_SK_LOOKUP, _ATT),
    _d("netfilter", P.BPF_PROG_TYPE_NETFILTER, A.BPF_NETFILTER),
)

# A section beginning with "xdp" that libbpf 1.x does not know (see the module doc).
LEGACY_XDP = SecDef("xdp*", int(P.BPF_PROG_TYPE_XDP), int(A.BPF_XDP))


def find_sec_def(section: str) -> SecDef | None:
    """libbpf's ``find_sec_def``; legacy ``xdp*`` names give :data:`LEGACY_XDP`.

    ``None`` when nothing matches: libbpf knows no program type for the section.
    """
    for d in SECTION_DEFS:
        if d.matches(section):
            return d
    return LEGACY_XDP if section.startswith("xdp") else None


def prog_type_name(prog_type: int) -> str:
    """libbpf's name of a program type (``libbpf_bpf_prog_type_str``): ``"sched_cls"``..."""
    try:
        return P(prog_type).name.removeprefix("BPF_PROG_TYPE_").lower()
    except ValueError:
        return f"type {prog_type}"
