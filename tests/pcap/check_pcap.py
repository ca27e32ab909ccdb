#!/usr/bin/python3
"""Conformance checks for any capture of INCA traffic (RoCEv2 UC WRITE-Only-Imm on UDP 4791).

usage: check_pcap.py CAPTURE [MIN_PACKETS] [--expect TSV] [--lua PATH] [--max-frames N] [--auth-key HEX] [-v]

For every UDP packet to port 4791 in CAPTURE (pcap or pcapng; Ethernet, the fake Ethernet
header of Linux loopback captures, Linux cooked (-i any) or raw IP):
  1. IPv4 shape: version 4, IHL 5, DF, no fragment, valid header checksum, UDP length.
  2. ICRC recomputed by scapy.contrib.roce (independent of INCA's C code) equals the carried one.
  3. An independent Python decode of BTH/RETH/ImmDt/INCA header per docs/protocol.md is strict-
     valid (opcode 0x2B, PadCnt and zero pad, DMA length, version, flags, enums, BSL, count).
  4. tshark decodes it as InfiniBand with bth.opcode 0x2B, RETH and ImmDt present and matching,
     and reports no malformed packet and no expert info at all.
  5. tshark with tools/inca.lua shows INCA fields, the set BFR-ids and the data elements equal to
     the Python decode, with no INCA expert info above "note".
  6. With --expect (written by gen_pcap), every packet equals what the encoder was asked to write.
A loopback capture shows a UDP GSO send as one datagram carrying several INCA packets back to
back (the kernel never segments it there). Such datagrams (longer than their first packet's
own length) are first cut into the packets the kernel puts on a real link (segment length from
the first packet's BTH PadCnt and RETH DMA length;
segment k gets IPv4 ID k after the send's, its own lengths and a zero UDP checksum) and every
check runs on those; frame numbers then count the cut packets.
Exit 0 on success, 1 on any failure, 77 when tshark or scapy is missing (test SKIP).
"""
import argparse
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ESIZE = [1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8]
DNAME = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
         "fp16", "bf16", "fp32", "fp64"]
ELEM_FMT = {0: "b", 1: "B", 2: "h", 3: "H", 4: "i", 5: "I", 6: "q", 7: "Q", 8: "e",
            10: "f", 11: "d"}
OPCODE = 0x2B
PORT = 4791
SEV_NOTE = 0x00400000  # Wireshark PI_NOTE; PI_WARN 0x00600000, PI_ERROR 0x00800000

errors = []


def fail(frame, msg):
    errors.append("frame %s: %s" % (frame, msg))


def bf16_to_float(h):
    return struct.unpack("<f", struct.pack("<I", h << 16))[0]


def elements(dtype, data):
    """Data elements as Python numbers (data is little-endian on the wire)."""
    n = len(data) // ESIZE[dtype]
    if dtype == 9:
        return [bf16_to_float(v) for v in struct.unpack("<%dH" % n, data)]
    return list(struct.unpack("<%d%s" % (n, ELEM_FMT[dtype]), data))


