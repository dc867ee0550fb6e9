"""Hostile arguments to the documented Python API: wrong types, negative or huge numbers,
numpy arrays of the wrong shape or dtype, closed objects. Each is refused at the door
with one line naming the function and the parameter (:class:`pyxdp.errors.BadArgument`,
or the kernel's errno where the kernel has one), never an internal IndexError, a numpy
error or a silent wrap (found by fuzzing the API, every public method at random)."""

from __future__ import annotations

import errno
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from pyxdp.collection import Collection
from pyxdp.errors import BadArgument, KernelError, MapError, PyxdpError
from pyxdp.explain.topology import Topology, TopologyError
from pyxdp.net.netdevice import Host
from pyxdp.net.packets import udp_packet
from pyxdp.net.xdp_umem import XskError
from pyxdp.spec import MapSpec, XdpRunConfig
from pyxdp.testing.programs import asm_collection
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.xsk.datapath import PyxdpXskSocket
from pyxdp.xsk.umem import Umem
from pyxdp.xsk.xsk import ChunkAccountingError

ROOT = Path(__file__).resolve().parents[1]
SEED = 0x15
MAPS = (MapSpec("arr", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 8, 8, 0),
        MapSpec("hash", int(BpfMapType.BPF_MAP_TYPE_HASH), 4, 8, 8, 0),
        MapSpec("blob", int(BpfMapType.BPF_MAP_TYPE_ARRAY), 4, 12, 2, 0),
        MapSpec("q", int(BpfMapType.BPF_MAP_TYPE_QUEUE), 0, 4, 8, 0),
        MapSpec("lpm", int(BpfMapType.BPF_MAP_TYPE_LPM_TRIE), 8, 4, 8, 1))
#: What an internal error says (a comparison of a str with an int, numpy's complaints).
INTERNAL = ("not supported between", "is not iterable", "invalid literal", "truth value",
            "has no attribute", "has no len", "out of bounds", "could not be broadcast",
            "cannot be interpreted", "ufunc")


def _one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text, text
    assert not any(s in text for s in INTERNAL), text
    return text


@pytest.fixture
def xsk() -> Iterator[tuple[Host, PyxdpXskSocket, Umem]]:
    with Host(native=False) as host:
        dev = host.add_device("eth0", rx_queues=2)
        umem = Umem(64, 2048)
        sock = PyxdpXskSocket(dev, 1, umem, fill_size=32, comp_size=32, rx_size=32,
                              tx_size=32)
        yield host, sock, umem
        sock.close()
        umem.close()


