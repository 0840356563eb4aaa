//! mercury-passes
