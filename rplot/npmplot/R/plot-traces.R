# Window and buffer traces of one run: the per-path vectors over time, sample by sample.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

# The quantities a trace figure draws, in panel order: the column of the per-path vector (or
# how a value is made of columns), the rows it is read from (per path, or the connection /
# association row), the panel's label with its unit, and the factor to that unit.
#   cwnd, ssthresh   per path, bytes -> kB (ssthresh where the stack tells it: TCP, MPTCP)
#   unacked          per path, segments (TCP, MPTCP: tcpi_unacked, the segments in flight)
#   sent_acked       per path, BytesSent - BytesAcked, bytes -> kB, where the stack tells no
#                    Unacked per path (SCTP with the bundled stack): the bytes sent on the
#                    path not yet acknowledged there, plus those it sent that were moved to
#                    another transmission (retransmitted) and so never acknowledged there
#   rtt              per path, SRTT in ms
#   rwnd             the association row, the peer's receiver window, bytes -> kB (SCTP)
#   sendbuf          the association row, Unacked: DATA chunks sent and not yet cumulatively
#                    acknowledged, which the send buffer holds (SCTP)
#   recvqueue        the association row, Pending: DATA chunks received and held on the
#                    reassembly and stream queues, not yet delivered (SCTP; the receiver's)
npm_trace_panels <- c(cwnd = "Congestion window [kB]", unacked = "Unacknowledged [segments]",
                      sent_acked = "Sent \u2212 acknowledged [kB]", rtt = "SRTT [ms]",
                      rwnd = "Peer receive window [kB]",
                      sendbuf = "Send buffer: sent, not cum. acked [DATA chunks]",
                      recvqueue = "Receive queue [DATA chunks]")
NPM_TRACE_QUANTITIES <- names(npm_trace_panels)  # nolint: object_name_linter. Exported name (NAMESPACE).

# Per-path vectors of a run: the config and the per-path files it names (not the other
# vectors, which a trace figure does not need). flows: flow IDs to keep (NULL = all);
# nodes: "Active" and/or "Passive". A config that names no per-path vector of the flows, or a
# named file that is not there or has no rows, is an error naming it. Returns a data.table of
# the vectors' rows with FlowID, Node, Flow (label), NodeLabel and PathLabel.
npm_read_traces <- function(config, time_range = c(NA_real_, NA_real_), flows = NULL,
                            nodes = c("Active", "Passive")) {
  cfg <- npm_read_config(config)
  dir <- dirname(config)
  fl <- npm_config_flows(cfg)
  if (!is.null(flows)) {
    unknown <- setdiff(flows, fl$FlowID)
    if (length(unknown))
      npm_stop("%s has no flow %s (its flows: %s)", config, paste(unknown, collapse = ", "),
               if (nrow(fl)) paste(sort(fl$FlowID), collapse = ", ") else "none")
    fl <- fl[FlowID %in% flows]
  }
  cols <- paste0("Paths", nodes)
  named <- fl[, Reduce(`|`, lapply(.SD, function(x) x != "")), .SDcols = cols]
  if (!any(named))
    npm_stop(paste0("%s names no per-path vector (FLOWn_PATHS_VECTOR_%s_NODE) of %s: record the run with ",
                    "-vector=NAME.vec and --path-interval above 0 (TCP, MPTCP and SCTP flows)"),
             config, if (length(nodes) == 1L) toupper(nodes) else "ACTIVE/PASSIVE",
             if (is.null(flows)) "any flow" else paste("flow", paste(flows, collapse = ", ")))
  out <- list()
  for (i in seq_len(nrow(fl))) {
    for (role in nodes) {
      name <- fl[[paste0("Paths", role)]][i]
      if (name == "") next
      file <- npm_resolve_file(name, dir)
      if (is.na(file))
        npm_stop("%s: the %s per-path vector %s of flow %d does not exist", config, tolower(role),
                 name, fl$FlowID[i])
      d <- npm_read_path_vector(file)
      if (is.null(d) || nrow(d) == 0L)
        npm_stop("per-path vector %s has no samples", file)
      d[, `:=`(FlowID = fl$FlowID[i], Node = role, File = file)]
      out[[length(out) + 1L]] <- d
    }
  }
  pv <- rbindlist(out, use.names = TRUE)
  if (!is.na(time_range[1])) pv <- pv[RelTime >= time_range[1]]
  if (!is.na(time_range[2])) pv <- pv[RelTime <= time_range[2]]
  if (nrow(pv) == 0L)
    npm_stop("%s: the per-path vectors have no samples between %s and %s s", config,
             ifelse(is.na(time_range[1]), "the start", format(time_range[1])),
             ifelse(is.na(time_range[2]), "the end", format(time_range[2])))
  nn <- c(Active = npm_cfg(cfg, "NAME_ACTIVE_NODE", "Client"),
          Passive = npm_cfg(cfg, "NAME_PASSIVE_NODE", "Server"))
  pv[, Flow := fl$Label[match(FlowID, fl$FlowID)]]
  pv[, NodeLabel := sprintf("%s node (%s)", Node, nn[Node])]
  pv[, PathLabel := ifelse(Path == npm_connection_path, "Whole connection",
                           ifelse(Local == "-", sprintf("Path %d: to %s", Path, Remote),
                                  sprintf("Path %d: %s to %s", Path, Local, Remote)))]
  # One label per path: the first one seen (SCTP's association row names the primary path,
  # which may change; a path keeps its ID).
  first <- pv[, .(Label = PathLabel[1L]), by = .(FlowID, Node, Path)]
  pv[first, PathLabel := i.Label, on = .(FlowID, Node, Path)]
  setorderv(pv, c("FlowID", "Node", "Path", "RelTime"))
  pv[]
}

