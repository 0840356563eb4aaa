//! mercury-search
