"""The dimensionless quantities a study's figure depends on, computed from its topology and flows.

A study scaled to one machine (rates divided, delays kept, ...) keeps the paper's figure only if
the quantities that decide the protocols' behaviour stay what they were. The study file states
them with the paper's values ([[regime]] rows); `regime_table()` computes the study's own value
of each at every sweep point with the formulas below (the one place they are written), and a
value further from the paper's than the row's tolerance is a mismatch, which is an error unless
the row gives a reason.

Quantities (a path is 1, 2, ... or "bottleneck"; its RTT is its two one-way delays, propagation
only; "the queue" is the most a flow can make it hold: drop-tail's limit, RED's max threshold in
full frames, the limit for CoDel and PIE):

  loss_per_packet   the chance that a data packet of the flow is lost on the path:
                    1 - (1 - loss) (1 - ber)^(8 b), b the bytes the bit errors can hit (the SCTP
                    packet inside UDP: the message and its 28 bytes of SCTP headers, at most 1472)
  mathis_ratio      Mathis et al.'s bound on a Reno flow's rate over the path, MSS/RTT sqrt(3/(2p))
                    with p = loss_per_packet and MSS the payload per packet, over the path's rate:
                    below 1 loss limits the flow, above 1 the path does
  queue_bdp         the path's queue over its bandwidth-delay product
  queue_ms          the path's queue in milliseconds at its rate
  sndbuf_bdp        the flow's send buffer (sndbuf=) over what all paths hold in flight and
  rcvbuf_bdp        queued: the sum of each path's BDP and queue (likewise the receive buffer)
  load              the offered load at frame level (each message with its headers: SCTP over UDP
                    70 bytes per packet with a DATA chunk, UDP 42) of every flow of constant rate
                    over the sum of the paths' rates (a study of saturated flows has none)
"""

import math

from . import study as studymod

QUANTITIES = ("loss_per_packet", "mathis_ratio", "queue_bdp", "queue_ms", "sndbuf_bdp", "rcvbuf_bdp", "load")
PATH_QUANTITIES = ("loss_per_packet", "mathis_ratio", "queue_bdp", "queue_ms")
FLOW_QUANTITIES = ("loss_per_packet", "mathis_ratio", "sndbuf_bdp", "rcvbuf_bdp")
TOLERANCE = 0.25  # relative (|study / paper - 1|), unless a row says otherwise
# the headers of one packet on the test bed's links: Ethernet 14, IPv4 20, UDP 8 (userland SCTP's
# encapsulation), SCTP common header 12, DATA chunk header 16
SCTP_HEADERS = 14 + 20 + 8 + 12 + 16
SCTP_IN_UDP = 12 + 16  # what of them lies inside the UDP payload (where the delay line's bit errors fall)
UDP_HEADERS = 14 + 20 + 8
UDP_PAYLOAD_MAX = 1500 - 20 - 8


def packet_loss(ber, packet_bytes, loss=0.0):
    """The probability that a packet of `packet_bytes` (the bytes bit errors can hit) is lost, at a
    bit error rate `ber` and a random loss `loss` (a fraction)."""
    return 1.0 - (1.0 - loss) * (1.0 - ber) ** (8 * packet_bytes)


def mathis_bound(mss_bytes, rtt_s, p):
    """Mathis, Semke, Mahdavi, Ott (1997): the rate (bit/s) a Reno flow reaches at a per-packet loss
    probability p: MSS / RTT * sqrt(3 / (2 p)); inf without loss."""
    if p <= 0:
        return math.inf
    return 8 * mss_bytes / rtt_s * math.sqrt(1.5 / p)


def bdp_bytes(rate, rtt_s):
    return rate * rtt_s / 8


def queue_ms(queue_bytes, rate):
    return 1000.0 * 8 * queue_bytes / rate


