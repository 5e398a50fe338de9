/*
 * packet-npmp.c -- Wireshark 4.x epan plugin for the NetPerfMeter Protocol
 * (NPMP-CONTROL and NPMP-DATA).
 *
 * Filter name "npmp" (the built-in dissector owns "netperfmeter").
 * The Lua twin dissectors/npmp.lua registers the same protocol, fields,
 * expert infos, preferences, heuristics and "-z npmp,stat" output; the tests
 * in tests/dissectors/ run the same assertions against both.
 *
 * Wire format: all integers big-endian except ADD_FLOW.Protocol (u16 LE);
 * doubles are IEEE-754 binary64 sent big-endian; common 4-byte header
 * Type(u8) Flags(u8) Length(u16, includes the header).
 *
 * Laid out as Wireshark's own dissectors (packet-netperfmeter.c): one
 * dissect_npmp_<type>_message() per message type, selected by a switch in
 * dissect_npmp_message(); C99 integer types and bool, glib's types only where
 * the Wireshark 4.0 API demands them (heuristic dissector, bool preference).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>

#include <wireshark.h>
#include <epan/packet.h>
#include <epan/prefs.h>
#include <epan/expert.h>
#include <epan/conversation.h>
#include <epan/proto_data.h>
#include <epan/tap.h>
#include <epan/stat_tap_ui.h>
#include <epan/dissectors/packet-tcp.h>
/* quic_stream_info, what the QUIC dissector hands its "quic.proto" sub-dissectors
 * (this header includes <gcrypt.h>: libgcrypt20-dev) */
#include <epan/dissectors/packet-quic.h>

#ifndef NPMP_PLUGIN_VERSION
#define NPMP_PLUGIN_VERSION "2.1.0"
#endif

WS_DLL_PUBLIC_DEF const char plugin_version[] = NPMP_PLUGIN_VERSION;
WS_DLL_PUBLIC_DEF const int plugin_want_major = WIRESHARK_VERSION_MAJOR;
WS_DLL_PUBLIC_DEF const int plugin_want_minor = WIRESHARK_VERSION_MINOR;
WS_DLL_PUBLIC void plugin_register(void);
#if WIRESHARK_VERSION_MAJOR > 4 || (WIRESHARK_VERSION_MAJOR == 4 && WIRESHARK_VERSION_MINOR >= 2)
#include <wsutil/plugins.h>
WS_DLL_PUBLIC uint32_t plugin_describe(void);
uint32_t
plugin_describe(void)
{
  return WS_PLUGIN_DESC_DISSECTOR;
}
#endif

/* ---- Protocol constants (reference §3) -------------------------------- */
#define NPMP_ACKNOWLEDGE    1
#define NPMP_ADD_FLOW       2
#define NPMP_REMOVE_FLOW    3
#define NPMP_IDENTIFY_FLOW  4
#define NPMP_DATA           5
#define NPMP_START          6
#define NPMP_STOP           7
#define NPMP_RESULTS        8
#define NPMP_AUTH_HELLO     9 /* --auth-key-file: mutual HMAC-SHA-256 authentication */
#define NPMP_AUTH_CHALLENGE 10
#define NPMP_AUTH_RESPONSE  11

#define NPMP_HDR_LEN            4
#define NPMP_ACK_LEN            24
#define NPMP_ADDFLOW_LEN        194
#define NPMP_ONOFF_LEN          36
#define NPMP_REMOVE_LEN         18
#define NPMP_IDENTIFY_LEN       26
#define NPMP_DATA_LEN           48
#define NPMP_STARTSTOP_LEN      16
#define NPMP_RESULTS_MAX        1404
#define NPMP_AUTH_BLOCK         32 /* nonce or HMAC-SHA-256 */
#define NPMP_AUTH_HELLO_LEN     (NPMP_HDR_LEN + NPMP_AUTH_BLOCK)
#define NPMP_AUTH_CHALLENGE_LEN (NPMP_HDR_LEN + 2 * NPMP_AUTH_BLOCK)
#define NPMP_AUTH_RESPONSE_LEN  (NPMP_HDR_LEN + NPMP_AUTH_BLOCK)

#define NPMP_MAGIC UINT64_C(0x4bcdf3aa303c6774)

#define PPID_NPMP_CONTROL        36
#define PPID_NPMP_DATA           37
#define PPID_NPMP_CONTROL_LEGACY 0x29097605
#define PPID_NPMP_DATA_LEGACY    0x29097606

#define NPMP_DEFAULT_PORTS "8999-9001"

/* QUIC flows: the ALPN of netperfmeter's QUIC connections (UDP BASE-1); flow n of a
 * connection is the client's unidirectional stream (n << 2) | 2 (active to passive)
 * and the server's (n << 2) | 3 (passive to active). */
#define NPMP_QUIC_ALPN "netperfmeter/data"

/* Plausible DATA time stamps: 2000-01-01 .. 2100-01-01 in microseconds. */
#define NPMP_TS_MIN UINT64_C(946684800000000)
#define NPMP_TS_MAX UINT64_C(4102444800000000)

enum { DIR_A2P = 0, DIR_P2A = 1 };

static const value_string npmp_type_vals[] = { { NPMP_ACKNOWLEDGE, "Acknowledge" },
                                               { NPMP_ADD_FLOW, "Add Flow" },
                                               { NPMP_REMOVE_FLOW, "Remove Flow" },
                                               { NPMP_IDENTIFY_FLOW, "Identify Flow" },
                                               { NPMP_DATA, "Data" },
                                               { NPMP_START, "Start" },
                                               { NPMP_STOP, "Stop" },
                                               { NPMP_RESULTS, "Results" },
                                               { NPMP_AUTH_HELLO, "Auth Hello" },
                                               { NPMP_AUTH_CHALLENGE, "Auth Challenge" },
                                               { NPMP_AUTH_RESPONSE, "Auth Response" },
                                               { 0, NULL } };

static const value_string npmp_protocol_vals[] = { { 6, "TCP" },    { 17, "UDP" },    { 33, "DCCP" }, { 132, "SCTP" },
                                                   { 261, "QUIC" }, { 262, "MPTCP" }, { 0, NULL } };

static const value_string npmp_rng_vals[] = { { 0, "Constant" }, { 1, "Uniform" }, { 2, "Negative Exponential" },
                                              { 3, "Pareto" },   { 4, "Normal" },  { 5, "Truncated Normal" },
                                              { 0, NULL } };

static const value_string npmp_cmt_vals[] = { { 0, "Off" },      { 1, "CMT" },        { 2, "CMT/RPv1" },
                                              { 3, "CMT/RPv2" }, { 4, "MPTCP-like" }, { 5, "W-PR-SCTP" },
                                              { 0, NULL } };

static const value_string npmp_bufsplit_vals[] = {
  { 0, "None" }, { 1, "Sender" }, { 2, "Receiver" }, { 3, "Both" }, { 0, NULL }
};

static const value_string npmp_sctpcc_vals[] = {
  { 0, "RFC 2581" }, { 1, "HSTCP" }, { 2, "H-TCP" }, { 3, "RTCC" }, { 0, NULL }
};

static const value_string npmp_status_vals[] = { { 0, "OK" },
                                                 { 1, "Error" },
                                                 { 2, "Not allowed" },
                                                 { 3, "Authentication required" },
                                                 { 4, "Unsupported" },
                                                 { 5, "OK, per-path vector follows" },
                                                 { 6, "Too many flows" },
                                                 { 7, "No file descriptors" },
                                                 { 8, "Process-wide SCTP settings conflict" },
                                                 { 9, "Busy: sessions" },
                                                 { 10, "Busy: sessions of this host" },
                                                 { 11, "Busy: sessions of this network" },
                                                 { 0, NULL } };

static const value_string npmp_direction_vals[] = { { DIR_A2P, "Active to Passive" },
                                                    { DIR_P2A, "Passive to Active" },
                                                    { 0, NULL } };

/* The two low bits of a QUIC Stream ID (RFC 9000, 2.1). */
static const value_string npmp_quic_stream_type_vals[] = {
  { 0, "Client-initiated, bidirectional" },
  { 1, "Server-initiated, bidirectional" },
  { 2, "Client-initiated, unidirectional (active to passive)" },
  { 3, "Server-initiated, unidirectional (passive to active)" },
  { 0, NULL }
};

static const true_false_string tfs_retrans_time = { "Time (ms)", "Trials" };

/* ---- Registration handles ------------------------------------------- */
static int proto_npmp = -1;
static int npmp_tap = -1;
static dissector_handle_t npmp_handle;
static dissector_handle_t npmp_quic_handle;

static int hf_type = -1, hf_flags = -1, hf_length = -1;
static int hf_addflow_flags_debug = -1, hf_addflow_flags_nodelay = -1, hf_addflow_flags_repeatonoff = -1;
static int hf_addflow_flags_nrsack = -1, hf_addflow_flags_bufsplit = -1, hf_addflow_flags_sctpcc = -1;
static int hf_sctp_rtomin = -1, hf_sctp_dac = -1;
static int hf_identify_flags_compress_vectors = -1, hf_identify_flags_no_vectors = -1;
static int hf_identify_flags_path_vectors = -1, hf_identify_flags_gzip_vectors = -1;
static int hf_data_flags_frame_begin = -1, hf_data_flags_frame_end = -1;
static int hf_start_flags_compress_vectors = -1, hf_start_flags_compress_scalars = -1;
static int hf_start_flags_no_vectors = -1, hf_start_flags_no_scalars = -1, hf_start_warmup = -1;
static int hf_start_flags_gzip_vectors = -1, hf_start_flags_gzip_scalars = -1;
static int hf_results_flags_eof = -1;
static int hf_flowid = -1, hf_measurementid = -1, hf_streamid = -1;
static int hf_padding = -1, hf_padding32 = -1, hf_status = -1;
static int hf_protocol = -1, hf_description = -1;
static int hf_ordered = -1, hf_ordered_fraction = -1, hf_reliable = -1, hf_reliable_fraction = -1;
static int hf_retranstrials = -1, hf_retranstrials_is_time = -1, hf_retranstrials_value = -1;
static int hf_framerate = -1, hf_framesize = -1, hf_framerate_rng = -1, hf_framesize_rng = -1;
static int hf_rcvbuf = -1, hf_sndbuf = -1, hf_maxmsgsize = -1, hf_cmt = -1, hf_ccid = -1;
static int hf_ndiffports = -1, hf_pathmgr = -1, hf_cc = -1, hf_seed = -1, hf_runtime = -1;
static int hf_sctp_mechanisms = -1, hf_sctp_mechanisms_bufsplit_on_buffered = -1, hf_sctp_mechanisms_smartfr = -1;
static int hf_sctp_mechanisms_pktdrop = -1, hf_sctp_mechanisms_reschedule = -1;
static int hf_onoffevents = -1, hf_onoff = -1, hf_onoff_rng = -1, hf_onoff_flags = -1;
static int hf_onoff_flags_reltime = -1, hf_onoff_padding = -1, hf_onoff_value = -1;
static int hf_magic = -1;
static int hf_frameid = -1, hf_seqnumber = -1, hf_byteseqnumber = -1, hf_timestamp = -1;
static int hf_timestamp_abs = -1, hf_payload = -1, hf_results_data = -1, hf_auth_nonce = -1, hf_auth_mac = -1;
static int hf_flow_description = -1, hf_flow_protocol = -1, hf_flow_addflow_in = -1;
static int hf_flow_identify_in = -1, hf_direction = -1;
static int hf_seq_expected = -1, hf_seq_lost = -1, hf_seq_reordered = -1;
static int hf_quic_stream_id = -1, hf_quic_stream_number = -1, hf_quic_stream_type = -1;

