"""The pytest plugin as a user meets it: user-style test files run by ``pytester`` against
the sample objects (README's snippet itself, failures and their messages, the kernel
variant's skip-or-fail rule, the other fixtures); and the library API under it: XDP
actions at the top level, map views, typed keys."""

from __future__ import annotations

import ipaddress
import re
import shutil
from pathlib import Path

import pytest

import pyxdp
from pyxdp.btf.codec import CodecError
from pyxdp.collection import Collection
from pyxdp.net.packets import tcp_packet, udp_packet
from pyxdp.testing import pytest_plugin
from pyxdp.testing.xdptest import kernel_unavailable

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
PLUGIN = "pyxdp.testing.pytest_plugin"
KERNEL = kernel_unavailable() is None


def readme_snippet() -> str:
    """The Python block of README's "Test your own XDP program" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Test your own XDP program\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None, "the section has no python block"
    return found.group(1)


@pytest.fixture(scope="module")
def _warm() -> None:
    """Every module the user files reach, imported before the first inline run: pytester
    drops the modules an inline run imported, and a second copy of one holding a
    registry (the map address space) would not see the first copy's maps."""
    from pyxdp.net.netdevice import Host
    from pyxdp.testing.xdptest import XdpObject

    for name in ("xdp1.o", "lb.o"):
        with XdpObject(SAMPLES / name, engine="interp", program=None if name == "xdp1.o"
                       else "lb_ingress") as obj:
            obj.run(udp_packet())
        if KERNEL:
            with XdpObject(SAMPLES / name, "kernel", program=None if name == "xdp1.o"
                           else "lb_ingress") as obj:
                obj.run(udp_packet())
    with Host(engine="interp") as host:
        host.add_device("eth0").attach_xdp(host.load(SAMPLES / "xdp1.o").programs["xdp_prog1"])
        host.dev("eth0").receive([udp_packet()])
        host.run()
    import pyxdp.testing.vethlab  # noqa: F401