def queue_bytes(path):
    """What a flow can fill the path's forward queue with: drop-tail's limit; RED's max threshold
    (packets, as full frames; the default 80 as the delay line's) or its limit if lower; CoDel's and
    PIE's limit."""
    if path.aqm == "red":
        maximum = dict(path.aqm_params).get("max", 80) * studymod.FRAME_BYTES
        return min(path.queue, maximum)
    return path.queue


def rtt_s(path):
    return (path.delay_ms + path.reverse_delay_ms) / 1000.0


def message_bytes(flow):
    """The constant outbound message size of a flow ("constN" in its second field), or None."""
    fields = flow.spec.split(":")
    try:
        return float(fields[1].strip()[5:]) if fields[1].strip().startswith("const") else None
    except (IndexError, ValueError):
        return None


def message_rate(flow):
    """The constant outbound message rate (messages/s) of a flow; 0 = saturated; None if not constant."""
    field = flow.spec.split(":")[0].strip()
    try:
        return float(field[5:]) if field.startswith("const") else None
    except ValueError:
        return None


def frame_bytes(flow, size):
    """The bytes on the wire (Ethernet frames) of one message of `size` bytes of the flow."""
    if flow.protocol == "sctp":
        packets = max(1, math.ceil(size / studymod.SCTP_DATA_PER_PACKET))
        return size + packets * SCTP_HEADERS
    if flow.protocol == "udp":
        return size + UDP_HEADERS
    return None


def flow_loss(flow, path):
    """loss_per_packet of the flow's full data packet on `path`."""
    size = message_bytes(flow)
    if flow.protocol == "sctp":
        size = min((size or studymod.SCTP_DATA_PER_PACKET), studymod.SCTP_DATA_PER_PACKET) + SCTP_IN_UDP
    else:
        size = min(size or UDP_PAYLOAD_MAX, UDP_PAYLOAD_MAX)
    return packet_loss(path.ber, size, path.loss / 100.0)


def shaped(paths, bottleneck):
    """The links whose rates bound the flows: the shared topology's bottleneck, else the paths."""
    return [bottleneck] if bottleneck is not None else paths


def value(quantity, paths, bottleneck, flows, path=None, flow=0):
    """The study's value of `quantity` for one sweep point (its Path objects, bottleneck or None, and
    Flow objects); `path` 1, 2, ... or "bottleneck" where the quantity is a path's, `flow` the flow's
    number. None where it is not defined (no rate, no sndbuf=, saturated flows)."""
    link = None
    if quantity in PATH_QUANTITIES:
        link = bottleneck if path == "bottleneck" else paths[int(path) - 1]
        if link is None or link.rate is None:
            return None
    the_flow = flows[flow] if flows and flow < len(flows) else None
    if quantity == "loss_per_packet":
        return flow_loss(the_flow, link)
    if quantity == "mathis_ratio":
        p = flow_loss(the_flow, link)
        if p <= 0:
            return math.inf
        size = message_bytes(the_flow) or studymod.SCTP_DATA_PER_PACKET
        rtt = rtt_s(link) + (rtt_s(bottleneck) if bottleneck is not None and link is not bottleneck else 0)
        if rtt <= 0:
            return None
        return mathis_bound(min(size, studymod.SCTP_DATA_PER_PACKET), rtt, p) / link.rate
    if quantity in ("queue_bdp", "queue_ms"):
        if quantity == "queue_ms":
            return queue_ms(queue_bytes(link), link.rate)
        rtt = rtt_s(link)
        return queue_bytes(link) / bdp_bytes(link.rate, rtt) if rtt > 0 else None
    if quantity in ("sndbuf_bdp", "rcvbuf_bdp"):
        buffer = studymod.spec_options(the_flow.spec).get(quantity[:6]) if the_flow else None
        try:
            buffer = float(buffer)
        except (TypeError, ValueError):
            return None
        links = shaped(paths, bottleneck)
        if any(p.rate is None for p in links):
            return None
        held = sum(bdp_bytes(p.rate, rtt_s(p)) + queue_bytes(p) for p in links)
        return buffer / held if held > 0 else None
    if quantity == "load":
        offered = 0.0
        for f in flows:
            rate, size = message_rate(f), message_bytes(f)
            if not rate or size is None or frame_bytes(f, size) is None:
                continue  # saturated or not constant: no offered load of its own
            offered += rate * frame_bytes(f, size) * 8
        capacity = sum(p.rate for p in shaped(paths, bottleneck) if p.rate is not None)
        return offered / capacity if offered and capacity else None
    raise ValueError(f"unknown quantity {quantity}")