static int ett_npmp = -1, ett_flags = -1, ett_retrans = -1, ett_onoff = -1, ett_ndiffports = -1;
static int ett_sctp_mechanisms = -1;
static int ett_onoff_flags = -1;

static expert_field ei_unknown_type = EI_INIT;
static expert_field ei_length_mismatch = EI_INIT;
static expert_field ei_truncated = EI_INIT;
static expert_field ei_bad_magic = EI_INIT;
static expert_field ei_unknown_flow = EI_INIT;
static expert_field ei_seq_lost = EI_INIT;
static expert_field ei_seq_reordered = EI_INIT;

/* Preferences */
static range_t *pref_tcp_ports = NULL, *pref_udp_ports = NULL, *pref_dccp_ports = NULL;
static range_t *cur_tcp_ports = NULL, *cur_udp_ports = NULL, *cur_dccp_ports = NULL;
static gboolean pref_desegment = TRUE; /* gboolean: prefs_register_bool_preference() */

/* ---- Analysis state (file scope) --------------------------------------
 * Flows are keyed by "MeasurementID:FlowID:StreamID" and learnt from
 * ADD_FLOW (description, protocol) and IDENTIFY_FLOW (data endpoints).
 * Sequence state is per flow and direction.  Everything is computed on the
 * first pass and stored per message (frame number, message ordinal). */
typedef struct {
  char *description;
  uint16_t protocol;
  uint32_t addflow_frame;
  uint32_t identify_frame;
  address active_addr; /* source of the IDENTIFY */
  uint32_t active_port;
  uint32_t passive_port; /* destination port of the IDENTIFY */
} npmp_flow_t;

typedef struct {
  bool seen;
  uint64_t expected;
} npmp_seq_t;

typedef struct {
  bool known;
  char *description;
  uint16_t protocol;
  uint32_t addflow_frame;
  uint32_t identify_frame;
  uint8_t direction;
  bool has_seq;
  uint64_t expected;
  uint64_t lost;
  bool reordered;
} npmp_msg_info_t;

static wmem_map_t *flow_table = NULL;      /* char* -> npmp_flow_t* */
static wmem_map_t *seq_table = NULL;       /* char* -> npmp_seq_t* */
static wmem_map_t *confirmed_convs = NULL; /* conversation_t* -> marker */
static wmem_map_t *quic_streams = NULL;    /* "connection:Stream ID" -> npmp_quic_stream_t* */

/* Tap record, one per message */
typedef struct {
  uint8_t type;
  uint16_t length;
  bool has_flow;
  uint64_t measurement;
  uint32_t flow;
  uint16_t stream;
  uint8_t direction;
  uint32_t frame;
} npmp_tap_rec_t;

static void
npmp_init(void)
{
  flow_table = wmem_map_new(wmem_file_scope(), g_str_hash, g_str_equal);
  seq_table = wmem_map_new(wmem_file_scope(), g_str_hash, g_str_equal);
  confirmed_convs = wmem_map_new(wmem_file_scope(), g_direct_hash, g_direct_equal);
  quic_streams = wmem_map_new(wmem_file_scope(), g_str_hash, g_str_equal);
}

static char *
flow_key(wmem_allocator_t *scope, uint64_t meas, uint32_t flow, uint16_t stream)
{
  return wmem_strdup_printf(scope, "%016" PRIx64 ":%u:%u", meas, flow, stream);
}

/* ---- Plausibility checks ---------------------------------------------- */

/* Level 1: the header at offset is a valid NPMP header for its type
 * (used before claiming a port-registered TCP/UDP/DCCP payload). */
static bool
header_plausible(tvbuff_t *tvb, int offset)
{
  if (tvb_captured_length_remaining(tvb, offset) < NPMP_HDR_LEN)
    return false;
  uint8_t type = tvb_get_guint8(tvb, offset);
  uint8_t flags = tvb_get_guint8(tvb, offset + 1);
  uint16_t len = tvb_get_ntohs(tvb, offset + 2);
  switch (type) {
  case NPMP_ACKNOWLEDGE: return flags == 0 && len == NPMP_ACK_LEN;
  case NPMP_ADD_FLOW:
    return len >= NPMP_ADDFLOW_LEN && /* every flag bit is defined */
           (len - NPMP_ADDFLOW_LEN) % NPMP_ONOFF_LEN == 0;
  case NPMP_REMOVE_FLOW: return flags == 0 && len == NPMP_REMOVE_LEN;
  case NPMP_IDENTIFY_FLOW: return (flags & ~0x07) == 0 && len == NPMP_IDENTIFY_LEN;
  case NPMP_DATA: return (flags & ~0x03) == 0 && len >= NPMP_DATA_LEN;
  case NPMP_START: return (flags & ~0x0f) == 0 && len == NPMP_STARTSTOP_LEN;
  case NPMP_STOP: return flags == 0 && len == NPMP_STARTSTOP_LEN;
  case NPMP_RESULTS: return (flags & ~0x01) == 0 && len <= NPMP_RESULTS_MAX;
  case NPMP_AUTH_HELLO: return flags == 0 && len == NPMP_AUTH_HELLO_LEN;
  case NPMP_AUTH_CHALLENGE: return flags == 0 && len == NPMP_AUTH_CHALLENGE_LEN;
  case NPMP_AUTH_RESPONSE: return flags == 0 && len == NPMP_AUTH_RESPONSE_LEN;
  default: return false;
  }
}

/* Level 2 (heuristics): IDENTIFY_FLOW with the magic number, DATA with zero
 * padding and a plausible time stamp, or ADD_FLOW with a known protocol. */
static bool
heur_plausible(tvbuff_t *tvb)
{
  if (!header_plausible(tvb, 0))
    return false;
  unsigned avail = tvb_captured_length(tvb);
  switch (tvb_get_guint8(tvb, 0)) {
  case NPMP_IDENTIFY_FLOW: return avail >= 16 && tvb_get_ntoh64(tvb, 8) == NPMP_MAGIC;
  case NPMP_DATA: {
    if (avail < NPMP_DATA_LEN || tvb_get_ntohs(tvb, 18) != 0)
      return false;
    uint64_t ts = tvb_get_ntoh64(tvb, 40);
    return ts >= NPMP_TS_MIN && ts <= NPMP_TS_MAX;
  }
  case NPMP_ADD_FLOW: {
    if (avail < 20)
      return false;
    return try_val_to_str(tvb_get_letohs(tvb, 18), npmp_protocol_vals) != NULL;
  }
  default: return false;
  }
}

/* ---- Message dissection ----------------------------------------------- */

/* One message being dissected: what the per-type functions read and fill in. */
typedef struct {
  tvbuff_t *tvb; /* the message at offset 0 */
  packet_info *pinfo;
  proto_tree *tree; /* the message's subtree */
  proto_item *item; /* the message's protocol item */
  uint8_t type;
  unsigned lim;     /* bytes of the message that are present */
  unsigned ordinal; /* the message's number inside its packet */
  /* Carried in a QUIC stream: its Stream ID */
  bool on_quic;
  uint64_t quic_stream_id;
  /* Flow identity (flow messages) or measurement (START, STOP) */
  bool has_flow;
  uint64_t meas;
  uint32_t flow;
  uint16_t stream;
  npmp_msg_info_t *mi; /* analysis result of a flow message */
} npmp_msg_t;

/* A field is added only if it lies completely inside the message. */
static bool
field_ok(const npmp_msg_t *m, unsigned offset, unsigned size)
{
  return offset + size <= m->lim;
}

static uint8_t
get_direction(packet_info *pinfo, const npmp_flow_t *fl)
{
  if (fl && fl->identify_frame) {
    if (addresses_equal(&pinfo->src, &fl->active_addr) && pinfo->srcport == fl->active_port)
      return DIR_A2P;
    if (addresses_equal(&pinfo->dst, &fl->active_addr) && pinfo->destport == fl->active_port)
      return DIR_P2A;
    if (pinfo->destport == fl->passive_port)
      return DIR_A2P;
    if (pinfo->srcport == fl->passive_port)
      return DIR_P2A;
  }
  return (pinfo->srcport >= pinfo->destport) ? DIR_A2P : DIR_P2A;
}

/* First-pass analysis of one flow-carrying message. */
static npmp_msg_info_t *
analyse(const npmp_msg_t *m)
{
  tvbuff_t *tvb = m->tvb;
  packet_info *pinfo = m->pinfo;
  npmp_msg_info_t *mi = wmem_new0(wmem_file_scope(), npmp_msg_info_t);
  char *key = flow_key(pinfo->pool, m->meas, m->flow, m->stream);
  npmp_flow_t *fl = (npmp_flow_t *)wmem_map_lookup(flow_table, key);

  if (m->type == NPMP_ADD_FLOW) {
    if (!fl) {
      fl = wmem_new0(wmem_file_scope(), npmp_flow_t);
      fl->addflow_frame = pinfo->num;
      fl->protocol = (m->lim >= 20) ? tvb_get_letohs(tvb, 18) : 0;
      fl->description = (m->lim >= 52) ? (char *)tvb_get_stringzpad(wmem_file_scope(), tvb, 20, 32, ENC_ASCII)
                                       : wmem_strdup(wmem_file_scope(), "");
      wmem_map_insert(flow_table, wmem_strdup(wmem_file_scope(), key), fl);
    }
  } else if (m->type == NPMP_IDENTIFY_FLOW && fl && !fl->identify_frame) {
    fl->identify_frame = pinfo->num;
    copy_address_wmem(wmem_file_scope(), &fl->active_addr, &pinfo->src);
    fl->active_port = pinfo->srcport;
    fl->passive_port = pinfo->destport;
  }

  if (fl) {
    mi->known = true;
    mi->description = fl->description;
    mi->protocol = fl->protocol;
    mi->addflow_frame = fl->addflow_frame;
    mi->identify_frame = fl->identify_frame;
  }
  /* In a unidirectional QUIC stream the Stream ID says who sends (as the
   * flows of netperfmeter/data use them); otherwise the addresses do. */
  if (m->on_quic && (m->quic_stream_id & 0x2))
    mi->direction = (m->quic_stream_id & 0x1) ? DIR_P2A : DIR_A2P;
  else
    mi->direction = get_direction(pinfo, fl);

  if (m->type == NPMP_DATA && m->lim >= 32) {
    uint64_t seq = tvb_get_ntoh64(tvb, 24);
    char *skey = wmem_strdup_printf(pinfo->pool, "%s:%u", key, mi->direction);
    npmp_seq_t *st = (npmp_seq_t *)wmem_map_lookup(seq_table, skey);
    if (!st) {
      st = wmem_new0(wmem_file_scope(), npmp_seq_t);
      wmem_map_insert(seq_table, wmem_strdup(wmem_file_scope(), skey), st);
    }
    if (!st->seen) {
      /* The start of the flow is in the capture if its ADD_FLOW is. */
      st->seen = true;
      st->expected = fl ? 0 : seq;
    }
    mi->has_seq = true;
    mi->expected = st->expected;
    if (seq >= st->expected) {
      mi->lost = seq - st->expected;
      st->expected = seq + 1;
    } else {
      mi->reordered = true;
    }
  }
  return mi;
}

