#!/usr/bin/python3
"""gen-topologies.py - write the hwloc XML topologies the binding tests use

    /usr/bin/python3 gen-topologies.py OUTDIR

The files are committed; this script documents how they were made and
regenerates them.  Each is a machine we do not have, written in hwloc 2.x's
XML format (as `lstopo --of xml` writes it) so that `HWLOC_XMLFILE=FILE`
makes hwloc load it instead of the real machine:

  2s64c-8gpu.xml    2 sockets x 32 cores x 2 threads (Intel-style numbering:
                    PU g and g+64 are the threads of core g), one NUMA node and
                    one L3 per socket, 8 NVIDIA H100 on two PCI root complexes
                    (GPUs 0-3 under socket 0, 4-7 under socket 1) behind PCIe
                    switches, with CUDA ("cudaN") and NVML ("nvmlN") OS devices,
                    a ConnectX-6 NIC and the BMC's ASPEED VGA (not a GPU).
  2s64c-8gpu-slurm16.xml
                    the same node as a Slurm job with a 16-core cgroup sees it
                    (allowed_cpuset: cores 0-7 of each socket, both threads),
                    and as Debian's hwloc sees it: no CUDA/NVML plugins, so the
                    GPUs are bare PCI devices with DRM "cardN" OS devices.
  amd-4numa-l3.xml  1 AMD EPYC-style socket in NPS4 mode: 4 NUMA nodes (Group
                    objects), 2 L3 core complexes of 4 cores x 2 threads each
                    (AMD numbering: PU c and c+32), 4 NVIDIA A100 with NVML OS
                    devices, one per root complex, whose index order is NOT the
                    NUMA order (nvml0 hangs off NUMA 3 ... nvml3 off NUMA 0).
  small-1s4c.xml    a 1-socket, 4-core, 8-thread workstation without GPU.
  fake-2numa-2cpu.xml
                    2 NUMA nodes of 1 core each on PUs 0 and 1: with
                    HWLOC_THISSYSTEM=1 on a 2-cpu, 1-node machine, binding
                    memory to node 1 is refused by the OS (the refusal test).
"""
import os
import sys


class Ids:
    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1
        return self.n


def bitmap(s):
    """hwloc's bitmap text: 32-bit words, most significant first."""
    if not s:
        return "0x0"
    nwords = max(s) // 32 + 1
    words = []
    for w in range(nwords - 1, -1, -1):
        v = 0
        for b in range(32):
            if w * 32 + b in s:
                v |= 1 << b
        words.append("0x%08x" % v)
    return ",".join(words)


class Obj:
    def __init__(self, type_, attrs=None, infos=None, children=None, memory=None):
        self.type = type_
        self.attrs = attrs or {}
        self.infos = infos or []
        self.children = children or []
        self.memory = memory or []
        self.cpus = set()
        self.nodes = set()


def pu_obj(os_index):
    o = Obj("PU", {"os_index": os_index})
    o.cpus = {os_index}
    return o


def core_obj(os_index, pus):
    core = Obj("Core", {"os_index": os_index}, children=[pu_obj(p) for p in pus])
    l1i = Obj("L1iCache", {"cache_size": 32768, "depth": 1, "cache_linesize": 64,
                           "cache_associativity": 8, "cache_type": 2}, children=[core])
    l1 = Obj("L1Cache", {"cache_size": 49152, "depth": 1, "cache_linesize": 64,
                         "cache_associativity": 12, "cache_type": 1}, children=[l1i])
    return Obj("L2Cache", {"cache_size": 2097152, "depth": 2, "cache_linesize": 64,
                           "cache_associativity": 16, "cache_type": 0}, children=[l1])


def l3_obj(cores, size):
    return Obj("L3Cache", {"cache_size": size, "depth": 3, "cache_linesize": 64,
                           "cache_associativity": 16, "cache_type": 0}, children=cores)


def numa_obj(os_index, gib):
    o = Obj("NUMANode", {"os_index": os_index, "local_memory": gib << 30})
    o.nodes = {os_index}
    return o


def compute_sets(o):
    """Fill cpus/nodes bottom-up (I/O objects have none)."""
    if o.type in ("Bridge", "PCIDev", "OSDev"):
        for c in o.children:
            compute_sets(c)
        return set(), set()
    cpus, nodes = set(o.cpus), set(o.nodes)
    for c in o.children:
        cc, cn = compute_sets(c)
        cpus |= cc
        nodes |= cn
    for m in o.memory:
        nodes |= m.nodes
    o.cpus, o.nodes = cpus, nodes
    for m in o.memory:
        m.cpus = cpus
    return cpus, nodes


