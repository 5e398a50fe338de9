# One run: a config file and the vector and scalar files it names.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

# Read everything a config file points at. time_range = c(from, to) in seconds
# (NA = open end) restricts the samples. Returns a list with config, flows,
# measurement (both nodes), flowvectors (both receiving nodes), cpu (or NULL).
npm_read_run <- function(config, time_range = c(NA_real_, NA_real_)) {
  cfg <- npm_read_config(config)
  dir <- dirname(config)
  flows <- npm_config_flows(cfg)
  nodes <- c(Active = npm_cfg(cfg, "NAME_ACTIVE_NODE", "Client"),
             Passive = npm_cfg(cfg, "NAME_PASSIVE_NODE", "Server"))
  node_label <- c(Active = sprintf("Active node (%s)", nodes[["Active"]]),
                  Passive = sprintf("Passive node (%s)", nodes[["Passive"]]))
  in_range <- function(t) {
    ok <- rep(TRUE, length(t))
    if (!is.na(time_range[1])) ok <- ok & t >= time_range[1]
    if (!is.na(time_range[2])) ok <- ok & t <= time_range[2]
    ok
  }

  mv <- list()
  for (role in c("Active", "Passive")) {
    key <- paste0("VECTOR_", toupper(role), "_NODE")
    name <- npm_cfg(cfg, key)
    if (name == "")
      npm_stop("%s: %s is empty; run netperfmeter with -vector=NAME.vec[.bz2] to record vectors",
               config, key)
    file <- npm_resolve_file(name, dir)
    if (is.na(file))
      npm_stop("%s: the %s measurement vector %s does not exist", config, tolower(role), name)
    d <- npm_read_measurement_vector(file)
    d[, Node := role]
    mv[[role]] <- d
  }
  mv <- rbindlist(mv, use.names = TRUE)
  if (nrow(mv) == 0L) npm_stop("%s: the measurement vectors have no samples", config)
  if (!all(in_range(mv$RelTime)) && !any(in_range(mv$RelTime) & mv$Interval > 0))
    npm_stop("no samples between %s and %s s (the run has samples from %g to %g s)",
             ifelse(is.na(time_range[1]), "the start", format(time_range[1])),
             ifelse(is.na(time_range[2]), "the end", format(time_range[2])),
             min(mv$RelTime), max(mv$RelTime))
  scalars <- npm_read_run_scalars(cfg, dir, config)
  npm_interval_lengths(mv, scalars)
  mv <- mv[in_range(RelTime)]

  fv <- npm_read_flow_files(flows, "Vector", dir,
                            function(file) npm_read_flow_vector(file, c("RelTime", "Delay", "Jitter")),
                            function(name) npm_warn("per-flow vector %s does not exist; skipped", name))
  if (!is.null(fv)) fv <- fv[in_range(RelTime)]

  # Per-path vectors (netperfmeter's own; a reference run has none; a passive may record none).
  pv <- npm_read_flow_files(flows, "Paths", dir, npm_read_path_vector, function(name) NULL)
  if (!is.null(pv)) pv <- pv[in_range(RelTime)]

  # Labels: config description for known flows, the vector's description otherwise.
  known <- flows$FlowID
  extra <- unique(mv[FlowID >= 0 & !(FlowID %in% known), .(FlowID, Description)])
  extra <- extra[!duplicated(FlowID)]
  labels <- rbind(flows[, .(FlowID, Label)],
                  extra[, .(FlowID, Label = npm_flow_label(FlowID, Description))])
  flow_levels <- labels$Label
  mv[, Flow := factor(labels$Label[match(FlowID, labels$FlowID)], levels = flow_levels)]
  mv[FlowID < 0, Flow := NA]
  mv[, NodeLabel := factor(node_label[Node], levels = node_label)]
  if (!is.null(fv)) {
    fv[, Flow := factor(labels$Label[match(FlowID, labels$FlowID)], levels = flow_levels)]
    recv_label <- c(Active = sprintf("Received at active node (%s)", nodes[["Active"]]),
                    Passive = sprintf("Received at passive node (%s)", nodes[["Passive"]]))
    fv[, NodeLabel := factor(recv_label[Node], levels = recv_label)]
  }

  cpu <- NULL
  if (!is.null(scalars)) {
    s <- scalars[grepl("\\.(CPU\\[[0-9]+\\]|totalCPU)$", Object)]
    if (nrow(s)) {
      s[, CPU := ifelse(grepl("totalCPU$", Object), "All", sub(".*CPU\\[([0-9]+)\\]$", "\\1", Object))]
      cpu <- s
    }
  }
  if (!is.null(cpu)) {
    cpu[, NodeLabel := factor(node_label[Node], levels = node_label)]
    cpu_levels <- unique(c(sort(as.integer(setdiff(cpu$CPU, "All"))), "All"))
    cpu[, CPU := factor(CPU, levels = as.character(cpu_levels))]
  }

  if (!is.null(pv) && nrow(pv)) {
    pv[, Flow := factor(labels$Label[match(FlowID, labels$FlowID)], levels = flow_levels)]
    pv[, NodeLabel := factor(node_label[Node], levels = node_label)]
    # One label per path and node: its ID and addresses as the node sees them.
    pv[, PathLabel := ifelse(Path == npm_connection_path, "Whole connection",
                             ifelse(Local == "-", sprintf("Path %d: to %s", Path, Remote),
                                    sprintf("Path %d: %s to %s", Path, Local, Remote)))]
  }

  list(config = cfg, config_file = config, flows = flows, nodes = nodes,
       measurement = mv, flowvectors = fv, paths = pv, cpu = cpu, scalars = scalars)
}

