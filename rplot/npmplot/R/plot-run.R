# The overview figures of one run.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

npm_bin_width <- function(t, target = 150) {
  span <- diff(range(t, na.rm = TRUE))
  if (!is.finite(span) || span <= 0) return(1)
  raw <- span / target
  e <- 10^floor(log10(raw))
  nice <- c(1, 2, 5, 10) * e
  nice[which(nice >= raw)[1]]
}

npm_time_label <- function(w) {
  if (w >= 1) sprintf("%g s", w) else sprintf("%g ms", w * 1000)
}

# The rates of every interval of the measurement vectors (flows only, not Total), as the
# figures draw them: the bytes, packets and frames of an interval divided by its true length
# (npm_interval_lengths(): a flow's last interval ends at its last message), drawn over
# (Start, End]. No interval is merged into another or stretched. A last interval shorter than
# a tenth of the median one (a runtime just past a whole second) holds a message or two,
# whose "rate" says nothing: it is left out, and attr(, "left_out") says which (Node, Flow,
# Action, Start, End).
npm_interval_rates <- function(mv) {
  d <- as.data.table(mv)[FlowID >= 0 & Interval > 0 & Action %in% c("Sent", "Received", "Lost")]
  if (!("Length" %in% names(d))) d[, `:=`(Length = Interval, Ends = "block")]
  d[, `:=`(Start = RelTime - Interval)]
  d[, End := Start + Length]
  typical <- if (nrow(d)) median(d$Interval) else 1
  short <- d$Ends != "block" & d$Length < typical / 10
  left_out <- d[short & Action != "Lost", .(Node, NodeLabel = if ("NodeLabel" %in% names(d)) NodeLabel,
                                            Flow = if ("Flow" %in% names(d)) Flow, Action, Start, End)]
  d <- d[!short]
  d[, `:=`(BitRate = RelBytes * 8 / Length, PacketRate = RelPackets / Length,
           FrameRate = RelFrames / Length)]
  setorderv(d, intersect(c("Node", "FlowID", "Action", "Start"), names(d)))
  setattr(d, "left_out", left_out)
  d[]
}

# What a caption says of the rate figures: where the last intervals end, and what was left out.
npm_interval_caption <- function(d) {
  out <- character(0)
  ends <- unique(d$Ends[d$Ends != "block"])
  if ("last message" %in% ends)
    out <- c(out, paste0("A flow's last interval ends at its last message (Last Transmission / Last ",
                         "Reception of the scalar files), not at the end of the measurement after the stop."))
  if ("stop" %in% ends)
    out <- c(out, paste0("Without the scalar files' Last Transmission / Last Reception, a flow's last ",
                         "interval runs to the end of the measurement, including the stop after the runtime."))
  lo <- attr(d, "left_out")
  if (!is.null(lo) && nrow(lo)) {
    what <- unique(sprintf("%s at the %s node", as.character(lo$Flow), tolower(lo$Node)))
    out <- c(out, sprintf(paste0("Not drawn: the last %s of %s (shorter than a tenth of an interval: ",
                                 "a rate over it says nothing)."),
                          paste(unique(sprintf("%.0f ms", (lo$End - lo$Start) * 1000)), collapse = ", "),
                          paste(what, collapse = "; ")))
  }
  if (length(out)) paste(strwrap(paste(out, collapse = " "), width = 110), collapse = "\n") else NULL
}

# Step curves of interval values: a row holds the value of the interval (Start, End];
# returns two points per row (at Start and at End, as RelTime), in drawing order.
npm_steps <- function(d, yv, by) {
  d <- as.data.table(d)[order(Start)][, .row := seq_len(.N)]
  a <- copy(d)[, RelTime := Start][, .ord := 1L]
  b <- copy(d)[, RelTime := End][, .ord := 2L]
  r <- rbind(a, b)
  setorderv(r, c(by, ".row", ".ord"))
  r[]
}

