//! mercury-commir
