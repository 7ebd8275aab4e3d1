"""Silver: bronze rows decoded by Spark into typed, event-sourced tables (commits, generations, members,
KIP-848 epochs and assignments, coordinator events), incrementally by the bronze versions consumed."""
