//! Predicted-latency tables (filled in below).
