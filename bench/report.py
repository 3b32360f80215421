#!/usr/bin/env python3
"""Turn the raw results of bench/run into docs/benchmarks.md.

    python3 bench/report.py OUTDIR DOC.md        # the report (bench/run calls this)
    python3 bench/report.py gaps FILE.pcap PPS [SIZE]   # pacing analysis of one capture

Standard library only. OUTDIR holds what bench/run wrote: steps.tsv (one line per measured
command: step, exit status, seconds, command), STEP.out / STEP.err (the command's stdout and
stderr), STEP.pcap (captures), meta.txt, install.txt.
"""

import json
import math
import os
import re
import struct
import sys

# ------------------------------------------------------------------------------------------
# Targets. Each is (text for the table, test on the figures). They are our own goals for
# flowlab, not promises of the peer tools.
# ------------------------------------------------------------------------------------------
TARGET_FLOWS_NOTE_NS = 100_000

TARGETS = {
    # Issue 3's targets, word for word where it gives one.
    "udp64_vs_iperf3": ("≥ 5x iperf3", lambda r: r >= 5.0),
    "udp64_loss": ("< 0.1 %", lambda v: v < 0.1),
    "udp64_vs_gso": ("≥ 0.8x bare GSO loop", lambda r: r >= 0.8),
    "tcp_goodput": ("≥ 1.0x iperf3", lambda r: r >= 1.0),
    "tcp_cpu_per_gbit": ("≤ 1.0x iperf3 (no more CPU per bit)", lambda r: r <= 1.0),
    "pace_500_p99": ("≤ 20 µs", lambda v: v <= 20_000),
    "pace_100k_p99": ("≤ 20 µs", lambda v: v <= 20_000),
    "rtt_vs_sockperf": ("≤ 1.2x sockperf", lambda r: r <= 1.2),
    "flows_sched_p99": ("≤ 100 µs", lambda v: v <= 100_000),
    "flows_mem": ("reported", lambda v: v > 0),
    # issue 18: 1000 flows × 100 packets/s
    "flows_sender_cpu": ("≤ 30 % of a core", lambda v: v <= 30.0),
    # Our own, beyond the issue.
    "pace_500_p50": ("≤ 2 µs", lambda v: v <= 2_000),
    "pace_100k_p50": ("≤ 2 µs", lambda v: v <= 2_000),
    "pace_vs_iperf3": ("≤ 1.0x iperf3", lambda r: r <= 1.0),
    "rtt_vs_irtt": ("≤ 1.0x irtt", lambda r: r <= 1.0),
    "udp2m_acc": ("within 0.1 %", lambda v: abs(v) <= 0.1),
    "udp1400_vs_iperf3": ("≥ 1.0x iperf3", lambda r: r >= 1.0),
    # issue 14: the emulator
    "emu_delay_bps": ("≥ 1 Gbit/s", lambda v: v >= 1e9),
    "emu_atm_fps": ("≥ 300k frames/s", lambda v: v >= 300e3),
    "emu_release_p99": ("≤ 50 µs", lambda v: v <= 50e3),
}


