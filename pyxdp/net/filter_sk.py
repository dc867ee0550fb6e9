"""The socket and SYN cookie helpers XDP gets from ``net/core/filter.c``.

``bpf_sk_lookup_tcp`` (#84), ``bpf_sk_lookup_udp`` (#85), ``bpf_sk_release``
(#86), ``bpf_skc_lookup_tcp`` (#99), ``bpf_tcp_check_syncookie`` (#100),
``bpf_tcp_gen_syncookie`` (#110) and ``bpf_tcp_raw_gen_syncookie_ipv4``/``_ipv6``,
``bpf_tcp_raw_check_syncookie_ipv4``/``_ipv6`` (#204-#207), with Linux 6.18's
checks in its order:

* lookups (``bpf_xdp_sk_lookup_*`` -> ``__bpf_sk_lookup``): a tuple of
  ``sizeof(tuple->ipv4)`` (12) or ``sizeof(tuple->ipv6)`` (36) bytes, flags 0, a
  ``netns_id`` (a u32) that is negative as an s32 (``BPF_F_CURRENT_NETNS``: the
  receiving device's namespace) or an id that namespace gave another
  (``SockTable.peers``), else NULL; the receiving device's ifindex is ``dif``.
  A found socket's address is its ``struct bpf_sock`` in the namespace's
  :class:`~pyxdp.net.inet_hashtables.SockTable` buffer, mapped read-only into
  the run. ``bpf_sk_release`` returns 0 (listeners and UDP sockets are not
  reference counted by a lookup, and pyxdp models no other).
* ``bpf_tcp_gen_syncookie``/``bpf_tcp_check_syncookie`` on a listener:
  ``-EINVAL`` for a header shorter than its struct, a ``th_len`` that is not
  ``doff * 4`` (gen), a socket that is no TCP listener, ``tcp_syncookies`` 0
  (check; gen says ``-ENOENT``), an IPv4 header for an ``IPV6_V6ONLY``
  socket or an IPv6 one for an IPv4 socket; ``-ENOENT`` for flags that are no
  SYN (gen: ``-EINVAL``) or no ACK (check), for a listener whose SYN queue did
  not overflow in the last two minutes (check), for ``tcp_syncookies`` 1 with a
  SYN queue that is not full (gen: pyxdp's never is) and for an invalid cookie;
  ``-EPROTONOSUPPORT`` for another IP version. A cookie generated counts as an
  overflow (``tcp_synq_overflow``). The result is ``cookie | mss << 32``.
* the raw helpers: ``-EINVAL`` for ``th_len`` below 20 or not ``doff * 4``
  (gen), ``-EACCES`` for an invalid cookie (check).

Cookies are :mod:`pyxdp.net.syncookies`'.

On the JIT every one of these runs as a native twin (below) over the same state:
the namespace's :class:`~pyxdp.net.inet_hashtables.SockTable` buffer (its
``SK_DESC`` words, the run context's ``sk``), scanned in slot order as
``SockTable.lookup`` scans, and :data:`pyxdp.net.syncookies.SECRETS`. A twin
gives Python the call (``SLOW``, before changing anything) for a peer
namespace's table, a socket of another table, memory it cannot map, or a run
without its namespace's table yet. ``bpf_tcp_gen_syncookie``'s twin writes the
listener's overflow stamp (``serial``: threaded NAPI runs its program under the
host lock).

The map helpers on a sockmap or sockhash (``net/core/sock_map.c``, which
Linux's verifier lets XDP use: ``may_update_sockmap``):
``bpf_map_update_elem(map, key, sk, flags)`` puts the socket a lookup gave
(:meth:`~pyxdp.maps.sock_map.SocketMapBase.update_socket`);
``bpf_map_lookup_elem`` returns the slot's socket as a ``struct bpf_sock``
(mapped like a lookup's), a reference the program releases with
``bpf_sk_release`` (``bpf_map_delete_elem`` is the base helper's, the map's
own delete). On other maps they are the base helpers: :mod:`pyxdp.net.filter`'s XDP
map helpers call :func:`sockmap_lookup` and :func:`sockmap_update` for these maps.
"""

from __future__ import annotations

import errno
from collections.abc import Callable

from pyxdp.errors import HelperFault
from pyxdp.maps.sock_map import SocketMapBase
from pyxdp.net.fib import dev_net
from pyxdp.net.inet_hashtables import (
    AF_INET,
    AF_INET6,
    IPPROTO_TCP,
    IPPROTO_UDP,
    SK_BASE,
    SK_DESC,
    SK_FLAGS,
    SK_OVERFLOW,
    SK_SLOT,
    SK_STRIDE,
    SK_USER_MSS,
    SKF_OVERFLOW,
    SKF_V6ONLY,
    SOCK_TABLES,
    Sock,
    SockTable,
    TcpState,
)
from pyxdp.net.syncookies import (
    COOKIEBITS,
    COOKIEMASK,
    IPV6_MIN_MTU,
    MAX_SYNCOOKIE_AGE,
    MSSTAB,
    MSSTAB6,
    TCP_MSS_DEFAULT,
    TCP_SYNCOOKIE_PERIOD,
    TCP_SYNCOOKIE_VALID,
    cookie_check,
    cookie_init_sequence,
    tcp_parse_mss_option,
)
from pyxdp.uapi.bpf import BpfFuncId, BpfSock
from pyxdp.vm.helpers import helper, neg
from pyxdp.vm.interpreter import Helper, Interpreter
from pyxdp.vm.jiffies import HZ, jiffies64, jiffies64_ir
from pyxdp.vm.jit.abi import NF_XDP, SLOW, Natives
from pyxdp.vm.jit.ir import TBAA_CTX_VALUES, Text, c64, ret_if
from pyxdp.vm.jit.natives import HelperNative, register_helper
from pyxdp.vm.memory import Region

__all__ = ["SK_HELPERS", "sockmap_lookup", "sockmap_update"]

# Their table: pyxdp.net.filter.XDP_HELPERS defers these ids to it (this module loads with
# the first program calling one, or the first map helper on a sockmap).
SK_HELPERS: dict[int, Helper] = {}
M32 = 0xFFFF_FFFF
M64 = (1 << 64) - 1
S32_MAX = (1 << 31) - 1
TUPLE_V4, TUPLE_V6 = 12, 36  # sizeof(struct bpf_sock_tuple) members ipv4, ipv6
IPHDR, IPV6HDR, TCPHDR = 20, 40, 20
_MSS_CLAMP6 = IPV6_MIN_MTU - TCPHDR - IPV6HDR
# TCP flags (byte 13 of struct tcphdr)
_FIN, _SYN, _RST, _ACK = 0x01, 0x02, 0x04, 0x10
_TCPOPT_EOL, _TCPOPT_NOP, _TCPOPT_MSS = 0, 1, 2


