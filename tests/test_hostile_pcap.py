"""Hostile arguments to the capture reader and writers (:mod:`pyxdp.net.pcap`): wrong
types for numbers and packet bytes, text files, closed files, things that are no file.
Each is one line (:class:`CaptureError` naming the parameter), never a TypeError from a
comparison or an AttributeError from deep inside (found by fuzzing the writers' arguments
and the readers' sources)."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest

from pyxdp.net.pcap import CaptureError, PcapngWriter, PcapWriter, read_capture


def _one_line(call: Callable[[], object]) -> str:
    with pytest.raises(CaptureError) as e:
        call()
    text = str(e.value)
    assert "\n" not in text and "not supported between" not in text, text
    return text


@pytest.mark.parametrize("cls", [PcapngWriter, PcapWriter])
def test_writer_numbers_of_the_wrong_type(cls: type[PcapngWriter] | type[PcapWriter]) -> None:
    w = cls(io.BytesIO())
    assert "timestamp must be an int, not NoneType" in _one_line(
        lambda: w.write(b"x", None))  # type: ignore[arg-type]
    assert "timestamp must be an int, not list" in _one_line(
        lambda: w.write(b"x", []))  # type: ignore[arg-type]
    assert "original length must be an int, not '5'" in _one_line(
        lambda: w.write(b"x", 0, orig_len="5"))  # type: ignore[arg-type]
    assert "packet data must be bytes, bytearray or memoryview, not object" in _one_line(
        lambda: w.write(object(), 0))  # type: ignore[arg-type]
    # A number is not packet bytes: bytes(5) would have written five zeros.
    _one_line(lambda: w.write(5, 0))  # type: ignore[arg-type]
    w.close()


def test_writer_options_of_the_wrong_type() -> None:
    assert "snaplen must be an int, not NoneType" in _one_line(
        lambda: PcapWriter(io.BytesIO(), snaplen=None))  # type: ignore[arg-type]
    w = PcapngWriter(io.BytesIO())
    assert "snaplen must be an int, not 1.5" in _one_line(
        lambda: w.add_interface("eth0", snaplen=1.5))  # type: ignore[arg-type]
    assert "interface must be an int, not '0'" in _one_line(
        lambda: w.write(b"x", 0, interface="0"))  # type: ignore[arg-type]
    assert "verdict must be an int, not '2'" in _one_line(
        lambda: w.write(b"x", 0, verdict="2"))  # type: ignore[arg-type]
    assert "epb_flags must be an int, not 1.0" in _one_line(
        lambda: w.write(b"x", 0, flags=1.0))  # type: ignore[arg-type]
    assert "userappl must be a str, not 5" in _one_line(
        lambda: PcapngWriter(io.BytesIO(), userappl=5))  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", [PcapngWriter, PcapWriter])
@pytest.mark.parametrize("dest", [None, 5, b"name.pcap", io.StringIO()])
def test_writer_destination_that_is_no_binary_file(cls: type[PcapngWriter] | type[PcapWriter],
                                                   dest: object) -> None:
    assert "not a capture destination" in _one_line(lambda: cls(dest))  # type: ignore


def test_closed_files() -> None:
    f = io.BytesIO()
    w = PcapngWriter(f)
    f.close()
    with pytest.raises(CaptureError, match="I/O operation on closed file"):
        w.write(b"x", 0)
    w.close()  # nothing left to flush: no ValueError
    r = io.BytesIO(b"\xd4\xc3\xb2\xa1")
    r.close()
    with pytest.raises(CaptureError, match="reading the capture failed at offset 0"):
        list(read_capture(r))


def test_text_file_source() -> None:
    with pytest.raises(CaptureError, match="not a capture source: a text file"):
        list(read_capture(io.StringIO("\n\r\r\n")))


def test_flag_without_a_truth() -> None:
    class NoTruth:  # like a numpy array of several items
        def __bool__(self) -> bool:
            raise ValueError("ambiguous")
    assert "big_endian must be a bool, not NoTruth" in _one_line(
        lambda: PcapngWriter(io.BytesIO(), big_endian=NoTruth()))  # type: ignore[arg-type]
    assert "nanoseconds must be a bool" in _one_line(
        lambda: PcapWriter(io.BytesIO(), nanoseconds=NoTruth()))  # type: ignore[arg-type]


def test_filter_arguments_of_the_wrong_type() -> None:
    """Found by fuzzing the filter API: an expression that is no str, a snaplen, linktype
    or batch of the wrong type, frames that are no bytes and captures that hold other
    things raised AttributeError/TypeError/ctypes.ArgumentError from inside."""
    from pyxdp.errors import BadArgument
    from pyxdp.net.pcap import CapturedPacket
    from pyxdp.net.pcap_filter import (
        PacketFilter,
        compile_filter,
        filter_capture,
        libpcap_available,
    )
    if not libpcap_available():
        pytest.skip("filter expressions need libpcap")
    for call, words in ((lambda: compile_filter(None), "expression must be str"),
                        (lambda: compile_filter(b"udp"), "expression must be str"),
                        (lambda: compile_filter("udp", snaplen=None), "snaplen must be an int"),
                        (lambda: compile_filter("udp", linktype=1 << 40), "linktype must be in"),
                        (lambda: compile_filter("udp", linktype="1"), "linktype must be an int"),
                        (lambda: PacketFilter(["udp"]), "expression must be str"),
                        (lambda: PacketFilter("udp").keep("abc"), "packets must be a sequence"),
                        (lambda: PacketFilter("udp").keep([b"x", None]),
                         "packets[1] must be bytes"),
                        (lambda: list(filter_capture([b"x"], "udp")),
                         "packets[0] must be a CapturedPacket"),
                        (lambda: list(filter_capture([CapturedPacket(b"x", 0)], "udp", batch=0)),
                         "batch must be in 1..")):
        with pytest.raises(BadArgument) as e:
            call()  # type: ignore[no-untyped-call]
        assert words in str(e.value) and "\n" not in str(e.value), str(e.value)