# ------------------------------------------------------------------------------------------
# pcap
# ------------------------------------------------------------------------------------------
def read_pcap(path, head=0):
    """Yield (timestamp_ns, dst_ip, dst_port, udp_payload_len) for each UDP packet, and with
    `head` the payload's first `head` bytes as a fifth element."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return
    magic_le = struct.unpack("<I", data[:4])[0]
    if magic_le in (0xA1B23C4D, 0xA1B2C3D4):
        endian = "<"
        magic = magic_le
    else:
        endian = ">"
        magic = struct.unpack(">I", data[:4])[0]
        if magic not in (0xA1B23C4D, 0xA1B2C3D4):
            raise ValueError(f"{path}: not a pcap file (magic {magic_le:#x})")
    frac_ns = 1 if magic == 0xA1B23C4D else 1000
    linktype = struct.unpack(endian + "I", data[20:24])[0] & 0x0FFFFFFF
    rec = struct.Struct(endian + "IIII")
    off = 24
    n = len(data)
    while off + 16 <= n:
        sec, frac, incl, _orig = rec.unpack_from(data, off)
        off += 16
        pkt = data[off:off + incl]
        off += incl
        ts = sec * 1_000_000_000 + frac * frac_ns
        if linktype == 1:  # Ethernet
            if len(pkt) < 14:
                continue
            etype = struct.unpack_from(">H", pkt, 12)[0]
            l3 = 14
            while etype in (0x8100, 0x88A8) and len(pkt) >= l3 + 4:
                etype = struct.unpack_from(">H", pkt, l3 + 2)[0]
                l3 += 4
        elif linktype == 113:  # Linux cooked v1
            if len(pkt) < 16:
                continue
            etype = struct.unpack_from(">H", pkt, 14)[0]
            l3 = 16
        elif linktype == 276:  # Linux cooked v2
            if len(pkt) < 20:
                continue
            etype = struct.unpack_from(">H", pkt, 0)[0]
            l3 = 20
        elif linktype in (101, 12):  # raw IP
            etype = 0x0800 if pkt and pkt[0] >> 4 == 4 else 0x86DD
            l3 = 0
        else:
            continue
        if etype == 0x0800:
            if len(pkt) < l3 + 20:
                continue
            ihl = (pkt[l3] & 0x0F) * 4
            if pkt[l3 + 9] != 17:
                continue
            frag = struct.unpack_from(">H", pkt, l3 + 6)[0]
            if frag & 0x1FFF:  # a later fragment: no UDP header
                continue
            dst = ".".join(str(b) for b in pkt[l3 + 16:l3 + 20])
            l4 = l3 + ihl
        elif etype == 0x86DD:
            if len(pkt) < l3 + 40 or pkt[l3 + 6] != 17:
                continue
            d = pkt[l3 + 24:l3 + 40]
            dst = ":".join(f"{d[i]:02x}{d[i + 1]:02x}" for i in range(0, 16, 2))
            l4 = l3 + 40
        else:
            continue
        if len(pkt) < l4 + 8:
            continue
        _sport, dport, ulen = struct.unpack_from(">HHH", pkt, l4)
        if head:
            yield ts, dst, dport, ulen - 8, bytes(pkt[l4 + 8:l4 + 8 + head])
        else:
            yield ts, dst, dport, ulen - 8


def pct(sorted_vals, p):
    """Nearest-rank percentile of a sorted list."""
    if not sorted_vals:
        return None
    k = max(1, math.ceil(p / 100.0 * len(sorted_vals)))
    return sorted_vals[min(k, len(sorted_vals)) - 1]


# Departures are put on their schedule's slots only where slots are far apart (500/s: 2 ms)
# against the errors, so that rounding finds each packet's slot.
SLOT_FIT_FROM_NS = 1e6


def slot_offsets(ts, nominal):
    """Each departure against its slot of the schedule, as the capture sees it.

    A departure's slot is its time since the first over the interval, rounded; the schedule
    is the least-squares line through (slot, time), so the capture's clock (tcpdump's
    CLOCK_REALTIME, which NTP may slew) and the sender's (CLOCK_MONOTONIC) need not run at
    the same rate; its offset is removed at the median. A departure's error is its distance
    from the line: unlike a gap's, it is not the sum of two packets' errors. The fitted rate
    against the nominal one (`ppm`) is the clocks' difference over a short run, not drift
    (group long measures that)."""
    slots = [round((t - ts[0]) / nominal) for t in ts]
    n = len(ts)
    ms, mt = sum(slots) / n, sum(ts) / n
    var = sum((k - ms) ** 2 for k in slots)
    if var == 0:
        return None
    slope = sum((k - ms) * (t - mt) for k, t in zip(slots, ts)) / var
    off = [t - (mt + slope * (k - ms)) for k, t in zip(slots, ts)]
    med = sorted(off)[n // 2]
    errs = sorted(abs(o - med) for o in off)
    return {"p50": pct(errs, 50), "p99": pct(errs, 99), "max": errs[-1],
            "ppm": (slope - nominal) / nominal * 1e6}


def gap_stats(path, pps, size=None):
    """Inter-capture gaps of the main flow in a capture against the nominal interval 1e9/pps.

    The main flow is the destination (address, port) with the most datagrams of `size` bytes
    of UDP payload (or, without `size`, the largest group of one address, port and length):
    that leaves out control datagrams (iperf3's UDP hello, irtt's handshake) without knowing
    each tool's format. A UDP GSO packet (one capture record whose payload is k × size bytes:
    the kernel segments it later, after the tap) counts as k datagrams captured at the same
    instant, since that is how they leave: back to back."""
    groups = {}
    for ts, dst, dport, plen in read_pcap(path):
        groups.setdefault((dst, dport), []).append((ts, plen))
    if not groups:
        return None
    if size is None:
        lens = {}
        for (dst, dport), pk in groups.items():
            for _, plen in pk:
                lens[(dst, dport, plen)] = lens.get((dst, dport, plen), 0) + 1
        dst, dport, size = max(lens.items(), key=lambda kv: kv[1])[0]
        key = (dst, dport)
    else:
        key = max(groups, key=lambda k: sum(p // size for _, p in groups[k] if p % size == 0))
    ts = []
    records = 0
    trains = 0
    max_train = 0
    other = 0
    for t, plen in groups[key]:
        if plen <= 0 or plen % size:
            other += 1
            continue
        k = plen // size
        records += 1
        if k > 1:
            trains += 1
        max_train = max(max_train, k)
        ts.extend([t] * k)
    other += sum(len(v) for k, v in groups.items() if k != key)
    ts.sort()
    if len(ts) < 2:
        return None
    nominal = 1e9 / pps
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    errs = sorted(abs(g - nominal) for g in gaps)
    span = ts[-1] - ts[0]
    slots = slot_offsets(ts, nominal) if nominal >= SLOT_FIT_FROM_NS else None
    return {
        "slot": slots,
        "flow": f"{key[0]}:{key[1]}, {size} B",
        "packets": len(ts),
        "records": records,
        "trains": trains,
        "max_train": max_train,
        "other_packets": other,
        "nominal_ns": nominal,
        "rate_pps": (len(ts) - 1) / (span / 1e9) if span > 0 else 0.0,
        "p50": pct(errs, 50),
        "p99": pct(errs, 99),
        "p999": pct(errs, 99.9),
        "max": errs[-1],
        "bunched_pct": 100.0 * sum(1 for g in gaps if g < nominal / 2) / len(gaps),
        "min_gap": min(gaps),
        "max_gap": max(gaps),
        "_gaps": gaps,
    }


# ------------------------------------------------------------------------------------------
# Raw results
# ------------------------------------------------------------------------------------------
class Results:
    def __init__(self, out):
        self.out = out
        self.steps = {}
        path = os.path.join(out, "steps.tsv")
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    parts = line.rstrip("\n").split("\t", 4)
                    if len(parts) == 4:  # older format, without conditions
                        parts.insert(3, "")
                    if len(parts) == 5:
                        m = re.search(r"others=(\d+)/(\d+)", parts[3])
                        la = re.search(r"load=([\d.]+)", parts[3])
                        self.steps[parts[0]] = {
                            "rc": int(parts[1]),
                            "secs": float(parts[2] or 0),
                            "cmd": parts[4],
                            "others": (int(m.group(1)), int(m.group(2))) if m else None,
                            "load": float(la.group(1)) if la else None,
                        }
        self.meta = {}
        mp = os.path.join(out, "meta.txt")
        if os.path.exists(mp):
            with open(mp) as f:
                for line in f:
                    if "=" in line:
                        k, v = line.rstrip("\n").split("=", 1)
                        self.meta[k] = v

    def path(self, name):
        return os.path.join(self.out, name)

    def text(self, name):
        try:
            with open(self.path(name), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def reason(self, step, doc=None):
        """Why a step failed, in one line."""
        st = self.steps.get(step)
        if st is None:
            return "not run"
        if doc is not None:
            for k in ("error",):
                if isinstance(doc, dict) and doc.get(k):
                    return str(doc[k])
        err = self.text(step + ".err").strip().splitlines()
        last = err[-1].strip() if err else ""
        if st["rc"] == 124 or st["rc"] == 137:
            return "timed out" + (f" ({last})" if last else "")
        if st["rc"] == 255 and st["cmd"].startswith("not run"):
            return st["cmd"][len("not run: "):]
        return (last or f"exit status {st['rc']}")[:200]

    def json(self, step, name=None):
        """(document, None) or (None, reason)."""
        st = self.steps.get(step)
        if st is None:
            return None, "not run"
        raw = self.text(name or step + ".out")
        doc = None
        try:
            doc = json.loads(raw) if raw.strip() else None
        except ValueError:
            doc = None
        if doc is None:
            return None, "failed: " + self.reason(step)
        if isinstance(doc, dict) and doc.get("error") and (
            "summary" not in doc or "end" in doc
        ):
            # iperf3 puts its error in "error"; flowlab too but still has figures
            if "summary" not in doc:
                return None, "failed: " + str(doc["error"])[:200]
        if st["rc"] != 0 and not (isinstance(doc, dict) and "summary" in doc):
            return None, "failed: " + self.reason(step, doc)
        return doc, None


# ------------------------------------------------------------------------------------------
# Formatting
# ------------------------------------------------------------------------------------------
def fnum(v, digits=3):
    """A rate or a size with an SI prefix and `digits` significant digits."""
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if v == 0:
        return "0"
    a = abs(v)
    for scale, prefix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if scale == 1e3 and a < 1e4:
            break
        x = float(f"{v / scale:.{digits}g}")
        if abs(x) >= 1:
            return f"{x:g}{prefix}"
    if a >= 100:
        return f"{v:.0f}"
    return f"{float(f'{v:.{digits}g}'):g}"


def fcount(v):
    """A count, exact, with thousands separators."""
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    return f"{int(v):,}"


def fns(v):
    """Nanoseconds, printed in a readable unit."""
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.3g} ms"
    if a >= 1e3:
        return f"{v / 1e3:.3g} µs"
    return f"{v:.0f} ns"


def fpct(v):
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    return f"{v:.3g} %" if abs(v) < 100 else f"{v:.0f} %"


def ratio(a, b):
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or b == 0:
        return None
    return a / b


def fratio(r):
    return "—" if r is None else f"{r:.2f}"


def met(target_key, value):
    if target_key is None:
        return "", ""
    text, test = TARGETS[target_key]
    if not isinstance(value, (int, float)):
        return text, "—"
    return text, ("yes" if test(value) else "**no**")


def table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


class Cmp:
    """One row of a comparison table: metric, flowlab, peer, ratio, target, met?"""

    def __init__(self):
        self.rows = []
        self.summary = []  # (measurement, metric, flowlab, peer, ratio, target, met)

    def add(self, metric, fl, peer_name, peer, fmt=fnum, rkey=None, vkey=None, value=None,
            measurement=""):
        """rkey: target tested on flowlab/peer; vkey: target tested on `value` (or flowlab)."""
        r = ratio(fl, peer)
        if rkey:
            t, m = met(rkey, r)
        elif vkey:
            t, m = met(vkey, value if value is not None else fl)
        else:
            t, m = "context", ""
        row = [metric, fmt(fl), f"{peer_name}: {fmt(peer)}" if peer_name else "—",
               fratio(r) if peer_name else "—", t, m]
        self.rows.append(row)
        self.summary.append([measurement] + row)

    def md(self):
        return table(["metric", "flowlab", "peer", "ratio", "target", "met?"], self.rows)


# ------------------------------------------------------------------------------------------
# Readers per tool
# ------------------------------------------------------------------------------------------
def fl_summary(res, step):
    doc, err = res.json(step)
    if doc is None:
        return None, err
    s = doc.get("summary") or {}
    return doc, s


def cpu_sum(c):
    if not c:
        return None
    return (c.get("process_user_pct") or 0) + (c.get("process_system_pct") or 0)


def iperf_udp(res, step, size):
    doc, err = res.json(step)
    if doc is None:
        return err
    end = doc.get("end") or {}
    s = end.get("sum") or {}
    recv = end.get("sum_received") or {}
    sent_pkts = s.get("packets")
    lost = s.get("lost_packets")
    secs = recv.get("seconds") or s.get("seconds") or 0
    got = None
    if sent_pkts is not None and lost is not None:
        got = sent_pkts - lost
    elif recv.get("bytes") is not None:
        got = recv["bytes"] / size
    cpu = end.get("cpu_utilization_percent") or {}
    return {
        "sent_pkts": sent_pkts,
        "recv_pkts": got,
        "sent_pps": (sent_pkts / s["seconds"]) if sent_pkts and s.get("seconds") else None,
        "recv_pps": (got / secs) if got is not None and secs else None,
        "loss_pct": s.get("lost_percent"),
        "recv_bps": recv.get("bits_per_second"),
        "host_cpu": cpu.get("host_total"),
        "remote_cpu": cpu.get("remote_total"),
        "error": doc.get("error"),
    }


def kernel_delta(res, step):
    """Changes of the receiving namespace's UDP counters and of the backlog drops over a step:
    {"InDatagrams": .., "NoPorts": .., "InErrors": .., "RcvbufErrors": .., "backlog_drops": ..}
    or None."""
    def parse(txt):
        out = {}
        udp = [ln.split()[1:] for ln in txt.splitlines() if ln.startswith("Udp:")]
        if len(udp) >= 2:
            for k, v in zip(udp[0], udp[1]):
                try:
                    out[k] = int(v)
                except ValueError:
                    pass
        drops = 0
        seen = False
        for ln in txt.splitlines():
            if ln.startswith("softnet "):
                cols = ln.split()[1:]
                if len(cols) >= 2:
                    drops += int(cols[1], 16)
                    seen = True
        if seen:
            out["backlog_drops"] = drops
        return out
    a = parse(res.text(step + ".kernel.before"))
    b = parse(res.text(step + ".kernel.after"))
    if not a or not b:
        return None
    return {k: b[k] - a[k] for k in a if k in b}


def kv_line(text, role):
    for line in text.splitlines():
        if line.startswith(f"role={role}") and "ready=1" not in line:
            return dict(p.split("=", 1) for p in line.split() if "=" in p)
    return None


def gso_result(res, step):
    st = res.steps.get(step)
    if st is None:
        return "not run"
    snd = kv_line(res.text(step + ".out"), "send")
    rcv = kv_line(res.text(step + ".recv"), "recv")
    if not snd or not rcv:
        return "failed: " + res.reason(step)
    sent = int(snd["sent"])
    got = int(rcv["received"])
    if got == 0:
        k = kernel_delta(res, step) or {}
        why = ", ".join(f"{n} +{k[n]}" for n in ("NoPorts", "RcvbufErrors", "InErrors",
                                                    "backlog_drops") if k.get(n))
        return (f"failed: the receiver got nothing of {sent:,} sent "
                f"(send errors {snd.get('errors')}, first errno {snd.get('first_errno', '?')}"
                + (f"; kernel: {why}" if why else "") + ")")
    return {
        "sent": sent,
        "sent_pps": float(snd["pps"]),
        "recv": got,
        "recv_pps": float(rcv["pps"]),
        "recv_bps": float(rcv["bytes"]) * 8 / float(rcv["seconds"]) if float(rcv["seconds"]) else None,
        "loss_pct": 100.0 * (sent - got) / sent if sent else 0.0,
        "calls": int(snd["calls"]),
        "gro": rcv.get("gro"),
        "rxq_ovfl": rcv.get("rxq_ovfl"),
    }


def sockperf_result(res, step):
    st = res.steps.get(step)
    if st is None:
        return "not run"
    txt = res.text(step + ".out") + res.text(step + ".err")
    txt = re.sub(r"\x1b\[[0-9;]*m", "", txt)
    out = {}
    for m in re.finditer(r"percentile\s+([\d.]+)\s*=\s*([\d.]+)", txt):
        out[float(m.group(1))] = float(m.group(2)) * 1000.0  # µs -> ns
    m = re.search(r"avg-latency=([\d.]+)", txt)
    if m:
        out["avg"] = float(m.group(1)) * 1000.0
    m = re.search(r"<MAX> observation\s*=\s*([\d.]+)", txt)
    if m:
        out["max"] = float(m.group(1)) * 1000.0
    m = re.search(r"<MIN> observation\s*=\s*([\d.]+)", txt)
    if m:
        out["min"] = float(m.group(1)) * 1000.0
    m = re.search(r"\[Valid Duration\].*?SentMessages=(\d+);\s*ReceivedMessages=(\d+)", txt)
    if m:
        out["sent"] = int(m.group(1))
        out["received"] = int(m.group(2))
    m = re.search(r"RunTime=([\d.]+) sec; SentMessages", txt)
    if 50.0 not in out:
        return "failed: " + res.reason(step)
    return out


def irtt_result(res, step):
    doc, err = res.json(step, step + ".json")
    if doc is None:
        return err
    s = doc.get("stats") or {}
    return s


def capture_log(res, name):
    txt = res.text(name + ".log")
    out = {}
    for key, pat in (("captured", r"(\d+) packets? captured"),
                     ("dropped", r"(\d+) packets? dropped by kernel"),
                     ("by_filter", r"(\d+) packets? received by filter"),
                     ("if_dropped", r"(\d+) packets? dropped by interface")):
        m = re.search(pat, txt)
        if m:
            out[key] = int(m.group(1))
    return out



# ------------------------------------------------------------------------------------------
# Rounds: max-rate runs are repeated (STEP-1, STEP-2, ...); the report uses the median round
# ------------------------------------------------------------------------------------------
def rounds(res, base):
    names = [k for k in res.steps if k == base or re.fullmatch(re.escape(base) + r"-\d+", k)]
    return sorted(names, key=lambda k: int(k.rsplit("-", 1)[1]) if k != base else 0)


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def median_round(res, base, metric):
    """(step of the median round by `metric`, [metric of each round, in order]).

    metric(res, step) returns a number, or a string saying why there is none."""
    steps = rounds(res, base)
    if not steps:
        return base, []
    vals = [metric(res, st) for st in steps]
    good = sorted((v, st) for v, st in zip(vals, steps) if _num(v))
    if not good:
        return steps[0], vals
    return good[(len(good) - 1) // 2][1], vals


def m_fl(key):
    def f(res, step):
        doc, s = fl_summary(res, step)
        return s if doc is None else s.get(key)
    return f


def m_iperf_udp(size, key):
    def f(res, step):
        r = iperf_udp(res, step, size)
        return r if isinstance(r, str) else r.get(key)
    return f


def m_gso(res, step):
    r = gso_result(res, step)
    return r if isinstance(r, str) else r.get("recv_pps")


def m_iperf_tcp(res, step):
    doc, err = res.json(step)
    if doc is None:
        return err
    return ((doc.get("end") or {}).get("sum_received") or {}).get("bits_per_second")


def fvals(vals, fmt=None):
    fmt = fmt or fnum
    return " / ".join(fmt(v) if _num(v) else "failed" for v in vals) if vals else "—"

# ------------------------------------------------------------------------------------------
# The emulator (group emu)
# ------------------------------------------------------------------------------------------
EMU_DELAY_NS = 1_000_000  # the delay-only link's delay (bench/run DELAY_LINK)
# Ethernet frame bytes (no FCS) for a UDP payload: 14 + 20 + 8 header bytes.
ETH_UDP_OVERHEAD = 42


def emu_direction(res, name):
    """The a>b direction of the emulator's report NAME.json, or None."""
    try:
        with open(res.path(name + ".json")) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    for link in doc.get("links", []):
        for d in link.get("directions", []):
            if d.get("from") == "a":
                return d
    return None


def emu_cpu_ticks(res, name):
    """{thread name: clock ticks} from NAME.cpu ("TID NAME TICKS" lines)."""
    out = {}
    for line in res.text(name + ".cpu").splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].isdigit():
            out[parts[1]] = int(parts[2])
    return out


def emu_flood(res, step, seg):
    """A max-rate run through a lab link: the receiver's figures and, for an emulated link,
    the emulator's (a>b thread: CPU, frames, drops, profile). A string if it failed."""
    st = res.steps.get(step)
    if st is None:
        return "not run"
    if st["rc"] == 255:
        return "failed: " + res.reason(step)
    recv = kv_line(res.text(step + ".recv"), "recv")
    send = kv_line(res.text(step + ".out"), "send")
    if not recv or not send:
        return "failed: " + res.reason(step)
    secs = float(recv.get("seconds") or 0)
    got = int(recv.get("received") or 0)
    fps = got / secs if secs > 0 else None
    r = {"fps": fps, "bps": fps * (seg + ETH_UDP_OVERHEAD) * 8 if fps else None,
         "sent_fps": float(send.get("pps") or 0), "received": got,
         "send_secs": float(send.get("seconds") or 0)}
    before, after = emu_direction(res, step + ".before"), emu_direction(res, step + ".after")
    if after is None:
        return r
    b = before or {}

    def delta(*keys):
        x, y = after, b
        for k in keys:
            x, y = (x or {}).get(k), (y or {}).get(k)
        return (x or 0) - (y or 0)

    frames = delta("frames_sent")
    ticks = emu_cpu_ticks(res, step + ".after").get("emu:a>b", 0) - emu_cpu_ticks(
        res, step + ".before").get("emu:a>b", 0)
    hz = float(res.meta.get("ticks") or 100)
    cpu_s = ticks / hz
    r.update({
        "emu_frames": frames,
        "cpu_pct": 100.0 * cpu_s / r["send_secs"] if r["send_secs"] else None,
        "cpu_ns_per_frame": cpu_s * 1e9 / frames if frames else None,
        "ingress_overflow": delta("emulator_drops", "ingress_overflow"),
        # the lab is new for each run: its counts are the run's
        "model_drops": sum(sum((s.get("dropped") or {}).values())
                           for s in after.get("stages", [])),
        "profile": {k: delta("profile", k) for k in (after.get("profile") or {})},
    })
    return r