def emit(o, ids, out, indent, allowed=None):
    pad = "  " * indent
    a = ['type="%s"' % o.type]
    if "os_index" in o.attrs:
        a.append('os_index="%d"' % o.attrs["os_index"])
    if "subtype" in o.attrs:
        a.append('subtype="%s"' % o.attrs["subtype"])
    if o.type not in ("Bridge", "PCIDev", "OSDev"):
        a.append('cpuset="%s" complete_cpuset="%s"' % (bitmap(o.cpus), bitmap(o.cpus)))
        if allowed is not None:
            a.append('allowed_cpuset="%s"' % bitmap(allowed))
        a.append('nodeset="%s" complete_nodeset="%s"' % (bitmap(o.nodes), bitmap(o.nodes)))
        if allowed is not None:
            a.append('allowed_nodeset="%s"' % bitmap(o.nodes))
    a.append('gp_index="%d"' % ids())
    for k in ("name", "osdev_type", "local_memory", "cache_size", "depth", "cache_linesize",
              "cache_associativity", "cache_type", "bridge_type", "bridge_pci", "pci_busid",
              "pci_type", "pci_link_speed"):
        if k in o.attrs:
            a.append('%s="%s"' % (k, o.attrs[k]))
    inner = []
    for name, value in o.infos:
        inner.append('%s  <info name="%s" value="%s"/>' % (pad, name, value))
    if o.type == "NUMANode":
        inner.append('%s  <page_type size="4096" count="%d"/>' % (pad, o.attrs["local_memory"] // 4096))
    if not inner and not o.children and not o.memory:
        out.append("%s<object %s/>" % (pad, " ".join(a)))
        return
    out.append("%s<object %s>" % (pad, " ".join(a)))
    out.extend(inner)
    for m in o.memory:
        emit(m, ids, out, indent + 1)
    for c in o.children:
        emit(c, ids, out, indent + 1)
    out.append("%s</object>" % pad)


def write(path, machine, infos, allowed=None):
    compute_sets(machine)
    if allowed is None:
        allowed = machine.cpus
    machine.infos = infos
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
           '<topology version="2.0">']
    emit(machine, Ids(), out, 1, allowed=allowed)
    out.append("</topology>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def pci(busid, cls, vendor, device, children=None, subtype=None):
    attrs = {"pci_busid": busid,
             "pci_type": "%04x [%04x:%04x] [%04x:%04x] a1" % (cls, vendor, device, vendor, 0x16c1),
             "pci_link_speed": "31.507692"}
    if subtype:
        attrs["subtype"] = subtype
    return Obj("PCIDev", attrs, children=children)


def bridge(busrange, children, depth, busid=None):
    if busid is None:  # host bridge (root complex)
        attrs = {"bridge_type": "0-1", "depth": 0, "bridge_pci": "0000:[%s]" % busrange}
    else:
        attrs = {"bridge_type": "1-1", "depth": depth, "bridge_pci": "0000:[%s]" % busrange,
                 "pci_busid": busid, "pci_type": "0604 [1000:c030] [1000:a064] b0",
                 "pci_link_speed": "31.507692"}
    return Obj("Bridge", attrs, children=children)


def osdev(name, kind, infos, subtype=None):
    # hwloc 2.x osdev_type: 0 block, 1 GPU, 2 network, 3 openfabrics, 4 DMA, 5 coproc
    attrs = {"name": name, "osdev_type": {"gpu": 1, "net": 2, "ofed": 3, "coproc": 5}[kind]}
    if subtype:
        attrs["subtype"] = subtype
    return Obj("OSDev", attrs, infos=infos)


UUIDS = ["GPU-1c7d4a1e-56c2-3b4f-9d8e-%012x" % (0x5a0000 + i) for i in range(8)]


def nv_gpu(busid, index, model, device_id, cuda, nvml, drm_card=None):
    kids = []
    if cuda:
        kids.append(osdev("cuda%d" % index, "coproc",
                          [("Backend", "CUDA"), ("GPUVendor", "NVIDIA Corporation"),
                           ("GPUModel", model), ("CUDAGlobalMemorySize", "83886080"),
                           ("CUDAMultiProcessors", "132")], subtype="CUDA"))
    if nvml:
        kids.append(osdev("nvml%d" % index, "gpu",
                          [("Backend", "NVML"), ("GPUVendor", "NVIDIA Corporation"),
                           ("GPUModel", model), ("NVIDIAUUID", UUIDS[index])]))
    if drm_card is not None:
        kids.append(osdev("card%d" % drm_card, "gpu", [], subtype="Display"))
    return pci(busid, 0x0302, 0x10de, device_id, kids)


def two_socket(io, allowed_cores=None):
    """2 x 32 cores x 2 threads; io(pkg) returns that package's I/O subtrees."""
    pkgs = []
    for p in range(2):
        cores = [core_obj(k, [p * 32 + k, p * 32 + k + 64]) for k in range(32)]
        pkg = Obj("Package", {"os_index": p},
                  infos=[("CPUVendor", "GenuineIntel"), ("CPUFamilyNumber", "6"),
                         ("CPUModelNumber", "143"),
                         ("CPUModel", "Intel(R) Xeon(R) Platinum 8480+")],
                  children=[l3_obj(cores, 110100480)] + io(p),
                  memory=[numa_obj(p, 1024)])
        pkgs.append(pkg)
    allowed = None
    if allowed_cores is not None:
        allowed = set()
        for g in allowed_cores:
            allowed |= {g, g + 64}
    return Obj("Machine", {"os_index": 0}, children=pkgs), allowed


def dgx_io(cuda, nvml, drm):
    def io(p):
        base = 0x18 if p == 0 else 0x98
        gpus = []
        for i in range(4):
            g = p * 4 + i
            bus = base + 2 + 2 * i
            gpus.append(bridge("%02x-%02x" % (bus, bus), [
                nv_gpu("0000:%02x:00.0" % bus, g, "NVIDIA H100 80GB HBM3", 0x2330,
                       cuda, nvml, drm_card=(g + 1) if drm else None)],
                2, busid="0000:%02x:%02x.0" % (base + 1, i)))
        switch = bridge("%02x-%02x" % (base + 1, base + 9), gpus, 1,
                        busid="0000:%02x:00.0" % base)
        kids = [bridge("%02x-%02x" % (base, base + 0x17), [switch], 0)]
        if p == 0:
            nic = pci("0000:0c:00.0", 0x0207, 0x15b3, 0x101b, [
                osdev("ib0", "net", [("Address", "00:00:10:29:fe:80")]),
                osdev("mlx5_0", "ofed", [("NodeGUID", "b83f:d203:0054:1a2c")])])
            vga = pci("0000:03:00.0", 0x0300, 0x1a03, 0x2000,
                      [osdev("card0", "gpu", [], subtype="Display")] if drm else [])
            kids.append(bridge("0c-0c", [nic], 0))
            kids.append(bridge("02-03", [bridge("03-03", [vga], 1, busid="0000:02:00.0")], 0))
        return kids
    return io


def amd_4numa():
    # nvml index -> NUMA quadrant: 0->3, 1->2, 2->1, 3->0 (PCI bus order)
    quad_bus = {0: 0xc1, 1: 0x81, 2: 0x41, 3: 0x01}
    quad_gpu = {0: 3, 1: 2, 2: 1, 3: 0}
    groups = []
    for q in range(4):
        l3s = []
        for x in range(2):
            cores = []
            for k in range(4):
                c = q * 8 + x * 4 + k
                cores.append(core_obj(c, [c, c + 32]))
            l3s.append(l3_obj(cores, 33554432))
        bus = quad_bus[q]
        gpu = nv_gpu("0000:%02x:00.0" % bus, quad_gpu[q], "NVIDIA A100-PCIE-40GB", 0x20f1,
                     cuda=False, nvml=True)
        host = bridge("%02x-%02x" % (bus - 1, bus + 0x3e),
                      [bridge("%02x-%02x" % (bus, bus), [gpu], 1,
                              busid="0000:%02x:01.1" % (bus - 1))], 0)
        groups.append(Obj("Group", {}, children=l3s + [host], memory=[numa_obj(q, 128)]))
    pkg = Obj("Package", {"os_index": 0},
              infos=[("CPUVendor", "AuthenticAMD"), ("CPUFamilyNumber", "25"),
                     ("CPUModelNumber", "1"), ("CPUModel", "AMD EPYC 7543 32-Core Processor")],
              children=groups)
    return Obj("Machine", {"os_index": 0}, children=[pkg])


def small():
    cores = [core_obj(k, [k, k + 4]) for k in range(4)]
    pkg = Obj("Package", {"os_index": 0},
              infos=[("CPUVendor", "GenuineIntel"), ("CPUModel", "Intel(R) Xeon(R) E-2334")],
              children=[l3_obj(cores, 8388608)], memory=[numa_obj(0, 32)])
    return Obj("Machine", {"os_index": 0}, children=[pkg])


def fake_2numa():
    pkgs = []
    for p in range(2):
        pkgs.append(Obj("Package", {"os_index": p}, children=[core_obj(0, [p])],
                        memory=[numa_obj(p, 2)]))
    return Obj("Machine", {"os_index": 0}, children=pkgs)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    linux = [("Backend", "Linux"), ("OSName", "Linux"), ("Architecture", "x86_64"),
             ("hwlocVersion", "2.9.0")]

    m, _ = two_socket(dgx_io(cuda=True, nvml=True, drm=False))
    write(os.path.join(outdir, "2s64c-8gpu.xml"), m, linux + [("HostName", "gpu-node")])

    slurm = list(range(0, 8)) + list(range(32, 40))
    m, allowed = two_socket(dgx_io(cuda=False, nvml=False, drm=True), allowed_cores=slurm)
    write(os.path.join(outdir, "2s64c-8gpu-slurm16.xml"), m,
          linux + [("HostName", "gpu-node"), ("LinuxCgroup", "/slurm/uid_1000/job_42/step_0")],
          allowed=allowed)

    write(os.path.join(outdir, "amd-4numa-l3.xml"), amd_4numa(), linux + [("HostName", "epyc")])
    write(os.path.join(outdir, "small-1s4c.xml"), small(), linux + [("HostName", "ws")])
    write(os.path.join(outdir, "fake-2numa-2cpu.xml"), fake_2numa(), linux + [("HostName", "fake")])


if __name__ == "__main__":
    main()