/* Generated fields of a flow message: its ADD_FLOW and IDENTIFY_FLOW,
 * direction and sequence analysis. */
static void
add_flow_info(const npmp_msg_t *m)
{
  tvbuff_t *tvb = m->tvb;
  proto_tree *tree = m->tree;
  const npmp_msg_info_t *mi = m->mi;
  proto_item *it;
  if (!mi)
    return;
  if (mi->known) {
    it = proto_tree_add_string(tree, hf_flow_description, tvb, 0, 0, mi->description);
    proto_item_set_generated(it);
    it = proto_tree_add_uint(tree, hf_flow_protocol, tvb, 0, 0, mi->protocol);
    proto_item_set_generated(it);
    if (m->type != NPMP_ADD_FLOW) {
      it = proto_tree_add_uint(tree, hf_flow_addflow_in, tvb, 0, 0, mi->addflow_frame);
      proto_item_set_generated(it);
    }
    if (mi->identify_frame && m->type != NPMP_IDENTIFY_FLOW && m->type != NPMP_ADD_FLOW) {
      it = proto_tree_add_uint(tree, hf_flow_identify_in, tvb, 0, 0, mi->identify_frame);
      proto_item_set_generated(it);
    }
  } else if (m->type == NPMP_DATA || m->type == NPMP_IDENTIFY_FLOW) {
    expert_add_info(m->pinfo, m->item, &ei_unknown_flow);
  }
  if (m->type == NPMP_DATA) {
    it = proto_tree_add_uint(tree, hf_direction, tvb, 0, 0, mi->direction);
    proto_item_set_generated(it);
  }
  if (mi->has_seq) {
    it = proto_tree_add_uint64(tree, hf_seq_expected, tvb, 24, 8, mi->expected);
    proto_item_set_generated(it);
    if (mi->lost) {
      it = proto_tree_add_uint64(tree, hf_seq_lost, tvb, 24, 8, mi->lost);
      proto_item_set_generated(it);
      expert_add_info_format(m->pinfo, it, &ei_seq_lost, "%" PRIu64 " message(s) missing before SeqNumber %" PRIu64,
                             mi->lost, mi->expected + mi->lost);
    }
    if (mi->reordered) {
      it = proto_tree_add_boolean(tree, hf_seq_reordered, tvb, 24, 8, true);
      proto_item_set_generated(it);
      expert_add_info_format(m->pinfo, it, &ei_seq_reordered,
                             "Out-of-order message: SeqNumber %" PRIu64 " < expected %" PRIu64, tvb_get_ntoh64(tvb, 24),
                             mi->expected);
    }
  }
}

/* Bits 0-2 as the reference; bits 3-7 this implementation's CMT-SCTP tuning (a reference
 * passive ignores them): 3 NR-SACK, 4-5 buffer splitting, 6-7 SCTP congestion control. */
static int *const addflow_flag_fields[] = { &hf_addflow_flags_debug,
                                            &hf_addflow_flags_nodelay,
                                            &hf_addflow_flags_repeatonoff,
                                            &hf_addflow_flags_nrsack,
                                            &hf_addflow_flags_bufsplit,
                                            &hf_addflow_flags_sctpcc,
                                            NULL };
/* The obsolete NDiffPorts field carries RTO.min (ms, bits 0-14) and DAC (bit 15). */
static int *const ndiffports_fields[] = { &hf_sctp_rtomin, &hf_sctp_dac, NULL };
/* Bytes 4-7 of the obsolete Scheduler field: the bundled stack's CMT-SCTP mechanisms. */
static int *const sctp_mechanisms_fields[] = { &hf_sctp_mechanisms_bufsplit_on_buffered, &hf_sctp_mechanisms_smartfr,
                                               &hf_sctp_mechanisms_pktdrop, &hf_sctp_mechanisms_reschedule, NULL };
static int *const identify_flag_fields[] = { &hf_identify_flags_compress_vectors, &hf_identify_flags_no_vectors,
                                             &hf_identify_flags_path_vectors, &hf_identify_flags_gzip_vectors, NULL };
static int *const data_flag_fields[] = { &hf_data_flags_frame_begin, &hf_data_flags_frame_end, NULL };
static int *const start_flag_fields[] = { &hf_start_flags_compress_vectors,
                                          &hf_start_flags_compress_scalars,
                                          &hf_start_flags_no_vectors,
                                          &hf_start_flags_no_scalars,
                                          &hf_start_flags_gzip_vectors,
                                          &hf_start_flags_gzip_scalars,
                                          NULL };
static int *const results_flag_fields[] = { &hf_results_flags_eof, NULL };
static int *const onoff_flag_fields[] = { &hf_onoff_flags_reltime, NULL };
static int *const retrans_fields[] = { &hf_retranstrials_is_time, &hf_retranstrials_value, NULL };

/* The defined flag bits of a message type, NULL if it has none. */
static int *const *
flag_fields(uint8_t type)
{
  switch (type) {
  case NPMP_ADD_FLOW: return addflow_flag_fields;
  case NPMP_IDENTIFY_FLOW: return identify_flag_fields;
  case NPMP_DATA: return data_flag_fields;
  case NPMP_START: return start_flag_fields;
  case NPMP_RESULTS: return results_flag_fields;
  default: return NULL;
  }
}

/* The length a message of this type must have, 0 if it varies (DATA, RESULTS, unknown). */
static unsigned
expected_length(const npmp_msg_t *m)
{
  switch (m->type) {
  case NPMP_ACKNOWLEDGE: return NPMP_ACK_LEN;
  case NPMP_REMOVE_FLOW: return NPMP_REMOVE_LEN;
  case NPMP_IDENTIFY_FLOW: return NPMP_IDENTIFY_LEN;
  case NPMP_START:
  case NPMP_STOP: return NPMP_STARTSTOP_LEN;
  case NPMP_AUTH_HELLO: return NPMP_AUTH_HELLO_LEN;
  case NPMP_AUTH_CHALLENGE: return NPMP_AUTH_CHALLENGE_LEN;
  case NPMP_AUTH_RESPONSE: return NPMP_AUTH_RESPONSE_LEN;
  case NPMP_ADD_FLOW:
    if (m->lim >= NPMP_ADDFLOW_LEN)
      return NPMP_ADDFLOW_LEN + NPMP_ONOFF_LEN * tvb_get_ntohs(m->tvb, 192);
    return NPMP_ADDFLOW_LEN;
  default: return 0;
  }
}

/* Expert infos on the Length field (item it). */
static void
check_length(const npmp_msg_t *m, proto_item *it, uint16_t length, unsigned avail, const char *tname)
{
  unsigned expected = expected_length(m);
  if (length < NPMP_HDR_LEN)
    expert_add_info_format(m->pinfo, it, &ei_length_mismatch, "Length %u is smaller than the 4-byte header", length);
  else if (expected && length != expected)
    expert_add_info_format(m->pinfo, it, &ei_length_mismatch, "Length %u does not match the expected %u for %s", length,
                           expected, tname);
  else if (m->type == NPMP_DATA && length < NPMP_DATA_LEN)
    expert_add_info_format(m->pinfo, it, &ei_length_mismatch, "Length %u is smaller than the 48-byte DATA header",
                           length);
  else if (m->type == NPMP_RESULTS && length > NPMP_RESULTS_MAX)
    expert_add_info_format(m->pinfo, it, &ei_length_mismatch, "Length %u exceeds the RESULTS maximum of 1404", length);
  if (length >= NPMP_HDR_LEN && length > avail)
    expert_add_info_format(m->pinfo, m->item, &ei_truncated, "Truncated message: Length %u, only %u bytes present",
                           length, avail);
}

/* FlowID, at offset 4 in every flow message. */
static void
dissect_npmp_flowid(npmp_msg_t *m)
{
  if (field_ok(m, 4, 4))
    proto_tree_add_item_ret_uint(m->tree, hf_flowid, m->tvb, 4, 4, ENC_BIG_ENDIAN, &m->flow);
}

/* MeasurementID and StreamID of a flow message.  With the StreamID the flow is
 * known: the analysis runs (first pass) or is looked up (later passes) before
 * the rest of the message is read. */
static void
dissect_npmp_measurement_stream(npmp_msg_t *m, unsigned meas_offset, unsigned stream_offset)
{
  if (field_ok(m, meas_offset, 8))
    proto_tree_add_item_ret_uint64(m->tree, hf_measurementid, m->tvb, meas_offset, 8, ENC_BIG_ENDIAN, &m->meas);
  if (!field_ok(m, stream_offset, 2))
    return;
  uint32_t stream;
  proto_tree_add_item_ret_uint(m->tree, hf_streamid, m->tvb, stream_offset, 2, ENC_BIG_ENDIAN, &stream);
  m->stream = (uint16_t)stream;
  m->has_flow = true;
  if (!m->pinfo->fd->visited) {
    m->mi = analyse(m);
    p_add_proto_data(wmem_file_scope(), m->pinfo, proto_npmp, m->ordinal, m->mi);
  } else {
    m->mi = (npmp_msg_info_t *)p_get_proto_data(wmem_file_scope(), m->pinfo, proto_npmp, m->ordinal);
  }
}

static void
dissect_npmp_acknowledge_message(npmp_msg_t *m)
{
  dissect_npmp_flowid(m);
  dissect_npmp_measurement_stream(m, 8, 16);
  if (field_ok(m, 18, 2))
    proto_tree_add_item(m->tree, hf_padding, m->tvb, 18, 2, ENC_BIG_ENDIAN);
  if (field_ok(m, 20, 4))
    proto_tree_add_item(m->tree, hf_status, m->tvb, 20, 4, ENC_BIG_ENDIAN);
}

/* Ordered and Reliable: a fraction times 0xffffffff. */
static void
dissect_npmp_fraction(npmp_msg_t *m, unsigned offset, int hf_raw, int hf_fraction)
{
  if (!field_ok(m, offset, 4))
    return;
  uint32_t v = tvb_get_ntohl(m->tvb, offset);
  proto_tree_add_item(m->tree, hf_raw, m->tvb, offset, 4, ENC_BIG_ENDIAN);
  proto_item *it = proto_tree_add_double(m->tree, hf_fraction, m->tvb, offset, 4, (double)v / 4294967295.0);
  proto_item_set_generated(it);
}

static void
dissect_npmp_onoff_events(npmp_msg_t *m)
{
  tvbuff_t *tvb = m->tvb;
  uint32_t n;
  proto_tree_add_item_ret_uint(m->tree, hf_onoffevents, tvb, 192, 2, ENC_BIG_ENDIAN, &n);
  for (unsigned i = 0; i < n; i++) {
    unsigned eo = NPMP_ADDFLOW_LEN + NPMP_ONOFF_LEN * i;
    if (!field_ok(m, eo, NPMP_ONOFF_LEN))
      break;
    proto_item *ei = proto_tree_add_item(m->tree, hf_onoff, tvb, eo, NPMP_ONOFF_LEN, ENC_NA);
    proto_item_append_text(ei, " %u", i + 1);
    proto_tree *et = proto_item_add_subtree(ei, ett_onoff);
    proto_tree_add_item(et, hf_onoff_rng, tvb, eo, 1, ENC_BIG_ENDIAN);
    proto_tree_add_bitmask(et, tvb, eo + 1, hf_onoff_flags, ett_onoff_flags, onoff_flag_fields, ENC_BIG_ENDIAN);
    proto_tree_add_item(et, hf_onoff_padding, tvb, eo + 2, 2, ENC_BIG_ENDIAN);
    for (unsigned j = 0; j < 4; j++)
      proto_tree_add_item(et, hf_onoff_value, tvb, eo + 4 + 8 * j, 8, ENC_BIG_ENDIAN);
  }
}

