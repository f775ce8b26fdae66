//! `processors.<id>`: [`ProcessorSpec`], whose configs the processor crate owns.

use crate::config::{ConfigError, component_type, typed};
use profilink_processor::SamplingConfig;
pub use profilink_processor::{BatchConfig, ProcessorSpec};
use serde_yaml_ng::Value;

fn err(msg: String) -> ConfigError {
    ConfigError(msg)
}

/// Reads `processors.<id>`.
pub fn read_processor(id: &str, value: &Value) -> Result<ProcessorSpec, ConfigError> {
    let at = format!("processors.{id}");
    match component_type(id) {
        "batch" => Ok(ProcessorSpec::Batch(typed(value, &at)?)),
        "profile_sampling" => {
            let c: SamplingConfig = typed(value, &at)?;
            let r = c.session_sample_rate;
            if !(0.0..=1.0).contains(&r) {
                return Err(err(format!(
                    "{at}.session_sample_rate: must be between 0 and 1, got {r}"
                )));
            }
            Ok(ProcessorSpec::Sampling(c))
        }
        "profile_linking" => Ok(ProcessorSpec::Linking(typed(value, &at)?)),
        other => Err(err(format!(
            "{at}: processor type {other:?} is not available in this version of profilink"
        ))),
    }
}
