//! Loadable-extension entry points: see sqlite_uring::register_with_api_routines.
