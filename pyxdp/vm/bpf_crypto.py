"""BPF crypto contexts (``kernel/bpf/crypto.c``) of the ``"skcipher"`` type
(``crypto/bpf_crypto_skcipher.c``), whose ciphers are the crypto API's lskciphers
(``crypto/ecb.c``, ``crypto/cbc.c`` over ``aes``).

``bpf_crypto_ctx_create`` checks a ``struct bpf_crypto_params`` in Linux 6.18's
order and answers with its error codes; a context is refcounted
(``bpf_crypto_ctx_acquire``/``_release``). ``bpf_crypto_encrypt``/``_decrypt``
(``bpf_crypto_crypt``) take their source, destination and IV ("siv": IV and
state, ``ivsize + statesize`` bytes) as dynptrs, here anything with a size, a
read-only bit and ``__bpf_dynptr_data`` (:class:`CryptBuf`). The AES blocks
themselves are the ``cryptography`` library's.

As the lskcipher templates do, a length that is not a whole number of blocks
still has its whole blocks written (and a CBC IV advanced past them) before the
call answers ``-EINVAL``.
"""

from __future__ import annotations

import errno
import struct
from dataclasses import dataclass
from typing import Protocol

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

__all__ = ["AES_BLOCK", "PARAMS", "CryptBuf", "CryptoCtx", "crypto_crypt",
           "crypto_ctx_acquire", "crypto_ctx_create", "crypto_ctx_release"]

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
    """``struct bpf_crypto_ctx``: the cipher (mode and key), ``siv_len`` and ``usage``."""

    mode: str
    key: bytes
    siv_len: int
    usage: int = 1


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


def crypto_ctx_acquire(ctx: CryptoCtx) -> CryptoCtx | None:
    """bpf_crypto_ctx_acquire: a new reference, or None once the last one is gone."""
    if ctx.usage == 0:
        return None
    ctx.usage += 1
    return ctx


def crypto_ctx_release(ctx: CryptoCtx) -> bool:
    """bpf_crypto_ctx_release: drop a reference; True when it was the last."""
    ctx.usage -= 1
    return ctx.usage == 0


class CryptBuf(Protocol):
    """A dynptr as bpf_crypto_crypt sees it (``struct bpf_dynptr_kern``)."""

    @property
    def size(self) -> int: ...

    @property
    def rdonly(self) -> bool: ...

    def data(self, length: int, rw: bool) -> memoryview | None:
        """``__bpf_dynptr_data`` (``rw``: ``_data_rw``): its first ``length`` bytes
        in place, or None where they are not one piece of memory."""
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
    return _lskcipher(ctx, bytes(psrc), pdst, piv, decrypt)


def _lskcipher(ctx: CryptoCtx, src: bytes, dst: memoryview, iv: memoryview | None,
               decrypt: bool) -> int:
    """crypto_lskcipher_{en,de}crypt with CRYPTO_LSKCIPHER_FLAG_FINAL: the whole blocks
    written, then -EINVAL for a remainder."""
    whole = len(src) - len(src) % AES_BLOCK
    if ctx.mode == "cbc" and iv is None:  # siv_len checked: cannot happen
        return -errno.EINVAL
    if whole:
        aes = algorithms.AES(ctx.key)
        cipher = Cipher(aes, modes.CBC(bytes(iv))) if iv is not None else \
            Cipher(aes, modes.ECB())
        op = cipher.decryptor() if decrypt else cipher.encryptor()
        out = op.update(src[:whole])
        dst[:whole] = out
        if iv is not None:  # the chain goes on from the last ciphertext block
            iv[:] = (src if decrypt else out)[whole - AES_BLOCK:whole]
    return -errno.EINVAL if len(src) != whole else 0
