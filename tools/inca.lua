-- tools/inca.lua: Wireshark/tshark dissector for the INCA header carried in RoCEv2
-- UC RDMA WRITE Only with Immediate (BTH opcode 0x2B) payloads. It chains after Wireshark's
-- InfiniBand dissector as a heuristic on "infiniband.payload". Layout: docs/protocol.md.
--
-- Use:  tshark -X lua_script:tools/inca.lua -r capture.pcap -Y inca
--       wireshark -X lua_script:tools/inca.lua   (or copy into ~/.local/lib/wireshark/plugins/)
-- Fields: inca.version inca.flags inca.flags.result inca.flags.retx inca.flags.nack
--   inca.flags.auth inca.auth (key_id, epoch, ctx, ctr, tag: the authentication block) inca.coll
--   inca.dtype
--   inca.op inca.tree inca.slot inca.round inca.bfr_id inca.bsl inca.bsl_bits inca.si
--   inca.count inca.owner inca.bitstring inca.set_bfr_ids (e.g. "1,3,64") inca.set_bfr_id
--   (one per set bit) inca.data inca.elem.<dtype> (one per element) inca.pad

local inca = Proto("inca", "INCA In-Network Collective Acceleration")

local COLL = { [1] = "allreduce", [2] = "reduce", [3] = "bcast", [4] = "barrier",
	[5] = "allgather", [6] = "reduce-scatter", [7] = "alltoall", [8] = "scatter",
	[9] = "gather" }
-- begin generated: dtypes and ops (tools/gen_facts.py, from lib/wire/dtype.h)
local DTYPE = { [0] = "int8", [1] = "uint8", [2] = "int16", [3] = "uint16", [4] = "int32",
	[5] = "uint32", [6] = "int64", [7] = "uint64", [8] = "fp16", [9] = "bf16",
	[10] = "fp32", [11] = "fp64" }
local DSIZE = { [0] = 1, [1] = 1, [2] = 2, [3] = 2, [4] = 4, [5] = 4, [6] = 8, [7] = 8, [8] = 2,
	[9] = 2, [10] = 4, [11] = 8 }
local OP = { [0] = "sum", [1] = "prod", [2] = "min", [3] = "max", [4] = "band", [5] = "bor",
	[6] = "bxor" }
local DT_INT = { [0] = true, [1] = true, [2] = true, [3] = true, [4] = true, [5] = true,
	[6] = true, [7] = true }
local OP_INT_ONLY = { [4] = true, [5] = true, [6] = true }
-- end generated: dtypes and ops
local BSL = { [1] = "64 bits", [2] = "128 bits", [3] = "256 bits", [4] = "512 bits",
	[5] = "1024 bits", [6] = "2048 bits", [7] = "4096 bits" }