static void
dissect_npmp_add_flow_message(npmp_msg_t *m)
{
  tvbuff_t *tvb = m->tvb;
  proto_tree *tree = m->tree;
  dissect_npmp_flowid(m);
  dissect_npmp_measurement_stream(m, 8, 16);
  if (field_ok(m, 18, 2))
    proto_tree_add_item(tree, hf_protocol, tvb, 18, 2, ENC_LITTLE_ENDIAN);
  if (field_ok(m, 20, 32))
    proto_tree_add_item(tree, hf_description, tvb, 20, 32, ENC_ASCII);
  dissect_npmp_fraction(m, 52, hf_ordered, hf_ordered_fraction);
  dissect_npmp_fraction(m, 56, hf_reliable, hf_reliable_fraction);
  if (field_ok(m, 60, 4))
    proto_tree_add_bitmask(tree, tvb, 60, hf_retranstrials, ett_retrans, retrans_fields, ENC_BIG_ENDIAN);
  for (unsigned i = 0; i < 4; i++)
    if (field_ok(m, 64 + 8 * i, 8))
      proto_tree_add_item(tree, hf_framerate, tvb, 64 + 8 * i, 8, ENC_BIG_ENDIAN);
  for (unsigned i = 0; i < 4; i++)
    if (field_ok(m, 96 + 8 * i, 8))
      proto_tree_add_item(tree, hf_framesize, tvb, 96 + 8 * i, 8, ENC_BIG_ENDIAN);
  if (field_ok(m, 128, 1))
    proto_tree_add_item(tree, hf_framerate_rng, tvb, 128, 1, ENC_BIG_ENDIAN);
  if (field_ok(m, 129, 1))
    proto_tree_add_item(tree, hf_framesize_rng, tvb, 129, 1, ENC_BIG_ENDIAN);
  if (field_ok(m, 130, 4))
    proto_tree_add_item(tree, hf_rcvbuf, tvb, 130, 4, ENC_BIG_ENDIAN);
  if (field_ok(m, 134, 4))
    proto_tree_add_item(tree, hf_sndbuf, tvb, 134, 4, ENC_BIG_ENDIAN);
  if (field_ok(m, 138, 2))
    proto_tree_add_item(tree, hf_maxmsgsize, tvb, 138, 2, ENC_BIG_ENDIAN);
  if (field_ok(m, 140, 1))
    proto_tree_add_item(tree, hf_cmt, tvb, 140, 1, ENC_BIG_ENDIAN);
  if (field_ok(m, 141, 1))
    proto_tree_add_item(tree, hf_ccid, tvb, 141, 1, ENC_BIG_ENDIAN);
  if (field_ok(m, 142, 2))
    proto_tree_add_bitmask(tree, tvb, 142, hf_ndiffports, ett_ndiffports, ndiffports_fields, ENC_BIG_ENDIAN);
  if (field_ok(m, 144, 16))
    proto_tree_add_item(tree, hf_pathmgr, tvb, 144, 16, ENC_ASCII);
  if (field_ok(m, 160, 16))
    proto_tree_add_item(tree, hf_cc, tvb, 160, 16, ENC_ASCII);
  /* The obsolete Scheduler field: its first 4 bytes carry the measurement's runtime (ms). */
  if (field_ok(m, 176, 4))
    proto_tree_add_item(tree, hf_runtime, tvb, 176, 4, ENC_BIG_ENDIAN);
  /* ... its next 4 the CMT-SCTP mechanisms of the bundled stack that the flow asks for. */
  if (field_ok(m, 180, 4))
    proto_tree_add_bitmask(tree, tvb, 180, hf_sctp_mechanisms, ett_sctp_mechanisms, sctp_mechanisms_fields,
                           ENC_BIG_ENDIAN);
  /* ... and its last 8 the run's seed (-seed), from which the passive seeds its random choices. */
  if (field_ok(m, 184, 8))
    proto_tree_add_item(tree, hf_seed, tvb, 184, 8, ENC_BIG_ENDIAN);
  if (field_ok(m, 192, 2))
    dissect_npmp_onoff_events(m);
}

static void
dissect_npmp_remove_flow_message(npmp_msg_t *m)
{
  dissect_npmp_flowid(m);
  dissect_npmp_measurement_stream(m, 8, 16);
}

static void
dissect_npmp_identify_flow_message(npmp_msg_t *m)
{
  dissect_npmp_flowid(m);
  if (field_ok(m, 8, 8)) {
    uint64_t magic;
    proto_item *it = proto_tree_add_item_ret_uint64(m->tree, hf_magic, m->tvb, 8, 8, ENC_BIG_ENDIAN, &magic);
    if (magic != NPMP_MAGIC)
      expert_add_info_format(m->pinfo, it, &ei_bad_magic,
                             "Bad magic number 0x%016" PRIx64 " (expected 0x%016" PRIx64 ")", magic, NPMP_MAGIC);
  }
  dissect_npmp_measurement_stream(m, 16, 24);
}

static void
dissect_npmp_data_message(npmp_msg_t *m)
{
  tvbuff_t *tvb = m->tvb;
  proto_tree *tree = m->tree;
  dissect_npmp_flowid(m);
  dissect_npmp_measurement_stream(m, 8, 16);
  if (field_ok(m, 18, 2))
    proto_tree_add_item(tree, hf_padding, tvb, 18, 2, ENC_BIG_ENDIAN);
  if (field_ok(m, 20, 4))
    proto_tree_add_item(tree, hf_frameid, tvb, 20, 4, ENC_BIG_ENDIAN);
  if (field_ok(m, 24, 8))
    proto_tree_add_item(tree, hf_seqnumber, tvb, 24, 8, ENC_BIG_ENDIAN);
  if (field_ok(m, 32, 8))
    proto_tree_add_item(tree, hf_byteseqnumber, tvb, 32, 8, ENC_BIG_ENDIAN);
  if (field_ok(m, 40, 8)) {
    uint64_t us = tvb_get_ntoh64(tvb, 40);
    nstime_t t;
    t.secs = (time_t)(us / 1000000);
    t.nsecs = (int)((us % 1000000) * 1000);
    proto_tree_add_item(tree, hf_timestamp, tvb, 40, 8, ENC_BIG_ENDIAN);
    proto_item *it = proto_tree_add_time(tree, hf_timestamp_abs, tvb, 40, 8, &t);
    proto_item_set_generated(it);
  }
  if (m->lim > NPMP_DATA_LEN)
    proto_tree_add_item(tree, hf_payload, tvb, NPMP_DATA_LEN, m->lim - NPMP_DATA_LEN, ENC_NA);
}

/* MeasurementID of START and STOP. */
static void
dissect_npmp_measurement(npmp_msg_t *m)
{
  if (field_ok(m, 8, 8))
    proto_tree_add_item_ret_uint64(m->tree, hf_measurementid, m->tvb, 8, 8, ENC_BIG_ENDIAN, &m->meas);
}

static void
dissect_npmp_start_message(npmp_msg_t *m)
{
  /* Offset 4 is the reference's Padding (always 0): here the warm-up in milliseconds. */
  if (field_ok(m, 4, 4)) {
    uint32_t warmup = tvb_get_ntohl(m->tvb, 4);
    if (warmup)
      proto_tree_add_uint_format_value(m->tree, hf_start_warmup, m->tvb, 4, 4, warmup, "%u ms", warmup);
    else
      proto_tree_add_uint_format_value(m->tree, hf_start_warmup, m->tvb, 4, 4, warmup, "none");
  }
  dissect_npmp_measurement(m);
}

static void
dissect_npmp_stop_message(npmp_msg_t *m)
{
  if (field_ok(m, 4, 4))
    proto_tree_add_item(m->tree, hf_padding32, m->tvb, 4, 4, ENC_BIG_ENDIAN);
  dissect_npmp_measurement(m);
}

static void
dissect_npmp_results_message(npmp_msg_t *m)
{
  if (m->lim > NPMP_HDR_LEN)
    proto_tree_add_item(m->tree, hf_results_data, m->tvb, NPMP_HDR_LEN, m->lim - NPMP_HDR_LEN, ENC_NA);
}

/* A nonce or an HMAC-SHA-256 value. */
static void
dissect_npmp_auth_block(npmp_msg_t *m, unsigned offset, int hf)
{
  if (field_ok(m, offset, NPMP_AUTH_BLOCK))
    proto_tree_add_item(m->tree, hf, m->tvb, offset, NPMP_AUTH_BLOCK, ENC_NA);
}

static void
dissect_npmp_auth_hello_message(npmp_msg_t *m)
{
  dissect_npmp_auth_block(m, NPMP_HDR_LEN, hf_auth_nonce);
}

static void
dissect_npmp_auth_challenge_message(npmp_msg_t *m)
{
  dissect_npmp_auth_block(m, NPMP_HDR_LEN, hf_auth_nonce);
  dissect_npmp_auth_block(m, NPMP_HDR_LEN + NPMP_AUTH_BLOCK, hf_auth_mac);
}

static void
dissect_npmp_auth_response_message(npmp_msg_t *m)
{
  dissect_npmp_auth_block(m, NPMP_HDR_LEN, hf_auth_mac);
}

/* Info column text of one message. */
static void
append_info(const npmp_msg_t *m, uint8_t flags, const char *tname)
{
  wmem_strbuf_t *sb = wmem_strbuf_new(m->pinfo->pool, tname);
  if (m->has_flow)
    wmem_strbuf_append_printf(sb, " flow=%u", m->flow);
  if (m->type == NPMP_DATA && m->lim >= 32)
    wmem_strbuf_append_printf(sb, " seq=%" PRIu64, tvb_get_ntoh64(m->tvb, 24));
  if (m->type == NPMP_ACKNOWLEDGE && m->lim >= 24)
    wmem_strbuf_append_printf(sb, " status=%s", val_to_str_const(tvb_get_ntohl(m->tvb, 20), npmp_status_vals, "?"));
  if (m->type == NPMP_RESULTS && (flags & 0x01))
    wmem_strbuf_append(sb, " EOF");
  col_append_sep_str(m->pinfo->cinfo, COL_INFO, ", ", wmem_strbuf_get_str(sb));
}

/* Generated fields of a message carried in a QUIC stream: the Stream ID, its
 * stream number (the flow's number in its connection) and its type. */
static void
add_quic_info(const npmp_msg_t *m)
{
  proto_item *it;
  it = proto_tree_add_uint64(m->tree, hf_quic_stream_id, m->tvb, 0, 0, m->quic_stream_id);
  proto_item_set_generated(it);
  it = proto_tree_add_uint64(m->tree, hf_quic_stream_number, m->tvb, 0, 0, m->quic_stream_id >> 2);
  proto_item_set_generated(it);
  it = proto_tree_add_uint(m->tree, hf_quic_stream_type, m->tvb, 0, 0, (uint32_t)(m->quic_stream_id & 0x3));
  proto_item_set_generated(it);
}