def _lookup(vm: Interpreter, r1: int, tup: int, size: int, netns_id: int, flags: int,
            protocol: int) -> int:
    """``__bpf_sk_lookup``: the socket's ``struct bpf_sock`` address, or 0."""
    fib, dif = dev_net(vm.context, r1, "socket lookup")
    net: SockTable = fib.sockets
    size &= M32
    if size == TUPLE_V4:
        family = AF_INET
    elif size == TUPLE_V6:
        family = AF_INET6
    else:
        return 0
    netns_id &= M32  # the XDP helpers take a u32
    if flags:
        return 0
    if netns_id <= S32_MAX:
        peer = net.peers.get(netns_id)
        if peer is None:
            return 0
        net = peer
    raw = vm.mem.read(tup, size)
    alen = 4 if family == AF_INET else 16
    saddr, daddr = raw[:alen], raw[alen:2 * alen]
    sport = int.from_bytes(raw[2 * alen:2 * alen + 2], "big")
    dport = int.from_bytes(raw[2 * alen + 2:2 * alen + 4], "big")
    sk = net.lookup(protocol, family, saddr, sport, daddr, dport, dif)
    if sk is None:
        return 0
    return _map_in(vm, sk)


def _map_in(vm: Interpreter, sk: Sock) -> int:
    """Map the socket's table into the run (once); the socket's ``struct bpf_sock``."""
    net = sk.table
    assert net is not None
    if not any(r.base == net.base for r in vm.mem.regions):
        vm.mem.add(Region("sockets", net.base, net.buf, writable=False))
    return sk.addr


def _sock(addr: int) -> Sock:
    """The socket a ``struct bpf_sock *`` argument points at."""
    table = SOCK_TABLES.get(addr & ~(SK_STRIDE - 1)) if addr >= SK_BASE else None
    sk = table.at(addr) if table is not None else None
    if sk is None:
        raise HelperFault(f"{addr:#x} is not a socket pointer of this run")
    return sk


def sockmap_lookup(vm: Interpreter, m: SocketMapBase, key: int) -> int:
    """``bpf_map_lookup_elem`` on a sockmap or sockhash: the slot's socket as a
    ``struct bpf_sock`` (mapped like a lookup's), or 0."""
    sk = m.socket_at(vm.mem.read(key, m.key_size))
    if not isinstance(sk, Sock) or sk.table is None:
        return 0
    return _map_in(vm, sk)


def sockmap_update(vm: Interpreter, m: SocketMapBase, key: int, sk: int, flags: int) -> int:
    """``bpf_map_update_elem`` on a sockmap or sockhash: puts the socket a lookup gave."""
    return m.update_socket(vm.mem.read(key, m.key_size), _sock(sk), flags) & M64