def test_rings_umem_and_socket_refuse_bad_arguments(
        xsk: tuple[Host, PyxdpXskSocket, Umem]) -> None:
    host, sock, umem = xsk
    fq, rx = sock.fill_ring, sock.rx
    assert fq is not None and rx is not None
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: fq.reserve("x"), "RingProd.reserve: n must be an int, not 'x'"),
        (lambda: fq.reserve(-1), "n must be in 0..4294967295, not -1"),  # once wrapped
        (lambda: fq.submit(None), "RingProd.submit: k must be an int"),
        (lambda: rx.peek(np.zeros((2, 2))), "n must be an int, not a float64 array"),
        (lambda: fq.write(0, "x"), "values must be integers, not 'x'"),
        (lambda: fq.write(0, [[1]]), "must be a 1-d array"),
        (lambda: fq.read(0, 33), "33 entries of a ring of 32"),
        (lambda: fq.write_descs(0, [1], [2]), "an addr ring holds no descriptors"),
        (lambda: sock.tx.write_descs(0, [1, 2], [3, 4, 5][:1]),  # type: ignore[union-attr]
         "1 length for 2 addresses|1 length"),
        (lambda: umem.chunk_index("x"), "Umem.chunk_index: addr must be integers"),
        (lambda: umem.rx_addr([0], -1), "offset must be in 0..65535"),
        (lambda: umem.packets([1 << 40], [10]), "beyond the UMEM"),
        (lambda: umem.packets([0, 64], [10]), "beyond the UMEM|1 lengths"),
        (lambda: umem.gather([0], [1], 1 << 40), "maxlen must be in"),
        (lambda: umem.write_packets([0], 5), "packets must be list or ndarray, not 5"),
        (lambda: umem.validate_desc(np.zeros(2)), "descs must be a 1-d XDP_DESC_DTYPE"),
        (lambda: sock.release(5), "XskSocket.release: batch must be RxBatch, not 5"),
        (lambda: sock.forward("x"), "batch must be RxBatch"),
        (lambda: sock.send(5), "packets must be a list of bytes-like"),
        (lambda: sock.send([b"x", 3]), "packets must be a list of bytes-like"),
        (lambda: sock.send([b"x"], lengths=[-1]), "lengths must be in 0..4294967295"),
        (lambda: sock.fill(1.5), "XskSocket.fill: n must be an int"),
        (lambda: fq.reserve(1, exact=np.zeros(2)), "exact must be a bool, not a float64"),
        (lambda: sock.send([b"x"], kick=np.zeros(2)), "kick must be a bool"),
        (lambda: sock.poll(events="x"), "events must be an int"),
        (lambda: sock.bind(host.dev("eth0"), 1 << 40), "queue_id must be in"),
        (lambda: sock.pool.alloc(-1, 1), "ChunkPool.alloc: n must be in"),
        (lambda: sock.pool.free(np.array([1.5]), 2, "x"), "idx must be integers"),
        (lambda: host.xsk_lookup([1], 0), "Host.xsk_lookup: ifindex must be an int, not list"),
    ]
    for call, match in cases:
        with pytest.raises(BadArgument, match=match) as e:
            call()
        _one_line(e.value)
        assert isinstance(e.value, TypeError) and isinstance(e.value, ValueError)
    assert fq.reserve(np.uint8(2)) == (0, 2)  # numpy integers are ints
    with pytest.raises(ChunkAccountingError, match="90 chunks back, only"):
        sock.pool.free(np.array([1, 2, 3] * 30), 0, "free")  # overflowed the free stack
    sock.close()  # a closed socket filled its ring and queued packets still
    for use in (sock.fill, sock.recv, sock.complete, lambda: sock.send([b"x"])):
        with pytest.raises(XskError, match="the socket is closed") as ex:
            use()
        assert ex.value.errno == errno.EBADF
    umem.close()
    with pytest.raises(XskError, match="the UMEM is closed") as ex:
        umem.packets([0], [1])
    assert ex.value.errno == errno.EBADF


def test_maps_programs_and_collections_refuse_bad_arguments() -> None:
    with Collection(asm_collection("r0 = 2\nexit", MAPS)) as c:
        arr, q, lpm = c.maps["arr"].handle, c.maps["q"].handle, c.maps["lpm"]
        key, val = b"\0" * 4, bytes(8)
        for call, err, match in (
                (lambda: arr.update(key, val, "x"), BadArgument,
                 "ArrayMap.update: flags must be an int"),
                (lambda: arr.update(key, val, memoryview(b"ab")), BadArgument, "flags"),
                (lambda: arr.lookup(key, cpu="0"), BadArgument, "cpu must be an int"),
                (lambda: c.maps["hash"].handle.update(key, val, 1 << 64), BadArgument,
                 "flags must be in"),
                (lambda: q.update(1.5, b"\0" * 4), MapError, "take no key"),
                (lambda: arr.update_batch(Path("x"), [val]), TypeError,
                 "must be a list of bytes-like"),
                (lambda: c.maps["hash"].handle.delete_batch(np.array([1, 2], dtype=object)),
                 TypeError, "4 bytes"),
                (lambda: c.maps["hash"].handle.delete_batch(memoryview(b"abcd")), TypeError,
                 "must be a list of bytes-like"),
                (lambda: c.maps["arr"].update(0, 1, "x"), BadArgument, "Map.update: flags"),
                (lambda: c.maps["blob"].sum(0), PyxdpError, "12-byte blobs, not numbers"),
                (lambda: lpm.handle.__delitem__("xdp"), MapError, "does not appear to be an IPv4"),
                (lambda: c.maps["hash"].handle.lookup_batch(None, np.zeros((2, 2))),
                 MapError, "count must be an int .* not a float64 array"),
                (lambda: c.programs["t"].stream_read(np.zeros((2, 2))), BadArgument,
                 "Program.stream_read: stream"),
                (lambda: Collection.load(5), BadArgument,  # type: ignore[arg-type]
                 "Collection.load: path must be str or PathLike")):
            with pytest.raises(err, match=match) as e:
                call()
            _one_line(e.value)
    with Collection.load(ROOT / "samples" / "xdp1.o") as xdp1:  # a BTF-typed __u32 key
        with pytest.raises(PyxdpError, match="needs an int .* got a uint32 array") as e:
            xdp1.maps["rxcnt"].key_bytes(np.zeros((2, 2), np.uint32))
        _one_line(e.value)