def decode_inca(frame, udp_payload):
    """Strict decode of the UDP payload following docs/protocol.md. Returns a dict or None."""
    p = udp_payload
    if len(p) < 12 + 16 + 4 + 20 + 4:
        return fail(frame, "UDP payload too short (%d)" % len(p))
    opcode, b1, pkey, b4, dqpn_hi, dqpn_lo, b8, psn_hi, psn_lo = struct.unpack(
        "!BBHBBHBBH", p[:12])
    if opcode != OPCODE:
        return fail(frame, "BTH opcode 0x%02x != 0x2B" % opcode)
    padcnt, tver = (b1 >> 4) & 3, b1 & 0xF
    if tver != 0 or b4 & 0x3F or b8 & 0x7F:
        return fail(frame, "BTH TVer or reserved bits set")
    va, rkey, dmalen, imm = struct.unpack("!QIII", p[12:32])
    h = p[32:]
    b0, coll, dtype, op, tree, slot, rnd, bfr, bslb, si, count, rsv = struct.unpack(
        "!BBBBHHIHBBHH", h[:20])
    d = dict(flags=b0 & 0xF, coll=coll, dtype=dtype, op=op, tree=tree, slot=slot, round=rnd,
             bfr_id=bfr, bsl=bslb & 0xF, si=si, count=count, va=va, rkey=rkey, imm=imm,
             dqpn=dqpn_hi << 16 | dqpn_lo, psn=psn_hi << 16 | psn_lo, padcnt=padcnt,
             dmalen=dmalen, pkey=pkey)
    if b0 >> 4 != 1:
        return fail(frame, "INCA version %d != 1" % (b0 >> 4))
    if b0 & 0x4 and (b0 & 0x3 or count):  # NACK: a header-only repair notice of its own kind
        return fail(frame, "NACK with RESULT/RETX or data (flags 0x%x count %d)" % (b0 & 0xF, count))
    if not 1 <= coll <= 9:
        return fail(frame, "unknown collective %d" % coll)
    if dtype >= 12:
        return fail(frame, "unknown dtype %d" % dtype)
    if op >= 7 or (op >= 4 and dtype >= 8):
        return fail(frame, "op %d invalid for dtype %d" % (op, dtype))
    if bslb >> 4 or (rsv and coll not in (2, 3, 5, 6)):  # offset 18: owner BFR-id
        return fail(frame, "INCA reserved bits set")
    if not 1 <= bslb <= 7:
        return fail(frame, "BSL code %d outside 1..7" % bslb)
    bl = 4 << bslb
    alen = 36 if b0 & 0x8 else 0  # flag 0x8: authentication block after the bit-string
    ib_total = len(p) - 32 - 4
    if ib_total % 4 or ib_total - padcnt < 20 + bl + alen:
        return fail(frame, "IB payload %d / PadCnt %d inconsistent" % (ib_total, padcnt))
    ib = ib_total - padcnt
    if ib > 4096:
        return fail(frame, "IB payload %d > 4096" % ib)
    if any(h[ib:ib + padcnt]):
        return fail(frame, "pad bytes not zero")
    if dmalen != ib:
        return fail(frame, "RETH DMA length %d != IB payload %d" % (dmalen, ib))
    if alen:
        kid, epoch, ctx, ctr = struct.unpack("!IIIQ", h[20 + bl:20 + bl + 20])
        d.update(auth=dict(key_id=kid, epoch=epoch, ctx=ctx, ctr=ctr,
                           tag=h[20 + bl + 20:20 + bl + 36]))
        # the MAC input (docs/protocol.md §14): RETH, ImmDt, INCA fixed header, the
        # bit-string of upward packets only, the block without its tag, then the data
        d["aad"] = (p[12:32] + h[:20] + (b"" if b0 & 0x5 else h[20:20 + bl]) +
                    h[20 + bl:20 + bl + 20])
    data = h[20 + bl + alen:ib]
    if len(data) != count * ESIZE[dtype]:
        return fail(frame, "data %d bytes != count %d x %d" % (len(data), count, ESIZE[dtype]))
    bits = h[20:20 + bl]
    ids = []  # RFC 8279: bit position 1 is the least significant bit of the last byte
    for i in range(bl):
        v = bits[bl - 1 - i]
        for j in range(8):
            if v >> j & 1:
                ids.append(si * bl * 8 + i * 8 + j + 1)
    d["bfr_ids"] = ids
    d["data"] = data
    return d


def check_scapy(path, min_count, max_frames):
    """Steps 1-3. Returns ({frame number: decoded dict}, number of INCA packets)."""
    try:
        from scapy.all import PcapReader, IP, UDP, raw
        from scapy.contrib.roce import BTH
    except ImportError:
        print("check_pcap: SKIP: scapy not available to %s" % sys.executable)
        sys.exit(77)
    out = {}
    n = 0
    for idx, pkt in enumerate(PcapReader(path)):  # streams: captures may be large
        frame = idx + 1
        if max_frames and frame > max_frames:
            break
        ip = pkt.getlayer(IP)  # the outer IP: ICMP errors quoting a 4791 datagram are skipped
        if ip is None or ip.proto != 17 or UDP not in ip or ip[UDP].dport != PORT:
            continue
        n += 1
        wire = raw(ip)[:ip.len] if ip.len else raw(ip)
        if len(wire) < ip.len:
            fail(frame, "capture truncated (snaplen?)")
            continue
        if ip.version != 4 or ip.ihl != 5:
            fail(frame, "IPv4 version/IHL %d/%d" % (ip.version, ip.ihl))
            continue
        if not ip.flags.DF or ip.flags.MF or ip.frag:
            fail(frame, "IPv4 DF clear or fragmented")
        ref = IP(wire)
        chk = ref.chksum
        ref.chksum = None
        if IP(raw(ref)).chksum != chk:
            fail(frame, "IPv4 header checksum wrong")
        udp = ip[UDP]
        if udp.len != ip.len - 20:
            fail(frame, "UDP length %d != IP length %d - 20" % (udp.len, ip.len))
        udp_payload = wire[28:]
        # ICRC by scapy: rebuild the same datagram with the ICRC left for scapy to compute
        again = IP(wire)
        if BTH not in again:
            fail(frame, "scapy does not see a BTH")
            continue
        again[BTH].icrc = None
        want = raw(again)[-4:]
        if want != udp_payload[-4:]:
            fail(frame, "ICRC %s != scapy's %s" % (udp_payload[-4:].hex(), want.hex()))
        d = decode_inca(frame, udp_payload)
        if d is not None:
            d["src"], d["dst"], d["sport"], d["ipid"] = ip.src, ip.dst, udp.sport, ip.id
            out[frame] = d
    if n < min_count:
        errors.append("only %d packets to UDP %d, expected at least %d" % (n, PORT, min_count))
    return out, n


