#!/usr/bin/python3
# Generates the ICRC known-answer vector used by lib/wire/wire_test.c, independently of the C
# encoder: headers packed by hand with struct, ICRC computed by scapy.contrib.roce.BTH.
# Usage: /usr/bin/python3 tests/pcap/icrc_kat.py  (prints a C initializer and the ICRC)
import struct
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.contrib.roce import BTH
from scapy.packet import Raw

bsl = bytes(7) + b"\x02"                        # BSL 64: P-BM = bit position 2 (BFR-id 2)
data = struct.pack("<3f", 1.0, -2.5, 1e-3)      # 3 x fp32, little-endian
inca = struct.pack("!BBBBHHIHBBHH", 0x10, 1, 10, 0, 7, 3, 1000, 2, 1, 0, 3, 0) + bsl
reth = struct.pack("!QII", 4096, 0x1234, len(inca) + len(data))
imm = struct.pack("!I", 1000)
pkt = (Ether() / IP(src="198.18.0.1", dst="198.18.0.2", id=0, flags="DF", ttl=64) /
       UDP(sport=49152, dport=4791, chksum=0) /
       BTH(opcode=0x2B, pkey=0xFFFF, dqpn=0x101, psn=5) / Raw(reth + imm + inca + data))
raw = bytes(pkt)
udp_payload = raw[14 + 20 + 8:]
icrc = struct.unpack("<I", udp_payload[-4:])[0]
print("/* %d bytes, ICRC 0x%08x */" % (len(udp_payload), icrc))
for i in range(0, len(udp_payload), 12):
    print("\t" + " ".join("0x%02x," % b for b in udp_payload[i:i + 12]))