# The samples a trace figure draws: one row per sample and quantity, in the panel's unit.
# Columns: FlowID, Flow, Node, NodeLabel, Path, Series (a path's label, "Sum of paths",
# or a connection row's), Line ("cwnd" or "ssthresh" in the window panel, else "value"),
# Quantity (key), Panel (label with unit), RelTime (s, as recorded), Value. Nothing is
# resampled or interpolated: every row is one sample of the vector (the sum of paths: the
# sum of the paths' samples taken at the same instant, AbsTime).
npm_trace_data <- function(pv, quantities = NPM_TRACE_QUANTITIES) {
  # The receive queue belongs to the receiver: unless asked for by name, it is drawn for the
  # passive node only (the active's of a one-way flow is empty).
  receive_queue_everywhere <- !identical(quantities, NPM_TRACE_QUANTITIES)
  bad <- setdiff(quantities, NPM_TRACE_QUANTITIES)
  if (length(bad)) npm_stop("unknown trace quantity %s (%s)", paste(bad, collapse = ", "),
                            paste(NPM_TRACE_QUANTITIES, collapse = ", "))
  pv <- as.data.table(pv)
  per <- pv[Path != npm_connection_path]
  conn <- pv[Path == npm_connection_path]
  keep <- c("FlowID", "Flow", "Node", "NodeLabel", "Path", "AbsTime", "RelTime")
  one <- function(d, q, value, line = "value", series = d$PathLabel) {
    if (!nrow(d)) return(NULL)
    r <- d[, ..keep]
    r[, `:=`(Series = series, Line = line, Quantity = q, Value = value)]
    r[is.finite(Value)]
  }
  out <- list()
  if ("cwnd" %in% quantities && nrow(per)) {
    out$cwnd <- one(per, "cwnd", per$Cwnd / 1000, "cwnd")
    out$ssthresh <- one(per, "cwnd", per$Ssthresh / 1000, "ssthresh")
    # The total window of a multipath flow (the papers' C): paths sampled at the same instant.
    multi <- per[is.finite(Cwnd), if (uniqueN(Path) > 1L) .SD, by = .(FlowID, Node)]
    if (nrow(multi)) {
      s <- multi[, .(Value = sum(Cwnd) / 1000, RelTime = RelTime[1L], Path = NA_integer_,
                     Flow = Flow[1L], NodeLabel = NodeLabel[1L], n = .N),
                 by = .(FlowID, Node, AbsTime)]
      total <- multi[, .(n_paths = uniqueN(Path)), by = .(FlowID, Node)]
      s <- s[total, on = .(FlowID, Node)][n == n_paths]     # only instants with every path
      s[, `:=`(Series = "Sum of paths", Line = "cwnd", Quantity = "cwnd", n = NULL, n_paths = NULL)]
      out$sum <- s
    }
  }
  has_unacked <- nrow(per) && any(is.finite(per$Unacked))
  if ("unacked" %in% quantities && has_unacked)
    out$unacked <- one(per, "unacked", per$Unacked)
  if ("sent_acked" %in% quantities && nrow(per) && !has_unacked)
    out$sent_acked <- one(per, "sent_acked", (per$BytesSent - per$BytesAcked) / 1000)
  if ("rtt" %in% quantities && nrow(per)) out$rtt <- one(per, "rtt", per$RTT)
  if ("rwnd" %in% quantities && nrow(conn)) out$rwnd <- one(conn, "rwnd", conn$Rwnd / 1000)
  if ("sendbuf" %in% quantities && nrow(conn)) out$sendbuf <- one(conn, "sendbuf", conn$Unacked)
  if ("recvqueue" %in% quantities && nrow(conn)) {
    rq <- if (receive_queue_everywhere) conn else conn[Node == "Passive"]
    out$recvqueue <- one(rq, "recvqueue", rq$Pending)
  }
  d <- rbindlist(out, use.names = TRUE, fill = TRUE)
  if (!nrow(d)) return(d)
  d[Series == "Whole connection", Series := "Association / connection"]
  present <- NPM_TRACE_QUANTITIES[NPM_TRACE_QUANTITIES %in% unique(d$Quantity)]
  d[, Panel := factor(npm_trace_panels[Quantity], levels = npm_trace_panels[present])]
  d[, Line := factor(Line, levels = c("cwnd", "ssthresh", "value"))]
  setorderv(d, c("FlowID", "Node", "Quantity", "Series", "Line", "RelTime"))
  d[]
}

