-- npmp.lua -- Lua twin of the NPMP Wireshark plugin (dissectors/packet-npmp.c).
--
-- NetPerfMeter Protocol: NPMP-CONTROL and NPMP-DATA.  Same protocol name
-- ("npmp"), fields, expert infos, preferences, heuristics and "-z npmp,stat"
-- output as the C plugin; tests/dissectors runs the same assertions on both.
-- Use it where no compiler is available, or under tshark as root (root
-- ignores personal C plugins, but Debian runs personal Lua scripts):
--
--   tshark -X lua_script:/path/npmp.lua -r capture.pcapng -Y npmp
--   cp npmp.lua ~/.local/lib/wireshark/plugins/
--
-- If the C plugin is loaded too, this script steps aside.
--
-- Laid out like the C plugin: one dissect_<type>_message(m) per message type,
-- chosen from dissect_message_of_type (the C plugin's switch) by dissect_message().
--
-- SPDX-License-Identifier: GPL-3.0-or-later

do
  local found, d = pcall(Dissector.get, "npmp")
  if found and d ~= nil then
    return  -- the C plugin already provides "npmp"
  end
end

-- bit32 is Lua 5.2 (Wireshark 4.0); Lua 5.3+ has the & operator instead.
local band = (bit32 and bit32.band) or load("return function(a, b) return a & b end")()

local NPMP_ACKNOWLEDGE, NPMP_ADD_FLOW, NPMP_REMOVE_FLOW, NPMP_IDENTIFY_FLOW = 1, 2, 3, 4
local NPMP_DATA, NPMP_START, NPMP_STOP, NPMP_RESULTS = 5, 6, 7, 8
local HDR_LEN, ACK_LEN, ADDFLOW_LEN, ONOFF_LEN = 4, 24, 194, 36
local REMOVE_LEN, IDENTIFY_LEN, DATA_LEN, STARTSTOP_LEN, RESULTS_MAX = 18, 26, 48, 16, 1404
-- --auth-key-file: mutual HMAC-SHA-256 authentication (a block is a nonce or a MAC)
local NPMP_AUTH_HELLO, NPMP_AUTH_CHALLENGE, NPMP_AUTH_RESPONSE = 9, 10, 11
local AUTH_BLOCK = 32
local AUTH_HELLO_LEN, AUTH_CHALLENGE_LEN, AUTH_RESPONSE_LEN = HDR_LEN + AUTH_BLOCK, HDR_LEN + 2 * AUTH_BLOCK, HDR_LEN + AUTH_BLOCK
local MAGIC = UInt64(0x303c6774, 0x4bcdf3aa)
local TS_MIN = UInt64(946684800) * UInt64(1000000)
local TS_MAX = UInt64(4102444800) * UInt64(1000000)
local DEFAULT_PORTS = "8999-9001"
local DIR_A2P, DIR_P2A = 0, 1
-- QUIC flows: the ALPN of netperfmeter's QUIC connections (UDP BASE-1); flow n of a
-- connection is the client's unidirectional stream (n << 2) | 2 (active to passive)
-- and the server's (n << 2) | 3 (passive to active).
local QUIC_ALPN = "netperfmeter/data"

local type_vals = {
  [1] = "Acknowledge", [2] = "Add Flow", [3] = "Remove Flow", [4] = "Identify Flow",
  [5] = "Data", [6] = "Start", [7] = "Stop", [8] = "Results",
  [9] = "Auth Hello", [10] = "Auth Challenge", [11] = "Auth Response",
}
local protocol_vals = { [6] = "TCP", [17] = "UDP", [33] = "DCCP", [132] = "SCTP", [261] = "QUIC", [262] = "MPTCP" }
local rng_vals = {
  [0] = "Constant", [1] = "Uniform", [2] = "Negative Exponential", [3] = "Pareto",
  [4] = "Normal", [5] = "Truncated Normal",
}
local cmt_vals = { [0] = "Off", [1] = "CMT", [2] = "CMT/RPv1", [3] = "CMT/RPv2", [4] = "MPTCP-like", [5] = "W-PR-SCTP" }
local bufsplit_vals = { [0] = "None", [1] = "Sender", [2] = "Receiver", [3] = "Both" }
local sctpcc_vals = { [0] = "RFC 2581", [1] = "HSTCP", [2] = "H-TCP", [3] = "RTCC" }
local status_vals = {
  [0] = "OK", [1] = "Error", [2] = "Not allowed", [3] = "Authentication required", [4] = "Unsupported", [5] = "OK, per-path vector follows",
  [6] = "Too many flows", [7] = "No file descriptors", [8] = "Process-wide SCTP settings conflict",
  [9] = "Busy: sessions", [10] = "Busy: sessions of this host", [11] = "Busy: sessions of this network",
}
local direction_vals = { [0] = "Active to Passive", [1] = "Passive to Active" }
-- The two low bits of a QUIC Stream ID (RFC 9000, 2.1).
local quic_stream_type_vals = {
  [0] = "Client-initiated, bidirectional", [1] = "Server-initiated, bidirectional",
  [2] = "Client-initiated, unidirectional (active to passive)",
  [3] = "Server-initiated, unidirectional (passive to active)",
}

local npmp = Proto("NPMP", "NetPerfMeter Protocol (NPMP)")

local hf = {
  type = ProtoField.uint8("npmp.type", "Type", base.DEC, type_vals, nil, "Message type"),
  flags = ProtoField.uint8("npmp.flags", "Flags", base.HEX),
  length = ProtoField.uint16("npmp.length", "Length", base.DEC, nil, nil, "Message length including the header"),
  af_debug = ProtoField.bool("npmp.addflow.flags.debug", "Debug", 8, nil, 0x01),
  af_nodelay = ProtoField.bool("npmp.addflow.flags.nodelay", "No Delay", 8, nil, 0x02),
  af_repeatonoff = ProtoField.bool("npmp.addflow.flags.repeatonoff", "Repeat On/Off", 8, nil, 0x04),
  -- bits 3-7: this implementation's CMT-SCTP tuning (a reference passive ignores them)
  af_nrsack = ProtoField.bool("npmp.addflow.flags.nrsack", "NR-SACK", 8, nil, 0x08),
  af_bufsplit = ProtoField.uint8("npmp.addflow.flags.bufsplit", "Buffer Splitting", base.DEC, bufsplit_vals, 0x30),
  af_sctpcc = ProtoField.uint8("npmp.addflow.flags.sctpcc", "SCTP Congestion Control", base.DEC, sctpcc_vals, 0xc0),
  id_compress_vectors = ProtoField.bool("npmp.identify.flags.compress_vectors", "Compress Vectors", 8, nil, 0x01),
  id_no_vectors = ProtoField.bool("npmp.identify.flags.no_vectors", "No Vectors", 8, nil, 0x02),
  id_path_vectors = ProtoField.bool("npmp.identify.flags.path_vectors", "Per-Path Statistics", 8, nil, 0x04),
  id_gzip_vectors = ProtoField.bool("npmp.identify.flags.gzip_vectors", "Gzip Vectors", 8, nil, 0x08,
    "gzip instead of bzip2 (this implementation's; a reference passive ignores it)"),
  data_frame_begin = ProtoField.bool("npmp.data.flags.frame_begin", "Frame Begin", 8, nil, 0x01),
  data_frame_end = ProtoField.bool("npmp.data.flags.frame_end", "Frame End", 8, nil, 0x02),
  st_compress_vectors = ProtoField.bool("npmp.start.flags.compress_vectors", "Compress Vectors", 8, nil, 0x01),
  st_compress_scalars = ProtoField.bool("npmp.start.flags.compress_scalars", "Compress Scalars", 8, nil, 0x02),
  st_no_vectors = ProtoField.bool("npmp.start.flags.no_vectors", "No Vectors", 8, nil, 0x04),
  st_no_scalars = ProtoField.bool("npmp.start.flags.no_scalars", "No Scalars", 8, nil, 0x08),
  st_gzip_vectors = ProtoField.bool("npmp.start.flags.gzip_vectors", "Gzip Vectors", 8, nil, 0x10,
    "gzip instead of bzip2 (this implementation's; a reference passive ignores it)"),
  st_gzip_scalars = ProtoField.bool("npmp.start.flags.gzip_scalars", "Gzip Scalars", 8, nil, 0x20,
    "gzip instead of bzip2 (this implementation's; a reference passive ignores it)"),
  st_warmup = ProtoField.uint32("npmp.start.warmup", "Warm-up", base.DEC, nil, nil,
    "Milliseconds from START before statistics count, 0 = none (the reference's Padding)"),
  res_eof = ProtoField.bool("npmp.results.flags.eof", "End of File", 8, nil, 0x01),
  flowid = ProtoField.uint32("npmp.flowid", "Flow ID", base.DEC),
  measurementid = ProtoField.uint64("npmp.measurementid", "Measurement ID", base.HEX),
  streamid = ProtoField.uint16("npmp.streamid", "Stream ID", base.DEC),
  padding = ProtoField.uint16("npmp.padding", "Padding", base.HEX),
  padding32 = ProtoField.uint32("npmp.padding32", "Padding", base.HEX),
  status = ProtoField.uint32("npmp.status", "Status", base.DEC, status_vals),
  protocol = ProtoField.uint16("npmp.protocol", "Protocol", base.DEC, protocol_vals, nil, "Transport protocol (little-endian)"),
  description = ProtoField.string("npmp.description", "Description", base.NONE),
  ordered = ProtoField.uint32("npmp.ordered", "Ordered Mode", base.HEX, nil, nil, "Fraction of ordered messages times 0xffffffff"),
  ordered_fraction = ProtoField.double("npmp.ordered_fraction", "Ordered Fraction"),
  reliable = ProtoField.uint32("npmp.reliable", "Reliable Mode", base.HEX, nil, nil, "Fraction of reliable messages times 0xffffffff"),
  reliable_fraction = ProtoField.double("npmp.reliable_fraction", "Reliable Fraction"),
  retranstrials = ProtoField.uint32("npmp.retranstrials", "Retransmission Trials", base.HEX),
  retranstrials_is_time = ProtoField.bool("npmp.retranstrials.is_time", "Unit", 32, { "Time (ms)", "Trials" }, 0x80000000),
  retranstrials_value = ProtoField.uint32("npmp.retranstrials.value", "Value", base.DEC, nil, 0x7fffffff),
  framerate = ProtoField.double("npmp.framerate", "Frame Rate", "Inbound frame rate parameter (frames/s)"),
  framesize = ProtoField.double("npmp.framesize", "Frame Size", "Inbound frame size parameter (bytes)"),
  framerate_rng = ProtoField.uint8("npmp.framerate_rng", "Frame Rate RNG", base.DEC, rng_vals),
  framesize_rng = ProtoField.uint8("npmp.framesize_rng", "Frame Size RNG", base.DEC, rng_vals),
  rcvbuf = ProtoField.uint32("npmp.rcvbuf", "Receive Buffer Size", base.DEC),
  sndbuf = ProtoField.uint32("npmp.sndbuf", "Send Buffer Size", base.DEC),
  maxmsgsize = ProtoField.uint16("npmp.maxmsgsize", "Max. Message Size", base.DEC),
  cmt = ProtoField.uint8("npmp.cmt", "CMT", base.DEC, cmt_vals),
  ccid = ProtoField.uint8("npmp.ccid", "CCID", base.DEC),
  ndiffports = ProtoField.uint16("npmp.ndiffports", "NDiffPorts", base.DEC, nil, nil,
    "Obsolete in the reference; here SCTP RTO.min and DAC"),
  sctp_rtomin = ProtoField.uint16("npmp.sctp.rtomin", "SCTP RTO.min", base.DEC, nil, 0x7fff,
    "Milliseconds, 0 = the stack's default"),
  sctp_dac = ProtoField.bool("npmp.sctp.dac", "SCTP DAC", 16, nil, 0x8000, "Delayed-ACK-aware CMT"),
  pathmgr = ProtoField.string("npmp.pathmgr", "Path Manager", base.NONE, "Obsolete"),
  cc = ProtoField.string("npmp.cc", "Congestion Control", base.NONE),
  runtime = ProtoField.uint32("npmp.runtime", "Runtime (ms)", base.DEC, nil, nil,
    "Obsolete Scheduler field in the reference; here the measurement's runtime, after which the passive's flow sends nothing (0 = until STOP)"),
  sctp_mechanisms = ProtoField.uint32("npmp.addflow.sctp_mechanisms", "SCTP Mechanisms", base.HEX, nil, nil,
    "Obsolete Scheduler field in the reference; here the CMT-SCTP mechanisms of the bundled stack"),
  sctp_mechanisms_bufsplit_on_buffered = ProtoField.bool(
    "npmp.addflow.sctp_mechanisms.bufsplit_on_buffered", "Buffer Splitting on Buffered Bytes", 32, nil, 0x00000001,
    "bufsplit-on=buffered"),
  sctp_mechanisms_smartfr = ProtoField.bool(
    "npmp.addflow.sctp_mechanisms.smartfr", "Smart Fast Retransmission", 32, nil, 0x00000002, "smartfr=on"),
  sctp_mechanisms_pktdrop = ProtoField.bool(
    "npmp.addflow.sctp_mechanisms.pktdrop", "Packet-Drop Reporting", 32, nil, 0x00000004, "pktdrop=on"),
  sctp_mechanisms_reschedule = ProtoField.bool(
    "npmp.addflow.sctp_mechanisms.reschedule", "Chunk Rescheduling", 32, nil, 0x00000008, "reschedule=on"),
  seed = ProtoField.uint64("npmp.addflow.seed", "Seed", base.DEC, nil, nil,
    "Obsolete Scheduler field in the reference (zero there); here the run's seed (-seed), from which the passive derives the seeds of the flow's random choices; 0 = none"),
  onoffevents = ProtoField.uint16("npmp.onoffevents", "On/Off Events", base.DEC),
  onoff = ProtoField.none("npmp.onoff", "On/Off Event"),
  onoff_rng = ProtoField.uint8("npmp.onoff.rng", "RNG", base.DEC, rng_vals),
  onoff_flags = ProtoField.uint8("npmp.onoff.flags", "Flags", base.HEX),
  onoff_reltime = ProtoField.bool("npmp.onoff.flags.reltime", "Relative Time", 8, nil, 0x01),
  onoff_padding = ProtoField.uint16("npmp.onoff.padding", "Padding", base.HEX),
  onoff_value = ProtoField.double("npmp.onoff.value", "Value", "Distribution parameter (s)"),
  magic = ProtoField.uint64("npmp.magic", "Magic Number", base.HEX),
  frameid = ProtoField.uint32("npmp.frameid", "Frame ID", base.DEC),
  seqnumber = ProtoField.uint64("npmp.seqnumber", "Sequence Number", base.DEC),
  byteseqnumber = ProtoField.uint64("npmp.byteseqnumber", "Byte Sequence Number", base.DEC),
  timestamp = ProtoField.uint64("npmp.timestamp", "Time Stamp", base.DEC, nil, nil, "Sender time, microseconds since the Unix epoch"),
  timestamp_abs = ProtoField.absolute_time("npmp.timestamp_abs", "Time Stamp (absolute)", base.UTC),
  payload = ProtoField.bytes("npmp.payload", "Payload"),
  results_data = ProtoField.bytes("npmp.results.data", "Results Data"),
  auth_nonce = ProtoField.bytes("npmp.auth.nonce", "Nonce", base.NONE, "Random challenge of the message's sender"),
  auth_mac = ProtoField.bytes("npmp.auth.mac", "MAC", base.NONE, "HMAC-SHA-256 over the peer's nonce with the shared key"),
  flow_description = ProtoField.string("npmp.flow.description", "Flow Description", base.NONE, "Description from the flow's ADD_FLOW"),
  flow_protocol = ProtoField.uint16("npmp.flow.protocol", "Flow Protocol", base.DEC, protocol_vals, nil, "Protocol from the flow's ADD_FLOW"),
  flow_addflow_in = ProtoField.framenum("npmp.flow.addflow_in", "ADD_FLOW in", base.NONE),
  flow_identify_in = ProtoField.framenum("npmp.flow.identify_in", "IDENTIFY_FLOW in", base.NONE),
  direction = ProtoField.uint8("npmp.direction", "Direction", base.DEC, direction_vals),
  seq_expected = ProtoField.uint64("npmp.seq.expected", "Expected Sequence Number", base.DEC),
  seq_lost = ProtoField.uint64("npmp.seq.lost", "Missing Messages", base.DEC, nil, nil, "Messages missing before this one"),
  seq_reordered = ProtoField.bool("npmp.seq.reordered", "Out of Order", base.NONE),
  quic_stream_id = ProtoField.uint64("npmp.quic.stream_id", "QUIC Stream ID", base.DEC, nil, nil,
    "The QUIC stream that carries the message"),
  quic_stream_number = ProtoField.uint64("npmp.quic.stream_number", "QUIC Stream Number", base.DEC, nil, nil,
    "Stream ID >> 2: the flow's number in its QUIC connection (netperfmeter's FLOWSPEC of the -quic option)"),
  quic_stream_type = ProtoField.uint8("npmp.quic.stream_type", "QUIC Stream Type", base.DEC, quic_stream_type_vals, nil,
    "The two low bits of the Stream ID: initiator and direction"),
}
-- Registration order = C registration order (keeps "-G fields" identical).
local hf_order = {
  "type", "flags", "length", "af_debug", "af_nodelay", "af_repeatonoff", "af_nrsack", "af_bufsplit",
  "af_sctpcc", "id_compress_vectors",
  "id_no_vectors", "id_path_vectors", "id_gzip_vectors", "data_frame_begin", "data_frame_end", "st_compress_vectors",
  "st_compress_scalars", "st_no_vectors", "st_no_scalars", "st_gzip_vectors", "st_gzip_scalars", "st_warmup",
  "res_eof", "flowid", "measurementid", "streamid", "padding",
  "padding32", "status", "protocol", "description", "ordered", "ordered_fraction", "reliable",
  "reliable_fraction", "retranstrials", "retranstrials_is_time", "retranstrials_value", "framerate",
  "framesize", "framerate_rng", "framesize_rng", "rcvbuf", "sndbuf", "maxmsgsize", "cmt", "ccid",
  "ndiffports", "sctp_rtomin", "sctp_dac", "pathmgr", "cc", "runtime", "sctp_mechanisms",
  "sctp_mechanisms_bufsplit_on_buffered", "sctp_mechanisms_smartfr",
  "sctp_mechanisms_pktdrop", "sctp_mechanisms_reschedule", "seed", "onoffevents", "onoff",
  "onoff_rng", "onoff_flags",
  "onoff_reltime", "onoff_padding", "onoff_value", "magic", "frameid", "seqnumber", "byteseqnumber",
  "timestamp", "timestamp_abs", "payload", "results_data", "auth_nonce", "auth_mac",
  "flow_description", "flow_protocol",
  "flow_addflow_in", "flow_identify_in", "direction", "seq_expected", "seq_lost", "seq_reordered",
  "quic_stream_id", "quic_stream_number", "quic_stream_type",
}
do
  local list = {}
  for _, k in ipairs(hf_order) do list[#list + 1] = assert(hf[k], k) end
  npmp.fields = list
end

local ei = {
  unknown_type = ProtoExpert.new("npmp.expert.unknown_type", "Unknown message type", expert.group.MALFORMED, expert.severity.ERROR),
  length_mismatch = ProtoExpert.new("npmp.expert.length_mismatch", "Length mismatch", expert.group.MALFORMED, expert.severity.ERROR),
  truncated = ProtoExpert.new("npmp.expert.truncated", "Truncated message", expert.group.MALFORMED, expert.severity.ERROR),
  bad_magic = ProtoExpert.new("npmp.expert.bad_magic", "Bad magic number", expert.group.PROTOCOL, expert.severity.ERROR),
  unknown_flow = ProtoExpert.new("npmp.expert.unknown_flow", "Flow without ADD_FLOW in this capture", expert.group.SEQUENCE, expert.severity.NOTE),
  seq_lost = ProtoExpert.new("npmp.expert.seq_lost", "Messages missing (lost)", expert.group.SEQUENCE, expert.severity.WARN),
  seq_reordered = ProtoExpert.new("npmp.expert.seq_reordered", "Out-of-order message", expert.group.SEQUENCE, expert.severity.WARN),
}
npmp.experts = { ei.unknown_type, ei.length_mismatch, ei.truncated, ei.bad_magic, ei.unknown_flow, ei.seq_lost, ei.seq_reordered }

npmp.prefs.tcp_ports = Pref.range("TCP ports", DEFAULT_PORTS,
  "TCP ports decoded as NPMP (data on BASE, MPTCP data on BASE-1, control on BASE+1)", 65535)
npmp.prefs.udp_ports = Pref.range("UDP ports", DEFAULT_PORTS, "UDP ports decoded as NPMP", 65535)
npmp.prefs.dccp_ports = Pref.range("DCCP ports", DEFAULT_PORTS, "DCCP ports decoded as NPMP", 65535)
npmp.prefs.desegment = Pref.bool("Reassemble NPMP messages spanning multiple TCP segments", true,
  "Whether NPMP messages split across TCP segments or QUIC STREAM frames are " ..
  "reassembled (TCP also needs its preference \"Allow subdissectors to reassemble " ..
  "TCP streams\"; QUIC reassembles its streams always)")

-- ---------------------------------------------------------------- state --
local flow_table, seq_table, results, confirmed
local quic_streams, quic_frames  -- QUIC: per stream ("connection:Stream ID"), per STREAM frame
local tap_pending = { frame = -1, recs = {} }

local function reset_state()
  flow_table = {}
  seq_table = {}
  results = {}
  confirmed = {}
  quic_streams = {}
  quic_frames = {}
  tap_pending = { frame = -1, recs = {} }
end
reset_state()
npmp.init = reset_state

-- Fixed-size, NUL-padded ASCII field (not necessarily NUL-terminated): the
-- value up to the first NUL inside the range, non-ASCII bytes as U+FFFD, like
-- tvb_get_stringzpad(..., ENC_ASCII) in C.  (The string fields are FT_STRING:
-- a Lua FT_STRINGZ field reads past its range when the range holds no NUL.)
local function fixed_string(range)
  local s = range:raw()
  local z = s:find("\0", 1, true)
  if z then s = s:sub(1, z - 1) end
  return (s:gsub("[\128-\255]", "\239\191\189"))
end

local function flow_key(meas, flow, stream)
  return meas:tohex(16) .. ":" .. flow .. ":" .. stream
end

-- Conversations: Wireshark's stream index of the transport (the same
-- conversation the C plugin looks up, including port reuse), else the
-- address/port pair.
local stream_fields = { [2] = Field.new("tcp.stream"), [3] = Field.new("udp.stream"), [4] = Field.new("dccp.stream") }

local function conv_key(pinfo)
  local pt = pinfo.port_type
  local f = stream_fields[pt]
  if f then
    local all = { f() }
    if #all > 0 then return pt .. "#" .. tostring(all[#all].value) end
  end
  local a = tostring(pinfo.src) .. "/" .. pinfo.src_port
  local b = tostring(pinfo.dst) .. "/" .. pinfo.dst_port
  if a > b then a, b = b, a end
  return tostring(pt) .. "|" .. a .. "|" .. b
end

-- ------------------------------------------------------ plausibility ----
local function header_plausible(tvb, offset)
  if tvb:captured_len() - offset < HDR_LEN then return false end
  local t = tvb(offset, 1):uint()
  local fl = tvb(offset + 1, 1):uint()
  local len = tvb(offset + 2, 2):uint()
  if t == NPMP_ACKNOWLEDGE then return fl == 0 and len == ACK_LEN
  elseif t == NPMP_ADD_FLOW then
    return len >= ADDFLOW_LEN and (len - ADDFLOW_LEN) % ONOFF_LEN == 0  -- every flag bit is defined
  elseif t == NPMP_REMOVE_FLOW then return fl == 0 and len == REMOVE_LEN
  elseif t == NPMP_IDENTIFY_FLOW then return band(fl, 0xf8) == 0 and len == IDENTIFY_LEN
  elseif t == NPMP_DATA then return band(fl, 0xfc) == 0 and len >= DATA_LEN
  elseif t == NPMP_START then return band(fl, 0xf0) == 0 and len == STARTSTOP_LEN
  elseif t == NPMP_STOP then return fl == 0 and len == STARTSTOP_LEN
  elseif t == NPMP_RESULTS then return band(fl, 0xfe) == 0 and len <= RESULTS_MAX
  elseif t == NPMP_AUTH_HELLO then return fl == 0 and len == AUTH_HELLO_LEN
  elseif t == NPMP_AUTH_CHALLENGE then return fl == 0 and len == AUTH_CHALLENGE_LEN
  elseif t == NPMP_AUTH_RESPONSE then return fl == 0 and len == AUTH_RESPONSE_LEN
  end
  return false
end

local function heur_plausible(tvb)
  if not header_plausible(tvb, 0) then return false end
  local avail = tvb:captured_len()
  local t = tvb(0, 1):uint()
  if t == NPMP_IDENTIFY_FLOW then
    return avail >= 16 and tvb(8, 8):uint64() == MAGIC
  elseif t == NPMP_DATA then
    if avail < DATA_LEN or tvb(18, 2):uint() ~= 0 then return false end
    local ts = tvb(40, 8):uint64()
    return ts >= TS_MIN and ts <= TS_MAX
  elseif t == NPMP_ADD_FLOW then
    return avail >= 20 and protocol_vals[tvb(18, 2):le_uint()] ~= nil
  end
  return false
end

-- ----------------------------------------------------------- analysis ----
local function get_direction(pinfo, fl)
  local src, dst = tostring(pinfo.src), tostring(pinfo.dst)
  if fl and fl.identify_frame then
    if src == fl.active_addr and pinfo.src_port == fl.active_port then return DIR_A2P end
    if dst == fl.active_addr and pinfo.dst_port == fl.active_port then return DIR_P2A end
    if pinfo.dst_port == fl.passive_port then return DIR_A2P end
    if pinfo.src_port == fl.passive_port then return DIR_P2A end
  end
  if pinfo.src_port >= pinfo.dst_port then return DIR_A2P end
  return DIR_P2A
end

-- First-pass analysis of one flow-carrying message.
local function analyse(m)
  local pinfo, mtype, tvb, lim = m.pinfo, m.mtype, m.tvb, m.lim
  local mi = {}
  local key = flow_key(m.meas, m.flow, m.stream)
  local fl = flow_table[key]
  if mtype == NPMP_ADD_FLOW then
    if not fl then
      fl = {
        addflow_frame = pinfo.number,
        protocol = (lim >= 20) and tvb(18, 2):le_uint() or 0,
        description = (lim >= 52) and fixed_string(tvb(20, 32)) or "",
      }
      flow_table[key] = fl
    end
  elseif mtype == NPMP_IDENTIFY_FLOW and fl and not fl.identify_frame then
    fl.identify_frame = pinfo.number
    fl.active_addr = tostring(pinfo.src)
    fl.active_port = pinfo.src_port
    fl.passive_port = pinfo.dst_port
  end
  if fl then
    mi.known = true
    mi.description = fl.description
    mi.protocol = fl.protocol
    mi.addflow_frame = fl.addflow_frame
    mi.identify_frame = fl.identify_frame
  end
  -- In a unidirectional QUIC stream the Stream ID says who sends (as the
  -- flows of netperfmeter/data use them); otherwise the addresses do.
  if m.quic_stream_id and m.quic_stream_id:band(2):tonumber() ~= 0 then
    mi.direction = (m.quic_stream_id:band(1):tonumber() ~= 0) and DIR_P2A or DIR_A2P
  else
    mi.direction = get_direction(pinfo, fl)
  end

  if mtype == NPMP_DATA and lim >= 32 then
    local seq = tvb(24, 8):uint64()
    local skey = key .. ":" .. mi.direction
    local st = seq_table[skey]
    if not st then
      st = {}
      seq_table[skey] = st
    end
    if not st.seen then
      st.seen = true
      st.expected = fl and UInt64(0) or seq
    end
    mi.has_seq = true
    mi.expected = st.expected
    if seq >= st.expected then
      mi.lost = seq - st.expected
      st.expected = seq + UInt64(1)
    else
      mi.lost = UInt64(0)
      mi.reordered = true
    end
  end
  return mi
end

-- Generated fields of a flow message: its ADD_FLOW and IDENTIFY_FLOW,
-- direction and sequence analysis.
local function add_flow_info(m)
  local tvb, tree, ti, mi, mtype = m.tvb, m.tree, m.tree, m.mi, m.mtype
  if not mi then return end
  local g = tvb(0, 0)
  if mi.known then
    tree:add(hf.flow_description, g, mi.description):set_generated()
    tree:add(hf.flow_protocol, g, mi.protocol):set_generated()
    if mtype ~= NPMP_ADD_FLOW then
      tree:add(hf.flow_addflow_in, g, mi.addflow_frame):set_generated()
    end
    if mi.identify_frame and mtype ~= NPMP_IDENTIFY_FLOW and mtype ~= NPMP_ADD_FLOW then
      tree:add(hf.flow_identify_in, g, mi.identify_frame):set_generated()
    end
  elseif mtype == NPMP_DATA or mtype == NPMP_IDENTIFY_FLOW then
    ti:add_proto_expert_info(ei.unknown_flow)
  end
  if mtype == NPMP_DATA then
    tree:add(hf.direction, g, mi.direction):set_generated()
  end
  if mi.has_seq then
    local r = tvb(24, 8)
    tree:add(hf.seq_expected, r, mi.expected):set_generated()
    if mi.lost ~= UInt64(0) then
      local it = tree:add(hf.seq_lost, r, mi.lost)
      it:set_generated()
      it:add_proto_expert_info(ei.seq_lost, string.format("%s message(s) missing before SeqNumber %s",
        tostring(mi.lost), tostring(mi.expected + mi.lost)))
    end
    if mi.reordered then
      local it = tree:add(hf.seq_reordered, r, true)
      it:set_generated()
      it:add_proto_expert_info(ei.seq_reordered, string.format("Out-of-order message: SeqNumber %s < expected %s",
        tostring(tvb(24, 8):uint64()), tostring(mi.expected)))
    end
  end
end

-- ---------------------------------------------------------- messages ----
-- One message being dissected, m: tvb (the message at offset 0), pinfo, tree
-- (the message's item), mtype, lim (bytes present), ordinal (number inside its
-- packet); the per-type functions fill in has_flow, meas, flow, stream, mi.

-- A field is added only if it lies completely inside the message.
local function field_ok(m, off, size) return off + size <= m.lim end

local function add_flags(tree, tvb, mtype)
  local r = tvb(1, 1)
  local it = tree:add(hf.flags, r)
  if mtype == NPMP_ADD_FLOW then
    it:add(hf.af_debug, r); it:add(hf.af_nodelay, r); it:add(hf.af_repeatonoff, r)
    it:add(hf.af_nrsack, r); it:add(hf.af_bufsplit, r); it:add(hf.af_sctpcc, r)
  elseif mtype == NPMP_IDENTIFY_FLOW then
    it:add(hf.id_compress_vectors, r); it:add(hf.id_no_vectors, r); it:add(hf.id_path_vectors, r)
    it:add(hf.id_gzip_vectors, r)
  elseif mtype == NPMP_DATA then
    it:add(hf.data_frame_begin, r); it:add(hf.data_frame_end, r)
  elseif mtype == NPMP_START then
    it:add(hf.st_compress_vectors, r); it:add(hf.st_compress_scalars, r)
    it:add(hf.st_no_vectors, r); it:add(hf.st_no_scalars, r)
    it:add(hf.st_gzip_vectors, r); it:add(hf.st_gzip_scalars, r)
  elseif mtype == NPMP_RESULTS then
    it:add(hf.res_eof, r)
  end
end

-- The length a message of this type must have, 0 if it varies (DATA, RESULTS, unknown).
local function expected_length(m)
  local t = m.mtype
  if t == NPMP_ACKNOWLEDGE then return ACK_LEN
  elseif t == NPMP_REMOVE_FLOW then return REMOVE_LEN
  elseif t == NPMP_IDENTIFY_FLOW then return IDENTIFY_LEN
  elseif t == NPMP_START or t == NPMP_STOP then return STARTSTOP_LEN
  elseif t == NPMP_AUTH_HELLO then return AUTH_HELLO_LEN
  elseif t == NPMP_AUTH_CHALLENGE then return AUTH_CHALLENGE_LEN
  elseif t == NPMP_AUTH_RESPONSE then return AUTH_RESPONSE_LEN
  elseif t == NPMP_ADD_FLOW then
    if m.lim >= ADDFLOW_LEN then return ADDFLOW_LEN + ONOFF_LEN * m.tvb(192, 2):uint() end
    return ADDFLOW_LEN
  end
  return 0
end

-- Expert infos on the Length field (item it).
local function check_length(m, it, length, avail, tname)
  local expected = expected_length(m)
  if length < HDR_LEN then
    it:add_proto_expert_info(ei.length_mismatch, string.format("Length %d is smaller than the 4-byte header", length))
  elseif expected ~= 0 and length ~= expected then
    it:add_proto_expert_info(ei.length_mismatch, string.format("Length %d does not match the expected %d for %s",
      length, expected, tname))
  elseif m.mtype == NPMP_DATA and length < DATA_LEN then
    it:add_proto_expert_info(ei.length_mismatch, string.format("Length %d is smaller than the 48-byte DATA header", length))
  elseif m.mtype == NPMP_RESULTS and length > RESULTS_MAX then
    it:add_proto_expert_info(ei.length_mismatch, string.format("Length %d exceeds the RESULTS maximum of 1404", length))
  end
  if length >= HDR_LEN and length > avail then
    m.tree:add_proto_expert_info(ei.truncated, string.format("Truncated message: Length %d, only %d bytes present",
      length, avail))
  end
end

-- FlowID, at offset 4 in every flow message.
local function dissect_flowid(m)
  if field_ok(m, 4, 4) then m.tree:add(hf.flowid, m.tvb(4, 4)); m.flow = m.tvb(4, 4):uint() end
end

-- MeasurementID and StreamID of a flow message.  With the StreamID the flow is
-- known: the analysis runs (first pass) or is looked up (later passes) before
-- the rest of the message is read.
local function dissect_measurement_stream(m, meas_off, stream_off)
  local tvb = m.tvb
  if field_ok(m, meas_off, 8) then m.tree:add(hf.measurementid, tvb(meas_off, 8)); m.meas = tvb(meas_off, 8):uint64() end
  if not field_ok(m, stream_off, 2) then return end
  m.tree:add(hf.streamid, tvb(stream_off, 2)); m.stream = tvb(stream_off, 2):uint(); m.has_flow = true
  local rkey = m.pinfo.number .. ":" .. m.ordinal
  if not m.pinfo.visited then
    m.mi = analyse(m)
    results[rkey] = m.mi
  else
    m.mi = results[rkey]
  end
end

local function dissect_acknowledge_message(m)
  local tvb = m.tvb
  dissect_flowid(m)
  dissect_measurement_stream(m, 8, 16)
  if field_ok(m, 18, 2) then m.tree:add(hf.padding, tvb(18, 2)) end
  if field_ok(m, 20, 4) then m.tree:add(hf.status, tvb(20, 4)) end
end

-- Ordered and Reliable: a fraction times 0xffffffff.
local function dissect_fraction(m, off, raw, fraction)
  if not field_ok(m, off, 4) then return end
  local r = m.tvb(off, 4)
  m.tree:add(raw, r)
  m.tree:add(fraction, r, r:uint() / 4294967295.0):set_generated()
end

local function dissect_onoff_events(m)
  local tvb = m.tvb
  m.tree:add(hf.onoffevents, tvb(192, 2))
  local n = tvb(192, 2):uint()
  for i = 0, n - 1 do
    local eo = ADDFLOW_LEN + ONOFF_LEN * i
    if not field_ok(m, eo, ONOFF_LEN) then break end
    local et = m.tree:add(hf.onoff, tvb(eo, ONOFF_LEN))
    et:append_text(" " .. (i + 1))
    et:add(hf.onoff_rng, tvb(eo, 1))
    local ft = et:add(hf.onoff_flags, tvb(eo + 1, 1))
    ft:add(hf.onoff_reltime, tvb(eo + 1, 1))
    et:add(hf.onoff_padding, tvb(eo + 2, 2))
    for j = 0, 3 do et:add(hf.onoff_value, tvb(eo + 4 + 8 * j, 8)) end
  end
end

local function dissect_add_flow_message(m)
  local tvb, ti = m.tvb, m.tree
  local function ok(off, size) return field_ok(m, off, size) end
  dissect_flowid(m)
  dissect_measurement_stream(m, 8, 16)
  if ok(18, 2) then ti:add_le(hf.protocol, tvb(18, 2)) end
  if ok(20, 32) then ti:add(hf.description, tvb(20, 32)) end
  dissect_fraction(m, 52, hf.ordered, hf.ordered_fraction)
  dissect_fraction(m, 56, hf.reliable, hf.reliable_fraction)
  if ok(60, 4) then
    local r = tvb(60, 4)
    local rt = ti:add(hf.retranstrials, r)
    rt:add(hf.retranstrials_is_time, r)
    rt:add(hf.retranstrials_value, r)
  end
  for i = 0, 3 do if ok(64 + 8 * i, 8) then ti:add(hf.framerate, tvb(64 + 8 * i, 8)) end end
  for i = 0, 3 do if ok(96 + 8 * i, 8) then ti:add(hf.framesize, tvb(96 + 8 * i, 8)) end end
  if ok(128, 1) then ti:add(hf.framerate_rng, tvb(128, 1)) end
  if ok(129, 1) then ti:add(hf.framesize_rng, tvb(129, 1)) end
  if ok(130, 4) then ti:add(hf.rcvbuf, tvb(130, 4)) end
  if ok(134, 4) then ti:add(hf.sndbuf, tvb(134, 4)) end
  if ok(138, 2) then ti:add(hf.maxmsgsize, tvb(138, 2)) end
  if ok(140, 1) then ti:add(hf.cmt, tvb(140, 1)) end
  if ok(141, 1) then ti:add(hf.ccid, tvb(141, 1)) end
  if ok(142, 2) then
    local nd = ti:add(hf.ndiffports, tvb(142, 2))
    nd:add(hf.sctp_rtomin, tvb(142, 2)); nd:add(hf.sctp_dac, tvb(142, 2))
  end
  if ok(144, 16) then ti:add(hf.pathmgr, tvb(144, 16)) end
  if ok(160, 16) then ti:add(hf.cc, tvb(160, 16)) end
  -- the obsolete Scheduler field: its first 4 bytes carry the measurement's runtime (ms)
  if ok(176, 4) then ti:add(hf.runtime, tvb(176, 4)) end
  -- ... its next 4 the CMT-SCTP mechanisms of the bundled stack that the flow asks for
  if ok(180, 4) then
    local sm = ti:add(hf.sctp_mechanisms, tvb(180, 4))
    sm:add(hf.sctp_mechanisms_bufsplit_on_buffered, tvb(180, 4))
    sm:add(hf.sctp_mechanisms_smartfr, tvb(180, 4))
    sm:add(hf.sctp_mechanisms_pktdrop, tvb(180, 4))
    sm:add(hf.sctp_mechanisms_reschedule, tvb(180, 4))
  end
  -- ... and its last 8 the run's seed (-seed), from which the passive seeds its random choices
  if ok(184, 8) then ti:add(hf.seed, tvb(184, 8)) end
  if ok(192, 2) then dissect_onoff_events(m) end
end

local function dissect_remove_flow_message(m)
  dissect_flowid(m)
  dissect_measurement_stream(m, 8, 16)
end

local function dissect_identify_flow_message(m)
  dissect_flowid(m)
  if field_ok(m, 8, 8) then
    local magic = m.tvb(8, 8):uint64()
    local it = m.tree:add(hf.magic, m.tvb(8, 8))
    if magic ~= MAGIC then
      it:add_proto_expert_info(ei.bad_magic, string.format("Bad magic number 0x%s (expected 0x%s)",
        magic:tohex(16), MAGIC:tohex(16)))
    end
  end
  dissect_measurement_stream(m, 16, 24)
end

local function dissect_data_message(m)
  local tvb, ti = m.tvb, m.tree
  dissect_flowid(m)
  dissect_measurement_stream(m, 8, 16)
  if field_ok(m, 18, 2) then ti:add(hf.padding, tvb(18, 2)) end
  if field_ok(m, 20, 4) then ti:add(hf.frameid, tvb(20, 4)) end
  if field_ok(m, 24, 8) then ti:add(hf.seqnumber, tvb(24, 8)) end
  if field_ok(m, 32, 8) then ti:add(hf.byteseqnumber, tvb(32, 8)) end
  if field_ok(m, 40, 8) then
    local us = tvb(40, 8):uint64()
    local secs = (us / UInt64(1000000)):tonumber()
    local nsecs = (us % UInt64(1000000)):tonumber() * 1000
    ti:add(hf.timestamp, tvb(40, 8))
    ti:add(hf.timestamp_abs, tvb(40, 8), NSTime.new(secs, nsecs)):set_generated()
  end
  if m.lim > DATA_LEN then ti:add(hf.payload, tvb(DATA_LEN, m.lim - DATA_LEN)) end
end

-- MeasurementID of START and STOP.
local function dissect_measurement(m)
  if field_ok(m, 8, 8) then m.tree:add(hf.measurementid, m.tvb(8, 8)); m.meas = m.tvb(8, 8):uint64() end
end

local function dissect_start_message(m)
  -- Offset 4 is the reference's Padding (always 0): here the warm-up in milliseconds.
  if field_ok(m, 4, 4) then
    local warmup = m.tvb(4, 4):uint()
    m.tree:add(hf.st_warmup, m.tvb(4, 4)):set_text("Warm-up: " .. (warmup ~= 0 and (warmup .. " ms") or "none"))
  end
  dissect_measurement(m)
end

local function dissect_stop_message(m)
  if field_ok(m, 4, 4) then m.tree:add(hf.padding32, m.tvb(4, 4)) end
  dissect_measurement(m)
end

local function dissect_results_message(m)
  if m.lim > HDR_LEN then m.tree:add(hf.results_data, m.tvb(HDR_LEN, m.lim - HDR_LEN)) end
end

-- A nonce or an HMAC-SHA-256 value.
local function dissect_auth_block(m, off, field)
  if field_ok(m, off, AUTH_BLOCK) then m.tree:add(field, m.tvb(off, AUTH_BLOCK)) end
end

local function dissect_auth_hello_message(m)
  dissect_auth_block(m, HDR_LEN, hf.auth_nonce)
end

local function dissect_auth_challenge_message(m)
  dissect_auth_block(m, HDR_LEN, hf.auth_nonce)
  dissect_auth_block(m, HDR_LEN + AUTH_BLOCK, hf.auth_mac)
end

local function dissect_auth_response_message(m)
  dissect_auth_block(m, HDR_LEN, hf.auth_mac)
end

-- Message type -> its function (the C plugin's switch).
local dissect_message_of_type = {
  [NPMP_ACKNOWLEDGE] = dissect_acknowledge_message,
  [NPMP_ADD_FLOW] = dissect_add_flow_message,
  [NPMP_REMOVE_FLOW] = dissect_remove_flow_message,
  [NPMP_IDENTIFY_FLOW] = dissect_identify_flow_message,
  [NPMP_DATA] = dissect_data_message,
  [NPMP_START] = dissect_start_message,
  [NPMP_STOP] = dissect_stop_message,
  [NPMP_RESULTS] = dissect_results_message,
  [NPMP_AUTH_HELLO] = dissect_auth_hello_message,
  [NPMP_AUTH_CHALLENGE] = dissect_auth_challenge_message,
  [NPMP_AUTH_RESPONSE] = dissect_auth_response_message,
}

-- Info column text of one message.
local function append_info(m, flags, tname)
  local tvb = m.tvb
  local info = tname
  if m.has_flow then info = info .. " flow=" .. m.flow end
  if m.mtype == NPMP_DATA and m.lim >= 32 then info = info .. " seq=" .. tostring(tvb(24, 8):uint64()) end
  if m.mtype == NPMP_ACKNOWLEDGE and m.lim >= 24 then
    info = info .. " status=" .. (status_vals[tvb(20, 4):uint()] or "?")
  end
  if m.mtype == NPMP_RESULTS and band(flags, 1) ~= 0 then info = info .. " EOF" end
  m.pinfo.cols.info:append((m.ordinal > 1 and ", " or "") .. info)
end

-- Generated fields of a message carried in a QUIC stream: the Stream ID, its
-- stream number (the flow's number in its connection) and its type.
local function add_quic_info(m)
  local g = m.tvb(0, 0)
  m.tree:add(hf.quic_stream_id, g, m.quic_stream_id):set_generated()
  m.tree:add(hf.quic_stream_number, g, m.quic_stream_id:rshift(2)):set_generated()
  m.tree:add(hf.quic_stream_type, g, m.quic_stream_id:band(3):tonumber()):set_generated()
end

-- Dissects one message at offset 0 of tvb (quic_stream_id: the UInt64 Stream ID
-- of its QUIC stream, nil if it came otherwise or the ID is unknown); returns
-- the bytes it occupies.
local function dissect_message(tvb, pinfo, tree, quic_stream_id)
  local avail = tvb:reported_len()
  local mtype = tvb(0, 1):uint()
  local flags = (avail >= 2) and tvb(1, 1):uint() or 0
  local length = (avail >= 4) and tvb(2, 2):uint() or 0
  local tname = type_vals[mtype] or "Unknown"

  local ordinal = (tonumber(pinfo.private.npmp_ordinal) or 0) + 1
  pinfo.private.npmp_ordinal = tostring(ordinal)

  if avail < HDR_LEN then
    local ti = tree:add(npmp, tvb(0, avail))
    ti:add(hf.type, tvb(0, 1))
    if avail >= 2 then ti:add(hf.flags, tvb(1, 1)) end
    ti:add_proto_expert_info(ei.truncated, string.format("Truncated message: %d of 4 header bytes present", avail))
    pinfo.cols.info:append((ordinal > 1 and ", " or "") .. "[Truncated]")
    return avail
  end

  local m = { tvb = tvb, pinfo = pinfo, mtype = mtype, ordinal = ordinal,
              has_flow = false, meas = UInt64(0), flow = 0, stream = 0, quic_stream_id = quic_stream_id }
  local consumed
  if length < HDR_LEN then
    m.lim = HDR_LEN
    consumed = avail  -- cannot resynchronise: the rest belongs to this message
  else
    m.lim = math.min(length, avail)
    consumed = m.lim
  end

  m.tree = tree:add(npmp, tvb(0, consumed))
  m.tree:append_text(", " .. tname)
  local it = m.tree:add(hf.type, tvb(0, 1))
  if not type_vals[mtype] then
    it:add_proto_expert_info(ei.unknown_type, string.format("Unknown message type %d", mtype))
  end
  add_flags(m.tree, tvb, mtype)
  it = m.tree:add(hf.length, tvb(2, 2))
  check_length(m, it, length, avail, tname)

  local dissect_type = dissect_message_of_type[mtype]
  if dissect_type then dissect_type(m) end

  if m.has_flow then add_flow_info(m) end
  if m.quic_stream_id then add_quic_info(m) end
  append_info(m, flags, tname)

  -- Statistics record
  if tap_pending.frame ~= pinfo.number or ordinal == 1 then
    tap_pending = { frame = pinfo.number, recs = {} }
  end
  table.insert(tap_pending.recs, {
    type = mtype, length = (length >= HDR_LEN) and length or consumed, has_flow = m.has_flow,
    measurement = m.meas, flow = m.flow, stream = m.stream,
    direction = m.mi and m.mi.direction or DIR_A2P,
  })
  return consumed
end

local function set_columns(pinfo)
  if pinfo.private.npmp_ordinal == nil then
    pinfo.cols.protocol = "NPMP"
    pinfo.cols.info:clear()
  end
end

local function get_pdu_len(tvb, pinfo, offset)
  local len = tvb(offset + 2, 2):uint()
  if len < HDR_LEN then return HDR_LEN end
  return len
end

local function dissect_pdu(tvb, pinfo, tree)
  set_columns(pinfo)
  return dissect_message(tvb, pinfo, tree)
end

local function dissect_datagram(tvb, pinfo, tree)
  local offset, total = 0, tvb:reported_len()
  set_columns(pinfo)
  while offset < total do
    local remaining = total - offset
    local len = (remaining >= 4) and tvb(offset + 2, 2):uint() or 0
    local sublen = (len >= HDR_LEN and len <= remaining) and len or remaining
    local used = dissect_message(tvb(offset, sublen):tvb(), pinfo, tree)
    if used == 0 then break end
    offset = offset + used
  end
  return tvb:captured_len()
end

local function confirm_conv(pinfo)
  local k = conv_key(pinfo)
  if not confirmed[k] then
    confirmed[k] = true
    pinfo.conversation = npmp
  end
end

local function tcp_framing(tvb, pinfo, tree)
  dissect_tcp_pdus(tvb, tree, HDR_LEN, get_pdu_len, dissect_pdu, npmp.prefs.desegment)
end

-- NPMP-DATA in a QUIC stream of a connection whose ALPN is netperfmeter/data.
-- Wireshark's QUIC dissector (4.0: packet-quic.c) decrypts the 1-RTT packets with
-- the TLS key log, looks up the "quic.proto" table by the ALPN once, and calls
-- this dissector with each STREAM frame's data.  The quic_stream_info it passes
-- along does not reach Lua: the Stream ID, the offset and the connection come
-- from the fields of the STREAM frame being dissected (the last quic.stream.stream_id
-- of the packet so far, its quic.stream.off flag and offset, quic.connection.number).
-- Fields need the protocol tree (tshark 4.0 builds one for field extractors in
-- every mode tried).  Without one the QUIC dissector is still recognised by the
-- reassembly it offers its sub-dissectors (can_desegment; UDP offers none), and
-- each STREAM frame is decoded on its own, without the QUIC fields.
-- A stream is a byte stream framed as on TCP.  Messages cut at the end of a frame
-- are reassembled here, not with the QUIC dissector's desegmentation: in Debian
-- 12's 4.0.17-0+deb12u3 that adds a stream's first piece under another
-- reassembly ID than the later ones (a partial backport of upstream 562c3c07,
-- CVE-2026-0960.patch), so nothing it reassembles ever completes.
local quic_fields = {}
for name, abbrev in pairs({ stream_id = "quic.stream.stream_id", off = "quic.stream.off",
                            offset = "quic.stream.offset", conn = "quic.connection.number" }) do
  local found, f = pcall(Field.new, abbrev)
  if found then quic_fields[name] = f end
end

-- The STREAM frame being dissected: { id = UInt64 Stream ID, offset = its stream
-- offset, conn = its connection } if called by the QUIC dissector, false if so
-- but without a tree, nil otherwise.
local function quic_stream(pinfo)
  if pinfo.port_type ~= 3 or not quic_fields.stream_id then return nil end  -- PT_UDP
  local ids = { quic_fields.stream_id() }
  local n = #ids
  if n == 0 then
    if pinfo.can_desegment > 0 then return false end
    return nil
  end
  -- One Off(set) flag per STREAM frame, an Offset only where the flag is set.
  local flags, offset = { quic_fields.off() }, 0
  if flags[n] and flags[n].value then
    local k = 0
    for i = 1, n do
      if flags[i].value then k = k + 1 end
    end
    local offsets = { quic_fields.offset() }
    offset = offsets[k].value:tonumber()
  end
  local conns = { quic_fields.conn() }
  return { id = ids[n].value, offset = offset, conn = tostring(#conns > 0 and conns[#conns].value or "") }
end

local function quic_msg_len(s, i)  -- the message whose header starts at s[i]
  local len = s:byte(i + 2) * 256 + s:byte(i + 3)
  if len < HDR_LEN then return HDR_LEN end
  return len
end

-- First pass: where the messages of this frame's data (a string) lie, at stream
-- offset `offset`; st: the stream's next new byte, and the start of a message cut at
-- the end of the last frame.  Offsets in the result count from 0, as in the Tvb.
local function quic_first_pass(st, data, offset)
  local total = #data
  local fr = { start = 0, stop = 0 }
  if st.lost or offset + total <= st.next then
    return fr  -- after a gap, or a retransmission of what was seen
  end
  if offset > st.next then
    st.lost = true  -- a gap: the capture lacks part of the stream
    return fr
  end
  local pos = st.next - offset  -- skip what a retransmission repeats
  st.next = offset + total
  if #st.pending > 0 then
    if #st.pending < HDR_LEN then
      local take = math.min(HDR_LEN - #st.pending, total - pos)
      st.pending = st.pending .. data:sub(pos + 1, pos + take)
      pos = pos + take
    end
    if #st.pending >= HDR_LEN then
      local take = math.min(quic_msg_len(st.pending, 1) - #st.pending, total - pos)
      st.pending = st.pending .. data:sub(pos + 1, pos + take)
      pos = pos + take
      if #st.pending == quic_msg_len(st.pending, 1) then
        fr.head = st.pending
        st.pending = ""
      end
    end
    if #st.pending > 0 then return fr end  -- the message goes on in the next frame
  end
  fr.start = pos
  while total - pos >= HDR_LEN and total - pos >= quic_msg_len(data, pos + 1) do
    pos = pos + quic_msg_len(data, pos + 1)
  end
  fr.stop = pos
  if pos < total then st.pending = data:sub(pos + 1) end
  return fr
end

local function dissect_quic(tvb, pinfo, tree, q)
  local total = tvb:reported_len()
  -- The QUIC dissector calls once per STREAM frame, in the same order on every pass.
  local call = (tonumber(pinfo.private.npmp_quic_call) or 0) + 1
  pinfo.private.npmp_quic_call = tostring(call)
  local stream_id = q and q.id or nil
  local fr
  if not q or not npmp.prefs.desegment or total == 0 then
    fr = { start = 0, stop = total }  -- every frame on its own
  elseif not pinfo.visited then
    local key = q.conn .. ":" .. tostring(q.id)
    local st = quic_streams[key]
    if not st then
      st = { next = 0, pending = "", lost = false }
      quic_streams[key] = st
    end
    fr = quic_first_pass(st, tvb:raw(0, total), q.offset)
    quic_frames[pinfo.number .. ":" .. call] = fr
  else
    fr = quic_frames[pinfo.number .. ":" .. call]
    if not fr then return 0 end
  end
  if fr.head then
    local whole = ByteArray.new(fr.head, true):tvb("Reassembled NPMP")
    set_columns(pinfo)
    dissect_message(whole, pinfo, tree, stream_id)
  end
  local pos = fr.start
  while pos < fr.stop do
    local remaining = fr.stop - pos
    local len = (remaining >= HDR_LEN) and get_pdu_len(tvb, pinfo, pos) or remaining
    set_columns(pinfo)
    pos = pos + dissect_message(tvb(pos, math.min(len, remaining)):tvb(), pinfo, tree, stream_id)
  end
  return total
end

function npmp.dissector(tvb, pinfo, tree)
  local q = quic_stream(pinfo)
  if q ~= nil then return dissect_quic(tvb, pinfo, tree, q or nil) end
  local pt = pinfo.port_type
  if pt == 2 then  -- PT_TCP
    if not confirmed[conv_key(pinfo)] then
      if not header_plausible(tvb, 0) then return 0 end
      confirm_conv(pinfo)
    end
    tcp_framing(tvb, pinfo, tree)
    return tvb:captured_len()
  end
  if (pt == 3 or pt == 4) and not confirmed[conv_key(pinfo)] then  -- UDP, DCCP
    -- One message per datagram: its Length must be the datagram's.
    if not header_plausible(tvb, 0) or tvb(2, 2):uint() ~= tvb:reported_len() then return 0 end
    confirm_conv(pinfo)
  end
  return dissect_datagram(tvb, pinfo, tree)
end

local function heuristic(tvb, pinfo, tree)
  if not heur_plausible(tvb) then return false end
  if pinfo.port_type ~= 2 and tvb(2, 2):uint() ~= tvb:reported_len() then
    return false  -- datagrams carry exactly one message
  end
  confirm_conv(pinfo)
  if pinfo.port_type == 2 then
    tcp_framing(tvb, pinfo, tree)
  else
    dissect_datagram(tvb, pinfo, tree)
  end
  return true
end

-- ------------------------------------------------------ registration ----
local sctp_ppi = DissectorTable.get("sctp.ppi")
for _, ppi in ipairs({ 36, 37, 0x29097605, 0x29097606 }) do sctp_ppi:add(ppi, npmp) end
DissectorTable.get("tcp.port"):add_for_decode_as(npmp)
DissectorTable.get("udp.port"):add_for_decode_as(npmp)
do
  local found, quic_proto = pcall(DissectorTable.get, "quic.proto")
  if found and quic_proto then quic_proto:add(QUIC_ALPN, npmp) end
end
npmp:register_heuristic("tcp", heuristic)
npmp:register_heuristic("udp", heuristic)
npmp:register_heuristic("dccp", heuristic)

local cur_ports = {}
local function update_ports()
  for tbl, pref in pairs({ ["tcp.port"] = "tcp_ports", ["udp.port"] = "udp_ports", ["dccp.port"] = "dccp_ports" }) do
    local dt = DissectorTable.get(tbl)
    local new = npmp.prefs[pref]
    if cur_ports[tbl] ~= new then
      if cur_ports[tbl] and cur_ports[tbl] ~= "" then dt:remove(cur_ports[tbl], npmp) end
      if new and new ~= "" then dt:add(new, npmp) end
      cur_ports[tbl] = new
    end
  end
end
update_ports()
function npmp.prefs_changed() update_ports() end

-- ------------------------------------------------- -z npmp,stat ----------
local function stat_cmd(arg)
  local filter = "npmp"
  if arg and arg:sub(1, 10) == "npmp,stat," then filter = "npmp && (" .. arg:sub(11) .. ")" end
  local type_msgs, type_bytes, flows = {}, {}, {}
  local tap = Listener.new("frame", filter)

  function tap.reset()
    type_msgs, type_bytes, flows = {}, {}, {}
  end

  function tap.packet(pinfo)
    if tap_pending.frame ~= pinfo.number then return end
    for _, r in ipairs(tap_pending.recs) do
      type_msgs[r.type] = (type_msgs[r.type] or 0) + 1
      type_bytes[r.type] = (type_bytes[r.type] or 0) + r.length
      if r.type == NPMP_DATA and r.has_flow then
        local key = r.measurement:tohex(16) .. ":" .. r.flow .. ":" .. r.stream .. ":" .. r.direction
        local f = flows[key]
        if not f then
          f = { measurement = r.measurement, flow = r.flow, stream = r.stream, direction = r.direction,
                messages = 0, bytes = 0, frames = 0, last_frame = -1 }
          flows[key] = f
        end
        f.messages = f.messages + 1
        f.bytes = f.bytes + r.length
        if f.last_frame ~= pinfo.number then
          f.frames = f.frames + 1
          f.last_frame = pinfo.number
        end
      end
    end
    tap_pending = { frame = -1, recs = {} }
  end

  function tap.draw()
    local line = string.rep("=", 80)
    print(line)
    print("NPMP Statistics")
    print("Message types:")
    print(string.format("  %-16s %12s %14s", "Type", "Messages", "Bytes"))
    for t = 0, 255 do
      if type_msgs[t] then
        local name = type_vals[t] or string.format("Unknown (%d)", t)
        print(string.format("  %-16s %12d %14d", name, type_msgs[t], type_bytes[t]))
      end
    end
    print("Data flows:")
    print(string.format("  %-18s %10s %6s %-4s %12s %14s %10s", "Measurement", "Flow", "Stream", "Dir",
      "Messages", "Bytes", "Frames"))
    local arr = {}
    for _, f in pairs(flows) do arr[#arr + 1] = f end
    table.sort(arr, function(x, y)
      if x.measurement ~= y.measurement then return x.measurement < y.measurement end
      if x.flow ~= y.flow then return x.flow < y.flow end
      if x.stream ~= y.stream then return x.stream < y.stream end
      return x.direction < y.direction
    end)
    for _, f in ipairs(arr) do
      print(string.format("  0x%s %10d %6d %-4s %12d %14d %10d", f.measurement:tohex(16), f.flow, f.stream,
        f.direction == DIR_A2P and "A->P" or "P->A", f.messages, f.bytes, f.frames))
    end
    print(line)
  end
end
register_stat_cmd_arg("npmp,stat", stat_cmd)
