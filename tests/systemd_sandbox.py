"""Runs a command the way a systemd unit's sandbox would, for machines
without systemd as PID 1: reads the unit and its drop-ins, and applies what
changes how a daemon behaves —

  User=                      an unprivileged uid and gid
  NoNewPrivileges=, CapabilityBoundingSet= (empty)
                             setpriv: no new privileges, no capabilities
  SystemCallFilter=, SystemCallErrorNumber=
                             a seccomp allow list expanded from the same
                             groups by `systemd-analyze syscall-filter`;
                             everything else fails with the errno
  RestrictAddressFamilies=   socket() of any other family fails
                             (EAFNOSUPPORT, as systemd does)
  MemoryDenyWriteExecute=    no writable+executable mappings
  ProtectSystem=strict       every mount read-only but /proc, /sys, /dev
                             and the directories named writable

The file-system views (PrivateTmp=, ProtectHome=, Protect*=) are left out:
they hide paths, and the daemons are pointed at theirs explicitly.

Used as a module (sandboxed_argv) by the tests, and as a program by the
command it builds: `python3 systemd_sandbox.py FILTER.json -- ARGV...`
loads the seccomp filter and execs ARGV.
"""

import errno
import json
import os
import socket
import subprocess
import sys
import tempfile


def unit_settings(*paths):
    """{key: [values]} from a unit file and its drop-ins, in order; an empty
    assignment resets a list, as systemd does."""
    settings = {}
    for path in paths:
        with open(path) as f:
            text = f.read().replace("\\\n", " ")
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", "[")) or "=" not in line:
                continue
            key, value = line.split("=", 1)
            if value == "":
                settings[key] = []
            else:
                settings.setdefault(key, []).append(value)
    return settings


def expand_syscall_filter(entries):
    """Syscall names allowed by SystemCallFilter= entries (allow lists only)."""
    names = set()
    pending = [word for entry in entries for word in entry.split()]
    seen_groups = set()
    while pending:
        word = pending.pop()
        if word.startswith("~"):
            raise ValueError(f"deny lists are not emulated: {word}")
        if not word.startswith("@"):
            names.add(word)
            continue
        if word in seen_groups:
            continue
        seen_groups.add(word)
        listing = subprocess.run(["systemd-analyze", "syscall-filter", word],
                                 capture_output=True, text=True, check=True).stdout
        for line in listing.splitlines()[1:]:
            line = line.strip()
            if line and not line.startswith("#"):
                pending.append(line)
    return names


def filter_spec(settings):
    """What the seccomp filter needs, as JSON-able data."""
    families = []
    for entry in settings.get("RestrictAddressFamilies", []):
        for word in entry.split():
            families.append(int(getattr(socket, word)))
    return {
        "syscalls": sorted(expand_syscall_filter(settings.get("SystemCallFilter", []))),
        "errno": getattr(errno, settings.get("SystemCallErrorNumber", ["EPERM"])[-1]),
        "address_families": families,
        "memory_deny_write_execute": settings.get("MemoryDenyWriteExecute", ["no"])[-1] == "yes",
    }


def sandboxed_argv(unit_paths, argv, uid, gid, writable, workdir):
    """argv wrapped in the unit's sandbox (run as root: it mounts and drops
    privileges itself). `writable`: directories left writable; `workdir`: a
    directory the unprivileged user can read, for the filter and this
    script."""
    settings = unit_settings(*unit_paths)
    assert settings.get("NoNewPrivileges") == ["yes"], "the unit sets NoNewPrivileges"
    assert settings.get("CapabilityBoundingSet") == [], "the unit drops every capability"
    # One file per command: a daemon reads its own while the next is written.
    descriptor, spec_path = tempfile.mkstemp(prefix="filter-", suffix=".json", dir=workdir)
    with os.fdopen(descriptor, "w") as f:
        json.dump(filter_spec(settings), f)
    os.chmod(spec_path, 0o644)
    launcher = os.path.join(workdir, "systemd_sandbox.py")
    if not os.path.exists(launcher):
        with open(__file__) as src, open(launcher, "w") as dst:
            dst.write(src.read())
    mounts = []
    if settings.get("ProtectSystem") == ["strict"]:
        # Writable binds first: a bind of a read-only mount would be read-only.
        mounts = [f"mount --bind {d} {d}" for d in writable]
        keep = " ".join(["/proc", "/sys", "/dev", *writable])
        mounts.append(
            "for m in $(awk '{print $5}' /proc/self/mountinfo | sort -u); do "
            f"case \" {keep} \" in *\" $m \"*) continue;; esac; "
            "case $m in /proc/*|/sys/*|/dev/*) continue;; esac; "
            "mount -o remount,bind,ro $m $m 2>/dev/null || true; done")
    script = " && ".join(mounts + [
        f"exec setpriv --reuid={uid} --regid={gid} --clear-groups --inh-caps=-all "
        f"--bounding-set=-all --no-new-privs /usr/bin/python3 -B {launcher} {spec_path} -- \"$@\""])
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
            "sandbox", *argv]


def exec_filtered(spec_path, argv):
    import seccomp  # Debian's python3-seccomp

    with open(spec_path) as f:
        spec = json.load(f)
    fail = seccomp.ERRNO(spec["errno"])
    rules = seccomp.SyscallFilter(defaction=fail)
    for name in spec["syscalls"]:
        if name in ("socket", "mmap", "mprotect", "pkey_mprotect"):
            continue
        try:
            rules.add_rule(seccomp.ALLOW, name)
        except (RuntimeError, ValueError):
            pass  # not a syscall on this architecture
    if "socket" in spec["syscalls"]:
        for family in spec["address_families"] or []:
            rules.add_rule(seccomp.ALLOW, "socket", seccomp.Arg(0, seccomp.EQ, family))
        # Any other family: EAFNOSUPPORT, whatever the filter's errno.
        for family in range(0, 46):
            if family not in spec["address_families"]:
                rules.add_rule(seccomp.ERRNO(errno.EAFNOSUPPORT), "socket",
                               seccomp.Arg(0, seccomp.EQ, family))
    write, execute = 0x2, 0x4  # PROT_WRITE, PROT_EXEC
    for name in ("mmap", "mprotect", "pkey_mprotect"):
        if name not in spec["syscalls"]:
            continue
        if not spec["memory_deny_write_execute"]:
            rules.add_rule(seccomp.ALLOW, name)
        elif name == "mmap":
            # Writable or executable, not both.
            rules.add_rule(seccomp.ALLOW, name, seccomp.Arg(2, seccomp.MASKED_EQ, execute, 0))
            rules.add_rule(seccomp.ALLOW, name, seccomp.Arg(2, seccomp.MASKED_EQ, write, 0))
        else:
            rules.add_rule(seccomp.ALLOW, name, seccomp.Arg(2, seccomp.MASKED_EQ, execute, 0))
    rules.load()
    os.execv(argv[0], argv)


if __name__ == "__main__":
    separator = sys.argv.index("--")
    exec_filtered(sys.argv[1], sys.argv[separator + 1:])
