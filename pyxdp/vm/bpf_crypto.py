"""BPF crypto contexts (``kernel/bpf/crypto.c``) of the ``"skcipher"`` type
(``crypto/bpf_crypto_skcipher.c``), whose ciphers are the crypto API's lskciphers
(``crypto/ecb.c``, ``crypto/cbc.c`` over ``aes``).

``bpf_crypto_ctx_create`` checks a ``struct bpf_crypto_params`` in Linux 6.18's
order and answers with its error codes. ``bpf_crypto_encrypt``/``_decrypt``
(``bpf_crypto_crypt``) take their source, destination and IV ("siv": IV and
state, ``ivsize + statesize`` bytes) as dynptrs, here anything with a size, a
read-only bit and ``__bpf_dynptr_data`` (:class:`CryptBuf`). The AES blocks
themselves are the ``cryptography`` library's.

As the lskcipher templates do, a length that is not a whole number of blocks
still has its whole blocks written (and a CBC IV advanced past them) before the
call answers ``-EINVAL``.

The kfuncs run in Python on both engines. A context is an object of the
process's object arena (:mod:`pyxdp.vm.memalloc`) whose first word is its
``usage`` refcount; its cipher is kept beside the arena by the object's address.
``bpf_crypto_ctx_acquire`` is ``refcount_inc_not_zero``, ``_release`` drops one
reference, and the destructor (the cipher forgotten, the object freed) runs when
the last one goes: released, or dropped by a map whose ``__kptr`` field held it
(an update or delete of the value, or the map freed). ``bpf_crypto_encrypt``/
``_decrypt`` take their dynptrs' memory from a resolver the caller passes
(:func:`make_crypt`: XDP frames are :mod:`pyxdp.net.xdp_dynptr`'s).
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pyxdp.errors import HelperFault
from pyxdp.vm.dynptr import dynptr_load
from pyxdp.vm.memalloc import arena, record_index, register_root_free

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["AES_BLOCK", "CRYPTO_CTX_KFUNCS", "PARAMS", "CryptBuf", "CryptoCtx", "DynptrMem",
           "Mem", "crypto_crypt", "crypto_ctx_create", "live_contexts", "make_crypt"]

# struct bpf_crypto_params: type[14], reserved[2], algo[128], key[256], key_len, authsize
PARAMS = struct.Struct("<14s2s128s256sII")
_KEY_MAX = 256
AES_BLOCK = 16
_AES_KEYS = frozenset({16, 24, 32})  # aes_expandkey: any other length is -EINVAL
_AES_DRIVERS = ("aes", "aes-generic", "aes-fixed-time")
# The lskciphers Linux 6.18 makes of its templates over AES (by the algorithm's name
# or a driver's): mode -> the IV size (ivsize; their statesize is 0).
_LSKCIPHERS = {f"{mode}({drv})": mode for mode in ("ecb", "cbc") for drv in _AES_DRIVERS}
_IVSIZE = {"ecb": 0, "cbc": AES_BLOCK}
# Names the crypto API has as skciphers but not as lskciphers: crypto_has_skcipher
# (has_algo) finds them, crypto_alloc_lskcipher then fails with -EINVAL.
_SKCIPHER_ONLY = frozenset({"ctr(aes)", "xts(aes)", "cts(cbc(aes))"})
_TYPE = "skcipher"  # the only bpf_crypto_type Linux registers


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("latin-1")


@dataclass
class CryptoCtx:
    """``struct bpf_crypto_ctx``: the cipher (mode and key) and ``siv_len``."""

    mode: str
    key: bytes
    siv_len: int


def crypto_ctx_create(params: bytes | None, params_sz: int) -> tuple[CryptoCtx | None, int]:
    """bpf_crypto_ctx_create: the new context and 0, or None and the error it stores
    in ``*err``. ``params`` are the program's bytes (None: a NULL pointer)."""
    if params is None or len(params) < PARAMS.size or params_sz != PARAMS.size:
        return None, -errno.EINVAL
    typ, reserved, _algo, key, key_len, authsize = PARAMS.unpack_from(params)
    if any(reserved):
        return None, -errno.EINVAL
    # strcmp reads the type on into reserved (zero: the end) and the algorithm's name
    # on into the key when its 128 bytes hold no NUL
    if _cstr(typ) != _TYPE:
        return None, -errno.ENOENT
    algo = _cstr(params[16:])
    if algo not in _LSKCIPHERS and algo not in _SKCIPHER_ONLY:
        return None, -errno.EOPNOTSUPP
    if authsize:  # the skcipher type has no setauthsize
        return None, -errno.EOPNOTSUPP
    if not key_len or key_len > _KEY_MAX:
        return None, -errno.EINVAL
    mode = _LSKCIPHERS.get(algo)
    if mode is None:  # crypto_alloc_lskcipher
        return None, -errno.EINVAL
    if key_len not in _AES_KEYS:  # setkey
        return None, -errno.EINVAL
    return CryptoCtx(mode, bytes(key[:key_len]), _IVSIZE[mode]), 0