MAX_INCA_UDP = 12 + 16 + 4 + 4096 + 3 + 4  # BTH RETH ImmDt, IB payload, pad, ICRC


def gso_split(path, outdir):
    """Cut GSO sends (datagrams longer than one INCA packet) into their segments, as the
    kernel does on a real link. Returns (path to check, sends cut, packets they made)."""
    try:
        from scapy.all import PcapReader, PcapWriter, IP, UDP, Raw, raw
    except ImportError:
        return path, 0, 0
    out = os.path.join(outdir, "segmented.pcap")
    sends = segs = 0
    writer = None
    for pkt in PcapReader(path):
        ip = pkt.getlayer(IP)
        frames = [pkt]
        if ip is not None and ip.proto == 17 and UDP in ip and ip[UDP].dport == PORT:
            wire = raw(ip)[:ip.len] if ip.len else raw(ip)
            pay = wire[28:]
            # one packet's own length, from its BTH PadCnt and RETH DMA length: a datagram
            # longer than that (small packets too) is a GSO send
            seg = (32 + struct.unpack(">I", pay[24:28])[0] + ((pay[1] >> 4) & 3) + 4
                   if len(pay) >= 32 else 0)
            if 36 <= seg < len(pay) and seg <= MAX_INCA_UDP:
                frames = []
                sends += 1
                for k, off in enumerate(range(0, len(pay), seg)):
                    chunk = pay[off:off + seg]
                    hdr = IP(wire[:20])
                    hdr.id = (ip.id + k) & 0xFFFF
                    hdr.len = 28 + len(chunk)
                    hdr.chksum = None
                    new = hdr / UDP(sport=ip[UDP].sport, dport=PORT, len=8 + len(chunk),
                                    chksum=0) / Raw(chunk)
                    if ip.underlayer is not None:
                        l2 = pkt.copy()
                        l2.getlayer(IP).underlayer.remove_payload()
                        new = l2 / new
                    new.time = pkt.time
                    frames.append(new)
                    segs += 1
        for f in frames:
            if writer is None:
                writer = PcapWriter(out, sync=False)
            writer.write(f)
    if writer is not None:
        writer.close()
    return (out, sends, segs) if sends else (path, 0, 0)


def tshark_fields(tshark, path, fields, extra=(), max_frames=0):
    if max_frames:
        extra = list(extra) + ["-c", str(max_frames)]
    cmd = [tshark, "-n", "-r", path, *extra, "-Y", "udp.dstport == %d && !icmp" % PORT,
           "-T", "fields",
           "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
    for f in fields:
        cmd += ["-e", f]
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=300)
    if res.returncode != 0:
        errors.append("tshark failed (%d): %s" % (res.returncode, res.stderr.strip()[-500:]))
        return {}
    rows = {}
    for line in res.stdout.splitlines():
        cols = line.split("\t")
        cols += [""] * (len(fields) - len(cols))
        rows[int(cols[0])] = dict(zip(fields, cols))
    return rows


def num(s):
    return int(s, 0)


