#!/usr/bin/env python3
"""Checks convtune's AVX-512 kernels on any x86-64 machine, AVX-512 or not.

Each config of each own CPU algorithm (one-shot, and packed where it packs) runs one call with
threads = 1 under Bochs, the x86 emulator, through the bochscpu module (PyPI bochscpu-python),
whose CPUID reports AVX-512F/BW/VL/DQ: build/tests/avx512_snapshot (tests/emulate/snapshot.cpp)
prepares the call natively and dumps the process, this script maps the dump into the emulator
and runs the call there, and the tool compares the output with the float64 reference under the
algorithm's own error bound. Use scripts/emulate-avx512.sh, which installs what this needs.

Problems: a fixed set of small ones covering every kernel family, or with --layers every layer of
layers/ at batch 1, its image shrunk to at most CAP GFLOP (channels, kernel, stride,
padding, dilation and groups kept).

Exit status: 0 when every emulated call matched the reference, 1 otherwise. A call that stops at
an instruction Bochs 2.7 does not emulate (a gather whose index register is zmm16-31, which it
takes for invalid; real CPUs run it) is reported as not checked, not as a failure.
"""
import argparse
import concurrent.futures
import ctypes
import mmap
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

# ALGO:CONFIG runs that config only: cpu.im2col_gemm's other configs are BLIS's kernels.
ALGOS = ["cpu.direct", "cpu.direct_kvec", "cpu.winograd", "cpu.fft", "cpu.pointwise", "cpu.depthwise",
         "cpu.im2col_gemm:oc6ow49_avx512"]

# Small problems that reach every kernel family's AVX-512 code: 3x3, 1x1, strided, grouped,
# depthwise, dilated, large kernels (FFT), few channels, small and odd images, batch 2.
QUICK = [
    "mb1ic16ih12oc16kh3ph1",
    "mb2ic24ih17iw19oc40kh3kw3ph1pw1",
    "mb1ic32ih14oc48kh1",
    "mb1ic32ih28oc64kh1sh2",
    "mb1ic3ih67oc24kh11sh4",
    "mb1ic3ih40oc16kh7sh2ph3",
    "g2mb1ic32ih13oc32kh3ph1",
    "mb1ic16ih15oc32kh3sh2ph1",
    "mb1ic16ih20oc16kh3ph2dh1",
    "g32mb1ic32ih14oc32kh3ph1",
    "g24mb1ic24ih15oc24kh3sh2ph1",
    "g16mb1ic16ih20oc16kh5ph2",
    "mb1ic8ih24oc8kh7ph3",
    "mb1ic4ih30oc4kh13ph6",
    "g8mb1ic8ih40oc8kh31ph15",
    "mb1ic64ih7oc64kh3ph1",
    "mb1ic48ih10oc40kh3ph1",
    "mb1ic64ih8oc256kh1",
]

PAGE = 4096
PT_PA = 0x10_0000  # the page tables, then the dump's pages from DATA_PA on
DATA_PA = 0x1000_0000
SYSCALL_VA = 0x1000  # tests/emulate/syscalls.s
MMAP_VA, MMAP_BYTES = 0x7E00_0000_0000, 1 << 30  # its anonymous mmap region (zero pages)

STATUS = {0: "did not finish", 1: "ok", 3: "threw", 5: "configs", 6: "packs nothing", 7: "not applicable"}


def shrunk_layers(tool, cap_gflop):
    """{descriptor: layer name} from the tool's `layers` mode."""
    out = subprocess.run([tool, "layers", str(cap_gflop)], capture_output=True, text=True, check=True).stdout
    return dict(line.split("\t", 1) for line in out.splitlines())