/* Dissects one message that starts at offset 0 of tvb (quic_stream_id: its QUIC
 * stream, NULL if it came otherwise).  Returns the number of bytes it occupies
 * (the Length field, clamped to what is present). */
static unsigned
dissect_npmp_message(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, const uint64_t *quic_stream_id)
{
  unsigned avail = tvb_reported_length(tvb);
  uint8_t type = tvb_get_guint8(tvb, 0);
  uint8_t flags = (avail >= 2) ? tvb_get_guint8(tvb, 1) : 0;
  uint16_t length = (avail >= 4) ? tvb_get_ntohs(tvb, 2) : 0;
  unsigned consumed;
  proto_item *it;
  const char *tname = val_to_str_const(type, npmp_type_vals, "Unknown");
  npmp_msg_t m = { .tvb = tvb,
                   .pinfo = pinfo,
                   .type = type,
                   .on_quic = quic_stream_id != NULL,
                   .quic_stream_id = quic_stream_id ? *quic_stream_id : 0 };

  /* Per-packet message ordinal, the key of the stored analysis result. */
  m.ordinal = (unsigned)(uintptr_t)p_get_proto_data(pinfo->pool, pinfo, proto_npmp, 0) + 1;
  p_add_proto_data(pinfo->pool, pinfo, proto_npmp, 0, (void *)(uintptr_t)m.ordinal);

  if (avail < NPMP_HDR_LEN) {
    m.item = proto_tree_add_item(tree, proto_npmp, tvb, 0, avail, ENC_NA);
    m.tree = proto_item_add_subtree(m.item, ett_npmp);
    proto_tree_add_item(m.tree, hf_type, tvb, 0, 1, ENC_BIG_ENDIAN);
    if (avail >= 2)
      proto_tree_add_item(m.tree, hf_flags, tvb, 1, 1, ENC_BIG_ENDIAN);
    expert_add_info_format(pinfo, m.item, &ei_truncated, "Truncated message: %u of 4 header bytes present", avail);
    col_append_sep_str(pinfo->cinfo, COL_INFO, ", ", "[Truncated]");
    return avail;
  }

  if (length < NPMP_HDR_LEN) {
    m.lim = NPMP_HDR_LEN;
    consumed = avail; /* cannot resynchronise: the rest belongs to this message */
  } else {
    m.lim = (length < avail) ? length : avail;
    consumed = m.lim;
  }

  m.item = proto_tree_add_item(tree, proto_npmp, tvb, 0, consumed, ENC_NA);
  m.tree = proto_item_add_subtree(m.item, ett_npmp);
  proto_item_append_text(m.item, ", %s", tname);
  it = proto_tree_add_item(m.tree, hf_type, tvb, 0, 1, ENC_BIG_ENDIAN);
  if (!try_val_to_str(type, npmp_type_vals))
    expert_add_info_format(pinfo, it, &ei_unknown_type, "Unknown message type %u", type);
  if (flag_fields(type))
    proto_tree_add_bitmask(m.tree, tvb, 1, hf_flags, ett_flags, flag_fields(type), ENC_BIG_ENDIAN);
  else
    proto_tree_add_item(m.tree, hf_flags, tvb, 1, 1, ENC_BIG_ENDIAN);
  it = proto_tree_add_item(m.tree, hf_length, tvb, 2, 2, ENC_BIG_ENDIAN);
  check_length(&m, it, length, avail, tname);

  switch (type) {
  case NPMP_ACKNOWLEDGE: dissect_npmp_acknowledge_message(&m); break;
  case NPMP_ADD_FLOW: dissect_npmp_add_flow_message(&m); break;
  case NPMP_REMOVE_FLOW: dissect_npmp_remove_flow_message(&m); break;
  case NPMP_IDENTIFY_FLOW: dissect_npmp_identify_flow_message(&m); break;
  case NPMP_DATA: dissect_npmp_data_message(&m); break;
  case NPMP_START: dissect_npmp_start_message(&m); break;
  case NPMP_STOP: dissect_npmp_stop_message(&m); break;
  case NPMP_RESULTS: dissect_npmp_results_message(&m); break;
  case NPMP_AUTH_HELLO: dissect_npmp_auth_hello_message(&m); break;
  case NPMP_AUTH_CHALLENGE: dissect_npmp_auth_challenge_message(&m); break;
  case NPMP_AUTH_RESPONSE: dissect_npmp_auth_response_message(&m); break;
  default: break;
  }

  if (m.has_flow)
    add_flow_info(&m);
  if (m.on_quic)
    add_quic_info(&m);
  append_info(&m, flags, tname);

  /* Tap */
  npmp_tap_rec_t *rec = wmem_new0(pinfo->pool, npmp_tap_rec_t);
  rec->type = type;
  rec->length = (length >= NPMP_HDR_LEN) ? length : (uint16_t)consumed;
  rec->has_flow = m.has_flow;
  rec->measurement = m.meas;
  rec->flow = m.flow;
  rec->stream = m.stream;
  rec->direction = m.mi ? m.mi->direction : DIR_A2P;
  rec->frame = pinfo->num;
  tap_queue_packet(npmp_tap, pinfo, rec);

  return consumed;
}

/* Columns are reset once per packet, before its first message. */
static void
set_columns(packet_info *pinfo)
{
  if (p_get_proto_data(pinfo->pool, pinfo, proto_npmp, 0) == NULL) {
    col_set_str(pinfo->cinfo, COL_PROTOCOL, "NPMP");
    col_clear(pinfo->cinfo, COL_INFO);
  }
}

static bool
conv_confirmed(packet_info *pinfo)
{
  conversation_t *conv = find_conversation_pinfo(pinfo, 0);
  return conv && wmem_map_contains(confirmed_convs, conv);
}

static void
confirm_conv(packet_info *pinfo)
{
  conversation_t *conv = find_or_create_conversation(pinfo);
  if (!wmem_map_contains(confirmed_convs, conv)) {
    wmem_map_insert(confirmed_convs, conv, (void *)(uintptr_t)1);
    conversation_set_dissector(conv, npmp_handle);
  }
}

/* TCP framing */
static unsigned
get_npmp_pdu_len(packet_info *pinfo _U_, tvbuff_t *tvb, int offset, void *data _U_)
{
  unsigned len = tvb_get_ntohs(tvb, offset + 2);
  return (len < NPMP_HDR_LEN) ? NPMP_HDR_LEN : len;
}

static int
dissect_npmp_pdu(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, void *data _U_)
{
  set_columns(pinfo);
  return (int)dissect_npmp_message(tvb, pinfo, tree, NULL);
}

/* Datagram transports (SCTP, UDP, DCCP): messages back to back. */
static int
dissect_datagram(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree)
{
  unsigned offset = 0, total = tvb_reported_length(tvb);
  set_columns(pinfo);
  while (offset < total) {
    unsigned remaining = total - offset;
    uint16_t len = (remaining >= 4) ? tvb_get_ntohs(tvb, offset + 2) : 0;
    unsigned sublen = (len >= NPMP_HDR_LEN && len <= remaining) ? len : remaining;
    tvbuff_t *sub = tvb_new_subset_length(tvb, offset, sublen);
    unsigned used = dissect_npmp_message(sub, pinfo, tree, NULL);
    if (used == 0)
      break;
    offset += used;
  }
  return (int)tvb_captured_length(tvb);
}

/* Main entry: SCTP PPIDs, port tables, Decode-As, conversations. */
static int
dissect_npmp(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, void *data)
{
  if (pinfo->ptype == PT_TCP) {
    if (!conv_confirmed(pinfo)) {
      if (!header_plausible(tvb, 0))
        return 0;
      confirm_conv(pinfo);
    }
    tcp_dissect_pdus(tvb, pinfo, tree, pref_desegment, NPMP_HDR_LEN, get_npmp_pdu_len, dissect_npmp_pdu, data);
    return (int)tvb_captured_length(tvb);
  }
  if ((pinfo->ptype == PT_UDP || pinfo->ptype == PT_DCCP) && !conv_confirmed(pinfo)) {
    /* One message per datagram: its Length must be the datagram's. */
    if (!header_plausible(tvb, 0) || tvb_get_ntohs(tvb, 2) != tvb_reported_length(tvb))
      return 0;
    confirm_conv(pinfo);
  }
  return dissect_datagram(tvb, pinfo, tree);
}

/* NPMP-DATA in a QUIC stream of a connection whose ALPN is netperfmeter/data.
 * Wireshark's QUIC dissector (4.0: packet-quic.c) decrypts the 1-RTT packets with
 * the TLS key log, looks up the "quic.proto" table by the ALPN once, and calls us
 * with each STREAM frame's data and a quic_stream_info (Stream ID, offset).  A
 * stream is a byte stream framed as on TCP.  Messages cut at the end of a frame
 * are reassembled here, not with the QUIC dissector's desegmentation: in Debian
 * 12's 4.0.17-0+deb12u3 that adds a stream's first piece under another
 * reassembly ID than the later ones (a partial backport of upstream 562c3c07,
 * CVE-2026-0960.patch), so nothing it reassembles ever completes. */

/* A QUIC stream as seen on the first pass: the next new byte, and the start of a
 * message cut at the end of the last frame. */
typedef struct {
  uint64_t next;
  uint8_t *pending; /* file scope, NPMP_QUIC_MAX_MSG bytes */
  unsigned pending_len;
  bool lost; /* a gap in the stream: message boundaries unknown from here on */
} npmp_quic_stream_t;

/* What one STREAM frame holds, found on the first pass. */
typedef struct {
  uint8_t *head; /* a message that began in earlier frames and ends here, or NULL */
  unsigned head_len;
  unsigned start, end; /* the frame's data [start, end) is whole messages */
} npmp_quic_frame_t;

#define NPMP_QUIC_MAX_MSG   65535u
#define NPMP_QUIC_FRAME_KEY 0x40000000u /* proto data keys of the frame records */

/* The length of the message whose header starts at p (the Length field, at least the header). */
static unsigned
quic_msg_len(const uint8_t *p)
{
  unsigned len = ((unsigned)p[2] << 8) | p[3];
  return (len < NPMP_HDR_LEN) ? NPMP_HDR_LEN : len;
}

/* Appends up to want bytes of data[*pos, total) to the stream's pending message. */
static void
quic_append(npmp_quic_stream_t *st, const uint8_t *data, unsigned *pos, unsigned total, unsigned want)
{
  unsigned take = MIN(want, total - *pos);
  memcpy(st->pending + st->pending_len, data + *pos, take);
  st->pending_len += take;
  *pos += take;
}

/* First pass: where the messages of this frame's data lie (data: the frame's bytes at
 * stream offset `offset`). */
