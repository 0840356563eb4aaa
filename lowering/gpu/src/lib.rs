//! mercury-lowering