local F = {
	version = ProtoField.uint8("inca.version", "Version", base.DEC, nil, 0xF0),
	flags = ProtoField.uint8("inca.flags", "Flags", base.HEX, nil, 0x0F),
	f_result = ProtoField.bool("inca.flags.result", "RESULT (downward)", 8, nil, 0x01),
	f_retx = ProtoField.bool("inca.flags.retx", "RETX (retransmission)", 8, nil, 0x02),
	f_nack = ProtoField.bool("inca.flags.nack", "NACK (repair notice: resend the contribution)",
		8, nil, 0x04),
	f_auth = ProtoField.bool("inca.flags.auth", "AUTH (authentication block present)", 8, nil,
		0x08),
	auth = ProtoField.bytes("inca.auth", "Authentication block"),
	auth_key_id = ProtoField.uint32("inca.auth.key_id", "Key id", base.DEC),
	auth_epoch = ProtoField.uint32("inca.auth.epoch", "Job epoch", base.DEC),
	auth_ctx = ProtoField.uint32("inca.auth.ctx", "Sender context", base.HEX),
	auth_ctr = ProtoField.uint64("inca.auth.ctr", "Nonce counter", base.DEC),
	auth_tag = ProtoField.bytes("inca.auth.tag", "Tag (AES-256-GMAC)"),
	coll = ProtoField.uint8("inca.coll", "Collective", base.DEC, COLL),
	dtype = ProtoField.uint8("inca.dtype", "Data type", base.DEC, DTYPE),
	op = ProtoField.uint8("inca.op", "Operation", base.DEC, OP),
	tree = ProtoField.uint16("inca.tree", "Tree id", base.DEC),
	slot = ProtoField.uint16("inca.slot", "Slot", base.DEC),
	round = ProtoField.uint32("inca.round", "Round", base.DEC),
	bfr_id = ProtoField.uint16("inca.bfr_id", "Sender BFR-id", base.DEC),
	bsl_rsv = ProtoField.uint8("inca.bsl_reserved", "Reserved", base.HEX, nil, 0xF0),
	bsl = ProtoField.uint8("inca.bsl", "BSL", base.DEC, BSL, 0x0F),
	bsl_bits = ProtoField.uint16("inca.bsl_bits", "Bit-string length (bits)", base.DEC),
	si = ProtoField.uint8("inca.si", "Set identifier (SI)", base.DEC),
	count = ProtoField.uint16("inca.count", "Element count", base.DEC),
	owner = ProtoField.uint16("inca.owner", "Owner BFR-id", base.DEC),
	bitstring = ProtoField.bytes("inca.bitstring", "BIER bit-string"),
	set_ids = ProtoField.string("inca.set_bfr_ids", "Set BFR-ids"),
	set_id = ProtoField.uint16("inca.set_bfr_id", "BFR-id", base.DEC),
	data = ProtoField.bytes("inca.data", "Data"),
	pad = ProtoField.bytes("inca.pad", "Pad"),
}
-- one element field per data type (data is little-endian on the wire)
local ELEM = {
	-- begin generated: element fields
	[0] = ProtoField.int8("inca.elem.int8", "int8"),
	[1] = ProtoField.uint8("inca.elem.uint8", "uint8"),
	[2] = ProtoField.int16("inca.elem.int16", "int16"),
	[3] = ProtoField.uint16("inca.elem.uint16", "uint16"),
	[4] = ProtoField.int32("inca.elem.int32", "int32"),
	[5] = ProtoField.uint32("inca.elem.uint32", "uint32"),
	[6] = ProtoField.int64("inca.elem.int64", "int64"),
	[7] = ProtoField.uint64("inca.elem.uint64", "uint64"),
	[8] = ProtoField.float("inca.elem.fp16", "fp16"),
	[9] = ProtoField.float("inca.elem.bf16", "bf16"),
	[10] = ProtoField.float("inca.elem.fp32", "fp32"),
	[11] = ProtoField.double("inca.elem.fp64", "fp64"),
	-- end generated: element fields
}
local fl = {}
for _, f in pairs(F) do fl[#fl + 1] = f end
for _, f in pairs(ELEM) do fl[#fl + 1] = f end
inca.fields = fl

local E = {
	bad = ProtoExpert.new("inca.malformed", "Malformed INCA header", expert.group.MALFORMED,
		expert.severity.ERROR),
	retx = ProtoExpert.new("inca.retx", "Retransmission", expert.group.SEQUENCE,
		expert.severity.NOTE),
}
inca.experts = { E.bad, E.retx }

inca.prefs.max_elems = Pref.uint("Elements shown per packet", 4096,
	"Decode at most this many data elements into the tree")

local f_opcode = Field.new("infiniband.bth.opcode")
local f_padcnt = Field.new("infiniband.bth.padcnt")

-- A 16-bit IEEE-style float with mbits mantissa bits (fp16: 10, bf16: 7): the exponent takes
-- the other 15 - mbits bits, with a bias of half its range.
local function half_value(h, mbits)
	local mscale = 2 ^ mbits
	local emax = 2 ^ (15 - mbits) - 1
	local bias = (emax - 1) / 2
	local sign = (h >= 0x8000) and -1 or 1
	local e = math.floor(h / mscale) % (emax + 1)
	local m = h % mscale
	if e == 0 then return sign * m * 2 ^ (1 - bias - mbits) end
	if e == emax then return (m == 0) and sign * math.huge or 0 / 0 end
	return sign * (1 + m / mscale) * 2 ^ (e - bias)
end

local function fp16_value(h) return half_value(h, 10) end
local function bf16_value(h) return half_value(h, 7) end

local function dissect(tvb, pinfo, root)
	local op = f_opcode()
	if not op or op.value ~= 0x2B then return false end
	local len = tvb:len()
	if len < 20 then return false end
	local b0 = tvb(0, 1):uint()
	if math.floor(b0 / 16) ~= 1 then return false end -- not INCA version 1

	pinfo.cols.protocol:set("INCA")
	local t = root:add(inca, tvb())
	local flags = b0 % 16
	t:add(F.version, tvb(0, 1))
	local ft = t:add(F.flags, tvb(0, 1))
	ft:add(F.f_result, tvb(0, 1))
	ft:add(F.f_retx, tvb(0, 1))
	ft:add(F.f_nack, tvb(0, 1))
	ft:add(F.f_auth, tvb(0, 1))
	local alen = 0
	if flags >= 8 then alen = 36 end
	local nack = math.floor(flags / 4) % 2 == 1
	if nack and (flags % 4 ~= 0 or tvb(16, 2):uint() ~= 0) then
		ft:add_proto_expert_info(E.bad, "NACK with RESULT/RETX or with data")
	end
	local coll, dtype, opc = tvb(1, 1):uint(), tvb(2, 1):uint(), tvb(3, 1):uint()
	local ct = t:add(F.coll, tvb(1, 1))
	if not COLL[coll] then ct:add_proto_expert_info(E.bad, "unknown collective") end
	local dt = t:add(F.dtype, tvb(2, 1))
	if not DTYPE[dtype] then dt:add_proto_expert_info(E.bad, "unknown data type") end
	local ot = t:add(F.op, tvb(3, 1))
	if not OP[opc] or (OP_INT_ONLY[opc] and not DT_INT[dtype]) then
		ot:add_proto_expert_info(E.bad, "unknown op or op invalid for the type")
	end
	t:add(F.tree, tvb(4, 2))
	t:add(F.slot, tvb(6, 2))
	t:add(F.round, tvb(8, 4))
	t:add(F.bfr_id, tvb(12, 2))
	local bslb = tvb(14, 1):uint()
	t:add(F.bsl_rsv, tvb(14, 1))
	local bt = t:add(F.bsl, tvb(14, 1))
	local code = bslb % 16
	if bslb >= 16 then bt:add_proto_expert_info(E.bad, "reserved BSL bits set") end
	t:add(F.si, tvb(15, 1))
	local count = tvb(16, 2):uint()
	t:add(F.count, tvb(16, 2))
	local rt = t:add(F.owner, tvb(18, 2))
	if tvb(18, 2):uint() ~= 0 and coll ~= 2 and coll ~= 3 and coll ~= 5 and coll ~= 6 then
		rt:add_proto_expert_info(E.bad, "owner set on a collective without one")
	end

	local si = tvb(15, 1):uint()
	local info = string.format("INCA %s %s %s tree %d slot %d round %d",
		COLL[coll] or "?", DTYPE[dtype] or "?", OP[opc] or "?",
		tvb(4, 2):uint(), tvb(6, 2):uint(), tvb(8, 4):uint())
	if flags % 2 == 1 then info = info .. " RESULT" end
	if nack then info = info .. " NACK" end
	if math.floor(flags / 2) % 2 == 1 then
		info = info .. " RETX"
		t:add_proto_expert_info(E.retx)
	end
	pinfo.cols.info:set(info)

	if code < 1 or code > 7 then
		bt:add_proto_expert_info(E.bad, "BSL code outside 1..7")
		return true
	end
	local bsl_bits = 2 ^ (code + 5)
	local bl = bsl_bits / 8
	t:add(F.bsl_bits, tvb(14, 1), bsl_bits):set_generated()
	if len < 20 + bl then
		t:add_proto_expert_info(E.bad, "bit-string truncated")
		return true
	end
	local bst = t:add(F.bitstring, tvb(20, bl))
	-- RFC 8279: bit position 1 is the least significant bit of the LAST byte
	local ids = {}
	for i = bl - 1, 0, -1 do
		local v = tvb(20 + i, 1):uint()
		if v ~= 0 then
			for j = 0, 7 do
				if math.floor(v / 2 ^ j) % 2 == 1 then
					local bp = (bl - 1 - i) * 8 + j + 1
					local id = si * bsl_bits + bp
					ids[#ids + 1] = id
					bst:add(F.set_id, tvb(20 + i, 1), id)
				end
			end
		end
	end
	bst:add(F.set_ids, tvb(20, bl), table.concat(ids, ",")):set_generated()
	bst:append_text(string.format(" (%d set)", #ids))

	-- the IB payload tvb still holds the pad bytes (BTH PadCnt)
	local pad = 0
	local pc = f_padcnt()
	if pc then pad = pc.value end
	local hdr = 20 + bl + alen
	if alen > 0 then
		if len < hdr then
			t:add_proto_expert_info(E.bad, "authentication block truncated")
			return true
		end
		local at = t:add(F.auth, tvb(20 + bl, alen))
		at:add(F.auth_key_id, tvb(20 + bl, 4))
		at:add(F.auth_epoch, tvb(20 + bl + 4, 4))
		at:add(F.auth_ctx, tvb(20 + bl + 8, 4))
		at:add(F.auth_ctr, tvb(20 + bl + 12, 8))
		at:add(F.auth_tag, tvb(20 + bl + 20, 16))
	end
	local dlen = len - hdr - pad
	if dlen < 0 then
		t:add_proto_expert_info(E.bad, "pad count larger than the payload")
		return true
	end
	local esz = DSIZE[dtype]
	if dlen > 0 then
		local dtree = t:add(F.data, tvb(hdr, dlen))
		if esz and dlen == count * esz then
			local ef = ELEM[dtype]
			local n = math.min(count, inca.prefs.max_elems)
			for i = 0, n - 1 do
				local r = tvb(hdr + i * esz, esz)
				if dtype == 8 then
					dtree:add(ef, r, fp16_value(r:le_uint()))
				elseif dtype == 9 then
					dtree:add(ef, r, bf16_value(r:le_uint()))
				else
					dtree:add_le(ef, r)
				end
			end
		end
	end
	if esz and dlen ~= count * esz then
		t:add_proto_expert_info(E.bad,
			string.format("data length %d != count %d x %d", dlen, count, esz))
	end
	if pad > 0 then
		local pt = t:add(F.pad, tvb(hdr + dlen, pad))
		for i = 0, pad - 1 do
			if tvb(hdr + dlen + i, 1):uint() ~= 0 then
				pt:add_proto_expert_info(E.bad, "pad byte not zero")
				break
			end
		end
	end
	return true
end

function inca.dissector(tvb, pinfo, tree)
	return dissect(tvb, pinfo, tree)
end

inca:register_heuristic("infiniband.payload", dissect)
