# Column names that data.table and ggplot2 expressions use as variables (non-standard
# evaluation); declared so that R CMD check's code analysis knows them.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

utils::globalVariables(c(
  ".block", ".col", ".grp", ".line", ".lt", ".ord", ".row", ".x", ".y",
  "AbsBytes", "AbsBytesS", "Action", "BitRate", "BitRateS", "BytesSent", "CPU", "Cwnd",
  "Delay", "Description", "Flow", "FlowID", "FrameRate", "Interval", "Jitter", "Label",
  "Local", "Lost", "Loss", "Lower", "Mean", "Metric", "Name", "Node", "NodeLabel", "Object",
  "Path", "PathLabel", "Received", "RelBytes", "RelFrames", "RelPackets", "RelTime", "Remote",
  "RTT", "Series", "Throughput", "Upper", "Value", "V1", "AbsTime", "BytesAcked", "File",
  "Line", "Panel", "Pending", "Quantity", "Rwnd", "Ssthresh", "Unacked", "i.Label", "n", "n_paths",
  "..keep"))