def emulate(d, syscalls):
    """Runs the call in snapshot directory d; writes y.bin, scale.bin, bound.bin when it finished."""
    import bochscpu
    import bochscpu.cpu
    import bochscpu.memory as mem

    index = open(os.path.join(d, "index.bin"), "rb").read()
    (magic, entry, done, context, rsp, fs_base, y_va, y_bytes, scale_va, off_status, off_message,
     off_bound, off_isa) = struct.unpack_from("<13Q", index)
    assert magic == 0x534E4150
    ranges, pos = [], 104
    while pos < len(index):  # lo, hi, from_file, offset, path length, path
        lo, hi, from_file, offset, n = struct.unpack_from("<5Q", index, pos)
        ranges.append((lo, hi, index[pos + 40:pos + 40 + n].decode() if from_file else None, offset))
        pos += 40 + n
    dump_file = open(os.path.join(d, "dump.bin"), "rb")
    dump = mmap.mmap(dump_file.fileno(), 0, access=mmap.ACCESS_READ) if os.path.getsize(dump_file.name) else b""

    pt = mem.PageMapLevel4Table()
    source = []  # per guest page: (file or None for the dump, byte offset)
    dumped = 0
    for lo, hi, path, offset in ranges:
        for va in range(lo, hi, PAGE):
            pt.insert(va, DATA_PA + len(source) * PAGE, 1)
            if path:
                source.append((path, offset + va - lo))
            else:
                source.append((None, dumped))
                dumped += PAGE
    assert dumped == len(dump)
    pages = len(source)
    files = {}
    syscall_pa = DATA_PA + pages * PAGE
    mmap_pa = syscall_pa + PAGE
    assert all(hi <= SYSCALL_VA or lo > SYSCALL_VA for lo, hi, _, _ in ranges)
    assert all(hi <= MMAP_VA or lo >= MMAP_VA + MMAP_BYTES for lo, hi, _, _ in ranges)
    pt.insert(SYSCALL_VA, syscall_pa, 1)
    for i in range(MMAP_BYTES // PAGE):
        pt.insert(MMAP_VA + i * PAGE, mmap_pa + i * PAGE, 1)

    session = bochscpu.Session()

    # Guest pages come in when first touched: the dump's, or zeros for the mmap region.
    def missing_page(gpa):
        gpa -= gpa % PAGE
        hva = mem.allocate_host_page()
        if DATA_PA <= gpa < syscall_pa:
            path, at = source[(gpa - DATA_PA) // PAGE]
            if path is None:
                data = dump[at:at + PAGE]
            else:  # the mapping may end past the file's end: zeros there, as in the process
                f = files.setdefault(path, open(path, "rb"))
                f.seek(at)
                data = f.read(PAGE)
            ctypes.memmove(hva, data, len(data))
        elif not mmap_pa <= gpa < mmap_pa + MMAP_BYTES:
            raise RuntimeError(f"guest physical page {gpa:#x} is outside the snapshot")
        mem.page_insert(gpa, hva)

    session.missing_page_handler = missing_page
    syscall_hva = mem.allocate_host_page()
    mem.page_insert(syscall_pa, syscall_hva)
    code = open(syscalls, "rb").read()
    ctypes.memmove(syscall_hva, code, len(code))
    for hva, gpa in pt.commit(PT_PA):
        assert gpa < DATA_PA
        mem.page_insert(gpa, hva)

    st = bochscpu.State()
    bochscpu.cpu.set_long_mode(st)
    st.cr3 = PT_PA
    st.cr0 = (st.cr0 | 1 << 1) & ~(1 << 2)  # MP on, EM off: SSE and x87
    st.cr4 = st.cr4 | 1 << 9 | 1 << 10 | 1 << 18  # OSFXSR, OSXMMEXCPT, OSXSAVE
    st.xcr0 = 0xE7  # x87, SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
    st.efer = st.efer | 1  # SCE: syscall enters SYSCALL_VA
    st.star = 0x23 << 48 | 0x10 << 32  # sysret back to CS 0x33, SS 0x2b
    st.lstar = SYSCALL_VA
    st.sfmask = 0
    st.mxcsr = 0x1F80
    st.fpcw = 0x37F
    st.fptw = 0xFFFF  # x87 registers empty (the full tag word: 0 would mean all in use)
    st.rip, st.rsp, st.rdi, st.rflags = entry, rsp, context, 0x202

    def segment(selector, attr, base=0):
        s = bochscpu.Segment()
        s.present, s.selector, s.base, s.limit, s.attr = True, selector, base, 0xFFFFFFFF, attr
        return s

    st.cs = segment(0x33, 0x22FB)
    st.ds, st.es, st.ss, st.gs = (segment(0x2B, 0xCF3) for _ in range(4))
    st.fs = segment(0x2B, 0xCF3, fs_base)
    session.cpu.state = st

    stop = {}

    def exception(s, cpu, vector, error):
        stop.update(vector=vector, rip=s.cpu.state.rip, rax=s.cpu.state.rax)
        s.stop()

    hook = bochscpu.Hook()
    hook.exception = exception
    t0 = time.time()
    session.run([hook])

    def read(va, n):
        return bytes(mem.virt_read(PT_PA, va, n))

    status, = struct.unpack("<i", read(context + off_status, 4))
    isa, = struct.unpack("<i", read(context + off_isa, 4))
    message = read(context + off_message, 4096).split(b"\0")[0].decode(errors="replace")
    finished = done <= stop.get("rip", 0) < done + 16  # the hlt in avx512_snapshot_done
    if status == 1 and finished:
        open(os.path.join(d, "y.bin"), "wb").write(read(y_va, y_bytes))
        open(os.path.join(d, "scale.bin"), "wb").write(read(scale_va, y_bytes // 4 * 8))
        open(os.path.join(d, "bound.bin"), "wb").write(read(context + off_bound, 8))
    print(f"status={status} isa={isa} finished={int(finished)} vector={stop.get('vector')} "
          f"rip={stop.get('rip', 0):#x} rax={stop.get('rax', 0)} seconds={time.time() - t0:.1f}")
    print("message=" + message)
    sys.stdout.flush()
    os._exit(0)  # bochscpu's objects do not survive the interpreter's teardown


def where(d, rip):
    """Library+offset of rip, and whether the instruction before it is a VSIB access with an
    index register Bochs does not emulate (zmm16-31)."""
    for line in open(os.path.join(d, "maps.txt")):
        parts = line.split()
        lo, hi = (int(v, 16) for v in parts[0].split("-"))
        if lo <= rip < hi and len(parts) > 5 and parts[5].startswith("/"):
            lib = parts[5]
            base = min(int(l.split("-")[0], 16) for l in open(os.path.join(d, "maps.txt")) if l.split()[-1] == lib)
            off = rip - base
            dis = subprocess.run(["objdump", "-d", f"--start-address={max(0, off - 16)}",
                                  f"--stop-address={off + 1}", lib], capture_output=True, text=True).stdout
            high_index = any(re.search(r"(gather|scatter)\w*\s.*\(.*%zmm(1[6-9]|2\d|3[01])", l) for l in dis.splitlines())
            return f"{os.path.basename(lib)}+{off:#x}", high_index
    return f"{rip:#x}", False


def run_one(args, desc, algo, config, packed):
    try:
        return run_checked(args, desc, algo, config, packed)
    except Exception as e:  # a timeout, a missing tool or file: that call failed, the others go on
        return "FAIL", f"{type(e).__name__}: {e}"


def run_checked(args, desc, algo, config, packed):
    with tempfile.TemporaryDirectory(prefix="emulate-") as d:
        env = dict(os.environ, OMP_NUM_THREADS="1", LD_BIND_NOW="1")
        env.pop("LD_PRELOAD", None)
        env.pop("CONVTUNE_MAX_ISA", None)  # the point is the widest ISA
        snap = subprocess.run([args.tool, "snap", desc, algo, config, d] + (["packed"] if packed else []),
                              capture_output=True, text=True, env=env, timeout=args.timeout)
        if snap.returncode != 0:
            return "FAIL", f"snapshot failed: {snap.stderr.strip()}"
        emu_env = dict(os.environ)
        if os.environ.get("CONVTUNE_EMULATE_PRELOAD"):  # scripts/emulate-avx512.sh
            emu_env["LD_PRELOAD"] = os.environ["CONVTUNE_EMULATE_PRELOAD"]
        emu = subprocess.run([sys.executable, __file__, "--emulate", d, "--syscalls", args.syscalls],
                             capture_output=True, text=True, env=emu_env, timeout=args.timeout)
        m = re.search(r"status=(\d+) isa=(\d+) finished=(\d) vector=(\S+) rip=(\S+) rax=(\d+) seconds=(\S+)\nmessage=(.*)",
                      emu.stdout, re.S)
        if not m:
            return "FAIL", f"emulator: {(emu.stdout + emu.stderr).strip()[-400:]}"
        status, isa, finished = int(m.group(1)), int(m.group(2)), m.group(3) == "1"
        message = m.group(8).strip()
        if isa != 2:
            return "FAIL", f"cpu_isa() in the emulator is {isa}, not avx512"
        if config == "__list__" or status in (6, 7):
            return STATUS[status], message
        if not finished or status != 1:
            rip = int(m.group(5), 16)
            at, high_index = where(d, rip) if rip else ("", False)
            if m.group(4) == "6" and high_index:
                return "not checked", f"Bochs takes a gather with index zmm16-31 at {at} for invalid"
            detail = message or f"stopped by exception {m.group(4)} at {at}"
            if m.group(4) == "6" and SYSCALL_VA <= rip < SYSCALL_VA + PAGE:
                detail += f" (system call {m.group(6)}, which tests/emulate/syscalls.s does not answer)"
            return "FAIL", f"{STATUS.get(status, status)}: {detail}"
        check = subprocess.run([args.tool, "check", desc, d], capture_output=True, text=True, env=env,
                               timeout=args.timeout)
        return ("ok" if check.returncode == 0 else "FAIL"), (check.stdout + check.stderr).strip() + f" ({m.group(7)} s emulated)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("descriptors", nargs="*", help="problems (benchdnn descriptors); default: the fixed small set")
    ap.add_argument("--tool", default="build/tests/avx512_snapshot")
    ap.add_argument("--syscalls", default="build/emulate-syscalls.bin", help="tests/emulate/syscalls.s assembled")
    ap.add_argument("--algos", default=",".join(ALGOS))
    ap.add_argument("--layers", type=float, metavar="CAP", help="the shared layers, shrunk to <= CAP GFLOP")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=900, metavar="S",
                    help="seconds for each step of a call (a guest that never returns fails)")
    ap.add_argument("--emulate", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.emulate:
        return emulate(args.emulate, args.syscalls)
    problems = {d: d for d in args.descriptors}
    if args.layers:
        problems.update(shrunk_layers(args.tool, args.layers))
    if not problems:
        problems = {d: d for d in QUICK}
    algos = [a.partition(":")[::2] for a in args.algos.split(",")]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        lists = {(d, a, only): pool.submit(run_one, args, d, a, "__list__", False)
                 for d in problems for a, only in algos}
        runs, counts = [], {}
        for (d, a, only), f in lists.items():
            outcome, text = f.result()
            if outcome == "configs":
                configs = [c for c in text.split(",") if c and (not only or c == only)]
                runs += [(d, a, c, p) for c in configs for p in (False, True)]
            elif outcome != "not applicable":
                print(f"FAIL {problems[d]} {a}: listing its configs: {text}", flush=True)
                counts["FAIL"] = counts.get("FAIL", 0) + 1
        futures = {pool.submit(run_one, args, *r): r for r in runs}
        for f in concurrent.futures.as_completed(futures):
            d, a, c, p = futures[f]
            outcome, text = f.result()
            if outcome == "packs nothing":
                continue
            counts[outcome] = counts.get(outcome, 0) + 1
            print(f"{outcome:11} {problems[d]} {a} {c} {'packed' if p else 'one-shot'}: {text}", flush=True)
    print("emulated AVX-512 calls: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    return 1 if counts.get("FAIL") or not counts.get("ok") else 0


if __name__ == "__main__":
    sys.exit(main())
