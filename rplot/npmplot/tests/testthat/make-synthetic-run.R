# Writes the result files of a synthetic NetPerfMeter run (formats of the
# reference's section 4) so that the plotting can be tested without a network:
#
#   Rscript make-synthetic-run.R OUTDIR [NAME] [--plain] [--nasty] [--reference-config]
#
# OUTDIR/NAME.config, NAME-{active,passive}.vec[.bz2],
# NAME-{active,passive}-<flow %08x>-0000.vec[.bz2], NAME-{active,passive}.sca[.bz2].
# Two flows: ID 0 "Bulk" (TCP, both directions) and ID 7 "Voice" (UDP, 50 + 25 msg/s),
# 5 s. --plain writes uncompressed files; --nasty puts quotes, $(…), backticks and ;
# into the descriptions; --reference-config writes them unescaped like the reference.
args <- commandArgs(TRUE)
flags <- args[startsWith(args, "--")]
args <- args[!startsWith(args, "--")]
outdir <- args[1]
name <- if (length(args) >= 2) args[2] else "run"
plain <- "--plain" %in% flags
nasty <- "--nasty" %in% flags
refcfg <- "--reference-config" %in% flags
dir.create(outdir, showWarnings = FALSE, recursive = TRUE)
set.seed(42)

ext <- if (plain) ".vec" else ".vec.bz2"
sext <- if (plain) ".sca" else ".sca.bz2"
open_out <- function(file) if (endsWith(file, ".bz2")) bzfile(file, "w") else file(file, "w")
t0 <- 1795272048342367  # µs, CLOCK_REALTIME
runtime <- 5

flows <- data.frame(
  id = c(0L, 7L),
  desc = if (nasty) c("Bulk \"quoted\" $(touch PWNED1); `touch PWNED2` \\ x",
                      "Voice; rm -rf / ${HOME} 'single'")
         else c("Bulk", "Voice"),
  proto = c("TCP", "UDP"),
  # outbound (active -> passive) and inbound message rates [1/s] and sizes [B]
  out_rate = c(2000, 50), out_size = c(1400, 500),
  in_rate = c(800, 25), in_size = c(1400, 1000),
  stringsAsFactors = FALSE)

fv_name <- function(role, id) sprintf("%s-%s-%08x-%04x%s", name, role, id, 0L, ext)

# ---- config -------------------------------------------------------------------
esc <- function(s) if (refcfg) s else gsub("([\\\\\"$`])", "\\\\\\1", s)
cfg <- c(sprintf("NUM_FLOWS=%d", nrow(flows)),
         sprintf("NAME_ACTIVE_NODE=\"%s\"", "Client"),
         sprintf("NAME_PASSIVE_NODE=\"%s\"", "Server"),
         sprintf("SCALAR_ACTIVE_NODE=\"%s-active%s\"", name, sext),
         sprintf("SCALAR_PASSIVE_NODE=\"%s-passive%s\"", name, sext),
         sprintf("VECTOR_ACTIVE_NODE=\"%s-active%s\"", name, ext),
         sprintf("VECTOR_PASSIVE_NODE=\"%s-passive%s\"", name, ext), "")
for (i in seq_len(nrow(flows))) {
  f <- flows[i, ]
  p <- sprintf("FLOW%d_", f$id)
  cfg <- c(cfg,
    sprintf("%sDESCRIPTION=\"%s\"", p, esc(f$desc)),
    sprintf("%sPROTOCOL=\"%s\"", p, f$proto),
    sprintf("%sOUTBOUND_FRAME_RATE_VALUE%d=%f", p, 1:4, c(f$out_rate, 0, 0, 0)),
    sprintf("%sOUTBOUND_FRAME_RATE_RNG_ID=0", p),
    sprintf("%sOUTBOUND_FRAME_RATE_RNG_NAME=\"constant\"", p),
    sprintf("%sOUTBOUND_FRAME_SIZE_VALUE%d=%f", p, 1:4, c(f$out_size, 0, 0, 0)),
    sprintf("%sOUTBOUND_FRAME_SIZE_RNG=0", p),
    sprintf("%sINBOUND_FRAME_RATE_VALUE%d=%f", p, 1:4, c(f$in_rate, 0, 0, 0)),
    sprintf("%sINBOUND_FRAME_RATE_RNG_ID=0", p),
    sprintf("%sINBOUND_FRAME_RATE_RNG_NAME=\"constant\"", p),
    sprintf("%sINBOUND_FRAME_SIZE_VALUE%d=%f", p, 1:4, c(f$in_size, 0, 0, 0)),
    sprintf("%sINBOUND_FRAME_SIZE_RNG=0", p),
    sprintf("%sRELIABLE=%f", p, 1), sprintf("%sORDERED=%f", p, 1),
    sprintf("%sNODELAY=\"off\"", p), sprintf("%sDEBUG=\"off\"", p),
    sprintf("%sCC=\"%s\"", p, if (f$proto == "TCP") "cubic" else ""),
    sprintf("%sVECTOR_ACTIVE_NODE=\"%s\"", p, fv_name("active", f$id)),
    sprintf("%sVECTOR_PASSIVE_NODE=\"%s\"", p, fv_name("passive", f$id)))
}
writeLines(c(cfg, ""), file.path(outdir, paste0(name, ".config")))