Mem = tuple[bytearray | memoryview, int]  # a byte of program memory: its buffer and offset


class CryptBuf(Protocol):
    """A dynptr as bpf_crypto_crypt sees it (``struct bpf_dynptr_kern``)."""

    @property
    def size(self) -> int: ...

    @property
    def rdonly(self) -> bool: ...

    def data(self, length: int, rw: bool) -> Mem | None:
        """``__bpf_dynptr_data`` (``rw``: ``_data_rw``): where its first ``length``
        bytes are, or None where they are not one piece of memory (or, ``rw``, the
        dynptr is read-only)."""
        ...


def crypto_crypt(ctx: CryptoCtx, src: CryptBuf, dst: CryptBuf, siv: CryptBuf | None,
                 decrypt: bool) -> int:
    """bpf_crypto_crypt: en- or decrypt ``src``'s bytes into the start of ``dst`` with
    the IV in ``siv`` (updated as the cipher leaves it); 0 or a negative errno."""
    if dst.rdonly:
        return -errno.EINVAL
    siv_len = siv.size if siv is not None else 0
    src_len, dst_len = src.size, dst.size
    if not src_len or not dst_len or src_len > dst_len:
        return -errno.EINVAL
    if siv_len != ctx.siv_len:
        return -errno.EINVAL
    psrc = src.data(src_len, False)
    if psrc is None:
        return -errno.EINVAL
    pdst = dst.data(dst_len, True)
    if pdst is None:
        return -errno.EINVAL
    piv = siv.data(siv_len, True) if siv is not None and siv_len else None
    if siv_len and piv is None:
        return -errno.EINVAL
    return _Lskcipher(ctx, decrypt).crypt(psrc, pdst, src_len, piv)


def _at(m: Mem, off: int) -> Mem:
    return m[0], m[1] + off


def _rd(m: Mem, n: int = AES_BLOCK) -> bytes:
    return bytes(m[0][m[1]:m[1] + n])


def _wr(m: Mem, data: bytes) -> None:
    m[0][m[1]:m[1] + len(data)] = data


def _xor(dst: Mem, src: Mem) -> None:
    """crypto_xor(dst, src, 16) as __crypto_xor does it: 8 bytes read from each, then
    written, at a time (what overlapping buffers see)."""
    for k in (0, 8):
        a, b = int.from_bytes(_rd(_at(dst, k), 8), "little"), \
            int.from_bytes(_rd(_at(src, k), 8), "little")
        _wr(_at(dst, k), (a ^ b).to_bytes(8, "little"))


class _Lskcipher:
    """crypto_lskcipher_{en,de}crypt with CRYPTO_LSKCIPHER_FLAG_FINAL over program memory,
    step by step as crypto/ecb.c and crypto/cbc.c take them: each block read whole and
    then written, IVs read where they are when used, so buffers that overlap come out
    as Linux leaves them. Whole blocks are written, then a remainder is -EINVAL."""

    def __init__(self, ctx: CryptoCtx, decrypt: bool) -> None:
        # imported on first use: its 10 ms are no part of loading a program that never
        # encrypts (pyxdp's first packet)
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        aes = Cipher(algorithms.AES(ctx.key), modes.ECB())
        self._block = aes.decryptor() if decrypt else aes.encryptor()
        self.mode, self.decrypt = ctx.mode, decrypt

    def _one(self, dst: Mem, src: Mem) -> None:
        _wr(dst, self._block.update(_rd(src)))

    def crypt(self, src: Mem, dst: Mem, length: int, iv: Mem | None) -> int:
        n = length // AES_BLOCK
        same = src[0] is dst[0] and src[1] == dst[1]
        blocks = [(_at(src, i * AES_BLOCK), _at(dst, i * AES_BLOCK)) for i in range(n)]
        if self.mode == "ecb" or iv is None:  # (a cbc context always has its IV)
            for s, d in blocks:
                self._one(d, s)
        elif not self.decrypt and same:  # crypto_cbc_encrypt_inplace
            cur = iv
            for s, _ in blocks:
                _xor(s, cur)
                self._one(s, s)
                cur = s
            if n:
                _wr(iv, _rd(cur))
        elif not self.decrypt:  # crypto_cbc_encrypt_segment
            for s, d in blocks:
                _xor(iv, s)
                self._one(d, iv)
                _wr(iv, _rd(d))
        elif same:  # crypto_cbc_decrypt_inplace: from the last block back
            if n:
                last = _rd(blocks[-1][0])
                for i in range(n - 1, -1, -1):
                    s = blocks[i][0]
                    self._one(s, s)
                    if i:
                        _xor(s, blocks[i - 1][0])
                _xor(blocks[0][0], iv)
                _wr(iv, last)
        else:  # crypto_cbc_decrypt_segment
            cur = iv
            for s, d in blocks:
                self._one(d, s)
                _xor(d, cur)
                cur = s
            if n:
                _wr(iv, _rd(cur))
        return -errno.EINVAL if length % AES_BLOCK else 0