def test_hosts_and_devices_refuse_bad_arguments() -> None:
    with Host(native=False) as host:
        eth0 = host.add_device("eth0")
        for call, err, match in (
                (lambda: host.dev(np.zeros(2)), BadArgument, "Host.dev: name_or_index"),
                (lambda: host.run(max_rounds=-1), BadArgument, "max_rounds must be in"),
                (lambda: host.program_by_id("x"), BadArgument, "prog_id must be an int"),
                (lambda: host.poll(np.zeros((2, 2))), BadArgument, "a float64 array"),
                (lambda: host.add_device(np.zeros((2, 2))), KernelError, "bad device name"),
                (lambda: host.veth("a", "b", mtu=np.zeros((2, 2))), KernelError, "mtu less"),
                (lambda: host.load(5), BadArgument, "Host.load: obj"),
                (lambda: eth0.detach_xdp("offload"), KernelError, "mode 'offload'"),
                (lambda: eth0.detach_xdp(np.zeros(3)), KernelError, "mode a float64 array"),
                (lambda: host.load("/dev/zero"), PyxdpError, "larger than 64 MiB"),  # hung
                (lambda: eth0.add_address("x"), KernelError, "does not appear to be"),
                (lambda: eth0.add_address(5), BadArgument, "address must be str"),
                (lambda: eth0.attach_xdp_multi(True), BadArgument, "progs must be Iterable"),
                (lambda: eth0.attach_xdp_multi(np.array(5)), BadArgument,
                 "progs must be programs, not a int64 array"),
                (lambda: eth0.attach_xdp(5), BadArgument,
                 "prog must be Program or XdpProg, not 5")):
            with pytest.raises(err, match=match) as e:
                call()  # type: ignore[no-untyped-call]
            _one_line(e.value)


def test_a_seeded_sweep_of_bad_values_meets_only_one_line_errors(
        xsk: tuple[Host, PyxdpXskSocket, Umem]) -> None:
    """Every listed method with random values of every kind: an error is pyxdp's own or
    a one-line TypeError/ValueError/KeyError (a dict's), never an internal one."""
    host, sock, umem = xsk
    rng = random.Random(SEED)
    values: list[object] = [None, "x", 1.5, float("nan"), b"", b"\0" * 4, [1, 2], [b"x"], {},
                            -1, 0, 1, 7, 1 << 32, 1 << 64, True, np.zeros(4, np.float64),
                            np.zeros((2, 2), np.uint32), np.array([1], dtype=object),
                            np.int64(3), object(), udp_packet(b"x"), memoryview(b"abcd")]
    with Collection(asm_collection("r0 = 2\nexit", MAPS)) as c:
        targets: list[tuple[object, tuple[str, ...]]] = [
            (sock, ("fill", "recv", "release", "send", "forward", "flush", "complete", "poll")),
            (sock.fill_ring, ("reserve", "submit", "cancel", "produce", "write", "read")),
            (sock.rx, ("peek", "release", "consume", "read_descs")),
            (umem, ("chunk_index", "chunk_base", "data_addr", "rx_addr", "packets", "gather",
                    "write_packets", "validate_desc")),
            (sock.pool, ("alloc", "free")),
            (host, ("xsk_lookup", "program_by_id", "dev", "poll")),
            (c.maps["arr"].handle, ("lookup", "update", "delete", "get_next_key",
                                    "update_batch", "delete_batch", "lookup_batch")),
            (c.maps["q"].handle, ("update", "push", "lookup_and_delete")),
            (c.maps["hash"], ("lookup", "update", "delete", "sum", "key_bytes"))]
        calls = 0
        for _ in range(400):
            obj, names = rng.choice(targets)
            fn = getattr(obj, rng.choice(names))
            args = [rng.choice(values) for _ in range(rng.randint(1, 3))]
            try:
                fn(*args)
            except (PyxdpError, TypeError, ValueError, KeyError) as e:
                assert type(e).__module__.startswith(("pyxdp", "builtins")), repr(e)
                _one_line(e)
            calls += 1
        assert calls == 400