def check_tshark(tshark, path, dec, max_frames):
    """Step 4: the stock InfiniBand dissector."""
    f = ["frame.number", "infiniband.bth.opcode", "infiniband.bth.padcnt",
         "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.reth.va",
         "infiniband.reth.r_key", "infiniband.reth.dmalen", "infiniband.immdt",
         "_ws.expert.message", "_ws.expert.severity", "_ws.malformed"]
    rows = tshark_fields(tshark, path, f, max_frames=max_frames)
    for frame, d in dec.items():
        r = rows.get(frame)
        if r is None:
            fail(frame, "tshark did not show it")
            continue
        if r["infiniband.bth.opcode"] == "" or num(r["infiniband.bth.opcode"]) != OPCODE:
            fail(frame, "tshark bth.opcode %r" % r["infiniband.bth.opcode"])
            continue
        if r["infiniband.reth.va"] == "" or r["infiniband.immdt"] == "":
            fail(frame, "tshark shows no RETH or ImmDt")
            continue
        # "infiniband.immdt" names both the ImmDt subtree and its value: take the last one
        got = (num(r["infiniband.reth.va"]), num(r["infiniband.reth.r_key"]),
               num(r["infiniband.reth.dmalen"]), int(r["infiniband.immdt"].split(",")[-1].replace(":", ""), 16),
               num(r["infiniband.bth.padcnt"]), num(r["infiniband.bth.destqp"]),
               num(r["infiniband.bth.psn"]))
        want = (d["va"], d["rkey"], d["dmalen"], d["imm"], d["padcnt"], d["dqpn"], d["psn"])
        if got != want:
            fail(frame, "tshark RoCE fields %s != %s" % (got, want))
        if r["_ws.malformed"] or r["_ws.expert.message"] or r["_ws.expert.severity"]:
            fail(frame, "tshark expert info: %s" % (r["_ws.expert.message"] or "malformed"))


