"""A seccomp filter that keeps a sandboxed subject from making user namespaces.

Without it a subject can ``unshare -U`` and hold every capability inside a namespace of its own:
no wall falls (the sandbox's mounts are locked, and the host's uid map holds), but "no capability
and no way to gain one" would not be true, and where memory is held by ``RLIMIT_AS`` alone (no
cgroup) a tmpfs mounted in that namespace would hold memory outside the limit. The filter (a
classic BPF program handed to bwrap with ``--seccomp FD``) answers ``EPERM`` to ``unshare`` and
``clone`` with ``CLONE_NEWUSER``, ``ENOSYS`` to ``clone3`` (whose flags a filter cannot read; the C
library then falls back to ``clone``), and ``ENOSYS`` to every system call of another ABI (the
i386 and x32 ones on x86_64), which could otherwise reach the same calls by other numbers.
"""

from __future__ import annotations

import os
import platform
import struct
import tempfile

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_NR, _ARCH, _ARG0 = 0, 4, 16
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_EPERM, _ENOSYS = 1, 38
_CLONE_NEWUSER = 0x10000000
_X32_BIT = 0x40000000
# machine -> (AUDIT_ARCH, unshare, clone, clone3)
_ABIS = {
    "x86_64": (0xC000003E, 272, 56, 435),
    "aarch64": (0xC00000B7, 97, 220, 435),
}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes:
    """The filter for ``machine`` (default: this one); ValueError for a machine it does not know."""
    machine = machine or platform.machine()
    if machine not in _ABIS:
        raise ValueError(f"no seccomp filter for machine {machine!r} (known: {sorted(_ABIS)})")
    arch, unshare, clone, clone3 = _ABIS[machine]
    ops = [
        _op(_LD_W_ABS, _ARCH),  # 0
        _op(_JEQ, arch, 1, 0),  # 1: native ABI? skip the deny
        _op(_RET, _ERRNO | _ENOSYS),  # 2: another ABI
        _op(_LD_W_ABS, _NR),  # 3
        _op(_JGE, _X32_BIT, 0, 1),  # 4: x32 numbers (x86_64): deny
        _op(_RET, _ERRNO | _ENOSYS),  # 5
        _op(_JEQ, clone3, 0, 1),  # 6
        _op(_RET, _ERRNO | _ENOSYS),  # 7
        _op(_JEQ, unshare, 1, 0),  # 8: unshare -> check its flags
        _op(_JEQ, clone, 0, 3),  # 9: clone -> check its flags; else allow
        _op(_LD_W_ABS, _ARG0),  # 10: the flags (the low 32 bits)
        _op(_JSET, _CLONE_NEWUSER, 0, 1),  # 11
        _op(_RET, _ERRNO | _EPERM),  # 12
        _op(_RET, _ALLOW),  # 13
    ]
    return b"".join(ops)


def program_fd() -> int:
    """An open descriptor holding :func:`program`, read from its start (for ``bwrap --seccomp FD``)."""
    fh = tempfile.TemporaryFile()
    fh.write(program())
    fh.flush()
    fd = os.dup(fh.fileno())
    fh.close()
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, False)
    return fd
