//! mercury-ir