def test_topology_numbers_are_checked() -> None:
    # Found by fuzzing explain topologies: int() of a dict or an address escaped.
    base = {"devices": [{"name": "eth0"}]}
    for extra, match in (({"xsk": [{"dev": "eth0", "fill": {}}]}, "'fill' must be a non-neg"),
                         ({"udp": ["1.2.3.4"]}, "'udp' lists ports"),
                         ({"udp": [70000]}, "'udp' lists ports")):
        with pytest.raises(TopologyError, match=match) as e:
            Topology.from_dict({**base, **extra})
        _one_line(e.value)


def test_the_testing_api_refuses_bad_arguments() -> None:
    # Found by fuzzing pyxdp.testing.xdptest: a backend that was not a name met .close
    # (AttributeError), a list as program name was unhashable, an array as the action
    # met numpy's truth value, a str of expected entries failed to unpack.
    from pyxdp.testing.xdptest import XdpObject
    xdp1 = ROOT / "samples" / "xdp1.o"
    with XdpObject(xdp1) as o:
        for call, match in (
                (lambda: XdpObject(5), "XdpObject.__init__: path must be str or PathLike"),
                (lambda: XdpObject(xdp1, 5), "backend must be str, not 5"),
                (lambda: Collection(asm_collection("r0 = 2\nexit"), 5),  # type: ignore[arg-type]
                 "backend must be 'userspace', 'kernel' or a Backend"),
                (lambda: o.program([1]), "name_or_section must be str or None, not list"),
                (lambda: o.assert_run(bytes(60), np.zeros((2, 2))), "action must be an int"),
                (lambda: o.assert_map("rxcnt", "x"), "dict or .key, value. pairs"),
                (lambda: o.assert_map([1], {}), "name must be str, not list"),
                (lambda: o.run(bytes(60), repeat=1 << 70), "repeat must be in")):
            with pytest.raises(BadArgument, match=match) as e:
                call()
            _one_line(e.value)


@pytest.mark.parametrize("backend", ["pyxdp", pytest.param("linux", marks=pytest.mark.kernel)])
def test_socket_ring_sizes_and_queue_ids_are_checked(backend: str) -> None:
    """Found by fuzzing socket parameters: Linux's socket packed a ring size past a C int
    or a queue id past a u32 with struct (struct.error), and both took a str or float
    size into a comparison. Now one line each; a negative size is the kernel's EINVAL."""
    with Host(native=False) as host:
        dev = host.add_device("eth0", rx_queues=2)

        def make(queue_id: object = 0, **kw: object) -> None:
            umem = Umem(16, 2048)
            try:
                if backend == "linux":
                    from pyxdp.xsk.linux import LinuxXskSocket
                    LinuxXskSocket("lo", queue_id, umem, **kw).close()  # type: ignore[arg-type]
                else:
                    PyxdpXskSocket(dev, queue_id, umem, **kw).close()  # type: ignore[arg-type]
            finally:
                umem.close()

        for kw, match in (({"queue_id": 1 << 32}, "queue_id must be in 0..4294967295"),
                          ({"queue_id": -1}, "queue_id must be in 0..4294967295, not -1"),
                          ({"rx_size": "8"}, "rx_size must be an int, not '8'"),
                          ({"tx_size": 2.0}, "tx_size must be an int, not 2.0"),
                          ({"fill_size": 1 << 32}, "fill_size must be in -2147483648..")):
            with pytest.raises(BadArgument, match=match) as e:
                make(**kw)
            _one_line(e.value)
        for size in (-1, 3):
            with pytest.raises(XskError, match="EINVAL") as x:
                make(rx_size=size)
            assert x.value.errno == errno.EINVAL


