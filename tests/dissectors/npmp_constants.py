#!/usr/bin/env python3
"""The NPMP wire constants are written three times: in the C++ codec (src/npmp/messages.h), the C
plugin and its Lua twin. This test reads all three and fails on any disagreement: message types,
sizes, statuses, every flag bit with its mask, and the fields this project puts into the reference's
padding (C and Lua only: the same name and width).

    npmp_constants.py SOURCE_DIR
"""
import re
import sys


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def number(text):
    return int(text, 0)


def cxx_constants(text):
    c = {}
    enum = re.search(r"enum class Type : std::uint8_t \{(.*?)\};", text, re.S).group(1)
    for name, value in re.findall(r"(\w+) = (\d+),", enum):
        c["type." + name] = int(value)
    for name, value in re.findall(r"\b(k\w+) = (0x[0-9A-Fa-f]+|\d+)U?L*\b", text):
        c[name] = number(value)
    return c


def fail(errors, what, values):
    if len(set(values.values())) != 1:
        errors.append(f"{what}: {values}")


def main(source):
    cxx = cxx_constants(read(f"{source}/src/npmp/messages.h"))
    c = read(f"{source}/dissectors/packet-npmp.c")
    lua = read(f"{source}/dissectors/npmp.lua")
    errors = []

    # Message types: C #defines and value_string names, Lua locals and type_vals.
    c_types = {m[0]: number(m[1]) for m in re.findall(r"#define NPMP_(\w+)\s+(\d+)\b", c)}
    lua_types = {}
    for names, values in re.findall(r"local (NPMP_\w+(?:, NPMP_\w+)*) = ([\d, ]+)\n", lua):
        for n, v in zip(names.split(", "), values.split(", ")):
            lua_types[n[5:]] = int(v)
    wire = {"ACKNOWLEDGE": "Acknowledge", "ADD_FLOW": "AddFlow", "REMOVE_FLOW": "RemoveFlow",
            "IDENTIFY_FLOW": "IdentifyFlow", "DATA": "Data", "START": "Start", "STOP": "Stop",
            "RESULTS": "Results", "AUTH_HELLO": "AuthHello", "AUTH_CHALLENGE": "AuthChallenge",
            "AUTH_RESPONSE": "AuthResponse"}
    c_names = dict((int(v) if not v.startswith("NPMP") else c_types[v[5:]], n)
                   for v, n in re.findall(r"\{ (NPMP_\w+|\d+),\s+\"([^\"]+)\" \}", c.split("npmp_type_vals")[1]
                                          .split("};")[0]))
    lua_names = {int(k): v for k, v in re.findall(r"\[(\d+)\] = \"([^\"]+)\"",
                                                  lua.split("local type_vals")[1].split("}")[0])}
    for macro, enum in wire.items():
        fail(errors, f"type {macro}", {"C++": cxx.get("type." + enum), "C": c_types.get(macro),
                                       "Lua": lua_types.get(macro)})
        value = cxx.get("type." + enum)
        fail(errors, f"type {macro} name", {"C": c_names.get(value), "Lua": lua_names.get(value)})
    if len(wire) != len([k for k in cxx if k.startswith("type.")]):
        errors.append("C++ has message types this test does not know: update the table above")

    # Sizes.
    lua_sizes = {}
    for names, values in re.findall(r"local ((?:[A-Z_]+_LEN|[A-Z_]+_MAX)(?:, (?:[A-Z_]+_LEN|[A-Z_]+_MAX))*) = "
                                    r"([\d, ]+)\n", lua):
        lua_sizes.update(zip(names.split(", "), map(int, values.split(", "))))
    for name, value in re.findall(r"local (AUTH_BLOCK) = (\d+)\n", lua):
        lua_sizes[name] = int(value)
    sizes = {"kHeaderSize": ("NPMP_HDR_LEN", "HDR_LEN"), "kAcknowledgeSize": ("NPMP_ACK_LEN", "ACK_LEN"),
             "kAddFlowBaseSize": ("NPMP_ADDFLOW_LEN", "ADDFLOW_LEN"),
             "kOnOffEventSize": ("NPMP_ONOFF_LEN", "ONOFF_LEN"),
             "kRemoveFlowSize": ("NPMP_REMOVE_LEN", "REMOVE_LEN"),
             "kIdentifyFlowSize": ("NPMP_IDENTIFY_LEN", "IDENTIFY_LEN"),
             "kDataHeaderSize": ("NPMP_DATA_LEN", "DATA_LEN"),
             "kStartStopSize": ("NPMP_STARTSTOP_LEN", "STARTSTOP_LEN"),
             "kAuthNonceSize": ("NPMP_AUTH_BLOCK", "AUTH_BLOCK")}
    c_defs = {m[0]: number(m[1]) for m in re.findall(r"#define (NPMP_\w+)\s+(0x[0-9a-fA-F]+|\d+)\b", c)}
    for k, (cn, ln) in sizes.items():
        fail(errors, f"size {k}", {"C++": cxx.get(k), "C": c_defs.get(cn), "Lua": lua_sizes.get(ln)})
    fail(errors, "RESULTS maximum", {"C++": cxx["kResultsMaxData"] + cxx["kHeaderSize"],
                                     "C": c_defs["NPMP_RESULTS_MAX"], "Lua": lua_sizes["RESULTS_MAX"]})
    fail(errors, "IDENTIFY magic", {"C++": cxx["kIdentifyMagic"],
                                    "C": number(re.search(r"NPMP_MAGIC UINT64_C\((0x[0-9a-f]+)\)", c).group(1))})

    # Statuses: every C++ kStatus* value has the same name in C and Lua.
    c_status = {int(v): n for v, n in re.findall(r"\{ (\d+), \"([^\"]+)\" \}", c.split("npmp_status_vals[]")[1]
                                                 .split("};")[0])}
    lua_status = {int(k): v for k, v in re.findall(r"\[(\d+)\] = \"([^\"]+)\"",
                                                   lua.split("local status_vals")[1].split("}")[0])}
    for k, v in cxx.items():
        if k.startswith("kStatus"):
            if v not in c_status or c_status.get(v) != lua_status.get(v):
                errors.append(f"status {k}={v}: C {c_status.get(v)!r}, Lua {lua_status.get(v)!r}")

    # Flag bits: field name -> C++ mask, and the masks registered in C and Lua.
    flags = {
        "npmp.addflow.flags.debug": cxx["kAddFlowDebug"],
        "npmp.addflow.flags.nodelay": cxx["kAddFlowNoDelay"],
        "npmp.addflow.flags.repeatonoff": cxx["kAddFlowRepeatOnOff"],
        "npmp.addflow.flags.nrsack": cxx["kAddFlowNrSack"],
        "npmp.addflow.flags.bufsplit": 3 << cxx["kAddFlowBufferSplitShift"],
        "npmp.addflow.flags.sctpcc": 3 << cxx["kAddFlowSctpCcShift"],
        "npmp.sctp.rtomin": cxx["kSctpRtoMinMask"],
        "npmp.sctp.dac": cxx["kSctpDacBit"],
        "npmp.identify.flags.compress_vectors": cxx["kIdentifyCompressVectors"],
        "npmp.identify.flags.no_vectors": cxx["kIdentifyNoVectors"],
        "npmp.identify.flags.path_vectors": cxx["kIdentifyPathVectors"],
        "npmp.identify.flags.gzip_vectors": cxx["kIdentifyGzipVectors"],
        "npmp.addflow.sctp_mechanisms.bufsplit_on_buffered": cxx["kSctpMechanismBufferSplitOnBuffered"],
        "npmp.addflow.sctp_mechanisms.smartfr": cxx["kSctpMechanismSmartFastRetransmit"],
        "npmp.addflow.sctp_mechanisms.pktdrop": cxx["kSctpMechanismPacketDropReporting"],
        "npmp.addflow.sctp_mechanisms.reschedule": cxx["kSctpMechanismChunkRescheduling"],
        "npmp.data.flags.frame_begin": cxx["kDataFrameBegin"],
        "npmp.data.flags.frame_end": cxx["kDataFrameEnd"],
        "npmp.start.flags.compress_vectors": cxx["kStartCompressVectors"],
        "npmp.start.flags.compress_scalars": cxx["kStartCompressScalars"],
        "npmp.start.flags.no_vectors": cxx["kStartNoVectors"],
        "npmp.start.flags.no_scalars": cxx["kStartNoScalars"],
        "npmp.start.flags.gzip_vectors": cxx["kStartGzipVectors"],
        "npmp.start.flags.gzip_scalars": cxx["kStartGzipScalars"],
        "npmp.results.flags.eof": cxx["kResultsEof"],
        "npmp.onoff.flags.reltime": cxx["kOnOffRelativeTime"],
    }
    for field, mask in flags.items():
        # (Whitespace between the hf_register_info fields is the formatter's: any.)
        cm = re.search(r"\"%s\",\s*FT_\w+,\s*\w+,\s*(?:VALS\(\w+\)|NULL),\s*(0x[0-9a-fA-F]+)" % re.escape(field), c)
        lm = re.search(r"\"%s\", \"[^\"]+\", (?:base\.\w+|\d+), (?:\w+|nil), (0x[0-9a-fA-F]+)" % re.escape(field), lua)
        fail(errors, f"flag {field}", {"C++": mask, "C": number(cm.group(1)) if cm else None,
                                       "Lua": number(lm.group(1)) if lm else None})

    # Fields this project puts where the reference has padding (no C++ constant to compare):
    # the same name and width in C and Lua.
    own = {"npmp.start.warmup": ("FT_UINT32", "uint32"), "npmp.runtime": ("FT_UINT32", "uint32"),
           "npmp.addflow.sctp_mechanisms": ("FT_UINT32", "uint32"), "npmp.addflow.seed": ("FT_UINT64", "uint64")}
    for field, (ctype, ltype) in own.items():
        cm = re.search(r"\"%s\", (FT_\w+)," % re.escape(field), c)
        lm = re.search(r"ProtoField\.(\w+)\(\"%s\"" % re.escape(field), lua)
        if not cm or cm.group(1) != ctype or not lm or lm.group(1) != ltype:
            errors.append(f"field {field}: C {cm.group(1) if cm else None}, Lua {lm.group(1) if lm else None}, "
                          f"want {ctype}/{ltype}")

    for e in errors:
        print("MISMATCH " + e)
    print(f"{len(wire)} types, {len(sizes) + 2} sizes, {len([k for k in cxx if k.startswith('kStatus')])} statuses, "
          f"{len(flags)} flag fields, {len(own)} own fields compared; {len(errors)} mismatches")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
