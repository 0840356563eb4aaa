//! mercury-tests