static npmp_quic_frame_t *
quic_first_pass(npmp_quic_stream_t *st, const uint8_t *data, unsigned total, uint64_t offset)
{
  npmp_quic_frame_t *fr = wmem_new0(wmem_file_scope(), npmp_quic_frame_t);
  unsigned pos = 0;
  if (st->lost || offset + total <= st->next)
    return fr; /* after a gap, or a retransmission of what was seen */
  if (offset > st->next) {
    st->lost = true; /* a gap: the capture lacks part of the stream */
    return fr;
  }
  pos = (unsigned)(st->next - offset); /* skip what a retransmission repeats */
  st->next = offset + total;
  if (st->pending_len) {
    if (st->pending_len < NPMP_HDR_LEN)
      quic_append(st, data, &pos, total, NPMP_HDR_LEN - st->pending_len);
    if (st->pending_len >= NPMP_HDR_LEN) {
      unsigned len = quic_msg_len(st->pending);
      quic_append(st, data, &pos, total, len - st->pending_len);
      if (st->pending_len == len) {
        fr->head = (uint8_t *)wmem_memdup(wmem_file_scope(), st->pending, len);
        fr->head_len = len;
        st->pending_len = 0;
      }
    }
    if (st->pending_len)
      return fr; /* the message goes on in the next frame */
  }
  fr->start = pos;
  while (total - pos >= NPMP_HDR_LEN && total - pos >= quic_msg_len(data + pos))
    pos += quic_msg_len(data + pos);
  fr->end = pos;
  if (pos < total) {
    if (!st->pending)
      st->pending = (uint8_t *)wmem_alloc(wmem_file_scope(), NPMP_QUIC_MAX_MSG);
    quic_append(st, data, &pos, total, total - pos);
  }
  return fr;
}

static int
dissect_npmp_quic(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, void *data)
{
  const quic_stream_info *si = (const quic_stream_info *)data;
  const uint64_t *stream_id = si ? &si->stream_id : NULL;
  unsigned total = tvb_reported_length(tvb);
  npmp_quic_frame_t *fr;

  /* The QUIC dissector calls once per STREAM frame, in the same order on every pass. */
  unsigned call = (unsigned)(uintptr_t)p_get_proto_data(pinfo->pool, pinfo, proto_npmp, NPMP_QUIC_FRAME_KEY) + 1;
  p_add_proto_data(pinfo->pool, pinfo, proto_npmp, NPMP_QUIC_FRAME_KEY, (void *)(uintptr_t)call);

  if (!si || !pref_desegment || total == 0) {
    fr = wmem_new0(pinfo->pool, npmp_quic_frame_t); /* every frame on its own */
    fr->end = total;
  } else if (!pinfo->fd->visited) {
    char *key = wmem_strdup_printf(pinfo->pool, "%p:%" PRIu64, (void *)si->quic_info, si->stream_id);
    npmp_quic_stream_t *st = (npmp_quic_stream_t *)wmem_map_lookup(quic_streams, key);
    if (!st) {
      st = wmem_new0(wmem_file_scope(), npmp_quic_stream_t);
      wmem_map_insert(quic_streams, wmem_strdup(wmem_file_scope(), key), st);
    }
    fr = quic_first_pass(st, tvb_get_ptr(tvb, 0, (int)total), total, si->stream_offset);
    p_add_proto_data(wmem_file_scope(), pinfo, proto_npmp, NPMP_QUIC_FRAME_KEY + call, fr);
  } else {
    fr = (npmp_quic_frame_t *)p_get_proto_data(wmem_file_scope(), pinfo, proto_npmp, NPMP_QUIC_FRAME_KEY + call);
    if (!fr)
      return 0;
  }

  if (fr->head) {
    tvbuff_t *whole = tvb_new_child_real_data(tvb, fr->head, fr->head_len, fr->head_len);
    add_new_data_source(pinfo, whole, "Reassembled NPMP");
    set_columns(pinfo);
    dissect_npmp_message(whole, pinfo, tree, stream_id);
  }
  for (unsigned pos = fr->start; pos < fr->end;) {
    unsigned remaining = fr->end - pos;
    unsigned len = (remaining >= NPMP_HDR_LEN) ? get_npmp_pdu_len(pinfo, tvb, (int)pos, NULL) : remaining;
    tvbuff_t *sub = tvb_new_subset_length(tvb, (int)pos, (int)MIN(len, remaining));
    set_columns(pinfo);
    pos += dissect_npmp_message(sub, pinfo, tree, stream_id);
  }
  return (int)total;
}

static gboolean
dissect_npmp_heur(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, void *data)
{
  if (!heur_plausible(tvb))
    return FALSE;
  if (pinfo->ptype != PT_TCP && tvb_get_ntohs(tvb, 2) != tvb_reported_length(tvb))
    return FALSE; /* datagrams carry exactly one message */
  confirm_conv(pinfo);
  if (pinfo->ptype == PT_TCP) {
    tcp_dissect_pdus(tvb, pinfo, tree, pref_desegment, NPMP_HDR_LEN, get_npmp_pdu_len, dissect_npmp_pdu, data);
  } else {
    dissect_datagram(tvb, pinfo, tree);
  }
  return TRUE;
}

/* ---- Statistics: -z npmp,stat ----------------------------------------- */
typedef struct {
  uint64_t measurement;
  uint32_t flow;
  uint16_t stream;
  uint8_t direction;
  uint64_t messages, bytes, frames;
  uint32_t last_frame;
} npmp_stat_flow_t;

typedef struct {
  char *filter;
  uint64_t type_msgs[256];
  uint64_t type_bytes[256];
  GHashTable *flows; /* key string -> npmp_stat_flow_t* */
} npmp_stat_t;

static void
npmp_stat_reset(void *tapdata)
{
  npmp_stat_t *st = (npmp_stat_t *)tapdata;
  memset(st->type_msgs, 0, sizeof(st->type_msgs));
  memset(st->type_bytes, 0, sizeof(st->type_bytes));
  g_hash_table_remove_all(st->flows);
}

static tap_packet_status
npmp_stat_packet(void *tapdata, packet_info *pinfo _U_, epan_dissect_t *edt _U_, const void *data,
                 tap_flags_t flags _U_)
{
  npmp_stat_t *st = (npmp_stat_t *)tapdata;
  const npmp_tap_rec_t *rec = (const npmp_tap_rec_t *)data;
  st->type_msgs[rec->type]++;
  st->type_bytes[rec->type] += rec->length;
  if (rec->type == NPMP_DATA && rec->has_flow) {
    char *key = g_strdup_printf("%016" PRIx64 ":%u:%u:%u", rec->measurement, rec->flow, rec->stream, rec->direction);
    npmp_stat_flow_t *f = (npmp_stat_flow_t *)g_hash_table_lookup(st->flows, key);
    if (!f) {
      f = g_new0(npmp_stat_flow_t, 1);
      f->measurement = rec->measurement;
      f->flow = rec->flow;
      f->stream = rec->stream;
      f->direction = rec->direction;
      g_hash_table_insert(st->flows, key, f);
    } else {
      g_free(key);
    }
    f->messages++;
    f->bytes += rec->length;
    if (f->last_frame != rec->frame) {
      f->frames++;
      f->last_frame = rec->frame;
    }
  }
  return TAP_PACKET_REDRAW;
}

static int
compare_flows(const void *a, const void *b)
{
  const npmp_stat_flow_t *x = *(const npmp_stat_flow_t *const *)a;
  const npmp_stat_flow_t *y = *(const npmp_stat_flow_t *const *)b;
  if (x->measurement != y->measurement)
    return x->measurement < y->measurement ? -1 : 1;
  if (x->flow != y->flow)
    return x->flow < y->flow ? -1 : 1;
  if (x->stream != y->stream)
    return x->stream < y->stream ? -1 : 1;
  if (x->direction != y->direction)
    return x->direction < y->direction ? -1 : 1;
  return 0;
}

static void
npmp_stat_draw(void *tapdata)
{
  npmp_stat_t *st = (npmp_stat_t *)tapdata;
  printf("================================================================================\n");
  printf("NPMP Statistics\n");
  printf("Message types:\n");
  printf("  %-16s %12s %14s\n", "Type", "Messages", "Bytes");
  for (int t = 0; t < 256; t++) {
    if (!st->type_msgs[t])
      continue;
    char name[32];
    const char *s = try_val_to_str((uint32_t)t, npmp_type_vals);
    if (s)
      snprintf(name, sizeof(name), "%s", s);
    else
      snprintf(name, sizeof(name), "Unknown (%d)", t);
    printf("  %-16s %12" PRIu64 " %14" PRIu64 "\n", name, st->type_msgs[t], st->type_bytes[t]);
  }
  printf("Data flows:\n");
  printf("  %-18s %10s %6s %-4s %12s %14s %10s\n", "Measurement", "Flow", "Stream", "Dir", "Messages", "Bytes",
         "Frames");
  GPtrArray *arr = g_ptr_array_new();
  GHashTableIter iter;
  void *k, *v;
  g_hash_table_iter_init(&iter, st->flows);
  while (g_hash_table_iter_next(&iter, &k, &v))
    g_ptr_array_add(arr, v);
  g_ptr_array_sort(arr, compare_flows);
  for (unsigned i = 0; i < arr->len; i++) {
    const npmp_stat_flow_t *f = (const npmp_stat_flow_t *)g_ptr_array_index(arr, i);
    printf("  0x%016" PRIx64 " %10u %6u %-4s %12" PRIu64 " %14" PRIu64 " %10" PRIu64 "\n", f->measurement, f->flow,
           f->stream, f->direction == DIR_A2P ? "A->P" : "P->A", f->messages, f->bytes, f->frames);
  }
  g_ptr_array_free(arr, true);
  printf("================================================================================\n");
}

static void
npmp_stat_finish(void *tapdata)
{
  npmp_stat_t *st = (npmp_stat_t *)tapdata;
  g_hash_table_destroy(st->flows);
  g_free(st->filter);
  g_free(st);
}

static void
npmp_stat_init(const char *opt_arg, void *userdata _U_)
{
  npmp_stat_t *st = g_new0(npmp_stat_t, 1);
  const char *filter = NULL;
  if (opt_arg && strncmp(opt_arg, "npmp,stat,", 10) == 0)
    filter = opt_arg + 10;
  st->filter = g_strdup(filter);
  st->flows = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  GString *err = register_tap_listener("npmp", st, st->filter, 0, npmp_stat_reset, npmp_stat_packet, npmp_stat_draw,
                                       npmp_stat_finish);
  if (err) {
    fprintf(stderr, "tshark: Couldn't register npmp,stat tap: %s\n", err->str);
    g_string_free(err, true);
    g_hash_table_destroy(st->flows);
    g_free(st->filter);
    g_free(st);
    exit(1);
  }
}

static stat_tap_ui npmp_stat_ui = {
  REGISTER_PACKET_STAT_GROUP_UNSORTED, "NPMP Statistics", "npmp,stat", npmp_stat_init, 0, NULL
};

/* ---- Registration ------------------------------------------------------ */
static void proto_reg_handoff_npmp(void);