EMU_RELEASE_SETUPS = [
    ("emu_release_100k", "on the emulator's core, both ends captured"),
    ("emu_release_100k_uncaptured", "on the emulator's core (a veth send runs it)"),
    ("emu_release_100k_steered", "on the sender's core (RPS on b's end)"),
    ("emu_release_100k_nostack", "off the machine (nftables drop at b's ingress)"),
]


def emu_release_setups(res):
    """A row per placement of b's stack that was run: the release error of its median round."""
    rows = []
    for base, where in EMU_RELEASE_SETUPS:
        if not rounds(res, base):
            continue
        step, _ = median_round(res, base, lambda res, st: (
            (emu_direction(res, st + ".after") or {}).get("release_error") or {}).get("p99_ns")
            or "failed")
        d = emu_direction(res, step + ".after") or {}
        err = d.get("release_error") or {}
        doc, fs = fl_summary(res, step)
        sched = ((fs.get("schedule_error") or {}).get("p99_ns")) if doc else None
        cap = (emu_capture_error(res, step) if os.path.exists(res.path(step + ".pcap"))
               else "not captured")
        late = (100.0 * d["late"] / d["frames_sent"]) if d.get("frames_sent") else None
        rows.append([where, f"`{step}`", fns(err.get("p50_ns")), fns(err.get("p99_ns")),
                     fns(err.get("p999_ns")), fns(err.get("max_ns")), fpct(late), fns(sched),
                     fns(cap["p99"]) if isinstance(cap, dict) else cap])
    return rows


def emu_capture_error(res, step):
    """Release error checked on the wire: each datagram's time from the sender's tap (a, out)
    to the receiver's (b, in), less the link's delay; matched by their payloads' first bytes
    (flowlab's header: flow and sequence number)."""
    try:
        sent = {p[4]: p[0] for p in read_pcap(res.path(step + ".out.pcap"), head=24)}
        got = [(p[4], p[0]) for p in read_pcap(res.path(step + ".pcap"), head=24)]
    except (OSError, ValueError) as e:
        return f"failed: {e}"
    errs = sorted(t - sent[k] - EMU_DELAY_NS for k, t in got if k in sent)
    if not errs:
        return "failed: no datagram in both captures"
    return {"n": len(errs), "sent": len(sent), "p50": pct(errs, 50), "p99": pct(errs, 99),
            "max": errs[-1]}


def emu_capture_used(res, step):
    """The capture path the emulator said it used (its log's "emulating" line), and any
    fallback notice."""
    text = res.text(step + ".emulator.log")
    used = re.search(r"emulating .*\((af_\w+)\)", text)
    notice = re.search(r"notice: (.*)", text)
    return (used.group(1) if used else "?") + (f" ({notice.group(1)})" if notice else "")


def capture_section(res, md):
    """Group capture: the emulator's AF_PACKET and AF_XDP capture paths side by side."""
    if not any(k.startswith("cap_") for k in res.steps):
        return
    md.append("### The capture path: AF_PACKET against AF_XDP (group `capture`)\n")
    md.append("The lab and measurements of f, the emulator reading and writing frames through "
              "packet sockets (`emulator_capture = \"af_packet\"`: `recvmmsg`, `sendmmsg`) or "
              "AF_XDP sockets (`\"af_xdp\"`: an XDP program on each of its veth ends redirects "
              "every frame to a socket's rings, copy mode; sends by one `sendto` kick per 32 "
              "frames), the two interleaved in each round. Frames/s are the receiver's (median "
              "round, every round in brackets); CPU per frame is the emulator's a>b thread's "
              "(utime + stime): the softirq work of receiving a frame runs on the sender's "
              "core on either path. `load`: the 1-minute load average when the median round "
              "started.\n")
    cases = [("64", "delay only (1 ms), 60 B frames", 18),
             ("1500", "delay only (1 ms), 1514 B frames", 1472),
             ("atm_64", "ATM OC-12c, 60 B frames", 18)]
    rows = []
    for key, what, seg in cases:
        for path in ("af_packet", "af_xdp"):
            def m(res, step, seg=seg):
                r = emu_flood(res, step, seg)
                return r if isinstance(r, str) else r.get("fps")
            step, vals = median_round(res, f"cap_{path}_{key}", m)
            r = emu_flood(res, step, seg)
            if isinstance(r, str):
                rows.append([what, path, r, "", "", "", ""])
                continue
            rows.append([what, emu_capture_used(res, step), fnum(r["fps"]) + f" ({fvals(vals)})",
                         fns(r.get("cpu_ns_per_frame")), fcount(r.get("ingress_overflow")),
                         fnum(r["sent_fps"]), f"{res.steps[step].get('load') or 0:.2f}"])
    md.append(table(["link, frames", "capture path", "received frames/s (rounds)",
                     "emulator CPU per frame", "emulator socket drops", "sent frames/s",
                     "load"], rows))
    md.append("")
    rel = []
    for path in ("af_packet", "af_xdp"):
        def p99(res, st):
            d = emu_direction(res, st + ".after") or {}
            return (d.get("release_error") or {}).get("p99_ns") or "failed"
        step, vals = median_round(res, f"cap_{path}_release", p99)
        d = emu_direction(res, step + ".after") or {}
        err, lag = d.get("release_error") or {}, d.get("read_lag") or {}
        cap = emu_capture_error(res, step) if step in res.steps else "not run"
        rel.append([emu_capture_used(res, step) if step in res.steps else path,
                    fns(lag.get("p50_ns")), fns(lag.get("p99_ns")), fns(err.get("p50_ns")),
                    fns(err.get("p99_ns")) + f" ({fvals(vals, fns)})",
                    " / ".join(fns(cap[k]) for k in ("p50", "p99"))
                    if isinstance(cap, dict) else cap, fcount(d.get("late")),
                    fcount(d.get("frames_sent")),
                    f"{(res.steps.get(step) or {}).get('load') or 0:.2f}"])
    md.append("At 100k packets/s (flowlab's sender, 200 B, 10 s, delay-only link): the read lag "
              "(arrival stamp to the emulator's read: the kernel's receive stamp for "
              "AF_PACKET, taken when veth queues the frame; the XDP program's "
              "`bpf_ktime_get_ns()` for AF_XDP, taken later, when veth's NAPI poll runs it: "
              "not the same starting point), the release error in the emulator's report, and "
              "the same error on the wire (b's tap − a's tap − 1 ms, the same for both "
              "paths):\n")
    md.append(table(["capture path", "read lag p50", "read lag p99", "release error p50",
                     "release error p99 (rounds)", "on the wire p50 / p99", "late > 50 µs",
                     "frames", "load"], rel))
    md.append("")


COST_RATES = (("500", 500, 1000), ("10k", 10_000, 200), ("100k", 100_000, 200))
COST_TOOLS = ("flowlab_auto", "flowlab_precise", "flowlab_efficient", "iperf3", "irtt")


def cost_cpu(res, step):
    """(client CPU s, server CPU s) of a group-cost step, from GNU time and /proc ticks."""
    client = server = None
    t = res.text(step + ".time").split()
    if len(t) >= 2:
        try:
            client = float(t[-2]) + float(t[-1])
        except ValueError:
            pass
    lines = res.text(step + ".server_cpu").split()
    if len(lines) == 3:
        hz, before, after = (float(x) for x in lines)
        server = (after - before) / hz
    return client, server


def cost_row(res, step, pps, size):
    """One row of group cost: packets, CPU per packet at both ends, departure error."""
    st = res.steps.get(step)
    if st is None:
        return None
    r = {"load": st.get("load"), "others": st.get("others")}
    if st["rc"] != 0:
        r["err"] = res.reason(step)
    if "flowlab" in step:
        doc, _ = fl_summary(res, step)
        snd = ((doc or {}).get("client") or {}).get("sender") or {}
        r["packets"] = snd.get("packets_sent")
        p = snd.get("pacing") or {}
        r["pacing"] = f"{p.get('strategy', '—')}, {fpct(p.get('cpu_pct'))}" if p else "—"
    elif "iperf3" in step:
        ipr = iperf_udp(res, step, size)
        r["packets"] = ipr.get("sent_pkts") if isinstance(ipr, dict) else None
    else:
        s = irtt_result(res, step)
        r["packets"] = s.get("packets_sent") if isinstance(s, dict) else None
    client, server = cost_cpu(res, step)
    n = r.get("packets")
    if n:
        r["client_ns"] = client * 1e9 / n if client is not None else None
        r["server_ns"] = server * 1e9 / n if server is not None else None
    pc = res.path(step + ".out.pcap")
    try:
        g = gap_stats(pc, pps, size) if os.path.exists(pc) else None
    except (ValueError, struct.error):
        g = None
    if g:
        r["p50"], r["p99"] = g["p50"], g["p99"]
        r["slot_p99"] = (g["slot"] or {}).get("p99")
    return r


def cost_section(res, md):
    """Group cost: every tool at 500, 10k and 100k packets/s, with CPU per packet."""
    rows = []
    for tag, pps, size in COST_RATES:
        for tool in COST_TOOLS:
            step = f"cost_{tool}_{tag}"
            r = cost_row(res, step, pps, size)
            if r is None:
                continue
            rows.append([f"{pps:,}/s, {size} B", tool.replace("_", " --pacing "),
                         fcount(r.get("packets")), fns(r.get("client_ns")),
                         fns(r.get("server_ns")), fns(r.get("p50")), fns(r.get("p99")),
                         fns(r.get("slot_p99")), r.get("pacing", ""), f"{r.get('load') or 0:.2f}",
                         r.get("err", "")])
    if not rows:
        return
    md.append("## c'. What pacing costs: CPU per packet at both ends (issue 18)\n")
    md.append(table(["rate, payload", "tool", "packets sent", "client CPU/packet",
                     "server CPU/packet", "gap error p50", "p99", "departure error p99",
                     "flowlab pacing: "
                     "strategy, waits' CPU", "load", "error"], rows))
    md.append("")
    md.append(
        "Group `cost` of `bench/run`: each row one run of `FLB_COST_SECONDS` (default 5 s) "
        "between the namespaces, captured leaving `flb-va`. CPU per packet: the client's user "
        "+ system time (GNU `time`, the process and its children) and the server's (its "
        "`/proc/PID/stat` ticks before and after; 10 ms ticks, so short rows are coarse), each "
        "over the packets the client sent. irtt echoes every packet, so its figures are per "
        "round trip (both ends send). Gap error: |gap − nominal| between consecutive "
        "departures on the sending veth (nanosecond tcpdump stamps), as in c., which holds "
        "two packets' errors; departure error (500/s only, where slots are 2 ms apart): each "
        "departure's distance from its slot of the schedule fitted to the capture (the least-"
        "squares line through slot and time; `slot_offsets` in bench/report.py); tcpdump's own "
        "CPU is in neither end's figure but competes for the 2 cores. `load`: the 1-minute "
        "load average when the row started (other engineers' builds share this machine).\n")


# The unit a step's CPU is divided by, by the step's name (its round suffix removed): a
# datagram sent, a 1448-byte TCP segment of payload (the veth's MSS), or a round trip.
CPU_UNITS = (
    ("tcp_", "1448 B segment"),
    ("rtt_", "round trip"),
    ("rr_", "round trip"),
    ("pace_irtt", "round trip"),
    ("cost_irtt", "round trip"),
    ("emu_", "frame"),
    ("cap_", "frame"),
)
TCP_SEGMENT = 1448