@helper(84, "sk_lookup_tcp", SK_HELPERS)
def _sk_lookup_tcp(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _lookup(vm, r1, r2, r3, r4, r5, IPPROTO_TCP)


@helper(85, "sk_lookup_udp", SK_HELPERS)
def _sk_lookup_udp(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _lookup(vm, r1, r2, r3, r4, r5, IPPROTO_UDP)


@helper(99, "skc_lookup_tcp", SK_HELPERS)
def _skc_lookup_tcp(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _lookup(vm, r1, r2, r3, r4, r5, IPPROTO_TCP)


@helper(86, "sk_release", SK_HELPERS)
def _sk_release(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    _sock(r1)
    return 0


def _time_between32(t: int, lo: int, hi: int) -> bool:
    return (hi - lo) & M32 >= (t - lo) & M32


def _headers(vm: Interpreter, sk: Sock, iph: int, iph_len: int, th_bytes: bytes
             ) -> tuple[bytes, bool] | int:
    """The IP header (the version picks the family) checked against the socket, or
    -errno."""
    if iph_len < IPHDR:
        return -errno.EINVAL
    version = vm.mem.load(iph, 1) >> 4
    if version == 4:
        if sk.family == AF_INET6 and sk.ipv6only:
            return -errno.EINVAL
        return vm.mem.read(iph, IPHDR), False
    if version == 6:
        if iph_len < IPV6HDR:
            return -errno.EINVAL
        if sk.family != AF_INET6:
            return -errno.EINVAL
        return vm.mem.read(iph, IPV6HDR), True
    return -errno.EPROTONOSUPPORT


@helper(100, "tcp_check_syncookie", SK_HELPERS)
def _tcp_check_syncookie(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int
                         ) -> int:
    sk = _sock(r1)
    th_len = r5 & M32
    if th_len < TCPHDR:
        return neg(errno.EINVAL)
    if sk.protocol != IPPROTO_TCP or sk.state != TcpState.TCP_LISTEN:
        return neg(errno.EINVAL)
    assert sk.table is not None
    if not sk.table.tcp_syncookies:
        return neg(errno.EINVAL)
    th = vm.mem.read(r4, TCPHDR)
    if not th[13] & _ACK or th[13] & (_RST | _SYN):
        return neg(errno.ENOENT)
    if r3 & M32 < IPHDR:
        return neg(errno.EINVAL)
    now = jiffies64()
    last = sk.last_overflow
    # tcp_synq_no_recent_overflow: no cookie went out in the last two minutes
    if last is None or not _time_between32(now, last - HZ, last + TCP_SYNCOOKIE_VALID):
        return neg(errno.ENOENT)
    got = _headers(vm, sk, r2, r3 & M32, th)
    if isinstance(got, int):
        return neg(-got)
    iph, v6 = got
    return 0 if cookie_check(iph, th, v6=v6) > 0 else neg(errno.ENOENT)


@helper(110, "tcp_gen_syncookie", SK_HELPERS)
def _tcp_gen_syncookie(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    sk = _sock(r1)
    th_len = r5 & M32
    if th_len < TCPHDR or th_len != (vm.mem.load(r4 + 12, 1) >> 4) * 4:
        return neg(errno.EINVAL)
    if sk.protocol != IPPROTO_TCP or sk.state != TcpState.TCP_LISTEN:
        return neg(errno.EINVAL)
    assert sk.table is not None
    if not sk.table.tcp_syncookies:
        return neg(errno.ENOENT)
    th = vm.mem.read(r4, th_len)
    if not th[13] & _SYN or th[13] & (_ACK | _FIN | _RST):
        return neg(errno.EINVAL)
    got = _headers(vm, sk, r2, r3 & M32, th)
    if isinstance(got, int):
        return neg(-got)
    iph, v6 = got
    # tcp_get_syncookie_mss: cookies only when tcp_syncookies is 2 (the queue never fills)
    if sk.table.tcp_syncookies != 2:
        return neg(errno.ENOENT)
    mss = tcp_parse_mss_option(th, sk.user_mss) or (_MSS_CLAMP6 if v6 else TCP_MSS_DEFAULT)
    cookie, mss = cookie_init_sequence(iph, th, mss, v6=v6)
    now = jiffies64()  # tcp_synq_overflow
    if sk.last_overflow is None or not _time_between32(now, sk.last_overflow,
                                                       sk.last_overflow + HZ):
        sk.last_overflow = now
    return cookie | mss << 32


def _raw_gen(vm: Interpreter, iph: int, th: int, th_len: int, v6: bool) -> int:
    th_len &= M32
    if th_len < TCPHDR or th_len != (vm.mem.load(th + 12, 1) >> 4) * 4:
        return neg(errno.EINVAL)
    hdr = vm.mem.read(th, th_len)
    mss = tcp_parse_mss_option(hdr, 0) or (_MSS_CLAMP6 if v6 else TCP_MSS_DEFAULT)
    cookie, mss = cookie_init_sequence(vm.mem.read(iph, IPV6HDR if v6 else IPHDR), hdr, mss,
                                       v6=v6)
    return cookie | mss << 32


def _raw_check(vm: Interpreter, iph: int, th: int, v6: bool) -> int:
    ok = cookie_check(vm.mem.read(iph, IPV6HDR if v6 else IPHDR), vm.mem.read(th, TCPHDR),
                      v6=v6)
    return 0 if ok > 0 else neg(errno.EACCES)


@helper(204, "tcp_raw_gen_syncookie_ipv4", SK_HELPERS)
def _raw_gen4(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _raw_gen(vm, r1, r2, r3, False)


@helper(205, "tcp_raw_gen_syncookie_ipv6", SK_HELPERS)
def _raw_gen6(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _raw_gen(vm, r1, r2, r3, True)


@helper(206, "tcp_raw_check_syncookie_ipv4", SK_HELPERS)
def _raw_check4(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _raw_check(vm, r1, r2, False)


@helper(207, "tcp_raw_check_syncookie_ipv6", SK_HELPERS)
def _raw_check6(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    return _raw_check(vm, r1, r2, True)


# -- native twins (the JIT) ---------------------------------------------------------------
# They scan the namespace's SockTable buffer in place (its SK_DESC words: the run context's
# ``sk``) in slot order, as SockTable.lookup does; Python gets the call (SLOW, nothing
# changed) for a peer namespace's table or a run without the namespace's table yet.

def _desc(f: Text) -> str:
    """The run's socket table descriptor (SK_DESC words); SLOW when the run has none."""
    d = f.cget("%ctx", "sk")
    ret_if(f, f.ins(f"icmp eq i64 {d}, 0"), SLOW)
    return f.ins(f"inttoptr i64 {d} to ptr")


def _ld(f: Text, p: str, off: int, ty: str) -> str:
    v = f.ins(f"load {ty}, ptr {f.gep(p, off)}, align 1")
    return v if ty == "i64" else f.ins(f"zext {ty} {v} to i64")


def _eq(f: Text, a: str, b: str) -> str:
    return f.ins(f"icmp eq i64 {a}, {b}")


def _all(f: Text, *conds: str) -> str:
    acc = conds[0]
    for c in conds[1:]:
        acc = f.ins(f"and i1 {acc}, {c}")
    return acc


def _any(f: Text, *conds: str) -> str:
    acc = conds[0]
    for c in conds[1:]:
        acc = f.ins(f"or i1 {acc}, {c}")
    return acc


def _sel(f: Text, c: str, a: str, b: str) -> str:
    return f.ins(f"select i1 {c}, i64 {a}, i64 {b}")


def _addr_eq(f: Text, p: str, off: int, words: list[str]) -> str:
    """Whether the address at ``p + off`` is ``words`` (one i32 for IPv4, two i64)."""
    if len(words) == 1:
        return _eq(f, _ld(f, p, off, "i32"), words[0])
    return _all(f, _eq(f, _ld(f, p, off, "i64"), words[0]),
                _eq(f, _ld(f, p, off + 8, "i64"), words[1]))


def _var(f: Text) -> str:
    """An i64 variable (an alloca in the entry block, which LLVM keeps in a register)."""
    v = f.tmp()
    f.lines.insert(1, f"  {v} = alloca i64, align 8")
    return v


class _Scan:
    """A loop over the table's slots: ``body(slot pointer, slot index)`` per slot."""

    def __init__(self, f: Text, n: str) -> None:
        self.f, self.n = f, n
        self.var = _var(f)
        f.do(f"store i64 0, ptr {self.var}, align 8")
        self.head, self.body, self.done = f.label("scan"), f.label("slot"), f.label("scanned")
        f.br(self.head)
        f.at(self.head)
        self.i = f.ins(f"load i64, ptr {self.var}, align 8")
        f.cbr(f.ins(f"icmp ult i64 {self.i}, {n}"), self.body, self.done)
        f.at(self.body)

    def slot(self, buf: str) -> str:
        return self.f.gep(buf, self.f.ins(f"mul i64 {self.i}, {SK_SLOT}"))

    def next(self) -> None:
        f = self.f
        f.do(f"store i64 {f.ins(f'add i64 {self.i}, 1')}, ptr {self.var}, align 8")
        f.br(self.head)
        f.at(self.done)


def _scan_family(f: Text, tp: str, v6: bool, protocol: int, dif: str, buf: str, base: str,
                 n: str) -> None:
    """``SockTable.lookup`` of the ``bpf_sock_tuple`` at ``tp`` for one family: returns
    the socket's address, or 0."""
    S = BpfSock
    alen = 16 if v6 else 4
    family = AF_INET6 if v6 else AF_INET

    def addr(off: int) -> list[str]:
        if v6:
            return [_ld(f, tp, off, "i64"), _ld(f, tp, off + 8, "i64")]
        return [_ld(f, tp, off, "i32")]

    saddr, daddr = addr(0), addr(alen)
    sport = _ld(f, tp, 2 * alen, "i16")  # as on the wire, as bpf_sock.dst_port keeps it
    dport_be = f.ins(f"load i16, ptr {f.gep(tp, 2 * alen + 2)}, align 1")
    dport = f.ins(f"zext i16 {f.ins(f'call i16 @llvm.bswap.i16(i16 {dport_be})')} to i64")
    src_off = S.src_ip6 if v6 else S.src_ip4
    dst_off = S.dst_ip6 if v6 else S.dst_ip4

    def dev_ok(p: str) -> tuple[str, str]:
        bound = _ld(f, p, S.bound_dev_if, "i32")
        return bound, _any(f, _eq(f, bound, "0"), _eq(f, bound, dif))

    if protocol == IPPROTO_TCP:  # an established socket of the four-tuple first
        scan = _Scan(f, n)
        p = scan.slot(buf)
        _bound, dok = dev_ok(p)
        hit = _all(f, _eq(f, _ld(f, p, S.protocol, "i32"), str(IPPROTO_TCP)),
                   _eq(f, _ld(f, p, S.state, "i32"), str(int(TcpState.TCP_ESTABLISHED))),
                   _eq(f, _ld(f, p, S.family, "i32"), str(family)),
                   _addr_eq(f, p, dst_off, saddr), _eq(f, _ld(f, p, S.dst_port, "i16"), sport),
                   _addr_eq(f, p, src_off, daddr), _eq(f, _ld(f, p, S.src_port, "i32"), dport),
                   dok)
        yes, no = f.label("est"), f.label("notest")
        f.cbr(hit, yes, no)
        f.at(yes)
        off = f.ins(f"mul i64 {scan.i}, {SK_SLOT}")
        f.do(f"ret i64 {f.ins(f'add i64 {base}, {off}')}")
        f.at(no)
        scan.next()
    zero = ["0"] * len(saddr)
    for wildcard in (False, True):  # the exact address, then INADDR_ANY/in6addr_any
        best, hi = _var(f), _var(f)
        f.do(f"store i64 0, ptr {best}, align 8")
        f.do(f"store i64 0, ptr {hi}, align 8")
        scan = _Scan(f, n)
        p = scan.slot(buf)
        bound, dok = dev_ok(p)
        sfam = _ld(f, p, S.family, "i32")
        same = _eq(f, sfam, str(family))
        want = zero if wildcard else daddr
        ok = _all(f, _eq(f, _ld(f, p, S.protocol, "i32"), str(protocol)),
                  _eq(f, _ld(f, p, S.src_port, "i32"), dport), dok)
        if protocol == IPPROTO_TCP:
            ok = _all(f, ok, _eq(f, _ld(f, p, S.state, "i32"), str(int(TcpState.TCP_LISTEN))))
        local = _all(f, same, _addr_eq(f, p, src_off, want))
        if not v6:  # an IPv6 socket without IPV6_V6ONLY on :: or the v4-mapped address
            v6only = f.ins(f"and i64 {_ld(f, p, SK_FLAGS, 'i8')}, 1")
            mapped = "0" if wildcard else f.ins(
                f"or i64 {f.ins(f'shl i64 {daddr[0]}, 32')}, {0xFFFF_0000}")
            cross = _all(f, _eq(f, sfam, str(AF_INET6)), _eq(f, v6only, "0"),
                         _addr_eq(f, p, S.src_ip6, ["0", mapped]))
            local = _any(f, local, cross)
        ok = _all(f, ok, local)
        has_dev = f.ins(f"icmp ne i64 {bound}, 0")
        if protocol == IPPROTO_UDP:
            score = _sel(f, same, "2", "1")
            dp = _ld(f, p, S.dst_port, "i16")
            connected = f.ins(f"icmp ne i64 {dp}, 0")
            peer = _addr_eq(f, p, dst_off, saddr)
            if not v6:  # an IPv6 socket's peer: the last word of its address
                peer = f.ins(f"select i1 {same}, i1 {peer}, "
                             f"i1 {_eq(f, _ld(f, p, S.dst_ip6 + 12, 'i32'), saddr[0])}")
            peer_ok = _all(f, peer, _eq(f, dp, sport))
            ok = _all(f, ok, _any(f, f.ins(f"xor i1 {connected}, true"), peer_ok))
            score = f.ins(f"add i64 {score}, {_sel(f, connected, '8', '0')}")
            score = f.ins(f"add i64 {score}, {_sel(f, has_dev, '4', '0')}")
        else:
            score = f.ins(f"add i64 {_sel(f, has_dev, '2', '1')}, {_sel(f, same, '1', '0')}")
        h = f.ins(f"load i64, ptr {hi}, align 8")
        better = _all(f, ok, f.ins(f"icmp ugt i64 {score}, {h}"))
        f.do(f"store i64 {_sel(f, better, score, h)}, ptr {hi}, align 8")
        b = f.ins(f"load i64, ptr {best}, align 8")
        f.do(f"store i64 {_sel(f, better, scan.i, b)}, ptr {best}, align 8")
        scan.next()
        found = f.ins(f"icmp ne i64 {f.ins(f'load i64, ptr {hi}, align 8')}, 0")
        yes, no = f.label("best"), f.label("none")
        f.cbr(found, yes, no)
        f.at(yes)
        off = f.ins(f"mul i64 {f.ins(f'load i64, ptr {best}, align 8')}, {SK_SLOT}")
        f.do(f"ret i64 {f.ins(f'add i64 {base}, {off}')}")
        f.at(no)
    f.do("ret i64 0")


def _lookup_fn(kind: str, protocol: int) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """``__bpf_sk_lookup`` over the run's namespace's table (_lookup's checks)."""
        f = Text()
        f.at("entry")
        ok = _all(f, f.flag(NF_XDP), f.ins(f"icmp eq i64 %r1, {c64(natives.ctx_base)}"))
        ret_if(f, f.ins(f"xor i1 {ok}, true"), SLOW)
        dp = _desc(f)
        size = f.ins("and i64 %r3, 4294967295")
        is6 = _eq(f, size, str(TUPLE_V6))
        ret_if(f, f.ins(f"xor i1 {_any(f, _eq(f, size, str(TUPLE_V4)), is6)}, true"), 0)
        ret_if(f, f.ins("icmp ne i64 %r5, 0"), 0)
        netns = f.ins("and i64 %r4, 4294967295")
        ret_if(f, f.ins(f"icmp ule i64 {netns}, {S32_MAX}"), SLOW)  # a peer's table
        tp = f.ins(f"call ptr @translate(ptr %ctx, i64 %r2, i64 {size}, i1 false)")
        ret_if(f, f.ins(f"icmp eq ptr {tp}, null"), SLOW)
        cv = f.cget("%ctx", "ctx_values", "ptr")
        dif = f.ins(f"and i64 {f.word(cv, 3, 'i64', TBAA_CTX_VALUES)}, 4294967295")
        buf = f.ins(f"inttoptr i64 {f.word(dp, SK_DESC['buf'], 'i64', '')} to ptr")
        base = f.word(dp, SK_DESC["base"], "i64", "")
        n = f.word(dp, SK_DESC["nslots"], "i64", "")
        l4, l6 = f.label("v4"), f.label("v6")
        f.cbr(is6, l6, l4)
        for v6, label in ((False, l4), (True, l6)):
            f.at(label)
            _scan_family(f, tp, v6, protocol, dif, buf, base, n)
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                      "i64 %r4, i64 %r5) nounwind")
    return define


def _sk_slot(f: Text, r1: str) -> str:
    """The slot pointer of socket address ``r1`` of the run's table (in use); else SLOW."""
    dp = _desc(f)
    off = f.ins(f"sub i64 {r1}, {f.word(dp, SK_DESC['base'], 'i64', '')}")
    size = f.ins(f"mul i64 {f.word(dp, SK_DESC['nslots'], 'i64', '')}, {SK_SLOT}")
    ret_if(f, f.ins(f"icmp uge i64 {off}, {size}"), SLOW)
    ret_if(f, f.ins(f"icmp ne i64 {f.ins(f'and i64 {off}, {SK_SLOT - 1}')}, 0"), SLOW)
    p = f.gep(f.ins(f"inttoptr i64 {f.word(dp, SK_DESC['buf'], 'i64', '')} to ptr"), off)
    ret_if(f, _eq(f, _ld(f, p, BpfSock.family, "i32"), "0"), SLOW)  # a free slot
    return p


def _release_fn(kind: str) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """``bpf_sk_release`` of a socket of the run's table: 0 (nothing counted)."""
        f = Text()
        f.at("entry")
        _sk_slot(f, "%r1")
        f.do("ret i64 0")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1) nounwind")
    return define


for _hid, _kind, _proto in ((BpfFuncId.BPF_FUNC_sk_lookup_tcp, "sk_lookup_tcp", IPPROTO_TCP),
                            (BpfFuncId.BPF_FUNC_sk_lookup_udp, "sk_lookup_udp", IPPROTO_UDP),
                            (BpfFuncId.BPF_FUNC_skc_lookup_tcp, "sk_skc_lookup_tcp",
                             IPPROTO_TCP)):
    register_helper(_hid, HelperNative(_kind, 5, _lookup_fn(_kind, _proto), ("translate",)))
register_helper(BpfFuncId.BPF_FUNC_sk_release, HelperNative("sk_release", 1,
                                                            _release_fn("sk_release")))


# -- SYN cookies (pyxdp.net.syncookies' math over its SECRETS, the table's desc words) -----

def _rotl(f: Text, v: str, b: int) -> str:
    return f.ins(f"or i64 {f.ins(f'shl i64 {v}, {b}')}, {f.ins(f'lshr i64 {v}, {64 - b}')}")


def _siphash(f: Text, key: str, words: list[str], nbytes: int) -> str:
    """SipHash-2-4 (``siphash``) of ``nbytes`` (a multiple of 8) given as little-endian
    words, under the 16-byte key at ``key``."""
    k0 = f.ins(f"load i64, ptr {key}, align 8")
    k1 = f.ins(f"load i64, ptr {f.gep(key, 8)}, align 8")
    v = [f.ins(f"xor i64 {k0}, {c64(0x736F6D6570736575)}"),
         f.ins(f"xor i64 {k1}, {c64(0x646F72616E646F6D)}"),
         f.ins(f"xor i64 {k0}, {c64(0x6C7967656E657261)}"),
         f.ins(f"xor i64 {k1}, {c64(0x7465646279746573)}")]

    def rounds(n: int) -> None:
        for _ in range(n):
            v[0] = f.ins(f"add i64 {v[0]}, {v[1]}")
            v[1] = f.ins(f"xor i64 {_rotl(f, v[1], 13)}, {v[0]}")
            v[0] = _rotl(f, v[0], 32)
            v[2] = f.ins(f"add i64 {v[2]}, {v[3]}")
            v[3] = f.ins(f"xor i64 {_rotl(f, v[3], 16)}, {v[2]}")
            v[0] = f.ins(f"add i64 {v[0]}, {v[3]}")
            v[3] = f.ins(f"xor i64 {_rotl(f, v[3], 21)}, {v[0]}")
            v[2] = f.ins(f"add i64 {v[2]}, {v[1]}")
            v[1] = f.ins(f"xor i64 {_rotl(f, v[1], 17)}, {v[2]}")
            v[2] = _rotl(f, v[2], 32)

    for m in [*words, c64((nbytes & 0xFF) << 56)]:
        v[3] = f.ins(f"xor i64 {v[3]}, {m}")
        rounds(2)
        v[0] = f.ins(f"xor i64 {v[0]}, {m}")
    v[2] = f.ins(f"xor i64 {v[2]}, 255")
    rounds(4)
    out = f.ins(f"xor i64 {f.ins(f'xor i64 {v[0]}, {v[1]}')}, "
                f"{f.ins(f'xor i64 {v[2]}, {v[3]}')}")
    return f.ins(f"and i64 {out}, 4294967295")


class _Cookie:
    """``cookie_hash`` of one segment's headers (host pointers ``iph``, ``th``)."""

    def __init__(self, f: Text, dp: str, iph: str, th: str, v6: bool) -> None:
        self.f, self.v6 = f, v6
        secrets = f.ins(f"inttoptr i64 {f.word(dp, SK_DESC['secrets'], 'i64', '')} to ptr")
        self.keys = (f.gep(secrets, 32 if v6 else 0), f.gep(secrets, 48 if v6 else 16))
        if v6:
            self.addrs = [_ld(f, iph, off, "i64") for off in (8, 16, 24, 32)]
            self.ports = _ld(f, th, 0, "i32")
        else:
            self.addrs = [_ld(f, iph, 12, "i64")]  # saddr, daddr
            sport, dport = _ld(f, th, 0, "i16"), _ld(f, th, 2, "i16")
            self.ports = f.ins(f"or i64 {f.ins(f'shl i64 {sport}, 16')}, {dport}")

    def hash(self, count: str, c: int) -> str:
        f = self.f
        if self.v6:
            last = f.ins(f"or i64 {count}, {f.ins(f'shl i64 {self.ports}, 32')}")
            return _siphash(f, self.keys[c], [*self.addrs, last], 40)
        last = f.ins(f"or i64 {self.ports}, {f.ins(f'shl i64 {count}, 32')}")
        return _siphash(f, self.keys[c], [*self.addrs, last], 16)


def _be32(f: Text, p: str, off: int) -> str:
    v = f.ins(f"load i32, ptr {f.gep(p, off)}, align 1")
    return f.ins(f"zext i32 {f.ins(f'call i32 @llvm.bswap.i32(i32 {v})')} to i64")


def _count(f: Text) -> str:
    """The minute counter: ``jiffies // TCP_SYNCOOKIE_PERIOD`` as a u32."""
    return f.ins(f"and i64 {f.ins(f'udiv i64 {jiffies64_ir(f)}, {TCP_SYNCOOKIE_PERIOD}')}, "
                 "4294967295")


def _gen_cookie(f: Text, dp: str, iph: str, th: str, mss: str, v6: bool) -> str:
    """``cookie_init_sequence``: ``cookie | mss << 32`` for the SYN (mss: the peer's)."""
    tab = MSSTAB6 if v6 else MSSTAB
    ind = "0"
    for entry in tab[1:]:  # the table grows: the entries not above mss
        above = f.ins(f"icmp uge i64 {mss}, {entry}")
        ind = f.ins(f"add i64 {ind}, {f.ins(f'zext i1 {above} to i64')}")
    got = str(tab[0])
    for k, entry in enumerate(tab[1:], 1):
        got = _sel(f, _eq(f, ind, str(k)), str(entry), got)
    ck = _Cookie(f, dp, iph, th, v6)
    count = _count(f)
    h1 = f.ins(f"and i64 {f.ins(f'add i64 {ck.hash(count, 1)}, {ind}')}, {COOKIEMASK}")
    h0, seq = ck.hash("0", 0), _be32(f, th, 4)
    cookie = f.ins(f"add i64 {h0}, {seq}")
    cookie = f.ins(f"add i64 {cookie}, {f.ins(f'shl i64 {count}, {COOKIEBITS}')}")
    cookie = f.ins(f"and i64 {f.ins(f'add i64 {cookie}, {h1}')}, 4294967295")
    return f.ins(f"or i64 {cookie}, {f.ins(f'shl i64 {got}, 32')}")


def _check_cookie(f: Text, dp: str, iph: str, th: str, v6: bool) -> str:
    """i1: ``cookie_check`` of the ACK is not 0 (a valid cookie of the last periods)."""
    ck = _Cookie(f, dp, iph, th, v6)
    cookie = f.ins(f"sub i64 {_be32(f, th, 8)}, 1")
    seq = f.ins(f"sub i64 {_be32(f, th, 4)}, 1")
    count = _count(f)
    h0 = ck.hash("0", 0)
    cookie = f.ins(f"sub i64 {cookie}, {f.ins(f'add i64 {h0}, {seq}')}")
    cookie = f.ins(f"and i64 {cookie}, 4294967295")
    minute = f.ins(f"lshr i64 {cookie}, {COOKIEBITS}")
    diff = f.ins(f"and i64 {f.ins(f'sub i64 {count}, {minute}')}, {0xFFFF_FFFF >> COOKIEBITS}")
    fresh = f.ins(f"icmp ult i64 {diff}, {MAX_SYNCOOKIE_AGE}")
    then = f.ins(f"and i64 {f.ins(f'sub i64 {count}, {diff}')}, 4294967295")
    ind = f.ins(f"and i64 {f.ins(f'sub i64 {cookie}, {ck.hash(then, 1)}')}, {COOKIEMASK}")
    return _all(f, fresh, f.ins(f"icmp ult i64 {ind}, {len(MSSTAB)}"))


def _parse_mss(f: Text, th: str, user_mss: str) -> str:
    """``tcp_parse_mss_option`` of the header at ``th`` (doff words); 0: none."""
    length, pos, mss = _var(f), _var(f), _var(f)
    doff = f.ins(f"lshr i64 {_ld(f, th, 12, 'i8')}, 4")
    words = f.ins(f"mul i64 {doff}, 4")
    f.do(f"store i64 {f.ins(f'sub i64 {words}, 20')}, ptr {length}, align 8")
    f.do(f"store i64 20, ptr {pos}, align 8")
    f.do(f"store i64 0, ptr {mss}, align 8")
    head, done = f.label("opt"), f.label("opts")
    f.br(head)
    f.at(head)
    ln = f.ins(f"load i64, ptr {length}, align 8")
    p = f.ins(f"load i64, ptr {pos}, align 8")
    body, nop, opt = f.label("optb"), f.label("nop"), f.label("optsz")
    f.cbr(f.ins(f"icmp sle i64 {ln}, 0"), done, body)
    f.at(body)
    opcode = f.ins(f"zext i8 {f.ins(f'load i8, ptr {f.gep(th, p)}, align 1')} to i64")
    p1 = f.ins(f"add i64 {p}, 1")
    notend = f.label("noteol")
    f.cbr(_eq(f, opcode, str(_TCPOPT_EOL)), done, notend)
    f.at(notend)
    f.cbr(_eq(f, opcode, str(_TCPOPT_NOP)), nop, opt)
    f.at(nop)
    f.do(f"store i64 {f.ins(f'sub i64 {ln}, 1')}, ptr {length}, align 8")
    f.do(f"store i64 {p1}, ptr {pos}, align 8")
    f.br(head)
    f.at(opt)
    sized = f.label("sized")
    f.cbr(f.ins(f"icmp slt i64 {ln}, 2"), done, sized)
    f.at(sized)
    opsize = f.ins(f"zext i8 {f.ins(f'load i8, ptr {f.gep(th, p1)}, align 1')} to i64")
    p2 = f.ins(f"add i64 {p}, 2")
    bad = _any(f, f.ins(f"icmp ult i64 {opsize}, 2"), f.ins(f"icmp sgt i64 {opsize}, {ln}"))
    good = f.label("optok")
    f.cbr(bad, done, good)
    f.at(good)
    four = _all(f, _eq(f, opcode, str(_TCPOPT_MSS)), _eq(f, opsize, "4"))
    at = _sel(f, four, p2, p)  # (p, p + 1 are in the header whatever the option)
    in_be = f.ins(f"load i16, ptr {f.gep(th, at)}, align 1")
    in_mss = f.ins(f"zext i16 {f.ins(f'call i16 @llvm.bswap.i16(i16 {in_be})')} to i64")
    is_mss = _all(f, four, f.ins(f"icmp ne i64 {in_mss}, 0"))
    capped = _all(f, f.ins(f"icmp ne i64 {user_mss}, 0"),
                  f.ins(f"icmp ult i64 {user_mss}, {in_mss}"))
    new = _sel(f, capped, user_mss, in_mss)
    old = f.ins(f"load i64, ptr {mss}, align 8")
    f.do(f"store i64 {_sel(f, is_mss, new, old)}, ptr {mss}, align 8")
    f.do(f"store i64 {f.ins(f'add i64 {p}, {opsize}')}, ptr {pos}, align 8")
    f.do(f"store i64 {f.ins(f'sub i64 {ln}, {opsize}')}, ptr {length}, align 8")
    f.br(head)
    f.at(done)
    return f.ins(f"load i64, ptr {mss}, align 8")



def _host(f: Text, addr: str, size: str | int) -> str:
    """A host pointer to ``size`` bytes at ``addr`` (read); SLOW when unmapped."""
    p = f.ins(f"call ptr @translate(ptr %ctx, i64 {addr}, i64 {size}, i1 false)")
    ret_if(f, f.ins(f"icmp eq ptr {p}, null"), SLOW)
    return p


def _th_len_ok(f: Text, th: str, th_len: str) -> None:
    """-EINVAL for a th_len below 20 or not ``doff * 4`` (the doff byte read after)."""
    ret_if(f, f.ins(f"icmp ult i64 {th_len}, {TCPHDR}"), neg(errno.EINVAL))
    doff = f.ins(f"lshr i64 {_ld(f, _host(f, f.ins(f'add i64 {th}, 12'), 1), 0, 'i8')}, 4")
    ret_if(f, f.ins(f"icmp ne i64 {th_len}, {f.ins(f'mul i64 {doff}, 4')}"), neg(errno.EINVAL))


def _raw_gen_fn(kind: str, v6: bool) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """``_raw_gen``: the cookie of a SYN, or -EINVAL for a bad th_len."""
        f = Text()
        f.at("entry")
        dp = _desc(f)
        th_len = f.ins("and i64 %r3, 4294967295")
        _th_len_ok(f, "%r2", th_len)
        th = _host(f, "%r2", th_len)
        mss = _parse_mss(f, th, "0")
        dflt = _MSS_CLAMP6 if v6 else TCP_MSS_DEFAULT
        mss = _sel(f, _eq(f, mss, "0"), str(dflt), mss)
        iph = _host(f, "%r1", IPV6HDR if v6 else IPHDR)
        f.do(f"ret i64 {_gen_cookie(f, dp, iph, th, mss, v6)}")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2, i64 %r3) "
                      "nounwind")
    return define


def _raw_check_fn(kind: str, v6: bool) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """``_raw_check``: 0 for a valid cookie in the ACK, else -EACCES."""
        f = Text()
        f.at("entry")
        dp = _desc(f)
        iph = _host(f, "%r1", IPV6HDR if v6 else IPHDR)
        th = _host(f, "%r2", TCPHDR)
        ok = _check_cookie(f, dp, iph, th, v6)
        f.do(f"ret i64 {_sel(f, ok, '0', c64(neg(errno.EACCES)))}")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2) nounwind")
    return define


def _listener(f: Text, p: str, off_err: int) -> None:
    """-EINVAL unless the socket is a TCP listener; ``off_err`` for tcp_syncookies 0."""
    ok = _all(f, _eq(f, _ld(f, p, BpfSock.protocol, "i32"), str(IPPROTO_TCP)),
              _eq(f, _ld(f, p, BpfSock.state, "i32"), str(int(TcpState.TCP_LISTEN))))
    ret_if(f, f.ins(f"xor i1 {ok}, true"), neg(errno.EINVAL))
    dp = _desc(f)
    ret_if(f, _eq(f, f.word(dp, SK_DESC["syncookies"], "i64", ""), "0"), neg(off_err))


def _headers_ir(f: Text, p: str, iph_len: str, on_v4: str, on_v6: str) -> None:
    """``_headers``: the IP version picks the family, checked against the socket; branch
    to ``on_v4``/``on_v6`` (the header's 20 or 40 bytes mapped there), or return -errno."""
    ret_if(f, f.ins(f"icmp ult i64 {iph_len}, {IPHDR}"), neg(errno.EINVAL))
    version = f.ins(f"lshr i64 {_ld(f, _host(f, '%r2', 1), 0, 'i8')}, 4")
    sfam = _ld(f, p, BpfSock.family, "i32")
    four, notfour, six, other = f.label("ip4"), f.label("nip4"), f.label("ip6"), f.label("ipx")
    f.cbr(_eq(f, version, "4"), four, notfour)
    f.at(four)
    v6only = f.ins(f"and i64 {_ld(f, p, SK_FLAGS, 'i8')}, {SKF_V6ONLY}")
    ret_if(f, _all(f, _eq(f, sfam, str(AF_INET6)), f.ins(f"icmp ne i64 {v6only}, 0")),
           neg(errno.EINVAL))
    f.br(on_v4)
    f.at(notfour)
    f.cbr(_eq(f, version, "6"), six, other)
    f.at(six)
    ret_if(f, f.ins(f"icmp ult i64 {iph_len}, {IPV6HDR}"), neg(errno.EINVAL))
    ret_if(f, f.ins(f"icmp ne i64 {sfam}, {AF_INET6}"), neg(errno.EINVAL))
    f.br(on_v6)
    f.at(other)
    f.do(f"ret i64 {c64(neg(errno.EPROTONOSUPPORT))}")


def _between(f: Text, t: str, lo: str, hi: str) -> str:
    """i1: ``_time_between32(t, lo, hi)``."""
    span = f.ins(f"and i64 {f.ins(f'sub i64 {hi}, {lo}')}, 4294967295")
    at = f.ins(f"and i64 {f.ins(f'sub i64 {t}, {lo}')}, 4294967295")
    return f.ins(f"icmp uge i64 {span}, {at}")


def _gen_fn(kind: str) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """``bpf_tcp_gen_syncookie`` (_tcp_gen_syncookie's checks in its order)."""
        f = Text()
        f.at("entry")
        p = _sk_slot(f, "%r1")
        th_len = f.ins("and i64 %r5, 4294967295")
        _th_len_ok(f, "%r4", th_len)
        _listener(f, p, errno.ENOENT)
        th = _host(f, "%r4", th_len)
        flags = _ld(f, th, 13, "i8")
        syn = f.ins(f"icmp ne i64 {f.ins(f'and i64 {flags}, {_SYN}')}, 0")
        other = f.ins(f"icmp ne i64 {f.ins(f'and i64 {flags}, {_ACK | _FIN | _RST}')}, 0")
        ret_if(f, _any(f, f.ins(f"xor i1 {syn}, true"), other), neg(errno.EINVAL))
        l4, l6 = f.label("g4"), f.label("g6")
        dp = _desc(f)
        _headers_ir(f, p, f.ins("and i64 %r3, 4294967295"), l4, l6)
        for v6, label in ((False, l4), (True, l6)):
            f.at(label)
            iph = _host(f, "%r2", IPV6HDR if v6 else IPHDR)
            # tcp_get_syncookie_mss: cookies only when tcp_syncookies is 2
            ret_if(f, f.ins(f"icmp ne i64 {f.word(dp, SK_DESC['syncookies'], 'i64', '')}, 2"),
                   neg(errno.ENOENT))
            user = _ld(f, p, SK_USER_MSS, "i16")
            mss = _parse_mss(f, th, user)
            dflt = _MSS_CLAMP6 if v6 else TCP_MSS_DEFAULT
            mss = _sel(f, _eq(f, mss, "0"), str(dflt), mss)
            out = _gen_cookie(f, dp, iph, th, mss, v6)
            # tcp_synq_overflow: the first in a second records the time
            now = jiffies64_ir(f)
            fl = _ld(f, p, SK_FLAGS, "i8")
            had = f.ins(f"icmp ne i64 {f.ins(f'and i64 {fl}, {SKF_OVERFLOW}')}, 0")
            last = _ld(f, p, SK_OVERFLOW, "i64")
            keep = _all(f, had, _between(f, now, last, f.ins(f"add i64 {last}, {HZ}")))
            f.do(f"store i64 {_sel(f, keep, last, now)}, ptr {f.gep(p, SK_OVERFLOW)}, align 1")
            nfl = f.ins(f"trunc i64 {f.ins(f'or i64 {fl}, {SKF_OVERFLOW}')} to i8")
            f.do(f"store i8 {nfl}, ptr {f.gep(p, SK_FLAGS)}, align 1")
            f.do(f"ret i64 {out}")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                      "i64 %r4, i64 %r5) nounwind")
    return define


def _check_fn(kind: str) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        """``bpf_tcp_check_syncookie`` (_tcp_check_syncookie's checks in its order)."""
        f = Text()
        f.at("entry")
        p = _sk_slot(f, "%r1")
        th_len = f.ins("and i64 %r5, 4294967295")
        ret_if(f, f.ins(f"icmp ult i64 {th_len}, {TCPHDR}"), neg(errno.EINVAL))
        _listener(f, p, errno.EINVAL)
        th = _host(f, "%r4", TCPHDR)
        flags = _ld(f, th, 13, "i8")
        ack = f.ins(f"icmp ne i64 {f.ins(f'and i64 {flags}, {_ACK}')}, 0")
        other = f.ins(f"icmp ne i64 {f.ins(f'and i64 {flags}, {_RST | _SYN}')}, 0")
        ret_if(f, _any(f, f.ins(f"xor i1 {ack}, true"), other), neg(errno.ENOENT))
        iph_len = f.ins("and i64 %r3, 4294967295")
        ret_if(f, f.ins(f"icmp ult i64 {iph_len}, {IPHDR}"), neg(errno.EINVAL))
        # tcp_synq_no_recent_overflow: no cookie went out in the last two minutes
        now = jiffies64_ir(f)
        fl = _ld(f, p, SK_FLAGS, "i8")
        had = f.ins(f"icmp ne i64 {f.ins(f'and i64 {fl}, {SKF_OVERFLOW}')}, 0")
        last = _ld(f, p, SK_OVERFLOW, "i64")
        recent = _all(f, had, _between(f, now, f.ins(f"sub i64 {last}, {HZ}"),
                                       f.ins(f"add i64 {last}, {TCP_SYNCOOKIE_VALID}")))
        ret_if(f, f.ins(f"xor i1 {recent}, true"), neg(errno.ENOENT))
        l4, l6 = f.label("c4"), f.label("c6")
        dp = _desc(f)
        _headers_ir(f, p, iph_len, l4, l6)
        for v6, label in ((False, l4), (True, l6)):
            f.at(label)
            iph = _host(f, "%r2", IPV6HDR if v6 else IPHDR)
            ok = _check_cookie(f, dp, iph, th, v6)
            f.do(f"ret i64 {_sel(f, ok, '0', c64(neg(errno.ENOENT)))}")
        return f.text(f"define internal i64 @{kind}(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, "
                      "i64 %r4, i64 %r5) nounwind")
    return define


register_helper(BpfFuncId.BPF_FUNC_tcp_gen_syncookie,
                HelperNative("sk_gen_syncookie", 5, _gen_fn("sk_gen_syncookie"),
                             ("translate",), serial=True))
register_helper(BpfFuncId.BPF_FUNC_tcp_check_syncookie,
                HelperNative("sk_check_syncookie", 5, _check_fn("sk_check_syncookie"),
                             ("translate",)))
for _hid, _kind, _v6 in ((BpfFuncId.BPF_FUNC_tcp_raw_gen_syncookie_ipv4, "sk_raw_gen4", False),
                         (BpfFuncId.BPF_FUNC_tcp_raw_gen_syncookie_ipv6, "sk_raw_gen6", True)):
    register_helper(_hid, HelperNative(_kind, 3, _raw_gen_fn(_kind, _v6), ("translate",)))
for _hid, _kind, _v6 in ((BpfFuncId.BPF_FUNC_tcp_raw_check_syncookie_ipv4, "sk_raw_check4",
                          False),
                         (BpfFuncId.BPF_FUNC_tcp_raw_check_syncookie_ipv6, "sk_raw_check6",
                          True)):
    register_helper(_hid, HelperNative(_kind, 2, _raw_check_fn(_kind, _v6), ("translate",)))
