#!/usr/bin/env python3
"""tsan-classify.py - sort ThreadSanitizer reports (scripts/tsan-check.sh)

   tsan-classify.py REPORT-FILE...

Prints "N M": N reports to read, M reports whose every access frame lies in
Debian's libpmix 4.2.2 (tests/tsan.supp, entry 3: PMIx completes one local
fence twice when clients of it are lost back to back; both accesses are its
own, in its progress thread).  Such a report has no symbols (libpmix ships
none), so a suppression could only name the whole module, and that would
also hide a race in elastic-exec's upcalls, which PMIx's thread calls with
libpmix frames below them.  Here a report is set aside only when no frame of
either access stack, ours or any other library's, is outside libpmix and
ThreadSanitizer's own interceptors.
"""
import re
import sys

FRAME = re.compile(r"^\s+#\d+ .*\((?P<module>[^()+]+)\+0x[0-9a-f]+\)\s*$")


def access_frames(report):
    """The frames of the access stacks: the blocks before the first
    'Thread T... created', 'Mutex ... created' or 'Location is' line."""
    frames = []
    for line in report.splitlines():
        s = line.strip()
        if s.startswith(("Thread T", "Mutex M", "Location is", "SUMMARY:")):
            break
        m = FRAME.match(line)
        if m:
            frames.append(m.group("module"))
        elif re.match(r"^\s+#\d+ ", line):
            frames.append("?")  # a frame without a module: not ours to judge
    return frames


def inside_libpmix(report):
    mods = access_frames(report)
    pmix = [m for m in mods if m.endswith("libpmix.so.2")]
    rest = [m for m in mods if not m.endswith("libpmix.so.2") and "libtsan" not in m]
    return bool(pmix) and not rest


def main(paths):
    read = libpmix = 0
    for path in paths:
        text = open(path, errors="replace").read()
        for rep in text.split("==================")[1:]:
            if "WARNING: ThreadSanitizer" not in rep:
                continue
            if inside_libpmix(rep):
                libpmix += 1
            else:
                read += 1
    print(read, libpmix)


if __name__ == "__main__":
    main(sys.argv[1:])