def mismatch(study_value, paper_value, tolerance):
    """Whether the study's value lies further from the paper's than the tolerance (relative)."""
    if study_value is None:
        return True
    if math.isinf(paper_value) or math.isinf(study_value):
        return math.isinf(paper_value) != math.isinf(study_value)
    if paper_value == 0:
        return abs(study_value) > tolerance
    return abs(study_value / paper_value - 1) > tolerance


def describe(row):
    where = f" path {row['path']}" if row.get("path") is not None else ""
    if row["quantity"] in FLOW_QUANTITIES and row.get("flow", 0):
        where += f" flow {row['flow']}"
    return row["quantity"] + where


def regime_table(study):
    """[(row, [(values, paper value, study value, mismatch)])] of the study's [[regime]] rows at
    each sweep point the row applies to."""
    out = []
    for row in study.regime:
        points = []
        for values in study.combinations():
            if any(str(values.get(k)) != str(v) for k, v in row["values"].items()):
                continue
            paper = study.regime_paper_value(row, values)
            mine = value(row["quantity"], study.paths_for(values), study.bottleneck_for(values),
                         study.flows_for(values), row.get("path"), row.get("flow", 0))
            points.append((values, paper, mine, mismatch(mine, paper, row["tolerance"])))
        out.append((row, points))
    return out


def errors(table):
    """The mismatches that no reason excuses: one line each (the first sweep point of a row)."""
    lines = []
    for row, points in table:
        bad = [p for p in points if p[3]]
        if bad and not row.get("reason"):
            values, paper, mine, _ = bad[0]
            at = ", ".join(f"{k}={v}" for k, v in values.items())
            lines.append(f"{describe(row)}: the study's {_number(mine)} against the paper's {_number(paper)} "
                         f"(beyond {row['tolerance']:.0%}) at {at or 'every point'}"
                         f"{f' and {len(bad) - 1} more point(s)' if len(bad) > 1 else ''}: scale the study "
                         "to keep it, or give the row a reason")
    return lines


def _number(v):
    if v is None:
        return "(undefined)"
    if math.isinf(v):
        return "inf"
    return f"{v:.3g}"


def report(table):
    """Lines for --dry-run: paper against study for each quantity, each distinct pair once with the
    sweep points it holds at."""
    lines = []
    for row, points in table:
        groups = {}
        for values, paper, mine, bad in points:
            groups.setdefault((_number(paper), _number(mine), bad), []).append(values)
        # the variables that tell the groups apart (those a group holds some values of only)
        every = {k: {str(v[k]) for v, *_ in points} for k in (points[0][0] if points else {})}
        shown = [k for k in every if any({str(v[k]) for v in where} != every[k] for where in groups.values())]
        for (paper, mine, bad), where in groups.items():
            distinct = list(dict.fromkeys(", ".join(f"{k}={vals[k]}" for k in shown) for vals in where))
            at = "; ".join(distinct[:6]) if shown else ""
            more = f" (+{len(distinct) - 6})" if shown and len(distinct) > 6 else ""
            verdict = "ok" if not bad else ("MISMATCH, reason: " + row["reason"] if row.get("reason")
                                            else "MISMATCH")
            lines.append(f"  {describe(row)}: paper {paper}, study {mine} (±{row['tolerance']:.0%}): {verdict}"
                         f"{'  [' + at + more + ']' if at else ''}")
    return lines