def test_objects_and_specs_of_the_wrong_type_are_refused_in_one_line() -> None:
    """Found by fuzzing the exported entry points: load_collection_spec(2**64) met
    os.path.exists as a file descriptor (OverflowError; a small int named one, stdin),
    Collection("userspace") ended in AttributeError, a list as a program name in
    'unhashable type'."""
    import pyxdp
    for call, match in ((lambda: pyxdp.load_collection_spec(1 << 64), "not 18446744073709551616"),
                        (lambda: pyxdp.load_collection_spec(0), "object's bytes, not 0"),
                        (lambda: pyxdp.load_collection_spec([]), "not list"),
                        (lambda: pyxdp.Collection("userspace"), "spec must be a CollectionSpec"),
                        (lambda: pyxdp.Collection.load(3), "path must be str or PathLike, not 3")):
        with pytest.raises(BadArgument, match=match) as e:
            call()  # type: ignore[no-untyped-call]
        _one_line(e.value)
    with Collection(asm_collection("r0 = 2\nexit", MAPS)) as c:
        with pytest.raises(KeyError):
            c[[1, 2]]  # type: ignore[index]
        with pytest.raises(KeyError) as k:  # found by the API sweep: the array's repr
            c[np.zeros((2, 2))]  # type: ignore[index]
        _one_line(k.value)


@pytest.mark.parametrize("nr_cpus", [0, -1, 10**6, "2", 2.0, True])
def test_cpu_counts_are_checked_at_the_door(nr_cpus: object) -> None:
    """Found by probing the constructors (round 10): Host(nr_cpus=0) divided by zero,
    Host(nr_cpus=10**6) asked numpy for 7.6 GiB, -1 made a host; Collection took 0 as
    "the default", True and 2.0 as counts, and "2" failed in a comparison deep inside."""
    from pyxdp.userspace import UserspaceBackend
    spec = asm_collection("r0 = 2\nexit", MAPS)
    for call in (lambda: Host(nr_cpus=nr_cpus), lambda: Collection(spec, nr_cpus=nr_cpus),
                 lambda: UserspaceBackend(nr_cpus=nr_cpus)):
        with pytest.raises(BadArgument, match="nr_cpus must be"):
            call()  # type: ignore[no-untyped-call]
    with Collection(spec, nr_cpus=8192) as c:  # CONFIG_NR_CPUS's ceiling is a machine
        assert c.programs["t"].test_run(bytes(64)).retval == 2


def test_a_missing_device_is_rtm_getlink_s_enodev() -> None:
    # Found by probing Host.dev (round 10): the lookup reported "xdp attach failed".
    with Host(native=False) as host:
        for key in (-1, 7, "", "eth9"):
            with pytest.raises(KernelError, match="RTM_GETLINK failed: ENODEV") as e:
                host.dev(key)
            _one_line(e.value)


@pytest.mark.parametrize("priority, actions", [
    ("x", 2), (-1, 2), (1 << 32, 2), (1.5, 2), (True, 2), (None, 2),
    (10, "x"), (10, -1), (10, 1 << 32), (10, None), (10, np.zeros(2))])