def step_units(res, step):
    """How many units (CPU_UNITS) step `step` moved, and which, or (None, reason)."""
    unit = next((u for prefix, u in CPU_UNITS if step.startswith(prefix)), "datagram")
    if "_mmsg" in step or "_gso" in step:
        g = gso_result(res, step)
        return (g["sent"], unit) if isinstance(g, dict) else (None, g)
    # The C senders (the 1000-flow floor, the emulator's floods) print one key=value line.
    if step.startswith(("flows_floor", "emu_", "cap_")):
        snd = kv_line(res.text(step + ".out"), "send")
        if snd and "sent" in snd:
            return int(snd["sent"]), unit
        if step.startswith("flows_floor"):
            return None, "failed: " + res.reason(step)
    if "sockperf" in step:
        r = sockperf_result(res, step)
        return (r.get("sent"), unit) if isinstance(r, dict) else (None, r)
    if "irtt" in step:
        name = "pace_irtt.json" if step == "pace_irtt" else step + ".json"
        doc, err = res.json(step, name)
        stats = (doc or {}).get("stats") or {}
        return (stats.get("packets_sent"), unit) if doc else (None, err)
    doc, err = res.json(step)
    if doc is None:
        return None, err
    if "iperf3" in step:
        end = doc.get("end") or {}
        if step.startswith("tcp_"):
            got = (end.get("sum_received") or {}).get("bytes")
            return (got / TCP_SEGMENT if got else None), unit
        return (end.get("sum") or {}).get("packets"), unit
    sm = doc.get("summary") or {}
    if step.startswith("tcp_"):
        got = sm.get("bytes_received")
        return (got / TCP_SEGMENT if got else None), unit
    if step.startswith("rr_"):
        return (sm.get("transactions") or {}).get("transactions"), unit
    return sm.get("packets_sent"), unit


def cpu_section(res, md):
    """CPU per packet at both ends for every step that measured it (client() in bench/run)."""
    rows = []
    for step, st in res.steps.items():
        client, server = cost_cpu(res, step)
        if client is None and server is None:
            continue
        n, unit = step_units(res, step)
        per = (lambda c: c * 1e9 / n if c is not None and n else None)
        rows.append([f"`{step}`", fcount(n) if n else (unit or "—")[:60], unit if n else "",
                     fnum(client) + " s" if client is not None else "—",
                     fnum(server) + " s" if server is not None else "—",
                     fns(per(client)), fns(per(server)), f"{st.get('load') or 0:.2f}"])
    if not rows:
        return
    md.append("## g. CPU per packet at both ends, every row (issue 18)\n")
    md.append(table(["step", "units", "unit", "client CPU", "server CPU", "client CPU/unit",
                     "server CPU/unit", "load"], rows))
    md.append("")
    md.append(
        "Every measured command of `bench/run`, in the order run, with CPU taken from outside "
        "the tools: the client's user + system time (GNU `time`, the process and its "
        "children) and the server's `/proc/PID/stat` ticks before and after (10 ms ticks), "
        "each over what the client sent: datagrams, round trips (sockperf, irtt, flowlab's "
        "loopback and request/response: both ends send), or TCP payload in 1448-byte "
        "segments (the veth's MSS; with TSO and GRO far fewer, larger packets cross it). The "
        "C loops' server is their receiver. On one machine the kernel charges much of the "
        "receiving host's stack to whichever process sent (a veth delivers in the sender's "
        "context), so the client's share is high and the server's low; the sum is the "
        "fairer figure. The emulator's steps (f.) have no server here: f. gives the "
        "emulator's own CPU per frame.\n")


def long_section(res, md):
    """Group long: one paced flow for a long time; drift of its schedule and memory growth."""
    step = "long_flowlab"
    if step not in res.steps:
        return
    doc, err = fl_summary(res, step)
    md.append("## c''. The long run: 500 packets/s, drift and memory (issue 18)\n")
    if doc is None:
        md.append(f"Not measured: {err}.\n")
        return
    snd = (doc.get("client") or {}).get("sender") or {}
    full = [i for i in doc.get("intervals") or [] if i["end_ns"] - i["start_ns"] >= 9_999_000_000]
    counts = [i["packets"] for i in full]
    delays = [(i.get("delay") or {}).get("p50_ns") for i in full]
    lost = snd.get("lost_by_sender") or {}
    n, dur = snd.get("packets_sent") or 0, snd.get("duration_ns") or 0
    # Slots, not packets: a slot skipped 10 ms late still passed on the schedule's clock.
    slots = n + sum(lost.values())
    ppm = ((slots - 1) * 2_000_000 / dur - 1) * 1e6 if slots > 1 and dur else None
    samples = [ln.split() for ln in res.text(step + ".rss").splitlines()[1:]]
    rss = [(int(a), int(c)) for _, a, c in (x for x in samples if len(x) == 3)
           if a.isdigit() and c.isdigit()]
    sched = snd.get("schedule_error") or {}
    pacing = snd.get("pacing") or {}
    rows = [
        ["run", f"{res.steps[step]['secs']:.0f} s, load {res.steps[step].get('load')}"],
        ["packets sent", fcount(n)],
        ["slots skipped (the sender woke over 10 ms late)", fcount(lost.get("missed_slots"))],
        ["schedule slots per second against 500 over the run",
         f"{ppm:+.2f} ppm" if ppm is not None else "—"],
        ["packets per 10 s interval (received)",
         f"min {min(counts):,}, max {max(counts):,} over {len(counts)}" if counts else "—"],
        ["one-way delay p50, first / last interval",
         f"{fns(delays[0])} / {fns(delays[-1])}" if delays else "—"],
        ["schedule error p50 / p99 / max",
         f"{fns(sched.get('p50_ns'))} / {fns(sched.get('p99_ns'))} / {fns(sched.get('max_ns'))}"],
        ["pacing", f"{pacing.get('mode', '—')}: {pacing.get('strategy', '—')}, "
                   f"waits {fpct(pacing.get('cpu_pct'))} of a core"],
        ["resident memory, agent: first / last sample",
         f"{rss[0][0]:,} / {rss[-1][0]:,} kB" if rss else "—"],
        ["resident memory, client: first / last sample",
         f"{rss[0][1]:,} / {rss[-1][1]:,} kB" if rss else "—"],
    ]
    md.append(table(["", "figure"], rows))
    md.append("")
    md.append(
        "`FLB_ONLY=long bench/run` (`FLB_LONG_SECONDS`, default 3600): one flow of 1000-byte "
        "datagrams at 4 Mbit/s, live intervals every 10 s, the agent's and the client's "
        "resident memory sampled every 10 s. Drift is the schedule's: its slots over the "
        "sender's first to last packet against 500/s (each deadline is computed from the "
        "start, so it should be 0 within the clock reads; a slot skipped at either end moves "
        "it by 2 ms over the run, 17 ppm over 2 minutes). A busy host shows as skipped slots "
        "and fewer packets in an interval, not as drift. Memory: the first sample (10 s in) "
        "against the last.\n")


def emu_section(res, md, overview, meta):
    if not any(k.startswith("emu_") for k in res.steps):
        return
    cmp_ = Cmp()
    md.append("## f. The emulator (issue 14)\n")
    md.append("A lab of two hosts (`flowlab lab up`, hosts `a` 10.77.0.1 and `b` 10.77.0.2) "
              "joined by one link: a bare veth, tbf at 1 Gbit/s, or emulated (through the "
              "lab's emulator namespace): delay-only (1 ms), or ATM OC-12c (CLIP, LLC/SNAP, "
              "4000-cell buffer). `gso_flood` sends for 10 s at full speed (UDP GSO, split "
              "into single frames: `gso_max_segs 1` on both hosts' ends, as on every "
              "emulated link), flowlab's sender paces 100k packets/s for the release error. "
              "The emulator's threads are pinned to one core and run SCHED_FIFO "
              "(`FLB_EMU_CPU`, `FLB_EMU_RT`), the senders to the other core. Frames/s are "
              "the receiver's; the emulator's CPU is its a>b thread's (utime + stime from "
              "`/proc/PID/task/TID/stat`; softirq work of the frames it sends is not in it), "
              "over the 10 s.\n")
    cases = [("emu_veth_1500", "bare veth, 1514 B frames", 1472),
             ("emu_tbf_1500", "tbf 1 Gbit/s, 1514 B frames", 1472),
             ("emu_delay_1500", "emulated, delay only (1 ms), 1514 B frames", 1472),
             ("emu_veth_64", "bare veth, 60 B frames (64 B with FCS)", 18),
             ("emu_atm_64", "emulated, ATM OC-12c, 60 B frames (64 B with FCS)", 18),
             ("emu_atm_steered_64", "the same, b's receive work steered to the senders' core "
              "(RPS)", 18)]
    rows, med = [], {}
    for base, what, seg in cases:
        def m(res, step, seg=seg):
            r = emu_flood(res, step, seg)
            return r if isinstance(r, str) else r.get("fps")
        step, vals = median_round(res, base, m)
        r = emu_flood(res, step, seg)
        med[base] = r
        if isinstance(r, str):
            rows.append([what, r, "", "", "", "", "", ""])
            continue
        bound = "—"
        if "emu_frames" in r:
            bound = ("emulator (its socket overflowed)" if r["ingress_overflow"] else
                     "the model's line rate" if r["model_drops"] else "the sender")
        rows.append([what, fnum(r["sent_fps"]), fnum(r["fps"]) + f" ({fvals(vals)})",
                     fnum(r["bps"]), fpct(r.get("cpu_pct")), fns(r.get("cpu_ns_per_frame")),
                     fcount(r.get("ingress_overflow")), bound])
    md.append(table(["link", "sent frames/s", "received frames/s (rounds)", "bit/s",
                     "emulator CPU", "CPU per frame", "emulator socket drops", "bounded by"],
                    rows))
    md.append("")
    prof_rows = []
    for base in ("emu_delay_1500", "emu_atm_64", "emu_atm_steered_64"):
        r = med.get(base)
        p = r.get("profile") if isinstance(r, dict) else None
        if not p or not p.get("turns"):
            continue
        busy = p.get("receive_ns", 0) + p.get("release_ns", 0)
        n = r["emu_frames"] or 1
        prof_rows.append([base, fcount(p["turns"]), f"{n / p['turns']:.1f}",
                          f"{n / max(p.get('reads', 0), 1):.1f}",
                          f"{n / max(p.get('sends', 0), 1):.1f}",
                          fns(p.get("receive_ns", 0) / n), fns(p.get("release_ns", 0) / n),
                          fpct(100.0 * busy / max(busy + p.get("sleep_ns", 0)
                                                  + p.get("spin_ns", 0), 1))])
    if prof_rows:
        md.append("The emulator's own profile of the same runs (its loop's clock; "
                  "`profile` in `emulator.json`):\n")
        md.append(table(["run", "turns", "frames per turn", "frames per read",
                         "frames per send", "reading + model, per frame",
                         "releasing + sending, per frame", "busy"], prof_rows))
        md.append("")

    rel_rows = []
    rstep, _ = median_round(res, "emu_release_100k", lambda res, st: (
        (emu_direction(res, st + ".after") or {}).get("release_error") or {}).get("p99_ns")
        or "failed")
    d = emu_direction(res, rstep + ".after")
    err = (d or {}).get("release_error") or {}
    lag = (d or {}).get("read_lag") or {}
    cap = emu_capture_error(res, rstep) if rstep in res.steps else "not run"
    doc, fs = fl_summary(res, rstep)
    rel_rows.append(["the emulator's report: release − modelled departure",
                     fns(err.get("p50_ns")), fns(err.get("p99_ns")), fns(err.get("max_ns")),
                     fcount(err.get("count"))])
    rel_rows.append(["of it, before the emulator read the frame (read lag)",
                     fns(lag.get("p50_ns")), fns(lag.get("p99_ns")), fns(lag.get("max_ns")),
                     fcount(lag.get("count"))])
    # Where the late frames lost their time (`late_parts`: each late frame's error cut at
    # the loop's steps; the parts of one frame add up to its error).
    parts = (d or {}).get("late_parts") or {}
    for key, what in [("unread", "read after its departure"),
                      ("busy", "due while the loop still released the turn before"),
                      ("wake", "the wait ended late"),
                      ("reading", "the turn read arrivals first"),
                      ("batch", "behind frames of the same release"),
                      ("send", "its own send call")]:
        p = parts.get(key)
        if p:
            rel_rows.append([f"of a late frame's error: {what} (`{key}`)", fns(p.get("p50_ns")),
                             fns(p.get("p99_ns")), fns(p.get("max_ns")), fcount(p.get("count"))])
    if isinstance(cap, dict):
        rel_rows.append(["capture: b's tap − a's tap − 1 ms", fns(cap["p50"]), fns(cap["p99"]),
                         fns(cap["max"]), f"{fcount(cap['n'])} of {fcount(cap['sent'])}"])
    else:
        rel_rows.append(["capture: b's tap − a's tap − 1 ms", cap, "", "", ""])
    md.append(f"Release error at 100k packets/s (flowlab's sender, 200 B, 10 s, delay-only "
              f"link; `{rstep}`; frames late by more than 50 µs: "
              f"{fcount((d or {}).get('late'))} of {fcount((d or {}).get('frames_sent'))}, "
              f"early (sent with a departure due up to 5 µs before theirs): "
              f"{fcount((d or {}).get('early'))}, earliest {fns(err.get('min_ns'))}; "
              f"flowlab's sender sent {fnum(fs.get('sender_packets_per_sec') if doc else None)}"
              f" packets/s, its receiver got "
              f"{fnum(fs.get('receiver_packets_per_sec') if doc else None)}):\n")
    md.append(table(["", "p50", "p99", "max", "frames"], rel_rows))
    md.append("")

    setups = emu_release_setups(res)
    if setups:
        md.append("The same release error with the receiving host's stack (IP, UDP, the socket and "
                  "flowlab's receiver, about 2 µs a frame, which a veth send runs inline on the "
                  "sending core) in three places, each the median round by p99:\n")
        md.append(table(["b's stack", "run", "p50", "p99", "p99.9", "max", "late > 50 µs",
                         "sender's schedule error p99", "capture p99"], setups))
        md.append("")

    def val(base, key):
        r = med.get(base)
        return r.get(key) if isinstance(r, dict) else r

    veth, tbf = val("emu_veth_1500", "bps"), val("emu_tbf_1500", "bps")
    m = "f. emulator"
    cmp_.add("delay-only link, 1514 B frames: bit/s", val("emu_delay_1500", "bps"), "bare veth",
             veth, vkey="emu_delay_bps", measurement=m)
    cmp_.add("delay-only link, 1514 B frames: bit/s", val("emu_delay_1500", "bps"),
             "tbf 1 Gbit/s", tbf, measurement=m)
    cmp_.add("ATM OC-12c, 64 B frames: frames/s", val("emu_atm_64", "fps"), "bare veth",
             val("emu_veth_64", "fps"), vkey="emu_atm_fps", measurement=m)
    cmp_.add("delay-only, 1514 B: emulator CPU per frame", val("emu_delay_1500",
             "cpu_ns_per_frame"), None, None, fmt=fns, measurement=m)
    cmp_.add("ATM OC-12c, 64 B: emulator CPU per frame", val("emu_atm_64", "cpu_ns_per_frame"),
             None, None, fmt=fns, measurement=m)
    cmp_.add("release error p99 at 100k packets/s (emulator's report)", err.get("p99_ns"),
             None, None, fmt=fns, vkey="emu_release_p99", measurement=m)
    cmp_.add("release error p99 at 100k packets/s (capture)",
             cap.get("p99") if isinstance(cap, dict) else cap, None, None, fmt=fns,
             measurement=m)
    md.append(cmp_.md())
    md.append("")
    overview.summary += cmp_.summary