def close(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= 1e-5 * max(abs(a), abs(b)) or abs(a - b) < 1e-30


def gmac_key(group_key):
    """The MAC key: HKDF-SHA256 of the group key (no salt), info as in lib/wire/auth.c."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=b"INCA packet MAC v1: AES-256-GMAC").derive(group_key)


def check_auth(dec, group_key):
    """Step 6: every tag recomputed independently (AES-256-GCM over no plaintext, the MAC
    input as additional data, nonce = context || counter) with python3-cryptography."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    g = AESGCM(gmac_key(group_key))
    n = 0
    for frame, d in dec.items():
        a = d.get("auth")
        if not a:
            continue
        nonce = struct.pack("!IQ", a["ctx"], a["ctr"])
        if g.encrypt(nonce, b"", d["aad"] + d["data"]) != a["tag"]:
            fail(frame, "authentication tag does not verify")
        n += 1
    return n


def check_lua(tshark, path, lua, dec, max_frames):
    """Step 5: tools/inca.lua against the Python decode."""
    scalar = ["version", "flags", "coll", "dtype", "op", "tree", "slot", "round", "bfr_id",
              "bsl", "si", "count"]
    auth = ["key_id", "epoch", "ctx", "ctr"]
    f = (["frame.number"] + ["inca." + s for s in scalar] + ["inca.set_bfr_ids"] +
         ["inca.auth." + s for s in auth] + ["inca.auth.tag"] +
         ["inca.elem." + n for n in DNAME] + ["_ws.expert.message", "_ws.expert.severity"])
    rows = tshark_fields(tshark, path, f, ["-X", "lua_script:" + lua], max_frames)
    for frame, d in dec.items():
        r = rows.get(frame)
        if r is None or r["inca.tree"] == "":
            fail(frame, "inca.lua did not decode it")
            continue
        want = dict(d, version=1)
        for s in scalar:
            if num(r["inca." + s]) != want[s]:
                fail(frame, "inca.%s %s != %s" % (s, r["inca." + s], want[s]))
        a = d.get("auth")
        if a:
            for s in auth:
                if num(r["inca.auth." + s]) != a[s]:
                    fail(frame, "inca.auth.%s %s != %s" % (s, r["inca.auth." + s], a[s]))
            if bytes.fromhex(r["inca.auth.tag"].replace(":", "")) != a["tag"]:
                fail(frame, "inca.auth.tag differs")
        elif r["inca.auth.key_id"] != "":
            fail(frame, "inca.lua shows an authentication block the packet does not have")
        ids = [int(x) for x in r["inca.set_bfr_ids"].split(",") if x]
        if ids != sorted(d["bfr_ids"]):
            fail(frame, "inca.set_bfr_ids %s != %s" % (ids, d["bfr_ids"]))
        vals = [x for x in r["inca.elem." + DNAME[d["dtype"]]].split(",") if x != ""]
        ref = elements(d["dtype"], d["data"])
        if len(vals) != len(ref):
            fail(frame, "inca.elem count %d != %d" % (len(vals), len(ref)))
        elif d["dtype"] >= 8:
            bad = [i for i, (v, e) in enumerate(zip(vals, ref)) if not close(float(v), e)]
            if bad:
                i = bad[0]
                fail(frame, "element %d: lua %s != %r" % (i, vals[i], ref[i]))
        elif [int(v, 0) for v in vals] != ref:
            fail(frame, "integer elements differ")
        sev = [int(x, 0) for x in r["_ws.expert.severity"].split(",") if x]
        if any(s > SEV_NOTE for s in sev):
            fail(frame, "expert info: %s" % r["_ws.expert.message"])


def check_expect(tsv, dec):
    """Step 6: the packet is what gen_pcap asked the encoder to write."""
    with open(tsv) as fh:
        hdr = fh.readline().rstrip("\n").split("\t")
        n = 0
        for line in fh:
            e = dict(zip(hdr, line.rstrip("\n").split("\t")))
            frame = int(e["frame"])
            n += 1
            d = dec.get(frame)
            if d is None:
                fail(frame, "expected packet missing or undecodable")
                continue
            for k in ["flags", "coll", "dtype", "op", "tree", "slot", "round", "bfr_id", "bsl",
                      "si", "count", "va", "rkey", "imm", "dqpn", "psn", "padcnt", "dmalen"]:
                if int(e[k]) != d[k]:
                    fail(frame, "%s %d != expected %s" % (k, d[k], e[k]))
            ids = [] if e["bfr_ids"] == "-" else [int(x) for x in e["bfr_ids"].split(",")]
            if ids != d["bfr_ids"]:
                fail(frame, "bfr_ids %s != expected %s" % (d["bfr_ids"], ids))
            data = b"" if e["data"] == "-" else bytes.fromhex(e["data"])
            if data != d["data"]:
                fail(frame, "data differs from what was encoded")
    if n != len(dec):
        errors.append("expectation has %d packets, capture %d" % (n, len(dec)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("capture")
    ap.add_argument("min_packets", nargs="?", type=int, default=1)
    ap.add_argument("--expect", help="TSV written by gen_pcap")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--lua", default=os.path.join(here, "..", "..", "tools", "inca.lua"))
    ap.add_argument("--tshark", default=shutil.which("tshark"))
    ap.add_argument("--max-frames", type=int, default=0,
                    help="only check the first N frames of a large capture")
    ap.add_argument("--auth-key", help="group key (64 hex digits): verify every tag")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    if not a.tshark:
        print("check_pcap: SKIP: tshark not found")
        return 77
    tmp = tempfile.TemporaryDirectory(prefix="check_pcap.")
    capture, sends, segs = gso_split(a.capture, tmp.name)
    if sends:
        print("check_pcap: %d GSO send(s) in the capture, checked as the %d packets the kernel "
              "sends for them on a link" % (sends, segs))
    dec, n = check_scapy(capture, a.min_packets, a.max_frames)
    check_tshark(a.tshark, capture, dec, a.max_frames)
    if os.path.exists(a.lua):
        check_lua(a.tshark, capture, a.lua, dec, a.max_frames)
    else:
        errors.append("dissector %s not found" % a.lua)
    if a.expect:
        check_expect(a.expect, dec)
    nauth = check_auth(dec, bytes.fromhex(a.auth_key)) if a.auth_key else 0
    if a.auth_key and not nauth:
        errors.append("--auth-key given but no packet carries an authentication block")
    if errors:
        for e in errors[:50]:
            print("FAIL " + e)
        print("check_pcap: %d problem(s) in %s (%d INCA packets)" % (len(errors), a.capture, n))
        return 1
    kinds = {}
    for d in dec.values():
        kinds[DNAME[d["dtype"]]] = kinds.get(DNAME[d["dtype"]], 0) + 1
    print("check_pcap: OK: %d INCA packets in %s (ICRC by scapy, tshark InfiniBand, inca.lua)"
          % (n, a.capture))
    if a.verbose:
        print("  by dtype: %s" % kinds)
    if nauth:
        print("check_pcap: %d authentication tags verified independently" % nauth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
