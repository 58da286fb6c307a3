"""A command run without a shell, executing nothing but its own program (access setting ``tools``).

Inside the sandbox, in place of ``bash -c <command>``, the sandbox's ``python3`` runs
:data:`LAUNCHER` (given with ``-c``: no file of the harness's is bound for it) with the command's
words. It finds the program on the sandbox's ``PATH``, and, where the kernel has Landlock
(:func:`landlock_abi`), restricts execution for itself and everything it starts to the
program's file, its ``#!`` interpreter (and, for ``#!/usr/bin/env NAME``, that program) and
the ELF loader each of them names; then it ``execve``\\ s the program. After that an ``execve`` of
any other file (``/bin/sh``, ``python3 -c``, a copy written to ``/tmp``, a memfd) fails with
``EACCES``. Landlock does not see what the loader maps, so the shells are also masked in the
sandbox (:func:`imagebench.sandbox.access.shell_masks`): the loader run directly has no shell to load.

Without Landlock the masks alone hold: no shell, but other programs of the system can run; the
run records which (``exec`` in its access evidence).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imagebench.sandbox.policy import SandboxPolicy

#: exit status of the launcher when it could not start the program (the program never ran)
LAUNCH_FAILED = 127

LAUNCHER = r"""
import ctypes, os, shutil, struct, sys

def fail(why):
    sys.stderr.write("imagebench launcher: " + why + "\n")
    sys.exit(127)

def elf_interp(path):
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:
                return None
            end = "<" if head[5] == 1 else ">"
            phoff, = struct.unpack(end + "Q", head[32:40])
            phentsize, phnum = struct.unpack(end + "HH", head[54:58])
            for i in range(phnum):
                fh.seek(phoff + i * phentsize)
                ph = fh.read(56)
                if struct.unpack(end + "I", ph[:4])[0] == 3:  # PT_INTERP
                    off, = struct.unpack(end + "Q", ph[8:16])
                    size, = struct.unpack(end + "Q", ph[32:40])
                    fh.seek(off)
                    return fh.read(size).rstrip(b"\0").decode()
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None

def allowed(program, env):
    out, todo = [], [program]
    while todo and len(out) < 8:
        path = os.path.realpath(todo.pop())
        if path in out:
            continue
        out.append(path)
        try:
            with open(path, "rb") as fh:
                first = fh.read(256)
        except OSError:
            continue
        if first[:2] == b"#!":
            words = first[2:].split(b"\n")[0].decode("utf-8", "replace").split()
            if words:
                todo.append(words[0])
                if os.path.basename(words[0]) == "env":
                    rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
                    if rest:
                        found = shutil.which(rest[0], path=env.get("PATH"))
                        if found:
                            todo.append(found)
        interp = elf_interp(path)
        if interp:
            todo.append(interp)
    return out

def restrict(paths):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    attr = struct.pack("=Q", 1)  # handled_access_fs: LANDLOCK_ACCESS_FS_EXECUTE
    buf = ctypes.create_string_buffer(attr, len(attr))
    rs = libc.syscall(444, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if rs < 0:
        fail("Landlock could not make a ruleset (errno %d)" % ctypes.get_errno())
    for path in paths:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        rule = ctypes.create_string_buffer(struct.pack("=Qi", 1, fd), 12)
        if libc.syscall(445, ctypes.c_int(rs), ctypes.c_int(1), rule, ctypes.c_uint32(0)) < 0:
            fail("Landlock refused a rule for %s (errno %d)" % (path, ctypes.get_errno()))
        os.close(fd)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        fail("no_new_privs could not be set")
    if libc.syscall(446, ctypes.c_int(rs), ctypes.c_uint32(0)) < 0:
        fail("Landlock could not restrict this process (errno %d)" % ctypes.get_errno())
    os.close(rs)

def main(argv):
    mode, words = argv[0], argv[1:]
    env = dict(os.environ)
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    if not words:
        fail("no program to run")
    program = words[0] if "/" in words[0] else shutil.which(words[0], path=env.get("PATH"))
    if not program or not os.path.isfile(program):
        fail("program %r not found on PATH" % words[0])
    if mode == "landlock":
        restrict(allowed(program, env))
    try:
        os.execve(program, words, env)
    except OSError as exc:
        fail("could not run %s: %s" % (words[0], exc.strerror or exc))

main(sys.argv[1:])
"""


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none; the launcher then masks shells only)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        version = int(
            libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
        )  # LANDLOCK_CREATE_RULESET_VERSION
    except (OSError, AttributeError):
        return 0
    return version if version > 0 else 0


def exec_rule() -> str:
    """How execution is confined under a setting without code: ``landlock`` or ``shells-masked``."""
    return "landlock" if landlock_abi() > 0 else "shells-masked"


def launch_argv(python: str, words: list[str]) -> list[str]:
    """The argv run inside the sandbox in place of ``bash -c``: the launcher and the command's words."""
    return [python, "-I", "-S", "-c", LAUNCHER, exec_rule(), *words]


def program_argv(policy: SandboxPolicy, bash: str, command: str) -> list[str]:
    """What runs ``command`` inside the sandbox: ``bash -c command``; under an access setting
    without code (``tools``) the launcher with the command's words (no shell)."""
    if policy.access is not None:
        from imagebench.sandbox.access import command_words, parse_access

        if not parse_access(policy.access).code:
            return launch_argv(sandbox_python(policy.env_prefix), command_words(command))
    return [bash, "-c", command]


def sandbox_python(env_prefix: str | os.PathLike[str] | None) -> str:
    """The ``python3`` the sandbox shows (the tool environment's, else the harness's interpreter)."""
    if env_prefix is not None:
        return os.path.join(os.fspath(env_prefix), "bin", "python3")
    return sys.executable


__all__ = ["LAUNCHER", "LAUNCH_FAILED", "exec_rule", "landlock_abi", "launch_argv", "program_argv", "sandbox_python"]