# The scalar files of both nodes (SCALAR_ACTIVE_NODE, SCALAR_PASSIVE_NODE) with their Node;
# NULL when the run has none. A file the config names but that is not there is warned about.
npm_read_run_scalars <- function(cfg, dir, config) {
  out <- list()
  for (role in c("Active", "Passive")) {
    key <- paste0("SCALAR_", toupper(role), "_NODE")
    name <- npm_cfg(cfg, key)
    if (name == "") next
    file <- npm_resolve_file(name, dir)
    if (is.na(file)) {
      npm_warn(paste0("%s: the %s scalar file %s does not exist; plotted without it (no CPU utilisation, ",
                      "the last interval as recorded)"),
               config, tolower(role), name)
      next
    }
    s <- npm_read_scalars(file)
    s[, Node := role]
    out[[role]] <- s
  }
  if (length(out)) rbindlist(out) else NULL
}

# The true length of every interval of the measurement vectors, as column Length (seconds),
# and where it ends, as column Ends. A row's interval is (AbsTime - Interval, AbsTime]: the
# vector's blocks come every second and a last one when the measurement stops, which is after
# the runtime, when the flows have stopped sending and the stop handshake is done (tens of ms
# later, up to seconds). That last interval of a flow ends, for what the node sent, at the
# node's last transmission of the flow, and for what it received or lost at its last
# reception (the scalars Last Transmission and Last Reception, microseconds as AbsTime), so
# that its bytes are divided by the time in which they were sent, not by the stop after it.
# Ends: "block" (a vector block), "last message" (the scalar), "stop" (the last block, with
# no scalar to tell the flow's end). Changes mv by reference.
npm_interval_lengths <- function(mv, scalars) {
  mv[, `:=`(Length = Interval, Ends = "block")]
  mv[, .last := Interval > 0 & FlowID >= 0 & AbsTime == max(AbsTime), by = Node]
  mv[(.last), Ends := "stop"]
  if (!is.null(scalars) && nrow(scalars)) {
    re <- "^netPerfMeter\\.(active|passive)\\.flow\\[([0-9]+)\\]$"
    ends <- scalars[grepl(re, Object) & Name %in% c("Last Transmission", "Last Reception")]
  }
  if (!is.null(scalars) && nrow(ends)) {
    ends[, `:=`(FlowID = as.numeric(sub(re, "\\2", Object)),
                Action = ifelse(Name == "Last Transmission", "Sent", "Received"))]
    ends <- rbind(ends, ends[Action == "Received"][, Action := "Lost"])
    last <- mv[(.last)]
    last[, .row := which(mv$.last)]
    last <- merge(last, ends[, .(Node, FlowID, Action, LastMessage = Value)],
                  by = c("Node", "FlowID", "Action"))
    # Only where the last message lies inside the interval; before it, the flow was silent.
    begin <- last$AbsTime - last$Interval * 1e6
    use <- is.finite(last$LastMessage) & last$LastMessage > begin & last$LastMessage <= last$AbsTime
    rows <- last$.row[use]
    set(mv, i = rows, j = "Length", value = (last$LastMessage[use] - begin[use]) / 1e6)
    set(mv, i = rows, j = "Ends", value = "last message")
  }
  mv[, .last := NULL]
  invisible(mv)
}

# The files a run's config names in its flows' columns `<column>Active` and `<column>Passive`,
# each read by `read` (NULL or no rows: left out) and marked with its FlowID and Node; `missing`
# is called with a name that resolves to no file. One data.table, or NULL if none was read.
npm_read_flow_files <- function(flows, column, dir, read, missing) {
  out <- list()
  for (i in seq_len(nrow(flows))) {
    for (role in c("Active", "Passive")) {
      name <- flows[[paste0(column, role)]][i]
      if (name == "") next
      file <- npm_resolve_file(name, dir)
      if (is.na(file)) {
        missing(name)
        next
      }
      d <- read(file)
      if (is.null(d) || nrow(d) == 0L) next
      d[, `:=`(FlowID = flows$FlowID[i], Node = role)]
      out[[length(out) + 1L]] <- d
    }
  }
  if (length(out)) rbindlist(out, use.names = TRUE) else NULL
}
