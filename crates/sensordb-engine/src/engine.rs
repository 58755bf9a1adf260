//! engine (in progress)
pub struct Engine;
pub struct EngineOptions;
