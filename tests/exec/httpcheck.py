#!/usr/bin/python3
"""httpcheck.py - a small HTTP client for elastic-exec's health server tests.

  httpcheck.py get PORT PATH          print the status line's code, then the body
  httpcheck.py metrics PORT           fetch /metrics, check it strictly against the
                                 Prometheus text format 0.0.4 (and with
                                 prometheus_client's parser when installed),
                                 print one "name{labels} value" per sample
  httpcheck.py abuse PORT             garbage, oversized and slow clients; then
                                 /healthz must still answer quickly
Exit status 0 on success; a failed check prints why and exits 1.
"""
import math
import re
import socket
import sys
import time
import urllib.error
import urllib.request

HOST = "127.0.0.1"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def get(port, path, timeout=10):
    req = urllib.request.Request("http://%s:%d%s" % (HOST, port, path))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r"^(%s)(\{(?:%s)(?:,%s)*\})? (\S+)( -?\d+)?$" % (NAME, LABEL, LABEL))
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_value(v):
    if v in ("NaN", "+Inf", "-Inf"):
        return float(v.replace("Inf", "inf"))
    return float(v)


def check_metrics(text):
    """Strict checks of the text format; returns a list of (name, labels, value)."""
    if not text.endswith("\n"):
        fail("the exposition does not end with a newline")
    helps, types, samples, seen_families = {}, {}, [], []
    current = None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("# HELP "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not re.fullmatch(NAME, parts[2]):
                fail("line %d: bad HELP: %r" % (n, line))
            if parts[2] in helps:
                fail("line %d: second HELP for %s" % (n, parts[2]))
            helps[parts[2]] = parts[3]
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            if len(parts) != 4 or not re.fullmatch(NAME, parts[2]) or parts[3] not in TYPES:
                fail("line %d: bad TYPE: %r" % (n, line))
            if parts[2] in types:
                fail("line %d: second TYPE for %s" % (n, parts[2]))
            types[parts[2]] = parts[3]
            current = parts[2]
            seen_families.append(current)
            continue
        if line.startswith("#") or line == "":
            fail("line %d: unexpected line %r" % (n, line))
        m = SAMPLE.match(line)
        if not m:
            fail("line %d: not a sample: %r" % (n, line))
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        if name != current:
            fail("line %d: sample %s outside its family (TYPE %s)" % (n, name, current))
        try:
            v = parse_value(value)
        except ValueError:
            fail("line %d: bad value %r" % (n, value))
        if types[name] == "counter" and (v < 0 or math.isnan(v)):
            fail("line %d: counter %s is %r" % (n, name, value))
        samples.append((name, labels, value))
    for fam in seen_families:
        if fam not in helps:
            fail("family %s has no HELP" % fam)
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        print("# prometheus_client not installed: strict checks only", file=sys.stderr)
        return samples
    count = 0
    for fam in text_string_to_metric_families(text):
        count += len(fam.samples)
    if count != len(samples):
        fail("prometheus_client parsed %d samples, the strict parser %d" % (count, len(samples)))
    print("# prometheus_client parsed %d samples" % count, file=sys.stderr)
    return samples


def metrics(port):
    status, headers, body = get(port, "/metrics")
    if status != 200:
        fail("/metrics answered %d" % status)
    ctype = headers.get("Content-Type", "")
    if not ctype.startswith("text/plain") or "version=0.0.4" not in ctype:
        fail("/metrics Content-Type is %r" % ctype)
    for name, labels, value in check_metrics(body):
        print("%s%s %s" % (name, labels, value))


def raw(port, data, wait=5.0):
    """Send raw bytes; return what the server answers before closing (or wait)."""
    s = socket.create_connection((HOST, port), timeout=wait)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(4096)
            except socket.timeout:
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def status_of(answer):
    m = re.match(rb"HTTP/1\.[01] (\d+)", answer)
    return int(m.group(1)) if m else None


def abuse(port):
    st = status_of(raw(port, b"\x00\xff\xfe garbage \x01\r\n\r\n"))
    if st is not None and st < 400:
        fail("garbage got status %r" % st)
    print("garbage -> %s" % st)
    st = status_of(raw(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n"))
    if st is not None and st < 400:
        fail("a 100 KB header got status %r" % st)
    print("oversized header -> %s" % st)
    st = status_of(raw(port, b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"))
    if st != 405:
        fail("POST got %r, expected 405" % st)
    print("POST -> 405")
    st = status_of(raw(port, b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
    if st != 404:
        fail("an unknown path got %r, expected 404" % st)
    print("unknown path -> 404")
    # slow clients: half a request each, held open
    slow = []
    for _ in range(8):
        s = socket.create_connection((HOST, port), timeout=30)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        slow.append(s)
    t0 = time.time()
    st, _, body = get(port, "/healthz", timeout=5)
    dt = time.time() - t0
    if st != 200 or dt > 3:
        fail("/healthz with 8 slow clients: %r after %.2f s" % (st, dt))
    print("healthz with 8 slow clients -> 200 in %.3f s" % dt)
    # the server drops them (connection timeout 5 s)
    t0 = time.time()
    for s in slow:
        s.settimeout(30)
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass
        s.close()
    dt = time.time() - t0
    if dt > 20:
        fail("slow clients were held for %.1f s" % dt)
    print("slow clients dropped after %.1f s" % dt)


def main():
    cmd, port = sys.argv[1], int(sys.argv[2])
    if cmd == "get":
        status, _, body = get(port, sys.argv[3])
        print(status)
        sys.stdout.write(body)
    elif cmd == "metrics":
        metrics(port)
    elif cmd == "abuse":
        abuse(port)
    else:
        fail("unknown command " + cmd)


if __name__ == "__main__":
    main()
