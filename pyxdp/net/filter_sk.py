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

The map helpers on a sockmap or sockhash (``net/core/sock_map.c``, which
Linux's verifier lets XDP use: ``may_update_sockmap``):
``bpf_map_update_elem(map, key, sk, flags)`` puts the socket a lookup gave
(:meth:`~pyxdp.maps.sock_map.SocketMapBase.update_socket`);
``bpf_map_lookup_elem`` returns the slot's socket as a ``struct bpf_sock``
(mapped like a lookup's), a reference the program releases with
``bpf_sk_release`` (``bpf_map_delete_elem`` is the base helper's, the map's
own delete). On other maps they are the base helpers.
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
    SK_SLOT,
    SK_STRIDE,
    SOCK_TABLES,
    Sock,
    SockTable,
    TcpState,
)
from pyxdp.net.nf_conntrack import HZ, jiffies64
from pyxdp.net.syncookies import (
    IPV6_MIN_MTU,
    TCP_MSS_DEFAULT,
    TCP_SYNCOOKIE_VALID,
    cookie_check,
    cookie_init_sequence,
    tcp_parse_mss_option,
)
from pyxdp.uapi.bpf import BpfFuncId, BpfSock
from pyxdp.vm.helpers import BASE_HELPERS, helper, neg
from pyxdp.vm.interpreter import Helper, Interpreter
from pyxdp.vm.jit.abi import NF_XDP, SLOW, Natives
from pyxdp.vm.jit.ir import TBAA_CTX_VALUES, Text, c64, ret_if
from pyxdp.vm.jit.natives import HelperNative, register_helper
from pyxdp.vm.map_space import map_at
from pyxdp.vm.memory import Region

__all__ = ["SK_HELPERS"]

SK_HELPERS: dict[int, Helper] = {}
M32 = 0xFFFF_FFFF
M64 = (1 << 64) - 1
S32_MAX = (1 << 31) - 1
TUPLE_V4, TUPLE_V6 = 12, 36  # sizeof(struct bpf_sock_tuple) members ipv4, ipv6
IPHDR, IPV6HDR, TCPHDR = 20, 40, 20
_MSS_CLAMP6 = IPV6_MIN_MTU - TCPHDR - IPV6HDR
# TCP flags (byte 13 of struct tcphdr)
_FIN, _SYN, _RST, _ACK = 0x01, 0x02, 0x04, 0x10


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


_BASE_LOOKUP, _BASE_UPDATE = BASE_HELPERS[1].fn, BASE_HELPERS[2].fn


@helper(1, "map_lookup_elem", SK_HELPERS)
def _map_lookup_elem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    m = map_at(r1)
    if not isinstance(m, SocketMapBase):
        return _BASE_LOOKUP(vm, r1, r2, r3, r4, r5)
    sk = m.socket_at(vm.mem.read(r2, m.key_size))
    if not isinstance(sk, Sock) or sk.table is None:
        return 0
    return _map_in(vm, sk)


@helper(2, "map_update_elem", SK_HELPERS)
def _map_update_elem(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    m = map_at(r1)
    if not isinstance(m, SocketMapBase):
        return _BASE_UPDATE(vm, r1, r2, r3, r4, r5)
    return m.update_socket(vm.mem.read(r2, m.key_size), _sock(r3), r4) & M64


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