static void
proto_register_npmp(void)
{
  static hf_register_info hf[] = {
    { &hf_type, { "Type", "npmp.type", FT_UINT8, BASE_DEC, VALS(npmp_type_vals), 0x0, "Message type", HFILL } },
    { &hf_flags, { "Flags", "npmp.flags", FT_UINT8, BASE_HEX, NULL, 0x0, NULL, HFILL } },
    { &hf_length,
      { "Length", "npmp.length", FT_UINT16, BASE_DEC, NULL, 0x0, "Message length including the header", HFILL } },
    { &hf_addflow_flags_debug, { "Debug", "npmp.addflow.flags.debug", FT_BOOLEAN, 8, NULL, 0x01, NULL, HFILL } },
    { &hf_addflow_flags_nodelay, { "No Delay", "npmp.addflow.flags.nodelay", FT_BOOLEAN, 8, NULL, 0x02, NULL, HFILL } },
    { &hf_addflow_flags_repeatonoff,
      { "Repeat On/Off", "npmp.addflow.flags.repeatonoff", FT_BOOLEAN, 8, NULL, 0x04, NULL, HFILL } },
    { &hf_addflow_flags_nrsack, { "NR-SACK", "npmp.addflow.flags.nrsack", FT_BOOLEAN, 8, NULL, 0x08, NULL, HFILL } },
    { &hf_addflow_flags_bufsplit,
      { "Buffer Splitting", "npmp.addflow.flags.bufsplit", FT_UINT8, BASE_DEC, VALS(npmp_bufsplit_vals), 0x30, NULL,
        HFILL } },
    { &hf_addflow_flags_sctpcc,
      { "SCTP Congestion Control", "npmp.addflow.flags.sctpcc", FT_UINT8, BASE_DEC, VALS(npmp_sctpcc_vals), 0xc0, NULL,
        HFILL } },
    { &hf_identify_flags_compress_vectors,
      { "Compress Vectors", "npmp.identify.flags.compress_vectors", FT_BOOLEAN, 8, NULL, 0x01, NULL, HFILL } },
    { &hf_identify_flags_no_vectors,
      { "No Vectors", "npmp.identify.flags.no_vectors", FT_BOOLEAN, 8, NULL, 0x02, NULL, HFILL } },
    { &hf_identify_flags_path_vectors,
      { "Per-Path Statistics", "npmp.identify.flags.path_vectors", FT_BOOLEAN, 8, NULL, 0x04, NULL, HFILL } },
    { &hf_identify_flags_gzip_vectors,
      { "Gzip Vectors", "npmp.identify.flags.gzip_vectors", FT_BOOLEAN, 8, NULL, 0x08,
        "gzip instead of bzip2 (this implementation's; a reference passive ignores it)", HFILL } },
    { &hf_data_flags_frame_begin,
      { "Frame Begin", "npmp.data.flags.frame_begin", FT_BOOLEAN, 8, NULL, 0x01, NULL, HFILL } },
    { &hf_data_flags_frame_end, { "Frame End", "npmp.data.flags.frame_end", FT_BOOLEAN, 8, NULL, 0x02, NULL, HFILL } },
    { &hf_start_flags_compress_vectors,
      { "Compress Vectors", "npmp.start.flags.compress_vectors", FT_BOOLEAN, 8, NULL, 0x01, NULL, HFILL } },
    { &hf_start_flags_compress_scalars,
      { "Compress Scalars", "npmp.start.flags.compress_scalars", FT_BOOLEAN, 8, NULL, 0x02, NULL, HFILL } },
    { &hf_start_flags_no_vectors,
      { "No Vectors", "npmp.start.flags.no_vectors", FT_BOOLEAN, 8, NULL, 0x04, NULL, HFILL } },
    { &hf_start_flags_no_scalars,
      { "No Scalars", "npmp.start.flags.no_scalars", FT_BOOLEAN, 8, NULL, 0x08, NULL, HFILL } },
    { &hf_start_flags_gzip_vectors,
      { "Gzip Vectors", "npmp.start.flags.gzip_vectors", FT_BOOLEAN, 8, NULL, 0x10,
        "gzip instead of bzip2 (this implementation's; a reference passive ignores it)", HFILL } },
    { &hf_start_flags_gzip_scalars,
      { "Gzip Scalars", "npmp.start.flags.gzip_scalars", FT_BOOLEAN, 8, NULL, 0x20,
        "gzip instead of bzip2 (this implementation's; a reference passive ignores it)", HFILL } },
    { &hf_start_warmup,
      { "Warm-up", "npmp.start.warmup", FT_UINT32, BASE_DEC, NULL, 0x0,
        "Milliseconds from START before statistics count, 0 = none (the reference's Padding)", HFILL } },
    { &hf_results_flags_eof, { "End of File", "npmp.results.flags.eof", FT_BOOLEAN, 8, NULL, 0x01, NULL, HFILL } },
    { &hf_flowid, { "Flow ID", "npmp.flowid", FT_UINT32, BASE_DEC, NULL, 0x0, NULL, HFILL } },
    { &hf_measurementid, { "Measurement ID", "npmp.measurementid", FT_UINT64, BASE_HEX, NULL, 0x0, NULL, HFILL } },
    { &hf_streamid, { "Stream ID", "npmp.streamid", FT_UINT16, BASE_DEC, NULL, 0x0, NULL, HFILL } },
    { &hf_padding, { "Padding", "npmp.padding", FT_UINT16, BASE_HEX, NULL, 0x0, NULL, HFILL } },
    { &hf_padding32, { "Padding", "npmp.padding32", FT_UINT32, BASE_HEX, NULL, 0x0, NULL, HFILL } },
    { &hf_status, { "Status", "npmp.status", FT_UINT32, BASE_DEC, VALS(npmp_status_vals), 0x0, NULL, HFILL } },
    { &hf_protocol,
      { "Protocol", "npmp.protocol", FT_UINT16, BASE_DEC, VALS(npmp_protocol_vals), 0x0,
        "Transport protocol (little-endian)", HFILL } },
    { &hf_description, { "Description", "npmp.description", FT_STRING, BASE_NONE, NULL, 0x0, NULL, HFILL } },
    { &hf_ordered,
      { "Ordered Mode", "npmp.ordered", FT_UINT32, BASE_HEX, NULL, 0x0, "Fraction of ordered messages times 0xffffffff",
        HFILL } },
    { &hf_ordered_fraction,
      { "Ordered Fraction", "npmp.ordered_fraction", FT_DOUBLE, BASE_NONE, NULL, 0x0, NULL, HFILL } },
    { &hf_reliable,
      { "Reliable Mode", "npmp.reliable", FT_UINT32, BASE_HEX, NULL, 0x0,
        "Fraction of reliable messages times 0xffffffff", HFILL } },
    { &hf_reliable_fraction,
      { "Reliable Fraction", "npmp.reliable_fraction", FT_DOUBLE, BASE_NONE, NULL, 0x0, NULL, HFILL } },
    { &hf_retranstrials,
      { "Retransmission Trials", "npmp.retranstrials", FT_UINT32, BASE_HEX, NULL, 0x0, NULL, HFILL } },
    { &hf_retranstrials_is_time,
      { "Unit", "npmp.retranstrials.is_time", FT_BOOLEAN, 32, TFS(&tfs_retrans_time), 0x80000000, NULL, HFILL } },
    { &hf_retranstrials_value,
      { "Value", "npmp.retranstrials.value", FT_UINT32, BASE_DEC, NULL, 0x7fffffff, NULL, HFILL } },
    { &hf_framerate,
      { "Frame Rate", "npmp.framerate", FT_DOUBLE, BASE_NONE, NULL, 0x0, "Inbound frame rate parameter (frames/s)",
        HFILL } },
    { &hf_framesize,
      { "Frame Size", "npmp.framesize", FT_DOUBLE, BASE_NONE, NULL, 0x0, "Inbound frame size parameter (bytes)",
        HFILL } },
    { &hf_framerate_rng,
      { "Frame Rate RNG", "npmp.framerate_rng", FT_UINT8, BASE_DEC, VALS(npmp_rng_vals), 0x0, NULL, HFILL } },
    { &hf_framesize_rng,
      { "Frame Size RNG", "npmp.framesize_rng", FT_UINT8, BASE_DEC, VALS(npmp_rng_vals), 0x0, NULL, HFILL } },
    { &hf_rcvbuf, { "Receive Buffer Size", "npmp.rcvbuf", FT_UINT32, BASE_DEC, NULL, 0x0, NULL, HFILL } },
    { &hf_sndbuf, { "Send Buffer Size", "npmp.sndbuf", FT_UINT32, BASE_DEC, NULL, 0x0, NULL, HFILL } },
    { &hf_maxmsgsize, { "Max. Message Size", "npmp.maxmsgsize", FT_UINT16, BASE_DEC, NULL, 0x0, NULL, HFILL } },
    { &hf_cmt, { "CMT", "npmp.cmt", FT_UINT8, BASE_DEC, VALS(npmp_cmt_vals), 0x0, NULL, HFILL } },
    { &hf_ccid, { "CCID", "npmp.ccid", FT_UINT8, BASE_DEC, NULL, 0x0, NULL, HFILL } },
    { &hf_ndiffports,
      { "NDiffPorts", "npmp.ndiffports", FT_UINT16, BASE_DEC, NULL, 0x0,
        "Obsolete in the reference; here SCTP RTO.min and DAC", HFILL } },
    { &hf_sctp_rtomin,
      { "SCTP RTO.min", "npmp.sctp.rtomin", FT_UINT16, BASE_DEC, NULL, 0x7fff, "Milliseconds, 0 = the stack's default",
        HFILL } },
    { &hf_sctp_dac, { "SCTP DAC", "npmp.sctp.dac", FT_BOOLEAN, 16, NULL, 0x8000, "Delayed-ACK-aware CMT", HFILL } },
    { &hf_pathmgr, { "Path Manager", "npmp.pathmgr", FT_STRING, BASE_NONE, NULL, 0x0, "Obsolete", HFILL } },
    { &hf_cc, { "Congestion Control", "npmp.cc", FT_STRING, BASE_NONE, NULL, 0x0, NULL, HFILL } },
    { &hf_runtime,
      { "Runtime (ms)", "npmp.runtime", FT_UINT32, BASE_DEC, NULL, 0x0,
        "Obsolete Scheduler field in the reference; here the measurement's runtime, after which the passive's "
        "flow sends nothing (0 = until STOP)",
        HFILL } },
    { &hf_sctp_mechanisms,
      { "SCTP Mechanisms", "npmp.addflow.sctp_mechanisms", FT_UINT32, BASE_HEX, NULL, 0x0,
        "Obsolete Scheduler field in the reference; here the CMT-SCTP mechanisms of the bundled stack", HFILL } },
    { &hf_sctp_mechanisms_bufsplit_on_buffered,
      { "Buffer Splitting on Buffered Bytes", "npmp.addflow.sctp_mechanisms.bufsplit_on_buffered", FT_BOOLEAN, 32, NULL,
        0x00000001, "bufsplit-on=buffered", HFILL } },
    { &hf_sctp_mechanisms_smartfr,
      { "Smart Fast Retransmission", "npmp.addflow.sctp_mechanisms.smartfr", FT_BOOLEAN, 32, NULL, 0x00000002,
        "smartfr=on", HFILL } },
    { &hf_sctp_mechanisms_pktdrop,
      { "Packet-Drop Reporting", "npmp.addflow.sctp_mechanisms.pktdrop", FT_BOOLEAN, 32, NULL, 0x00000004, "pktdrop=on",
        HFILL } },
    { &hf_sctp_mechanisms_reschedule,
      { "Chunk Rescheduling", "npmp.addflow.sctp_mechanisms.reschedule", FT_BOOLEAN, 32, NULL, 0x00000008,
        "reschedule=on", HFILL } },
    { &hf_seed,
      { "Seed", "npmp.addflow.seed", FT_UINT64, BASE_DEC, NULL, 0x0,
        "Obsolete Scheduler field in the reference (zero there); here the run's seed (-seed), from which the "
        "passive derives the seeds of the flow's random choices; 0 = none",
        HFILL } },
    { &hf_onoffevents, { "On/Off Events", "npmp.onoffevents", FT_UINT16, BASE_DEC, NULL, 0x0, NULL, HFILL } },
    { &hf_onoff, { "On/Off Event", "npmp.onoff", FT_NONE, BASE_NONE, NULL, 0x0, NULL, HFILL } },
    { &hf_onoff_rng, { "RNG", "npmp.onoff.rng", FT_UINT8, BASE_DEC, VALS(npmp_rng_vals), 0x0, NULL, HFILL } },
    { &hf_onoff_flags, { "Flags", "npmp.onoff.flags", FT_UINT8, BASE_HEX, NULL, 0x0, NULL, HFILL } },
    { &hf_onoff_flags_reltime,
      { "Relative Time", "npmp.onoff.flags.reltime", FT_BOOLEAN, 8, NULL, 0x01, NULL, HFILL } },
    { &hf_onoff_padding, { "Padding", "npmp.onoff.padding", FT_UINT16, BASE_HEX, NULL, 0x0, NULL, HFILL } },
    { &hf_onoff_value,
      { "Value", "npmp.onoff.value", FT_DOUBLE, BASE_NONE, NULL, 0x0, "Distribution parameter (s)", HFILL } },
    { &hf_magic, { "Magic Number", "npmp.magic", FT_UINT64, BASE_HEX, NULL, 0x0, NULL, HFILL } },
    { &hf_frameid, { "Frame ID", "npmp.frameid", FT_UINT32, BASE_DEC, NULL, 0x0, NULL, HFILL } },
    { &hf_seqnumber, { "Sequence Number", "npmp.seqnumber", FT_UINT64, BASE_DEC, NULL, 0x0, NULL, HFILL } },
    { &hf_byteseqnumber,
      { "Byte Sequence Number", "npmp.byteseqnumber", FT_UINT64, BASE_DEC, NULL, 0x0, NULL, HFILL } },
    { &hf_timestamp,
      { "Time Stamp", "npmp.timestamp", FT_UINT64, BASE_DEC, NULL, 0x0,
        "Sender time, microseconds since the Unix epoch", HFILL } },
    { &hf_timestamp_abs,
      { "Time Stamp (absolute)", "npmp.timestamp_abs", FT_ABSOLUTE_TIME, ABSOLUTE_TIME_UTC, NULL, 0x0, NULL, HFILL } },
    { &hf_payload, { "Payload", "npmp.payload", FT_BYTES, BASE_NONE, NULL, 0x0, NULL, HFILL } },
    { &hf_results_data, { "Results Data", "npmp.results.data", FT_BYTES, BASE_NONE, NULL, 0x0, NULL, HFILL } },
    { &hf_auth_nonce,
      { "Nonce", "npmp.auth.nonce", FT_BYTES, BASE_NONE, NULL, 0x0, "Random challenge of the message's sender",
        HFILL } },
    { &hf_auth_mac,
      { "MAC", "npmp.auth.mac", FT_BYTES, BASE_NONE, NULL, 0x0,
        "HMAC-SHA-256 over the peer's nonce with the shared key", HFILL } },
    { &hf_flow_description,
      { "Flow Description", "npmp.flow.description", FT_STRING, BASE_NONE, NULL, 0x0,
        "Description from the flow's ADD_FLOW", HFILL } },
    { &hf_flow_protocol,
      { "Flow Protocol", "npmp.flow.protocol", FT_UINT16, BASE_DEC, VALS(npmp_protocol_vals), 0x0,
        "Protocol from the flow's ADD_FLOW", HFILL } },
    { &hf_flow_addflow_in, { "ADD_FLOW in", "npmp.flow.addflow_in", FT_FRAMENUM, BASE_NONE, NULL, 0x0, NULL, HFILL } },
    { &hf_flow_identify_in,
      { "IDENTIFY_FLOW in", "npmp.flow.identify_in", FT_FRAMENUM, BASE_NONE, NULL, 0x0, NULL, HFILL } },
    { &hf_direction,
      { "Direction", "npmp.direction", FT_UINT8, BASE_DEC, VALS(npmp_direction_vals), 0x0, NULL, HFILL } },
    { &hf_seq_expected,
      { "Expected Sequence Number", "npmp.seq.expected", FT_UINT64, BASE_DEC, NULL, 0x0, NULL, HFILL } },
    { &hf_seq_lost,
      { "Missing Messages", "npmp.seq.lost", FT_UINT64, BASE_DEC, NULL, 0x0, "Messages missing before this one",
        HFILL } },
    { &hf_seq_reordered, { "Out of Order", "npmp.seq.reordered", FT_BOOLEAN, BASE_NONE, NULL, 0x0, NULL, HFILL } },
    { &hf_quic_stream_id,
      { "QUIC Stream ID", "npmp.quic.stream_id", FT_UINT64, BASE_DEC, NULL, 0x0,
        "The QUIC stream that carries the message", HFILL } },
    { &hf_quic_stream_number,
      { "QUIC Stream Number", "npmp.quic.stream_number", FT_UINT64, BASE_DEC, NULL, 0x0,
        "Stream ID >> 2: the flow's number in its QUIC connection (netperfmeter's FLOWSPEC of the -quic option)",
        HFILL } },
    { &hf_quic_stream_type,
      { "QUIC Stream Type", "npmp.quic.stream_type", FT_UINT8, BASE_DEC, VALS(npmp_quic_stream_type_vals), 0x0,
        "The two low bits of the Stream ID: initiator and direction", HFILL } },
  };

  static int *ett[] = { &ett_npmp,        &ett_flags,      &ett_retrans,        &ett_onoff,
                        &ett_onoff_flags, &ett_ndiffports, &ett_sctp_mechanisms };

  static ei_register_info ei[] = {
    { &ei_unknown_type, { "npmp.expert.unknown_type", PI_MALFORMED, PI_ERROR, "Unknown message type", EXPFILL } },
    { &ei_length_mismatch, { "npmp.expert.length_mismatch", PI_MALFORMED, PI_ERROR, "Length mismatch", EXPFILL } },
    { &ei_truncated, { "npmp.expert.truncated", PI_MALFORMED, PI_ERROR, "Truncated message", EXPFILL } },
    { &ei_bad_magic, { "npmp.expert.bad_magic", PI_PROTOCOL, PI_ERROR, "Bad magic number", EXPFILL } },
    { &ei_unknown_flow,
      { "npmp.expert.unknown_flow", PI_SEQUENCE, PI_NOTE, "Flow without ADD_FLOW in this capture", EXPFILL } },
    { &ei_seq_lost, { "npmp.expert.seq_lost", PI_SEQUENCE, PI_WARN, "Messages missing (lost)", EXPFILL } },
    { &ei_seq_reordered, { "npmp.expert.seq_reordered", PI_SEQUENCE, PI_WARN, "Out-of-order message", EXPFILL } },
  };

  proto_npmp = proto_register_protocol("NetPerfMeter Protocol (NPMP)", "NPMP", "npmp");
  proto_register_field_array(proto_npmp, hf, array_length(hf));
  proto_register_subtree_array(ett, array_length(ett));
  expert_module_t *em = expert_register_protocol(proto_npmp);
  expert_register_field_array(em, ei, array_length(ei));

  npmp_handle = register_dissector("npmp", dissect_npmp, proto_npmp);
  npmp_quic_handle = create_dissector_handle(dissect_npmp_quic, proto_npmp);
  npmp_tap = register_tap("npmp");
  register_init_routine(npmp_init);

  module_t *mod = prefs_register_protocol(proto_npmp, proto_reg_handoff_npmp);
  range_convert_str(wmem_epan_scope(), &pref_tcp_ports, NPMP_DEFAULT_PORTS, 65535);
  range_convert_str(wmem_epan_scope(), &pref_udp_ports, NPMP_DEFAULT_PORTS, 65535);
  range_convert_str(wmem_epan_scope(), &pref_dccp_ports, NPMP_DEFAULT_PORTS, 65535);
  prefs_register_range_preference(mod, "tcp_ports", "TCP ports",
                                  "TCP ports decoded as NPMP (data on BASE, MPTCP data on BASE-1, control on BASE+1)",
                                  &pref_tcp_ports, 65535);
  prefs_register_range_preference(mod, "udp_ports", "UDP ports", "UDP ports decoded as NPMP", &pref_udp_ports, 65535);
  prefs_register_range_preference(mod, "dccp_ports", "DCCP ports", "DCCP ports decoded as NPMP", &pref_dccp_ports,
                                  65535);
  prefs_register_bool_preference(mod, "desegment", "Reassemble NPMP messages spanning multiple TCP segments",
                                 "Whether NPMP messages split across TCP segments or QUIC STREAM frames are "
                                 "reassembled (TCP also needs its preference \"Allow subdissectors to reassemble "
                                 "TCP streams\"; QUIC reassembles its streams always)",
                                 &pref_desegment);

  register_stat_tap_ui(&npmp_stat_ui, NULL);
}