# ------------------------------------------------------------------------------------------
# The report
# ------------------------------------------------------------------------------------------
ANALYSIS_BEGIN, ANALYSIS_END = "<!-- analysis: kept by report.py -->", "<!-- /analysis -->"


def kept_analysis(doc_path):
    """The hand-written analysis (shortfalls and their profiled causes) of the previous report,
    between the two markers: a run renews the figures, not what people found out."""
    try:
        old = open(doc_path).read()
    except OSError:
        return ""
    begin, end = old.find(ANALYSIS_BEGIN), old.find(ANALYSIS_END)
    if begin < 0 or end < begin:
        return ""
    return old[begin:end + len(ANALYSIS_END)]


def build(out, doc_path):
    res = Results(out)
    meta = res.meta
    md = []
    overview = Cmp()
    notes = []  # things in flowlab's output that looked wrong or missing

    md.append("# flowlab benchmarks\n")
    md.append(
        "flowlab against the usual tools, on the same path in the same run: a veth pair between "
        "two network namespaces on one machine (`flb-a` 10.98.0.1 sends, `flb-b` 10.98.0.2 "
        "receives or echoes). Produced by `bench/run` (see `bench/README.md`); every figure below "
        "comes from one run of it. Ratios are flowlab / peer. Targets are issue 3's, and a few "
        "of our own beyond it (`TARGETS` in `bench/report.py`).\n"
    )
    md.append("## Machine and tools\n")
    facts = [
        ("date (UTC)", meta.get("date")),
        ("kernel", meta.get("kernel")),
        ("CPU", f"{meta.get('cpu')} ({meta.get('cores')} cores, {meta.get('memory')})"),
        ("flowlab", meta.get("flowlab")),
        ("rustc", meta.get("rustc")),
        ("iperf3", meta.get("iperf3")),
        ("sockperf", meta.get("sockperf")),
        ("irtt", meta.get("irtt")),
        ("tcpdump", meta.get("tcpdump")),
        ("gcc (for bench/gso_flood.c)", meta.get("gcc")),
        ("iproute2", meta.get("iproute2")),
        ("whole run", f"{meta.get('elapsed', '?')} s (measurements only, after install and build)"),
    ]
    md.append(table(["", ""], [(k, v or "—") for k, v in facts]))
    inst = res.text("install.txt").strip()
    if inst:
        md.append("\nInstall notes: " + "; ".join(inst.splitlines()) + "\n")
    md.append("")
    link = res.text("link.txt")
    m = re.search(r"mtu (\d+)", link)
    if m:
        md.append(f"The veth MTU is {m.group(1)}. Both namespaces share the machine's "
                  f"{meta.get('cores', '?')} cores: sender and receiver compete for CPU.\n")

    summary_at = len(md)
    md.append("")  # the summary table goes here
    kept = kept_analysis(doc_path)
    if kept:
        md.append(kept + "\n")

    # -------------------------------------------------------------------------- a. UDP 64 B
    md.append("## a. UDP, 64-byte payload, as fast as possible, 10 s\n")
    cmp_ = Cmp()
    detail = []
    st_fl, v_fl = median_round(res, "udp64_flowlab", m_fl("receiver_packets_per_sec"))
    st_ip, v_ip = median_round(res, "udp64_iperf3", m_iperf_udp(64, "recv_pps"))
    st_mm, v_mm = median_round(res, "udp64_mmsg", m_gso)
    st_gs, v_gs = median_round(res, "udp64_gso", m_gso)
    fdoc, fs = fl_summary(res, st_fl)
    fl = {}
    if fdoc is None:
        fl_err = fs
        detail.append(["flowlab", fl_err, "", "", "", "", ""])
    else:
        fl_err = None
        fl = {
            "sent_pps": fs.get("sender_packets_per_sec"),
            "recv_pps": fs.get("receiver_packets_per_sec"),
            "loss_pct": fs.get("loss_pct"),
            "sent": fs.get("packets_sent"),
            "drops": fs.get("lost_at_receiver_socket"),
            "scpu": cpu_sum(fs.get("client_cpu")),
            "rcpu": cpu_sum(fs.get("agent_cpu")),
        }
        bt = ((fdoc.get("client") or {}).get("sender") or {}).get("batching") or {}
        detail.append(["flowlab", fcount(fl["sent"]), fnum(fl["sent_pps"]), fnum(fl["recv_pps"]),
                       fpct(fl["loss_pct"]), fcount(fl["drops"]),
                       f"{fpct(fl['scpu'])} / {fpct(fl['rcpu'])}"])
        fl["batching"] = bt
    ip = iperf_udp(res, st_ip, 64)
    if isinstance(ip, str):
        detail.append(["iperf3", ip, "", "", "", "", ""])
    else:
        detail.append(["iperf3", fcount(ip["sent_pkts"]), fnum(ip["sent_pps"]), fnum(ip["recv_pps"]),
                       fpct(ip["loss_pct"]), "—",
                       f"{fpct(ip['host_cpu'])} / {fpct(ip['remote_cpu'])}"])
    gso = {}
    for mode, label in (("mmsg", "C loop, sendmmsg 64/call, recvmmsg"),
                        ("gso", "C loop, UDP GSO 64×64 B/sendmsg, recvmmsg + UDP_GRO")):
        g = gso_result(res, st_mm if mode == "mmsg" else st_gs)
        gso[mode] = g
        if isinstance(g, str):
            detail.append([label, g, "", "", "", "", ""])
        else:
            detail.append([label, fcount(g["sent"]), fnum(g["sent_pps"]), fnum(g["recv_pps"]),
                           fpct(g["loss_pct"]), fcount(int(g["rxq_ovfl"] or 0)), "—"])
    ipv = ip if isinstance(ip, dict) else {}
    flv = fl if fl_err is None else {}
    cmp_.add("received packets/s", flv.get("recv_pps", fl_err), "iperf3",
             ipv.get("recv_pps", ip if isinstance(ip, str) else None), rkey="udp64_vs_iperf3",
             measurement="a. UDP 64 B max")
    cmp_.add("loss at receiver", flv.get("loss_pct", fl_err), "iperf3",
             ipv.get("loss_pct", ip if isinstance(ip, str) else None), fmt=fpct,
             vkey="udp64_loss", measurement="a. UDP 64 B max")
    gm = gso["mmsg"] if isinstance(gso["mmsg"], dict) else {}
    gg = gso["gso"] if isinstance(gso["gso"], dict) else {}
    cmp_.add("received packets/s", flv.get("recv_pps", fl_err), "C sendmmsg",
             gm.get("recv_pps", gso["mmsg"] if isinstance(gso["mmsg"], str) else None),
             measurement="a. UDP 64 B max")
    cmp_.add("received packets/s (machine limit)", flv.get("recv_pps", fl_err), "C GSO+GRO",
             gg.get("recv_pps", gso["gso"] if isinstance(gso["gso"], str) else None),
             rkey="udp64_vs_gso", measurement="a. UDP 64 B max")
    md.append(cmp_.md())
    md.append("")
    md.append(table(["sender / receiver", "datagrams sent", "sent /s", "received /s", "loss",
                     "receive-socket drops", "CPU sender / receiver (% of a core)"], detail))
    md.append("")
    krows = []
    for label, st in (("flowlab", st_fl), ("iperf3", st_ip), ("C sendmmsg", st_mm),
                      ("C GSO+GRO", st_gs)):
        k = kernel_delta(res, st)
        if k:
            krows.append([label, fcount(k.get("InDatagrams")), fcount(k.get("RcvbufErrors")),
                          fcount(k.get("NoPorts")), fcount(k.get("InErrors")),
                          fcount(k.get("backlog_drops"))])
    if krows:
        md.append("The kernel's own count over the same (median) rounds, independent of the tools: "
                  "UDP counters of `flb-b` (`/proc/net/snmp`; one GSO/GRO buffer counts once) "
                  "and the machine's per-CPU backlog drops (`/proc/net/softnet_stat`):\n")
        md.append(table(["run", "InDatagrams", "RcvbufErrors", "NoPorts", "InErrors",
                         "backlog drops"], krows))
        md.append("")
    md.append(f"Received packets/s in each round (the tables show the median round): "
              f"flowlab {fvals(v_fl)}; iperf3 {fvals(v_ip)}; C sendmmsg {fvals(v_mm)}; "
              f"C GSO {fvals(v_gs)}.\n")
    if fl:
        bt = fl.get("batching") or {}
        para = (f"flowlab's sender: {fnum(bt.get('syscalls'))} send calls, mean batch "
                f"{bt.get('mean_batch')}, GSO {'on' if bt.get('gso') else 'off'}.")
        lost = (fl.get("sent") or 0) - (fdoc["summary"].get("packets_received") or 0)
        if fl.get("drops"):
            para += (f" The agent's receiving socket reported {fcount(fl['drops'])} drops "
                     f"(`lost_at_receiver_socket`, SO_RXQ_OVFL) for {fcount(lost)} datagrams "
                     "lost: the receiver is slower than the sender.")
        md.append(para + "\n")
    # lost_at_receiver_socket against the kernel's own count, in every UDP max-rate round
    for base in ("udp64_flowlab", "udp1400_flowlab"):
        for st in rounds(res, base):
            d, sm = fl_summary(res, st)
            if d is None:
                continue
            lars = sm.get("lost_at_receiver_socket")
            lostn = sm.get("packets_lost") or 0
            k = kernel_delta(res, st) or {}
            rbe = k.get("RcvbufErrors")
            if lars is None and sm.get("sender") == "client":
                notes.append(
                    f"`{st}`: `summary.lost_at_receiver_socket` is null for a UDP test on "
                    f"Linux (the kernel counted {fcount(rbe)} receive-buffer drops in `flb-b`; "
                    f"flowlab lost {fcount(lostn)}). The docs say null means the kernel does not "
                    "tell; here it is presumably 0 (SO_RXQ_OVFL's cmsg only comes once a drop "
                    "has happened), so null hides a real 0.")
            elif lars and lostn > 4 * lars:
                notes.append(
                    f"`{st}`: `summary.lost_at_receiver_socket` = {fcount(lars)} but "
                    f"{fcount(lostn)} datagrams were lost ({lostn / lars:.0f}× as many; the "
                    f"kernel's RcvbufErrors in `flb-b`: {fcount(rbe)}). With UDP GSO/GRO one "
                    "socket buffer carries up to 64 datagrams and SO_RXQ_OVFL counts buffers, "
                    "so the field undercounts the datagrams dropped at the socket; the docs "
                    "call it a count of packets.")
    md.append(
        "The C loop (`bench/gso_flood.c`) is the ceiling: with UDP GSO one `sendmsg` hands "
        "64 datagrams to the kernel, they cross the veth as one GSO packet and, with UDP_GRO "
        "set on the receiving socket, arrive as one buffer; the receiver counts len/gso_size "
        "datagrams. The sendmmsg variant sends the same datagrams one skb each, as flowlab and "
        "iperf3 do.\n")
    overview.summary += cmp_.summary

    # -------------------------------------------------------------------------- b. TCP
    md.append("## b. TCP bulk, 10 s\n")
    cmp_ = Cmp()
    detail = []
    st_ft, v_ft = median_round(res, "tcp_flowlab", m_fl("receiver_goodput_bps"))
    st_it, v_it = median_round(res, "tcp_iperf3", m_iperf_tcp)
    fdoc, fs = fl_summary(res, st_ft)
    ftcp = {}
    if fdoc is None:
        detail.append(["flowlab", fs, "", "", ""])
        f_err = fs
    else:
        f_err = None
        g = fs.get("receiver_goodput_bps")
        c1, c2 = cpu_sum(fs.get("client_cpu")), cpu_sum(fs.get("agent_cpu"))
        tot = (c1 or 0) + (c2 or 0)
        ftcp = {"bps": g, "cpu": tot, "cpg": tot / (g / 1e9) if g else None}
        ti = (fdoc.get("client") or {}).get("tcp_info") or {}
        detail.append(["flowlab", fnum(g) + "bit/s", f"{fpct(c1)} / {fpct(c2)}",
                       fpct(ftcp["cpg"]), fnum(ti.get("total_retrans"))])
    doc, err = res.json(st_it)
    itcp = {}
    if doc is None:
        detail.append(["iperf3", err, "", "", ""])
        i_err = err
    else:
        i_err = None
        end = doc.get("end") or {}
        g = (end.get("sum_received") or {}).get("bits_per_second")
        cpu = end.get("cpu_utilization_percent") or {}
        c1, c2 = cpu.get("host_total"), cpu.get("remote_total")
        tot = (c1 or 0) + (c2 or 0)
        itcp = {"bps": g, "cpu": tot, "cpg": tot / (g / 1e9) if g else None}
        detail.append(["iperf3", fnum(g) + "bit/s", f"{fpct(c1)} / {fpct(c2)}", fpct(itcp["cpg"]),
                       fnum((end.get("sum_sent") or {}).get("retransmits"))])
    cmp_.add("receiver goodput, bit/s", ftcp.get("bps", f_err), "iperf3", itcp.get("bps", i_err),
             rkey="tcp_goodput", measurement="b. TCP bulk")
    cmp_.add("CPU % (sender + receiver) per Gbit/s", ftcp.get("cpg", f_err), "iperf3",
             itcp.get("cpg", i_err), fmt=lambda v: fpct(v) if not isinstance(v, str) else v,
             rkey="tcp_cpu_per_gbit", measurement="b. TCP bulk")
    md.append(cmp_.md())
    md.append("")
    md.append(table(["tool", "goodput", "CPU sender / receiver (% of a core)",
                     "CPU % per Gbit/s (both ends)", "retransmitted segments"], detail))
    md.append(f"\nGoodput in each round, bit/s (the tables show the median round): flowlab "
              f"{fvals(v_ft)}; iperf3 {fvals(v_it)}.")
    md.append(
        "\nCPU is process time (user + system) as a percent of one core at each end: flowlab's "
        "`process_user_pct + process_system_pct` of `client_cpu` and `agent_cpu`, iperf3's "
        "`cpu_utilization_percent.host_total` and `remote_total` (the same getrusage measure). "
        "Softirq work done on behalf of the other process is charged to whoever was running, "
        "so the split between ends is rough on one machine; the sum is the fairer figure.\n")
    overview.summary += cmp_.summary

    # -------------------------------------------------------------------------- c. pacing
    md.append("## c. Pacing fidelity, measured from a packet capture\n")
    cmp_ = Cmp()
    detail = []
    pace = {}
    runs = [(f"pace_{tool}_{tag}", pps, size)
            for tag, pps, size in (("500", 500, 1000), ("100k", 100_000, 200))
            for tool in ("flowlab", "iperf3")] + [("pace_irtt", 100, None)]
    for step, pps, size in runs:
        st = res.steps.get(step)
        r = {"pps": pps}
        pace[step] = r
        if st is None:
            r["err"] = "not run"
            continue
        for tap, suffix in (("in", ".pcap"), ("out", ".out.pcap")):
            pc = res.path(step + suffix)
            g = None
            try:
                g = gap_stats(pc, pps, size) if os.path.exists(pc) else None
            except (ValueError, struct.error) as e:
                r.setdefault("err", f"failed: pcap unreadable ({e})")
            if g:
                g["cap"] = capture_log(res, step + suffix)
                r[tap] = g
        if "in" in r and "out" in r and len(r["in"]["_gaps"]) == len(r["out"]["_gaps"]):
            d = sorted(abs(a - b) for a, b in zip(r["in"]["_gaps"], r["out"]["_gaps"]))
            r["tapdiff"] = (pct(d, 50), pct(d, 99))
        for tap in ("in", "out"):
            if tap in r:
                del r[tap]["_gaps"]
        if "in" not in r and "err" not in r:
            r["err"] = "failed: " + (res.reason(step) if st["rc"] else "empty capture")
        if step.startswith("pace_flowlab"):
            fdoc, fs = fl_summary(res, step)
            if fdoc is not None:
                r["self"] = fs.get("schedule_error")
                r["sent"] = fs.get("packets_sent")
                r["lost_by_sender"] = fs.get("lost_by_sender")
                r["batching"] = ((fdoc.get("client") or {}).get("sender") or {}).get("batching")
            elif st["rc"] != 0:
                r["err"] = fs
        elif step.startswith("pace_iperf3"):
            ipr = iperf_udp(res, step, size)
            if isinstance(ipr, dict):
                r["sent"] = ipr["sent_pkts"]
            elif st["rc"] != 0:
                r["err"] = ipr
        else:
            s = irtt_result(res, step)
            if isinstance(s, str):
                r["err"] = s
            else:
                r["stats"] = s
                r["sent"] = s.get("packets_sent")
    irtt = pace["pace_irtt"]

    def pv(step, key, tap="in"):
        r = pace.get(step) or {}
        if tap in r:
            return r[tap].get(key)
        return r.get("err", "—")

    for tag, label in (("500", "500 packets/s (2 ms)"), ("100k", "100k packets/s (10 µs)")):
        for q in ("p50", "p99"):
            cmp_.add(f"{label}: {q} of abs(gap − nominal)", pv(f"pace_flowlab_{tag}", q), "iperf3",
                     pv(f"pace_iperf3_{tag}", q), fmt=fns, vkey=f"pace_{tag}_{q}",
                     measurement="c. pacing")
        cmp_.add(f"{label}: max of abs(gap − nominal)", pv(f"pace_flowlab_{tag}", "max"), "iperf3",
                 pv(f"pace_iperf3_{tag}", "max"), fmt=fns, measurement="c. pacing")
        cmp_.add(f"{label}: p99 at the sender's tap (flb-va, out)",
                 pv(f"pace_flowlab_{tag}", "p99", "out"), "iperf3",
                 pv(f"pace_iperf3_{tag}", "p99", "out"), fmt=fns, measurement="c. pacing")
        cmp_.add(f"{label}: gaps shorter than half the interval", pv(f"pace_flowlab_{tag}", "bunched_pct"),
                 "iperf3", pv(f"pace_iperf3_{tag}", "bunched_pct"), fmt=fpct, measurement="c. pacing")
    cmp_.add("100 packets/s (10 ms): p50 / p99 of abs(gap − nominal)", None, "irtt",
             f"{fns(pv('pace_irtt', 'p50'))} / {fns(pv('pace_irtt', 'p99'))}",
             measurement="c. pacing")
    md.append("Capture on `flb-vb` in `flb-b` (where the packets arrive):\n")
    md.append(cmp_.md())
    md.append("")
    for step, r in pace.items():
        for tap, tapname in (("in", "flb-vb, in"), ("out", "flb-va, out")):
            g = r.get(tap)
            row = [step, tapname]
            if g:
                cap = g.get("cap") or {}
                notw = None
                if "by_filter" in cap and "captured" in cap:
                    notw = cap["by_filter"] - cap["captured"]
                row += [f"{g['packets']:,}", fcount(r.get("sent")),
                        f"{cap.get('dropped', '?')} / {notw if notw is not None else '?'}",
                        f"{g['trains']:,} (max {g['max_train']})",
                        f"{g['rate_pps']:.1f}", fns(g["p50"]), fns(g["p99"]), fns(g["p999"]),
                        fns(g["max"]), fpct(g["bunched_pct"]), fns(g["min_gap"]),
                        fns(g["max_gap"])]
                td = r.get("tapdiff")
                row.append(f"{fns(td[0])} / {fns(td[1])}" if td and tap == "in" else "")
            else:
                if tap == "out" and "in" in r:
                    continue
                row += [r.get("err", "no capture")] + [""] * 13
            detail.append(row)
    md.append("All runs and both capture points:\n")
    md.append(table(["run", "tap", "datagrams captured", "sent (tool's count)",
                     "capture drops (kernel / unwritten)", "GSO trains (records of >1 datagram)",
                     "rate from capture, /s", "p50 abs err", "p99 abs err", "p99.9 abs err",
                     "max abs err", "gaps < nominal/2", "min gap", "max gap",
                     "gap in − gap out, abs: p50 / p99"], detail))
    md.append("")
    # the tools' own view
    own = []
    for tag in ("500", "100k"):
        r = pace.get(f"pace_flowlab_{tag}") or {}
        se = r.get("self")
        bt = r.get("batching") or {}
        if se:
            own.append([f"flowlab {tag}/s: summary.schedule_error (send time − due time)",
                        fns(se.get("min_ns")), fns(se.get("p50_ns")), fns(se.get("p99_ns")),
                        fns(se.get("max_ns")), fns(se.get("mean_ns")),
                        f"mean batch {bt.get('mean_batch', 0):.2f}, max {bt.get('max_batch')}, "
                        f"GSO {'on' if bt.get('gso') else 'off'}, lost_by_sender "
                        f"{fcount(r.get('lost_by_sender'))}"])
        elif r:
            own.append([f"flowlab {tag}/s", r.get("err", "schedule_error null"), "", "", "", "", ""])
    s = irtt.get("stats")
    if s:
        te = s.get("timer_error") or {}
        sc = s.get("send_call") or {}
        own.append(["irtt 100/s: stats.timer_error (timer wake-up error)", fns(te.get("min")), "—",
                    "—", fns(te.get("max")), fns(te.get("mean")),
                    f"timer misses {s.get('timer_misses')}"])
        own.append(["irtt 100/s: stats.send_call (time in the send call)", fns(sc.get("min")), "—",
                    "—", fns(sc.get("max")), fns(sc.get("mean")), ""])
    if own:
        md.append("What the tools report about their own timing (flowlab: lateness of each send "
                  "against its absolute due time, negative = sent early; irtt's JSON has no "
                  "percentiles for these):\n")
        md.append(table(["tool's own figure", "min", "p50", "p99", "max", "mean", "batching"], own))
        md.append("")
    for tag, pps in (("500", 500), ("100k", 100_000)):
        r = pace.get(f"pace_flowlab_{tag}") or {}
        se = r.get("self") or {}
        g = r.get("out") or r.get("in")
        if se.get("min_ns") is not None and se["min_ns"] < 0:
            notes.append(
                f"c. At {tag} packets/s flowlab sends some datagrams before they are due: "
                f"`schedule_error` min {fns(se['min_ns'])}, p50 {fns(se.get('p50_ns'))} "
                f"(nominal interval {fns(1e9 / pps)}). A negative schedule error means the "
                "pacer put a datagram on the wire early, bundled with an earlier one.")
        if g and g.get("trains"):
            notes.append(
                f"c. At {tag} packets/s the capture at the sender shows {fcount(g['trains'])} of "
                f"{fcount(g['records'])} records carrying more than one datagram (UDP GSO "
                f"trains, up to {g['max_train']}): those datagrams leave back to back, not "
                f"{fns(1e9 / pps)} apart; {fpct(g['bunched_pct'])} of gaps are shorter than "
                "half the interval.")
        if se.get("p99_ns") and se["p99_ns"] > 20_000:
            notes.append(
                f"c. flowlab's own `schedule_error` at {tag} packets/s: p99 "
                f"{fns(se['p99_ns'])}, max {fns(se.get('max_ns'))}, "
                f"lost_by_sender {fcount(r.get('lost_by_sender'))}: the sender wakes late on "
                "this machine, so the capture's p99 is mostly the sender's own lateness.")
    md.append(
        "**How the capture is analysed.** While each paced run goes, two `tcpdump`s stamp every "
        "UDP datagram to 10.98.0.2 with the kernel's clock in nanoseconds "
        "(`-s 128 -B 65536 --time-stamp-precision=nano`): one on `flb-vb` inside `flb-b` "
        "(`-Q in`, where the packets arrive: the figures of the first table), one on `flb-va` "
        "inside `flb-a` (`-Q out`, where they leave the sender's namespace). Neither depends on "
        "the tool under test. `bench/report.py` reads each pcap with `struct` (nanosecond magic "
        "`0xa1b23c4d`), parses Ethernet/IPv4/UDP, and keeps the destination port carrying most "
        "datagrams of the run's payload size (this drops iperf3's and irtt's control "
        "datagrams). A UDP GSO packet (one record of k × size bytes, segmented by the kernel "
        "after the tap) counts as k datagrams at the same instant: they leave back to back. "
        "For consecutive datagrams it takes the inter-capture gap and its error against the "
        "nominal interval (1/rate: 2 ms at 500 /s, 10 µs at 100k /s, 10 ms for irtt) and "
        "reports the nearest-rank p50, p99, p99.9 and max of |gap − nominal|, the share of gaps "
        "shorter than half the interval (bursts), and the rate over the whole capture. A "
        "datagram missing from the capture shows as one gap of twice the interval. The "
        "arrival tap adds the veth hand-over and softirq scheduling to each gap; the last "
        "column compares each gap at arrival with the same gap at departure, to show how much "
        "(in trial runs: about 0.5 µs at p50, from under 1 µs to ~35 µs at p99 at 500 /s, "
        "where the receiving CPU may be idle between packets). The departure tap is the "
        "closer view of the sender's own timing. "
        "On this 2-core machine the two tcpdumps also compete with sender and receiver for "
        "CPU. Capture drops: `dropped by kernel` as tcpdump reports it, and datagrams the "
        "filter accepted but tcpdump never wrote.\n")
    overview.summary += cmp_.summary

    cost_section(res, md)
    long_section(res, md)

    # -------------------------------------------------------------------------- d. RTT
    md.append("## d. Round trip of a 64-byte UDP echo\n")
    cmp_ = Cmp()
    detail = []
    rtt = {}
    for step, label in (("rtt_flowlab", "flowlab --mode loopback, 125 packets/s"),
                        ("rtt_flowlab_busypoll", "flowlab --mode loopback --busy-poll")):
        fdoc, fs = fl_summary(res, step)
        if fdoc is None:
            rtt[step] = {"err": fs}
            detail.append([label, fs, "", "", "", "", ""])
            continue
        rt = fs.get("round_trip") or {}
        rtt[step] = rt
        detail.append([label, fnum(rt.get("count")), fns(rt.get("min_ns")), fns(rt.get("p50_ns")),
                       fns(rt.get("p90_ns")), fns(rt.get("p99_ns")), fns(rt.get("max_ns"))])
        if fs.get("loss_pct"):
            detail[-1][0] += f" (loss {fpct(fs.get('loss_pct'))})"
    sp = {}
    for step, label in (("rtt_sockperf", "sockperf ping-pong (back to back), 2× one-way"),
                        ("rtt_sockperf_125", "sockperf ping-pong --mps 125, 2× one-way")):
        r = sockperf_result(res, step)
        sp[step] = r
        if isinstance(r, str):
            detail.append([label, r, "", "", "", "", ""])
        else:
            detail.append([label, fnum(r.get("received")), fns(2 * r["min"]) if "min" in r else "—",
                           fns(2 * r[50.0]), fns(2 * r[90.0]) if 90.0 in r else "—",
                           fns(2 * r[99.0]) if 99.0 in r else "—",
                           fns(2 * r["max"]) if "max" in r else "—"])
    s = irtt.get("stats") or {}
    irtt_rtt = (s.get("rtt") or {})
    if irtt_rtt:
        detail.append(["irtt client -i 10ms (100 packets/s, 60 B)", fnum(irtt_rtt.get("n")),
                       fns(irtt_rtt.get("min")), fns(irtt_rtt.get("median")), "—", "—",
                       fns(irtt_rtt.get("max"))])
    else:
        detail.append(["irtt", irtt.get("err", "not run"), "", "", "", "", ""])

    def fl_p50(step):
        r = rtt.get(step) or {}
        return r.get("p50_ns", r.get("err"))

    def sp_p50(step):
        r = sp.get(step)
        return 2 * r[50.0] if isinstance(r, dict) else r

    cmp_.add("RTT p50 (sockperf back to back)", fl_p50("rtt_flowlab"), "sockperf 2×p50",
             sp_p50("rtt_sockperf"), fmt=fns, measurement="d. RTT 64 B")
    if "rtt_sockperf_125" in res.steps:
        cmp_.add("RTT p50 (same 125 packets/s)", fl_p50("rtt_flowlab"), "sockperf --mps 125 2×p50",
                 sp_p50("rtt_sockperf_125"), fmt=fns, rkey="rtt_vs_sockperf",
                 measurement="d. RTT 64 B")
    cmp_.add("RTT p50", fl_p50("rtt_flowlab"), "irtt median",
             irtt_rtt.get("median", irtt.get("err")), fmt=fns, rkey="rtt_vs_irtt",
             measurement="d. RTT 64 B")
    bp = rtt.get("rtt_flowlab_busypoll") or {}
    cmp_.add("RTT p50 with --busy-poll", bp.get("p50_ns", bp.get("err")), "sockperf 2×p50",
             sp_p50("rtt_sockperf"), fmt=fns, rkey="rtt_vs_sockperf", measurement="d. RTT 64 B")
    rdoc, rs = fl_summary(res, "rr_flowlab")
    tr = (rs.get("transactions") or {}) if rdoc is not None else {}
    srr = sockperf_result(res, "rr_sockperf_tcp")
    sp_rr = srr if isinstance(srr, dict) else {}
    sp_secs = 10.0
    cmp_.add("TCP RR 64 B/64 B: transaction p50", (tr.get("latency") or {}).get("p50_ns", rs),
             "sockperf --tcp 2×p50", 2 * sp_rr[50.0] if 50.0 in sp_rr else srr, fmt=fns,
             measurement="d. TCP request/response")
    cmp_.add("TCP RR 64 B/64 B: transactions/s", tr.get("transactions_per_sec", rs),
             "sockperf --tcp round trips/s",
             sp_rr["received"] / sp_secs if "received" in sp_rr else srr,
             measurement="d. TCP request/response")
    b, p = rtt.get("rtt_flowlab_busypoll") or {}, rtt.get("rtt_flowlab") or {}
    if b.get("p99_ns") and p.get("p99_ns") and b["p99_ns"] > 3 * p["p99_ns"]:
        bdoc, bs = fl_summary(res, "rtt_flowlab_busypoll")
        lbs = bs.get("lost_by_sender") if bdoc is not None else None
        verb = "lowers" if (b.get("p50_ns") or 0) < (p.get("p50_ns") or 0) else "does not lower"
        notes.append(
            f"d. `--busy-poll` {verb} the RTT p50 ({fns(p.get('p50_ns'))} without, "
            f"{fns(b.get('p50_ns'))} with) and the tail is far worse: p90 {fns(b.get('p90_ns'))}, "
            f"p99 {fns(b.get('p99_ns'))} (without: {fns(p.get('p99_ns'))}), and "
            f"{fcount(lbs)} datagrams lost by the sender (missed slots). CPU with busy-poll: "
            f"client {fpct(cpu_sum(bs.get('client_cpu')) if bdoc is not None else None)}, agent "
            f"{fpct(cpu_sum(bs.get('agent_cpu')) if bdoc is not None else None)} of a core, "
            f"host {fpct(((bs.get('client_cpu') or {}).get('host_pct')) if bdoc is not None else None)}"
            " (`--help`: \"one core spinning\"). On 2 cores, spinning sockets at both ends "
            "leave little for the sender and the echoer.")
    md.append(cmp_.md())
    md.append("")
    md.append(table(["tool", "samples", "min", "p50", "p90", "p99", "max"], detail))
    md.append(
        "\nsockperf reports one-way latency as RTT/2, so its figures are doubled here. "
        "`sockperf ping-pong` sends the next message as soon as the answer arrives (about "
        "15-30k round trips a second), which keeps both CPUs awake; flowlab at `--rate 64k "
        "--size 64` sends 125 packets/s and irtt 100/s, so each packet may find a CPU idle. The "
        "`--mps 125` row runs sockperf at flowlab's rate for a like-for-like figure.\n")
    overview.summary += cmp_.summary

    # -------------------------------------------------------------------------- e. flows
    md.append("## e. 1000 concurrent flows of 100 packets/s through one agent\n")
    cmp_ = Cmp()

    def sched_p99(res, step):
        doc, s = fl_summary(res, step)
        return s if doc is None else (s.get("schedule_error") or {}).get("p99_ns")

    def sched_p999(res, step):
        doc, s = fl_summary(res, step)
        return s if doc is None else (s.get("schedule_error") or {}).get("p999_ns")

    def sender_cpu(res, step):
        """The client's sending threads, % of a core."""
        doc, s = fl_summary(res, step)
        if doc is None:
            return s
        rc = (doc.get("client") or {}).get("role_cpu") or {}
        return (rc.get("user_pct") or 0) + (rc.get("system_pct") or 0) if rc else None

    def floor_cpu(res, step):
        """The path's floor (bench/flows_floor.c): its sender's CPU, % of a core."""
        if step not in res.steps:
            return "not run"
        snd = kv_line(res.text(step + ".out"), "send")
        return float(snd["cpu_pct"]) if snd else "failed: " + res.reason(step)

    def floor_per_packet(res, step):
        snd = kv_line(res.text(step + ".out"), "send") if step in res.steps else None
        return float(snd["cpu_per_packet_ns"]) if snd else None

    st_def, v_def = median_round(res, "flows_flowlab", sched_p99)
    st_floor, v_floor = median_round(res, "flows_floor", floor_cpu)
    st_floor_apart, v_floor_apart = median_round(res, "flows_floorapart", floor_cpu)
    st_frames_apart, v_frames_apart = median_round(res, "flows_framesapart", floor_cpu)
    st_floor_apart4, v_floor_apart4 = median_round(res, "flows_floorapart4", floor_cpu)
    st_frames_apart4, v_frames_apart4 = median_round(res, "flows_framesapart4", floor_cpu)
    st_pin, v_pin = median_round(res, "flows_pinned", sched_p99)
    fdoc, fs = fl_summary(res, st_def)
    if fdoc is None:
        cmp_.add("schedule error p99", fs if "not available" not in fs else "not available yet",
                 None, None, fmt=fns, vkey="flows_sched_p99", measurement="e. 1000 flows")
        cmp_.add("agent max RSS (VmHWM)", fs if "not available" not in fs else "not available yet",
                 None, None, vkey="flows_mem", measurement="e. 1000 flows")
    else:
        se = fs.get("schedule_error") or {}
        mem = res.text("flows_flowlab.mem") + res.text("flows_flowlab.mem_samples")
        hwms = [int(x) for x in re.findall(r"VmHWM:\s*(\d+)\s*kB", mem)]
        hwm = max(hwms) if hwms else None
        cmp_.add("schedule error p99", se.get("p99_ns"), None, None, fmt=fns,
                 vkey="flows_sched_p99", measurement="e. 1000 flows")
        pdoc, ps = fl_summary(res, st_pin)
        if pdoc is not None:
            cmp_.add("schedule error p99, pinned (`--cpus`)",
                     (ps.get("schedule_error") or {}).get("p99_ns"), None, None, fmt=fns,
                     vkey="flows_sched_p99", measurement="e. 1000 flows")
        cmp_.add("agent max RSS (VmHWM)", hwm, None, None,
                 fmt=lambda v: f"{v / 1024:.1f} MiB" if isinstance(v, (int, float)) else fnum(v),
                 vkey="flows_mem", measurement="e. 1000 flows")
        own = (fs.get("agent_cpu") or {}).get("process_max_rss_bytes")
        cmp_.add("agent peak memory, as flowlab reports it", own / 1024 if _num(own) else own,
                 None, None,
                 fmt=lambda v: f"{v / 1024:.1f} MiB" if isinstance(v, (int, float)) else fnum(v),
                 vkey="flows_mem", measurement="e. 1000 flows")
        cmp_.add("received packets/s (all flows)", fs.get("receiver_packets_per_sec"), None, None,
                 measurement="e. 1000 flows")
        cmp_.add("loss", fs.get("loss_pct"), None, None, fmt=fpct, measurement="e. 1000 flows")
        floor_name = "floor (C sendmmsg, 1000 per call)"
        cmp_.add("sender CPU (the client's sending threads), % of a core",
                 sender_cpu(res, st_def), floor_name if v_floor else None,
                 floor_cpu(res, st_floor), fmt=fpct, measurement="e. 1000 flows")
        st_apart, v_apart = median_round(res, "flows_apart", sender_cpu)
        if v_apart:
            cmp_.add("sender CPU, pinned, receive path on the agent's core (RPS), % of a core",
                     sender_cpu(res, st_apart), floor_name if v_floor_apart else None,
                     floor_cpu(res, st_floor_apart), fmt=fpct,
                     vkey="flows_sender_cpu", measurement="e. 1000 flows")
            cmp_.add("schedule error p99, pinned, receive path on the agent's core",
                     sched_p99(res, st_apart), None, None, fmt=fns,
                     vkey="flows_sched_p99", measurement="e. 1000 flows")
        st_packet, v_packet = median_round(res, "flows_packet", sender_cpu)
        if v_packet:
            cmp_.add("sender CPU, as above, through a packet socket (`--packet-socket`), "
                     "% of a core",
                     sender_cpu(res, st_packet),
                     "floor (C, frames through a packet socket, 1000 per call)"
                     if v_frames_apart else None,
                     floor_cpu(res, st_frames_apart), fmt=fpct,
                     vkey="flows_sender_cpu", measurement="e. 1000 flows")
            cmp_.add("sender CPU through a packet socket, against the floor sending as often "
                     "(4 per call every 40 µs)",
                     sender_cpu(res, st_packet),
                     "floor (C, frames, 4 per call)" if v_frames_apart4 else None,
                     floor_cpu(res, st_frames_apart4), fmt=fpct, measurement="e. 1000 flows")
            cmp_.add("sender CPU through the shared UDP socket, against the floor sending as "
                     "often (4 per call every 40 µs)",
                     sender_cpu(res, st_apart),
                     "floor (C sendmmsg, 4 per call)" if v_floor_apart4 else None,
                     floor_cpu(res, st_floor_apart4), fmt=fpct, measurement="e. 1000 flows")
            cmp_.add("schedule error p99, as above, through a packet socket",
                     sched_p99(res, st_packet), None, None, fmt=fns,
                     vkey="flows_sched_p99", measurement="e. 1000 flows")
        pc = ((fdoc.get("client") or {}).get("sender") or {}).get("pacing") or {}
        cmp_.add("of which pacing waits (strategy)",
                 f"{fpct(pc.get('cpu_pct'))} ({pc.get('mode')}: {pc.get('strategy')})" if pc
                 else None, None, None, measurement="e. 1000 flows")
        if se.get("p99_ns") and se["p99_ns"] > TARGET_FLOWS_NOTE_NS:
            bt = ((fdoc.get("client") or {}).get("sender") or {}).get("batching") or {}
            notes.append(
                f"e. 1000 flows × 100 packets/s: `schedule_error` p99 {fns(se['p99_ns'])}, "
                f"max {fns(se.get('max_ns'))}, {fcount(fs.get('lost_by_sender'))} datagrams "
                f"lost by the sender, {fnum(bt.get('syscalls'))} send calls (mean batch "
                f"{bt.get('mean_batch', 0):.2f}), the client process at "
                f"{fpct(cpu_sum(fs.get('client_cpu')))} of a core.")
        hl = [ln.strip() for ln in res.text("flowlab-test-help.txt").splitlines()
              if "--rate" in ln and re.search(r"each flow|per flow|total", ln)]
        given = res.text("flows_flowlab.rate").strip()
        md.append(f"Rate given: `--rate {given}` "
                  f"{'per flow' if given.endswith('k') else 'in total'}, "
                  "100 datagrams/s of 1000 B each (`flowlab test --help`: "
                  f"\"{hl[0] if hl else '?'}\").\n")
        rounds_p999 = [sched_p999(res, st) for st in rounds(res, "flows_flowlab")]
        pinned_p999 = [sched_p999(res, st) for st in rounds(res, "flows_pinned")]
        md.append(f"Schedule error in each round (median shown): p99 {fvals(v_def, fns)}, "
                  f"p999 {fvals(rounds_p999, fns)}; pinned p99 {fvals(v_pin, fns)}, "
                  f"p999 {fvals(pinned_p999, fns)}.\n")
        if v_floor or v_floor_apart:
            md.append(
                "The floor (peer column): `bench/flows_floor.c`, the cheapest sender of the same "
                "traffic (1000 destination ports, 1000 B, 100k datagrams/s, one sendmmsg of 1000 "
                "every 10 ms, no pacing) to 1000 sockets in flb-b; `floorapart` pinned like "
                "`apart`, with RPS. What the kernel charges a datagram on this path: "
                f"{fvals([floor_per_packet(res, st) for st in rounds(res, 'flows_floor')], fns)} "
                "a datagram, apart "
                f"{fvals([floor_per_packet(res, st) for st in rounds(res, 'flows_floorapart')], fns)}"
                " (each round); the sender's CPU in each round "
                f"{fvals(v_floor, fpct)}, apart {fvals(v_floor_apart, fpct)}; as whole frames "
                f"through a packet socket (`framesapart`) {fvals(v_frames_apart, fpct)}; "
                "sending 4 datagrams every 40 µs, as often as flowlab's auto pacing sends "
                f"them, apart {fvals(v_floor_apart4, fpct)}, as frames "
                f"{fvals(v_frames_apart4, fpct)}.\n")
    md.append(cmp_.md())
    md.append("")
    overview.summary += cmp_.summary

    # -------------------------------------------------------------------------- extras
    md.append("## Other figures\n")
    cmp_ = Cmp()
    fdoc, fs = fl_summary(res, "udp2m_flowlab")
    if fdoc is None:
        cmp_.add("2 Mbit/s UDP, 500 B: receiver goodput", fs, None, None,
                 measurement="UDP 2 Mbit/s accuracy")
        acc_row = None
    else:
        g = fs.get("receiver_goodput_bps")
        err = 100.0 * (g - 2e6) / 2e6 if g is not None else None
        cmp_.add("2 Mbit/s UDP, 500 B: receiver goodput (error vs 2e6)",
                 f"{fnum(g)}bit/s ({err:+.4f} %)" if err is not None else None, None, None,
                 vkey="udp2m_acc", value=err, measurement="UDP 2 Mbit/s accuracy")
    st_f14, v_f14 = median_round(res, "udp1400_flowlab", m_fl("receiver_goodput_bps"))
    st_i14, v_i14 = median_round(res, "udp1400_iperf3", m_iperf_udp(1400, "recv_bps"))
    fdoc, fs = fl_summary(res, st_f14)
    ip = iperf_udp(res, st_i14, 1400)
    fl_g = fs.get("receiver_goodput_bps") if fdoc is not None else fs

    def m_gso_bps(res, step):
        r = gso_result(res, step)
        return r if isinstance(r, str) else r.get("recv_bps")

    st_g14, v_g14 = median_round(res, "udp1400_gso", m_gso_bps)
    ip_g = ip.get("recv_bps") if isinstance(ip, dict) else ip
    cmp_.add("UDP 1400 B max rate: receiver goodput, bit/s", fl_g, "iperf3", ip_g,
             rkey="udp1400_vs_iperf3", measurement="UDP 1400 B max")
    if v_g14:
        g14 = m_gso_bps(res, st_g14)
        cmp_.add("UDP 1400 B max rate: receiver goodput, bit/s", fl_g, "C GSO+GRO 46×1400 B", g14,
                 measurement="UDP 1400 B max")
    fl_l = fs.get("loss_pct") if fdoc is not None else fs
    ip_l = ip.get("loss_pct") if isinstance(ip, dict) else ip
    cmp_.add("UDP 1400 B max rate: loss", fl_l, "iperf3", ip_l, fmt=fpct,
             measurement="UDP 1400 B max")
    cmp_.add("TCP max rate: receiver goodput, bit/s (from b)", ftcp.get("bps", f_err), "iperf3",
             itcp.get("bps", i_err), rkey="tcp_goodput", measurement="TCP max")
    r = rtt.get("rtt_flowlab") or {}
    cmp_.add("UDP round trip on the veth, p50 / p99 (from d)",
             f"{fns(r.get('p50_ns'))} / {fns(r.get('p99_ns'))}" if "p50_ns" in r else r.get("err"),
             None, None, measurement="RTT on veth")
    md.append(cmp_.md())
    md.append("")
    if v_f14 or v_i14:
        md.append(f"UDP 1400 B goodput in each round, bit/s (median shown): flowlab "
                  f"{fvals(v_f14)}; iperf3 {fvals(v_i14)}; C GSO+GRO {fvals(v_g14)}. flowlab "
                  "and the C loop use UDP GSO (and GRO at the receiver), iperf3 sends one "
                  "datagram per call: on a veth, where GSO packets are never segmented, that "
                  "is most of the difference.\n")
    overview.summary += cmp_.summary

    emu_section(res, md, overview, meta)
    capture_section(res, md)
    cpu_section(res, md)

    # -------------------------------------------------------------------------- notes
    for step, st in res.steps.items():
        if st["rc"] not in (0, 255):
            notes.append(f"`{step}` exited with status {st['rc']}: {res.reason(step)}")
    disturbed = [k for k, st in res.steps.items() if st.get("others") and max(st["others"]) > 0]
    if disturbed:
        notes.insert(0,
            f"**{len(disturbed)} of {len(res.steps)} measured commands ran while compilers or "
            "linkers were running on this machine** (someone building; `bench/run` waits for "
            "them before each command, up to `FLB_QUIET_BUDGET` seconds in all): their "
            "figures are disturbed: " + ", ".join(f"`{k}`" for k in disturbed) + ".")
    md.append("## Observations\n")
    md.append("Found by `bench/report.py` in this run's figures:\n")
    md.extend(f"- {n}" for n in notes) if notes else md.append("- nothing unusual")
    md.append("")

    # -------------------------------------------------------------------------- commands
    md.append("## Exact commands\n")
    md.append("Servers run in `flb-b`, clients in `flb-a`; every command under `timeout`. "
              "Each server is started fresh for its step and stopped after it.\n")
    md.append("Paths: `target/release/flowlab` is relative to the checkout, `$OUT` is the run's "
              "raw-results directory.\n")
    md.append("```sh")
    root = meta.get("root", "\0")
    outdir = meta.get("out", out)

    def rel(c):
        return c.replace(outdir + "/", "$OUT/").replace(root + "/", "")

    for step, st in res.steps.items():
        m = re.fullmatch(r"(.*)-(\d+)", step)
        if m and int(m.group(2)) > 1:
            continue  # later rounds run the same commands
        if m:
            n = len(rounds(res, m.group(1)))
            md.append(f"# {m.group(1)}: {n} round(s), the same commands each time")
        srv = res.text(step + ".server.cmd").strip()
        cap = res.text(step + ".capture.cmd").strip()
        cond = ""
        if st.get("load") is not None:
            cond = f", load {st['load']:.2f}"
        if st.get("others"):
            cond += f", compilers running {st['others'][0]}/{st['others'][1]}"
        md.append(f"# {step}  (exit {st['rc']}, {st['secs']:.1f} s{cond})")
        if srv:
            srv = srv if srv.startswith("ip netns") else f"ip netns exec flb-b {srv}"
            md.append(rel(srv) + " &")
        if cap:
            md.extend(rel(c) + " &" for c in cap.splitlines())
        md.append(rel(st["cmd"]))
    md.append("```\n")
    md.append(f"Raw results of this run were in `{out}` (not committed).\n")

    # -------------------------------------------------------------------------- summary
    srows = []
    for row in overview.summary:
        srows.append(row)
    summ = ["## Summary\n",
            table(["measurement", "metric", "flowlab", "peer", "ratio", "target", "met?"], srows),
            ""]
    md[summary_at:summary_at + 1] = summ

    text = "\n".join(md).rstrip() + "\n"
    with open(doc_path, "w") as f:
        f.write(text)
    # the summary on stdout too
    print("\n".join(summ))


def main(argv):
    if len(argv) in (4, 5) and argv[1] == "gaps":
        pps = float(argv[3].replace("k", "e3"))
        g = gap_stats(argv[2], pps, int(argv[4]) if len(argv) == 5 else None)
        if g:
            g.pop("_gaps", None)
        print(json.dumps(g, indent=2))
        return 0
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    build(argv[1], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