# The figures of one run, as a list of list(plot, title, outline = c(section, title)).
npm_run_plots <- function(run, per_flow = TRUE, grey = FALSE, base_size = 12,
                          legend_position = "bottom") {
  mv <- run$measurement
  fv <- run$flowvectors
  flows <- levels(mv$Flow)
  pal <- setNames(npm_palette(length(flows), grey), flows)
  flow_cols <- max(1L, ceiling(length(flows) / 5))   # legend: at most 5 flows per column
  theme_npm <- npm_theme(base_size, legend_position)
  npm_caption_theme <- theme(plot.caption = element_text(hjust = 0, size = rel(0.75)),
                             plot.caption.position = "plot")
  xl <- "Time t [s]"
  colour_flow <- scale_colour_manual(values = pal, name = "Flow", drop = TRUE)
  out <- list()
  add <- function(p, title, section) {
    shown <- if (section == "Overview") title else paste0(section, ": ", title)
    out[[length(out) + 1L]] <<- list(plot = p + labs(title = shown), title = title,
                                     outline = c(section, title))
  }
  act <- npm_interval_rates(mv)
  caption <- npm_interval_caption(act)
  lost <- act[Action %in% c("Received", "Lost")]
  act <- act[Action %in% c("Sent", "Received")]
  act[, Action := factor(Action, levels = c("Sent", "Received"))]
  linetype_action <- scale_linetype_manual(values = c(Sent = "solid", Received = "22"),
                                           name = "Action", drop = FALSE)
  lines_by_flow <- function(d, yv, ylab) {
    ggplot(npm_steps(d, yv, c("NodeLabel", "Flow", "Action")),
           aes(x = RelTime, y = .data[[yv]], colour = Flow, linetype = Action,
               group = interaction(Flow, Action))) +
      geom_path(linewidth = 0.6) +
      facet_wrap(vars(NodeLabel), ncol = 1) + colour_flow + linetype_action +
      labs(x = xl, y = ylab, caption = caption) + theme_npm + npm_caption_theme +
      guides(colour = guide_legend(ncol = flow_cols, order = 1), linetype = guide_legend(order = 2))
  }
  section <- "Overview"
  if (nrow(act)) {
    u <- npm_auto_unit(act$BitRate, "bit/s")
    act[, BitRateS := BitRate * u$factor]
    add(lines_by_flow(act, "BitRateS", sprintf("Bit rate [%s]", u$unit)) +
          expand_limits(y = 0), "Bit rate", section)
    cum <- mv[FlowID >= 0 & Action %in% c("Sent", "Received")]
    cum[, Action := factor(Action, levels = c("Sent", "Received"))]
    u <- npm_auto_unit(cum$AbsBytes, "B")
    cum[, AbsBytesS := AbsBytes * u$factor]
    add(ggplot(cum[order(RelTime)], aes(x = RelTime, y = AbsBytesS, colour = Flow, linetype = Action,
                        group = interaction(Flow, Action))) +
          geom_line(linewidth = 0.7) + facet_wrap(vars(NodeLabel), ncol = 1) +
          colour_flow + linetype_action + expand_limits(y = 0) +
          labs(x = xl, y = sprintf("Cumulative data [%s]", u$unit)) + theme_npm +
          guides(colour = guide_legend(ncol = flow_cols, order = 1), linetype = guide_legend(order = 2)),
        "Cumulative data", section)
    add(lines_by_flow(act, "FrameRate", "Frame rate [frames/s]") + expand_limits(y = 0),
        "Frame rate", section)
    # Loss as seen by the receiver of each interval: lost / (received + lost) packets.
    rl <- lost[, .(Received = sum(RelPackets[Action == "Received"]),
                   Lost = sum(RelPackets[Action == "Lost"])),
               by = .(NodeLabel, Flow, FlowID, Start, End)]
    rl[, Loss := ifelse(Received + Lost > 0, 100 * Lost / (Received + Lost), NA_real_)]
    add(ggplot(npm_steps(rl, "Loss", c("NodeLabel", "Flow")),
               aes(x = RelTime, y = Loss, colour = Flow, group = Flow)) +
          geom_path(linewidth = 0.6) + facet_wrap(vars(NodeLabel), ncol = 1) +
          colour_flow + expand_limits(y = c(0, 1)) +
          labs(x = xl, y = "Packet loss [%]") + theme_npm +
          guides(colour = guide_legend(ncol = flow_cols)),
        "Packet loss", section)
  }
  if (!is.null(fv) && nrow(fv)) {
    w <- npm_bin_width(fv$RelTime)
    fb <- fv[, .(Delay = mean(Delay), Jitter = mean(Jitter)),
             by = .(NodeLabel, Flow, RelTime = (floor(RelTime / w) + 0.5) * w)]
    for (m in list(c("Delay", "One-way delay"), c("Jitter", "Jitter")))
      add(ggplot(fb, aes(x = RelTime, y = .data[[m[1]]], colour = Flow)) +
            geom_line(linewidth = 0.6) + facet_wrap(vars(NodeLabel), ncol = 1) + colour_flow +
            expand_limits(y = 0) +
            labs(x = xl, y = sprintf("%s [ms] (mean per %s)", m[2], npm_time_label(w))) +
            theme_npm + guides(colour = guide_legend(ncol = flow_cols)),
          m[2], section)
  }
  if (!is.null(run$cpu) && nrow(run$cpu)) {
    cpu <- run$cpu[Name != "Idle"]
    cpu[, Name := factor(Name, levels = unique(Name))]
    add(ggplot(cpu, aes(x = CPU, y = Value, fill = Name)) +
          geom_col(width = 0.7, colour = "grey20", linewidth = 0.2) +
          facet_wrap(vars(NodeLabel), ncol = 1) +
          scale_fill_manual(values = npm_palette(nlevels(cpu$Name), grey), name = "State") +
          scale_y_continuous(limits = c(0, 100), expand = expansion(mult = c(0, 0.02))) +
          labs(x = "CPU", y = "Utilisation [%]") + theme_npm,
        "CPU utilisation", section)
  }
  if (per_flow) {
    for (f in flows) {
      d <- act[Flow == f]
      if (nrow(d) == 0L) next
      series <- c("Sent by active node", "Received by passive node",
                  "Sent by passive node", "Received by active node")
      d[, Series := factor(paste(Action, "by", tolower(Node), "node"), levels = series)]
      u <- npm_auto_unit(d$BitRate, "bit/s")
      d[, BitRateS := BitRate * u$factor]
      pc <- npm_palette(2L, grey)
      add(ggplot(npm_steps(d, "BitRateS", "Series"),
                 aes(x = RelTime, y = BitRateS, colour = Series, linetype = Series,
                     group = Series)) +
            geom_path(linewidth = 0.6) +
            scale_colour_manual(values = setNames(pc[c(1, 1, 2, 2)], series), name = NULL,
                                drop = TRUE) +
            scale_linetype_manual(values = setNames(c("solid", "22", "solid", "22"), series),
                                  name = NULL, drop = TRUE) +
            expand_limits(y = 0) + labs(x = xl, y = sprintf("Bit rate [%s]", u$unit), caption = caption) +
            theme_npm + npm_caption_theme,
          "Bit rate", f)
      if (!is.null(fv) && nrow(fv[Flow == f])) {
        g <- fv[Flow == f]
        w <- npm_bin_width(g$RelTime)
        gb <- g[, .(Delay = mean(Delay), Jitter = mean(Jitter)),
                by = .(NodeLabel, RelTime = (floor(RelTime / w) + 0.5) * w)]
        long <- rbind(gb[, .(NodeLabel, RelTime, Metric = "One-way delay [ms]", Value = Delay)],
                      gb[, .(NodeLabel, RelTime, Metric = "Jitter [ms]", Value = Jitter)])
        long[, Metric := factor(Metric, levels = c("One-way delay [ms]", "Jitter [ms]"))]
        add(ggplot(long, aes(x = RelTime, y = Value, colour = NodeLabel)) +
              geom_line(linewidth = 0.6) +
              facet_grid(rows = vars(Metric), scales = "free_y") +
              scale_colour_manual(values = npm_palette(nlevels(long$NodeLabel), grey),
                                  name = NULL, drop = TRUE) +
              expand_limits(y = 0) +
              labs(x = xl, y = sprintf("Mean per %s", npm_time_label(w))) + theme_npm,
            "One-way delay and jitter", f)
      }
      pv <- run$paths
      if (!is.null(pv) && nrow(pv[Flow == f])) {
        p <- pv[Flow == f][order(NodeLabel, Path, RelTime)]
        # Throughput per path from the bytes it sent (TCP, MPTCP subflows and the MPTCP
        # connection's data level), between samples.
        p[, Throughput := c(NA_real_, diff(BytesSent) * 8 / diff(RelTime)) / 1e6,
          by = .(NodeLabel, Path)]
        long <- rbind(p[, .(NodeLabel, PathLabel, RelTime, Metric = "cwnd [kB]",
                            Value = Cwnd / 1000)],
                      p[, .(NodeLabel, PathLabel, RelTime, Metric = "SRTT [ms]", Value = RTT)],
                      p[, .(NodeLabel, PathLabel, RelTime, Metric = "Sent [Mbit/s]", Value = Throughput)])
        long <- long[is.finite(Value)]
        metrics <- c("cwnd [kB]", "SRTT [ms]", "Sent [Mbit/s]")
        long[, Metric := factor(Metric, levels = metrics[metrics %in% unique(Metric)])]
        labels <- unique(p$PathLabel)
        if (nrow(long))
          add(ggplot(long, aes(x = RelTime, y = Value, colour = PathLabel, group = PathLabel)) +
                geom_line(linewidth = 0.6) +
                facet_grid(rows = vars(Metric), cols = vars(NodeLabel), scales = "free_y") +
                scale_colour_manual(values = setNames(npm_palette(length(labels), grey), labels),
                                    name = NULL) +
                expand_limits(y = 0) + labs(x = xl, y = NULL) + theme_npm +
                guides(colour = guide_legend(ncol = 1)),
              "Per-path state", f)
      }
    }
  }
  if (length(out) == 0L) npm_stop("the run has no samples to plot (check the time range)")
  out
}