static void
update_ports(const char *table, range_t **cur, range_t *pref)
{
  if (*cur) {
    dissector_delete_uint_range(table, *cur, npmp_handle);
    wmem_free(wmem_epan_scope(), *cur);
  }
  *cur = range_copy(wmem_epan_scope(), pref);
  dissector_add_uint_range(table, *cur, npmp_handle);
}

static void
proto_reg_handoff_npmp(void)
{
  static bool initialised = false;
  if (!initialised) {
    dissector_add_uint("sctp.ppi", PPID_NPMP_CONTROL, npmp_handle);
    dissector_add_uint("sctp.ppi", PPID_NPMP_DATA, npmp_handle);
    dissector_add_uint("sctp.ppi", PPID_NPMP_CONTROL_LEGACY, npmp_handle);
    dissector_add_uint("sctp.ppi", PPID_NPMP_DATA_LEGACY, npmp_handle);
    dissector_add_for_decode_as("tcp.port", npmp_handle);
    dissector_add_for_decode_as("udp.port", npmp_handle);
    dissector_add_string("quic.proto", NPMP_QUIC_ALPN, npmp_quic_handle);
    heur_dissector_add("tcp", dissect_npmp_heur, "NetPerfMeter (NPMP) over TCP", "npmp_tcp", proto_npmp,
                       HEURISTIC_ENABLE);
    heur_dissector_add("udp", dissect_npmp_heur, "NetPerfMeter (NPMP) over UDP", "npmp_udp", proto_npmp,
                       HEURISTIC_ENABLE);
    heur_dissector_add("dccp", dissect_npmp_heur, "NetPerfMeter (NPMP) over DCCP", "npmp_dccp", proto_npmp,
                       HEURISTIC_ENABLE);
    initialised = true;
  }
  update_ports("tcp.port", &cur_tcp_ports, pref_tcp_ports);
  update_ports("udp.port", &cur_udp_ports, pref_udp_ports);
  update_ports("dccp.port", &cur_dccp_ports, pref_dccp_ports);
}

void
plugin_register(void)
{
  static proto_plugin plug;
  plug.register_protoinfo = proto_register_npmp;
  plug.register_handoff = proto_reg_handoff_npmp;
  proto_register_plugin(&plug);
}