# -- the kfuncs -----------------------------------------------------------------------------
# The arena object: struct bpf_crypto_ctx's usage refcount at 0 (the rest of Linux's struct,
# the type and tfm pointers, is the Python cipher below: no program reads them).
_OBJ_SIZE = 16
_DTOR = "bpf_crypto_ctx"
_CTXS: dict[int, CryptoCtx] = {}  # the live contexts' ciphers, by object address


def _destroy(view: Any, addr: int, end: int, roots: tuple[tuple[int, int], ...]) -> None:
    """crypto_free_cb: the last reference went; the arena frees the object after."""
    _CTXS.pop(addr, None)


register_root_free(_DTOR, _destroy)
_RECORD = record_index(((_DTOR, ((0, 0),)),))


def live_contexts() -> int:
    """Contexts made and not yet destroyed (for leak checks)."""
    return len(_CTXS)


def _ctx_create(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_crypto_ctx_create(params, params__sz, err)``: a context with one reference,
    or NULL with ``*err`` the error (left as it was on success, as Linux leaves it)."""
    size = r2 & 0xFFFF_FFFF
    params = vm.mem.read(r1, min(size, PARAMS.size)) if r1 else None
    ctx, err = crypto_ctx_create(params, size)
    addr = 0
    if ctx is not None:
        addr = arena().alloc(_OBJ_SIZE, 0, _RECORD)
        if addr:
            _CTXS[addr] = ctx
        else:  # kzalloc failing
            err = -errno.ENOMEM
    if err:
        vm.mem.store(r3, 4, err)
    return addr


def _ctx(addr: int) -> CryptoCtx:
    ctx = _CTXS.get(addr)
    if ctx is None:
        raise HelperFault(f"{addr:#x} is no live struct bpf_crypto_ctx")
    return ctx


def _ctx_acquire(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_crypto_ctx_acquire(ctx)``: another reference; NULL once the count is zero."""
    _ctx(r1)
    return arena().acquire(r1)


def _ctx_release(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_crypto_ctx_release(ctx)``: one reference fewer; the last runs the destructor."""
    _ctx(r1)
    arena().drop(r1)
    return 0


CRYPTO_CTX_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_crypto_ctx_create": _ctx_create,
    "bpf_crypto_ctx_acquire": _ctx_acquire,
    "bpf_crypto_ctx_release": _ctx_release,
}

# __bpf_dynptr_data(_rw) of the dynptr at an address: (vm, addr, length, rw) -> its memory
DynptrMem = Callable[["Interpreter", int, int, bool], Mem | None]


@dataclass
class _Dynptr:
    """A program's dynptr as :class:`CryptBuf`."""

    vm: Interpreter
    addr: int
    size: int
    rdonly: bool
    resolve: DynptrMem

    def data(self, length: int, rw: bool) -> Mem | None:
        return self.resolve(self.vm, self.addr, length, rw)


def make_crypt(resolve: DynptrMem, decrypt: bool) -> Callable[..., int]:
    """``bpf_crypto_encrypt``/``_decrypt(ctx, src, dst, siv__nullable)`` with dynptr
    memory found by ``resolve``."""
    def call(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        ctx = _ctx(r1)

        def buf(addr: int) -> _Dynptr:
            d = dynptr_load(vm, addr)
            return _Dynptr(vm, addr, d.size, d.rdonly, resolve)
        return crypto_crypt(ctx, buf(r2), buf(r3), buf(r4) if r4 else None, decrypt) \
            & 0xFFFF_FFFF_FFFF_FFFF
    return call