@pytest.fixture
def user(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, _warm: None
         ) -> pytest.Pytester:
    """A user's project: the samples it tests under samples/, the plugin loaded explicitly
    (the inline run must not depend on whether the entry point is installed)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("CI", raising=False)
    (pytester.path / "samples").mkdir()
    for name in ("xdp1.o", "lb.o"):
        shutil.copy(SAMPLES / name, pytester.path / "samples" / name)
    pytester.makeini("[pytest]\nxdp_engine = interp\n")
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # (the plugin module is imported already here: nothing for pytest to rewrite)
    return pytester.runpytest("-p", PLUGIN, "-p", "no:cacheprovider",
                              "-W", "ignore::pytest.PytestAssertRewriteWarning", *args)


def test_readme_snippet_runs_on_both_backends(user: pytest.Pytester) -> None:
    snippet = readme_snippet()
    assert len(snippet.splitlines()) <= 15
    user.makepyfile(test_mine=snippet)
    res = run(user, "-rs")
    if KERNEL:
        res.assert_outcomes(passed=2)
    else:
        res.assert_outcomes(passed=1, skipped=1)
        res.stdout.fnmatch_lines(["*kernel backend needs root and BPF*"])
    res.stdout.fnmatch_lines(["*2 *"])


def doc_tests() -> list[str]:
    """docs/TESTING.md's complete test files: the map example, then the veth lab one."""
    text = (ROOT / "docs" / "TESTING.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "def test_" in b]
    assert len(blocks) == 2
    return blocks


def test_testing_doc_map_example_runs(user: pytest.Pytester) -> None:
    user.makepyfile(test_doc_maps=doc_tests()[0])
    res = run(user, "-rs")
    if KERNEL:
        res.assert_outcomes(passed=2)
    else:
        res.assert_outcomes(passed=1, skipped=1)


@pytest.mark.kernel  # namespaces and tracefs: with the other kernel tests
def test_testing_doc_lab_example_runs(user: pytest.Pytester) -> None:
    user.makepyfile(test_doc_lab=doc_tests()[1])
    run(user).assert_outcomes(passed=1)


def test_failures_name_what_differs(user: pytest.Pytester) -> None:
    user.makepyfile(test_fail="""
        import pytest
        from pyxdp import XDP_PASS, XDP_DROP
        from pyxdp.net.packets import udp_packet

        pytestmark = pytest.mark.xdp_object("samples/xdp1.o", backends=["userspace"])

        def test_verdict(xdp):
            xdp.assert_run(udp_packet(), XDP_PASS)

        def test_output(xdp):
            pkt = udp_packet(b"abc")
            xdp.assert_run(pkt, XDP_DROP, output=pkt[:20] + b"X" + pkt[21:])

        def test_map(xdp):
            xdp.run(udp_packet())
            xdp.assert_map("rxcnt", {17: 2, 6: 0})

        def test_map_exact(xdp):
            xdp.run(udp_packet())
            xdp.assert_map("rxcnt", {}, exact=True)

        def test_no_such_map(xdp):
            xdp.assert_map("nope", {})
    """)
    res = run(user)
    res.assert_outcomes(failed=5)
    res.stdout.fnmatch_lines([
        "*xdp_prog1 (userspace) returned XDP_DROP, expected XDP_PASS*",
        "*output differs from byte 20 (*",
        "*expected [[]12:28]*",
        # one CPU's slot holds the count: the one the run was on (the caller's)
        "*key 17: 1 (summed over CPUs [[]*[]]), expected 2*",
        "*key 17: [[]*[]], not expected*",
        "*xdp1.o has no map 'nope' (maps: rxcnt)*",
    ])
    assert "xdptest.py" not in res.stdout.str()  # the user's line, not the library's


def test_kernel_variant_skips_with_the_reason_or_fails_under_ci(
        user: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pytest_plugin, "kernel_unavailable", lambda: "not root (EPERM)")
    user.makepyfile(test_k="""
        import pytest
        pytestmark = pytest.mark.xdp_object("samples/xdp1.o")

        def test_one(xdp, xdp_backend):
            assert xdp.backend == xdp_backend == "userspace"
    """)
    res = run(user, "-rs")
    res.assert_outcomes(passed=1, skipped=1)
    res.stdout.fnmatch_lines(["*kernel backend needs root and BPF: not root (EPERM)*"])
    monkeypatch.setenv("CI", "true")
    res = run(user)
    res.assert_outcomes(passed=1, errors=1)  # at the fixture's setup
    res.stdout.fnmatch_lines(["*kernel backend cannot run under CI: not root (EPERM)*"])


def test_marker_backends_ini_and_missing_objects(user: pytest.Pytester) -> None:
    user.makepyfile(test_m="""
        import pytest

        @pytest.mark.xdp_object("samples/xdp1.o", backends=["userspace"])
        def test_marked(xdp):
            assert xdp.backend == "userspace"

        def test_unmarked(xdp):
            pass

        @pytest.mark.xdp_object("samples/missing.o")
        def test_missing(xdp_object_path):
            pass
    """)
    res = run(user, "--co", "-q")
    res.stdout.fnmatch_lines(["*test_marked[[]userspace[]]*", "*test_unmarked[[]kernel[]]*"])
    res = run(user, "-k", "unmarked or missing", "-o", "xdp_backends=userspace")
    res.assert_outcomes(errors=2)
    res.stdout.fnmatch_lines(["*name the object with @pytest.mark.xdp_object('prog.o')*",
                              "*XDP object 'samples/missing.o' is no file in *"])


def test_bad_plugin_options_are_one_usage_error(user: pytest.Pytester) -> None:
    """Found by fuzzing the plugin's options: a bad xdp_engine was every userspace test's
    traceback (the kernel variants passing), a backend named twice ran its tests twice,
    ``backends="userspace"`` was taken letter by letter, ``backends=5`` and
    ``xdp_object(5)`` were TypeErrors, and a missing object's message named the
    directories' parents."""
    user.makepyfile(test_strb="""
        import pytest

        @pytest.mark.xdp_object("samples/xdp1.o", backends="userspace")
        def test_str_backends(xdp):
            assert xdp.run(bytes(64)).retval == 1
    """, test_intb="""
        import pytest

        @pytest.mark.xdp_object("samples/xdp1.o", backends=5)
        def test_int_backends(xdp):
            pass
    """, test_ini="""
        import pytest

        @pytest.mark.xdp_object("samples/xdp1.o")
        def test_ini_backends(xdp):
            pass
    """, test_intp="""
        import pytest

        @pytest.mark.xdp_object(5)
        def test_int_path(xdp_object_path):
            pass
    """)
    res = run(user, "test_strb.py")
    res.assert_outcomes(passed=1)
    res = run(user, "test_intp.py", "-o", "xdp_backends=userspace")
    res.assert_outcomes(errors=1)
    res.stdout.fnmatch_lines(["*a path is a non-empty str or os.PathLike, not 5*"])
    res = run(user, "test_intb.py")
    res.stdout.fnmatch_lines(["*backends=...) takes names among userspace, kernel, not 5*"])
    res = run(user, "test_strb.py", "-o", "xdp_engine=JIT")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*ini option xdp_engine: 'JIT' is none of auto, jit, *"])
    res = run(user, "test_ini.py", "-o", "xdp_backends=kernel userspace kernel")
    res.stdout.fnmatch_lines(["*xdp backends name kernel twice*"])


def test_load_host_packets_and_typed_maps(user: pytest.Pytester) -> None:
    user.makepyfile(test_more="""
        import ipaddress
        from pyxdp import XDP_DROP, XDP_TX, XdpAction

        class Scapyish:  # what a scapy packet does: bytes(pkt) is the frame
            def __init__(self, frame):
                self.frame = frame
            def __bytes__(self):
                return self.frame

        def test_lb(xdp_load, xdp_packets):
            lb = xdp_load("samples/lb.o", program="lb_ingress")
            lb.maps["vips"][{"addr": "198.51.100.2", "port": 5678, "proto": 17}] = {
                "first_backend": 0, "backend_count": 1}
            lb.maps["backends"][0] = {"addr": "10.1.0.1", "mac": bytes(6)}
            res = lb.assert_run(Scapyish(xdp_packets.udp_packet(b"hi")), XDP_TX)
            assert isinstance(res.retval, XdpAction) and res.retval == 3
            (key, conn), = lb.maps["conns"].items()
            assert key["daddr"] == ipaddress.IPv4Address("198.51.100.2")
            assert (key["dport"], conn["backend"]) == (5678, 0)

        def test_host(xdp_host, xdp_load, xdp_packets):
            prog = xdp_host.load("samples/xdp1.o").programs["xdp_prog1"]
            xdp_host.dev("eth0").attach_xdp(prog)
            xdp_host.dev("eth0").receive([xdp_packets.udp_packet()] * 3)
            xdp_host.run()
            assert xdp_host.dev("eth0").stats.xdp_drops == 3
            assert [d.name for d in xdp_host.devices.values()] == [
                "lo", "eth0", "veth0", "veth1"]
    """)
    run(user).assert_outcomes(passed=2)


@pytest.mark.kernel
def test_xdp_lab_compares_a_user_program_with_linux(user: pytest.Pytester) -> None:
    user.makepyfile(test_lab=f"""
        from pyxdp.net.packets import udp_packet, tcp_packet
        from pyxdp.testing.vethlab import Attach, Scenario, lab_mac

        PAIRS = (("veth0", "veth1"),)
        FRAMES = [udp_packet(b"x", src_mac=lab_mac(PAIRS, "veth1"),
                             dst_mac=lab_mac(PAIRS, "veth0")), tcp_packet()]

        def test_same_as_linux(xdp_lab):
            lab = Scenario("mine", pairs=PAIRS,
                           attach=(Attach("veth0", "{SAMPLES / 'xdp1.o'}", "xdp_prog1"),),
                           traffic=tuple(("veth0", f) for f in FRAMES), maps=("rxcnt",))
            result = xdp_lab(lab)
            result.assert_same()
            assert result.pyxdp.trace["xdp_exception"].events == 0
            assert result.kernel.rx == {{"veth0": (), "veth1": ()}}
    """)
    run(user).assert_outcomes(passed=1)


# -- the library API under the plugin --------------------------------------------------

def test_actions_at_the_top_level_and_in_results() -> None:
    assert [pyxdp.XDP_ABORTED, pyxdp.XDP_DROP, pyxdp.XDP_PASS, pyxdp.XDP_TX,
            pyxdp.XDP_REDIRECT] == list(pyxdp.XdpAction) == [0, 1, 2, 3, 4]
    with Collection.load(SAMPLES / "xdp1.o", engine="interp") as xdp1:
        res = xdp1.programs["xdp_prog1"].test_run(udp_packet())
    assert res.retval is pyxdp.XDP_DROP and isinstance(res.retval, int)
    assert f"{res.retval}" == "1" and res.retval + 1 == 2  # old code keeps its ints


def test_map_views_have_len_iteration_and_in() -> None:
    with Collection.load(SAMPLES / "lb.o", engine="interp") as lb:
        vips = lb.maps["vips"]
        keys, values, items = vips.keys(), vips.values(), vips.items()
        assert len(keys) == len(values) == len(items) == 0
        vips[{"addr": "198.51.100.2", "port": 53, "proto": 17}] = {"first_backend": 1,
                                                                   "backend_count": 2}
        key = {"addr": ipaddress.IPv4Address("198.51.100.2"), "port": 53, "proto": 17,
               "pad": 0}
        # the views are live: made before the update, they see it
        assert len(keys) == len(values) == len(items) == 1
        assert list(keys) == [key] and key in keys
        assert {"addr": "198.51.100.2", "port": 53, "proto": 17} in keys  # any accepted form
        assert {"first_backend": 1, "backend_count": 2} in values
        assert (key, {"first_backend": 1, "backend_count": 2}) in items
        assert (key, {"first_backend": 0, "backend_count": 2}) not in items
        stats = lb.maps["stats"]  # a per-CPU array: every slot, a list per CPU
        assert len(stats.keys()) == 5 and list(stats.keys()) == [0, 1, 2, 3, 4]
        assert all(isinstance(v, list) and len(v) == stats.nr_cpus for v in stats.values())


def test_typed_keys_addresses_and_network_order() -> None:
    with Collection.load(SAMPLES / "lb.o", engine="interp") as lb:
        vips, backends = lb.maps["vips"], lb.maps["backends"]
        raw = bytes([198, 51, 100, 2]) + (5678).to_bytes(2, "big") + bytes([17, 0])
        for form in ({"addr": "198.51.100.2", "port": 5678, "proto": 17},
                     {"addr": ipaddress.IPv4Address("198.51.100.2"), "port": 5678,
                      "proto": 17},
                     {"addr": 0xC6336402, "port": 5678, "proto": 17},  # __be32: host order
                     {"addr": bytes([198, 51, 100, 2]), "port": b"\x16\x2e", "proto": 17}):
            assert vips.key_bytes(form) == raw, form
        backends[3] = {"addr": "10.1.0.1", "mac": bytes(6)}
        assert backends[3]["addr"] == ipaddress.IPv4Address("10.1.0.1")
        assert backends.handle.lookup((3).to_bytes(4, "little"))[:4] == bytes([10, 1, 0, 1])
        with pytest.raises(CodecError, match="IPv6 address ::1 in a 4-byte field"):
            vips[{"addr": "::1"}] = {}
        with pytest.raises(CodecError, match=r"needs an int \(or an IP address\), got str"):
            vips[{"addr": "10.0.0.300"}] = {}
        # a plain __u32 key takes an address too, in network order (what iph->saddr holds)
        rxcnt = Collection.load(SAMPLES / "xdp1.o", engine="interp")
        with rxcnt:
            assert rxcnt.maps["rxcnt"].key_bytes("10.0.0.1") == bytes([10, 0, 0, 1])


def test_xdp_object_runs_scapy_style_packets_and_refuses_others() -> None:
    from pyxdp.testing.xdptest import XdpObject, packet_bytes

    class Frame:
        def __bytes__(self) -> bytes:
            return tcp_packet()

    assert packet_bytes(Frame()) == tcp_packet()
    with pytest.raises(TypeError, match="a packet is bytes or converts to bytes"):
        packet_bytes("not a frame")  # type: ignore[arg-type]
    with XdpObject(SAMPLES / "xdp1.o", engine="interp") as obj:
        assert obj.run(Frame()).retval == pyxdp.XDP_DROP
    with pytest.raises(pyxdp.PyxdpError, match="no such object file"):
        XdpObject(SAMPLES / "nope.o")


def test_in6_addr_and_be32_in_a_hand_built_struct() -> None:
    """``struct key { struct in6_addr dst; __be32 v4; }`` from raw BTF records."""
    import struct

    from pyxdp.btf.btf import Btf
    from pyxdp.btf.codec import TypeCodec

    names = b"\0u8\0in6_addr\0a\0u32\0__be32\0key\0dst\0v4\0"
    off = {n: names.index(b"\0" + n.encode() + b"\0") + 1 for n in
           ("u8", "in6_addr", "a", "u32", "__be32", "key", "dst", "v4")}

    def rec(name: str | None, kind: int, size_type: int, vlen: int = 0) -> bytes:
        return struct.pack("<III", off[name] if name else 0, (kind << 24) | vlen, size_type)

    types = (rec("u8", 1, 1) + struct.pack("<I", 8)                          # [1] u8
             + rec(None, 3, 0) + struct.pack("<III", 1, 1, 16)               # [2] u8[16]
             + rec("in6_addr", 4, 16, 1) + struct.pack("<III", off["a"], 2, 0)  # [3]
             + rec("u32", 1, 4) + struct.pack("<I", 32)                      # [4] u32
             + rec("__be32", 8, 4)                                           # [5] typedef
             + rec("key", 4, 20, 2) + struct.pack("<IIIIII", off["dst"], 3, 0,
                                                  off["v4"], 5, 128))        # [6]
    hdr = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(names))
    codec = TypeCodec(Btf.parse(hdr + types + names), 6)
    raw = codec.encode({"dst": "2001:db8::1", "v4": "192.0.2.7"})
    assert raw == ipaddress.IPv6Address("2001:db8::1").packed + bytes([192, 0, 2, 7])
    assert codec.decode(raw) == {"dst": ipaddress.IPv6Address("2001:db8::1"),
                                 "v4": ipaddress.IPv4Address("192.0.2.7")}
    assert codec.encode({"v4": 0xC0000207})[16:] == bytes([192, 0, 2, 7])  # host order in
    with pytest.raises(CodecError, match="IPv4 address 10.0.0.1 in a 16-byte field"):
        codec.encode({"dst": "10.0.0.1"})