# The trace figures of a run: one page per flow and node, the quantities as panels one above
# the other on a common time axis, each path a colour (and the sum of a multipath flow's
# windows), ssthresh dotted beside cwnd. Step lines: a sample's value holds until the next
# sample (geom_step, "hv"), nothing drawn between samples that were not taken.
# Returns a list of list(plot, title, outline).
npm_trace_plots <- function(pv, quantities = NPM_TRACE_QUANTITIES, grey = FALSE, base_size = 12,
                            legend_position = "bottom", title = NULL) {
  d <- npm_trace_data(pv, quantities)
  if (!nrow(d))
    npm_stop("the per-path vectors hold none of the quantities %s in the time range",
             paste(quantities, collapse = ", "))
  theme_npm <- npm_theme(base_size, legend_position)
  out <- list()
  for (key in unique(d[, paste(FlowID, Node)])) {
    g <- d[paste(FlowID, Node) == key]
    series <- unique(g$Series)
    series <- c(setdiff(series, c("Sum of paths", "Association / connection")),
                intersect(c("Sum of paths", "Association / connection"), series))
    pal <- setNames(npm_palette(length(series), grey), series)
    g[, Series := factor(Series, levels = series)]
    lines <- levels(droplevels(g$Line))
    shown <- sprintf("%s, %s", g$Flow[1L], g$NodeLabel[1L])
    p <- ggplot(g, aes(x = RelTime, y = Value, colour = Series, linetype = Line,
                       group = interaction(Series, Line))) +
      geom_step(direction = "hv", linewidth = 0.5) +
      facet_wrap(vars(Panel), ncol = 1, scales = "free_y", strip.position = "top") +
      scale_colour_manual(values = pal, name = NULL, drop = TRUE) +
      scale_linetype_manual(values = c(cwnd = "solid", ssthresh = "22", value = "solid"),
                            breaks = intersect(c("cwnd", "ssthresh"), lines),
                            labels = c(cwnd = "cwnd", ssthresh = "ssthresh")[intersect(c("cwnd", "ssthresh"), lines)],
                            name = NULL, drop = TRUE) +
      expand_limits(y = 0) +
      labs(x = "Time t [s]", y = NULL, title = if (is.null(title)) shown else paste0(title, "\n", shown),
           caption = "Step lines: each sample of the per-path vector holds until the next one.") +
      theme_npm + theme(plot.caption = element_text(hjust = 0, size = rel(0.75)),
                        strip.text = element_text(hjust = 0, margin = margin(1, 3, 1, 3))) +
      guides(colour = guide_legend(ncol = 1, order = 1), linetype = guide_legend(order = 2))
    out[[length(out) + 1L]] <- list(plot = p, title = shown, outline = c("Traces", shown))
  }
  out
}