def test_run_configs_are_u32s(priority: object, actions: object) -> None:
    """Found by sweeping XDP_RUN_CONFIG values (round 7): a str priority failed in the
    dispatcher's ordering ("'<' not supported"), a str or None chain_call_actions in its
    code generation, -1 and 2^64 were taken and a numpy uint32 overflowed the encoder;
    libxdp's run_prio and chain-call actions are unsigned ints."""
    with pytest.raises(BadArgument, match="XdpRunConfig: .* must be a u32") as e:
        XdpRunConfig(priority, actions)  # type: ignore[arg-type]
    _one_line(e.value)
    rc = XdpRunConfig(np.uint32(0xFFFF_FFFF), np.int64(7))  # type: ignore[arg-type]
    assert (type(rc.priority), rc.chain_call_actions) == (int, 7)
    with Host(native=False, engine="interp") as host:
        eth0 = host.add_device("eth0")
        prog = host.load(ROOT / "samples" / "xdp1.o").programs["xdp_prog1"]
        with pytest.raises(BadArgument, match=r"run_configs\['xdp_prog1'\] must be Xdp"):
            eth0.attach_xdp_multi([prog], run_configs={"xdp_prog1": 5})  # type: ignore[dict-item]
        disp = eth0.attach_xdp_multi([prog], run_configs={"xdp_prog1": rc})
        eth0.receive([udp_packet(b"x")])
        assert host.run() == 1 and disp.chain[0][1] == rc


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_a_truncated_test_run_carries_enospc_on_either_backend(engine: str) -> None:
    """Round 8 (test_run fuzzed against Linux): a data_size_out too small for the packet
    raised TestRunTruncated without an errno on the userspace backend, while the kernel
    backend's carries ENOSPC, what bpf(2) returns."""
    from pyxdp.errors import TestRunTruncated
    with Collection.load(ROOT / "samples" / "xdp1.o", engine=engine) as c:
        with pytest.raises(TestRunTruncated) as e:
            c.programs["xdp_prog1"].test_run(bytes(34), data_size_out=14, ctx_size_out=32)
    assert e.value.errno == errno.ENOSPC and "\n" not in str(e.value)


def test_packet_builders_and_traffic_refuse_bad_values_in_one_line() -> None:
    """Round 8 (packet builders fuzzed, 3,000 calls): wrong types reached struct, numpy
    and len() ("'<=' not supported between 'int' and 'str'", AttributeError on a float
    of TCP flags, a 3.7 TiB numpy allocation for sizes=[10**9],
    internet_checksum(1 << 32) building 4 GiB of zeros). The builders now check their
    arguments at the door (pyxdp.args), the numbers in one place (_check_range), and
    batch() builds every template before it allocates the rows."""
    from pyxdp.net import packets as P
    from pyxdp.net.source import TrafficGenerator
    calls: list[Callable[[], object]] = [
        lambda: P.udp_packet(b"x", sport="1"),  # type: ignore[arg-type]
        lambda: P.udp_packet(b"x", vlans="::1"),  # type: ignore[arg-type]
        lambda: P.udp_packet(b"x", vlans=[(1, 2, 3)]),  # type: ignore[list-item]
        lambda: P.udp_packet(np.uint8(3)),  # type: ignore[arg-type]
        lambda: P.tcp_packet(flags=float("nan")),  # type: ignore[arg-type]
        lambda: P.tcp_packet(flags=[4095, 1]),  # type: ignore[arg-type]
        lambda: P.internet_checksum(1 << 32),  # type: ignore[arg-type]
        lambda: P.ipv4(0, 65536, 0, 1 << 64, 42, 1.5),  # type: ignore[arg-type]
        lambda: list(P.traffic(sizes=["64"], count=1)),  # type: ignore[list-item]
        lambda: list(P.traffic(protos=[["udp"]], count=1)),  # type: ignore[list-item]
        lambda: P.batch(4, sizes=[10 ** 9]),
        lambda: TrafficGenerator(sizes=[10 ** 9]),
        lambda: TrafficGenerator(vlan=np.int64(64), count="udp"),  # type: ignore[arg-type]
        lambda: TrafficGenerator(vlan=b"\x01", period=0),
    ]
    for call in calls:
        with pytest.raises(PyxdpError) as e:
            call()
        assert "\n" not in str(e.value)
    frames = TrafficGenerator(vlan=np.int64(64), sizes=[np.int64(128)], period=4).batch
    assert frames.length.tolist() == [128] * 4


def test_a_descriptor_closed_under_a_racing_call_is_ebadf() -> None:
    """Found by closing a kernel-backed collection while threads iterated its maps: a
    close between a map's liveness check and its bpf(2) call met Fd.fileno's bare
    ValueError. A closed Fd is the kernel's answer to a closed descriptor, EBADF (still a
    ValueError, as Python's files raise)."""
    import os

    from pyxdp.kernel.syscall import Fd
    fd = Fd(os.dup(0), "map")
    fd.close()
    with pytest.raises(KernelError) as e:
        fd.fileno()
    assert e.value.errno == errno.EBADF and "the map is closed" in _one_line(e.value)
    assert isinstance(e.value, ValueError)