# ---- per-flow vectors: one row per received message ----------------------------
flow_vector <- function(rate, size, base_delay) {
  n <- floor(rate * runtime)
  t <- sort(runif(n, 0, runtime))
  delay <- base_delay + rexp(n, 1 / (base_delay / 4)) + 0.02 * sin(t * 2)
  d <- c(0, diff(delay))
  jit <- numeric(n)
  j <- 0
  for (k in seq_len(n)) {
    j <- j + (abs(d[k]) - j) / 16
    jit[k] <- j
  }
  data.frame(AbsTime = sprintf("%.0f", t0 + t * 1e6), RelTime = sprintf("%1.6f", t),
             SeqNumber = seq_len(n) - 1L, AbsBytes = cumsum(rep(size, n)),
             AbsPackets = seq_len(n), AbsFrames = seq_len(n), RelBytes = size,
             RelPackets = 1L, RelFrames = 1L, Delay = sprintf("%1.3f", delay),
             PrevPacketDelayDiff = sprintf("%1.3f", d), Jitter = sprintf("%1.3f", jit))
}
write_vec <- function(df, file) {
  con <- open_out(file.path(outdir, file))
  writeLines(paste(names(df), collapse = "\t"), con)
  if (nrow(df))
    writeLines(paste(sprintf("%06d", seq_len(nrow(df))), do.call(paste, c(df, sep = "\t")),
                     sep = "\t"), con)
  close(con)
}
for (i in seq_len(nrow(flows))) {
  f <- flows[i, ]
  # the active's file holds what the active received (inbound), the passive's the outbound
  write_vec(flow_vector(f$in_rate, f$in_size, 0.08), fv_name("active", f$id))
  write_vec(flow_vector(f$out_rate, f$out_size, 0.12), fv_name("passive", f$id))
}

# ---- measurement vectors: a block of rows per second ----------------------------
measurement <- function(role) {
  rows <- list()
  abs <- matrix(0, nrow(flows) + 1, 9)  # Sent/Received/Lost x bytes/packets/frames
  for (s in 0:runtime) {
    interval <- if (s == 0) 0 else 0.999945 + runif(1, 0, 1e-4)
    tot <- numeric(9)
    for (i in seq_len(nrow(flows))) {
      f <- flows[i, ]
      sent_rate <- if (role == "active") f$out_rate else f$in_rate
      sent_size <- if (role == "active") f$out_size else f$in_size
      recv_rate <- if (role == "active") f$in_rate else f$out_rate
      recv_size <- if (role == "active") f$in_size else f$out_size
      ramp <- if (s == 0) 0 else min(1, s / 2) * (1 + 0.05 * sin(s + i))
      sp <- round(sent_rate * interval * ramp)
      rp <- round(recv_rate * interval * ramp * 0.98)
      lp <- if (f$proto == "UDP" && s > 0) round(recv_rate * interval * 0.02) else 0
      rel <- c(sp * sent_size, sp, sp, rp * recv_size, rp, rp, lp * recv_size, lp, lp)
      abs[i, ] <- abs[i, ] + rel
      tot <- tot + rel
      for (a in 1:3) {
        k <- (a - 1) * 3 + 1:3
        rows[[length(rows) + 1]] <- c(sprintf("%.0f", t0 + s * 1e6), sprintf("%1.6f", s),
          sprintf("%1.6f", interval), f$id, sprintf("\"%s\"", f$desc),
          sprintf("%1.3f", if (a == 2) 0.1 + 0.01 * s else 0),
          sprintf("\"%s\"", c("Sent", "Received", "Lost")[a]), abs[i, k], rel[k])
      }
    }
    abs[nrow(flows) + 1, ] <- abs[nrow(flows) + 1, ] + tot
    for (a in 1:3) {
      k <- (a - 1) * 3 + 1:3
      rows[[length(rows) + 1]] <- c(sprintf("%.0f", t0 + s * 1e6), sprintf("%1.6f", s),
        sprintf("%1.6f", interval), -1, "\"Total\"", 0,
        sprintf("\"%s\"", c("Sent", "Received", "Lost")[a]), abs[nrow(flows) + 1, k], tot[k])
    }
  }
  m <- do.call(rbind, rows)
  con <- open_out(file.path(outdir, sprintf("%s-%s%s", name, role, ext)))
  writeLines(paste(c("AbsTime", "RelTime", "Interval", "FlowID", "Description", "Jitter", "Action",
                     "AbsBytes", "AbsPackets", "AbsFrames", "RelBytes", "RelPackets", "RelFrames"),
                   collapse = "\t"), con)
  writeLines(paste(sprintf("%06d", seq_len(nrow(m))), apply(m, 1, paste, collapse = "\t"),
                   sep = "\t"), con)
  close(con)
}
measurement("active")
measurement("passive")

# ---- scalars with CPU utilisation ----------------------------------------------------
scalars <- function(role) {
  obj <- sprintf("netPerfMeter.%s", role)
  lines <- character(0)
  for (i in seq_len(nrow(flows)))
    lines <- c(lines, sprintf("scalar \"%s.flow[%d]\" \"Transmitted Bytes\" %d", obj, flows$id[i],
                              round(flows$out_rate[i] * flows$out_size[i] * runtime)))
  states <- c("User", "Nice", "System", "Idle", "IOWait", "Hardware Interrupts",
              "Software Interrupts", "Hypervisor")
  for (cpu in c("CPU[1]", "CPU[2]", "totalCPU")) {
    v <- c(12, 0, 20, 0, 1, 0, 6, 0) * runif(8, 0.7, 1.3)
    v[4] <- 100 - sum(v)
    lines <- c(lines, sprintf("scalar \"%s.%s\" \"%s\" %1.3f", obj, cpu, states, v))
  }
  con <- open_out(file.path(outdir, sprintf("%s-%s%s", name, role, sext)))
  writeLines(lines, con)
  close(con)
}
scalars("active")
scalars("passive")
