//! CPU reference executor (filled in by the plan executor work).
