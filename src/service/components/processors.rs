//! `processors.<id>`: [`ProcessorSpec`], whose configs the processor crate owns.

use crate::config::{ConfigError, component_type, typed};
use profilink_processor::SamplingConfig;
pub use profilink_processor::{BatchConfig, ProcessorSpec};
use profilink_symbolizer::SymbolizerConfig;
use serde_yaml_ng::Value;

/// Reads `processors.<id>`.
pub fn read_processor(id: &str, value: &Value) -> Result<ProcessorSpec, ConfigError> {
    let at = format!("processors.{id}");
    match component_type(id) {
        "batch" => Ok(ProcessorSpec::Batch(typed(value, &at)?)),
        "profile_sampling" => {
            let c: SamplingConfig = typed(value, &at)?;
            let r = c.session_sample_rate;
            if !(0.0..=1.0).contains(&r) {
                return Err(ConfigError::at(
                    format!("{at}.session_sample_rate"),
                    format!("must be between 0 and 1, got {r}"),
                ));
            }
            Ok(ProcessorSpec::Sampling(c))
        }
        "profile_linking" => Ok(ProcessorSpec::Linking(typed(value, &at)?)),
        "symbolize" => {
            let c: SymbolizerConfig = typed(value, &at)?;
            c.check()
                .map_err(|(key, msg)| ConfigError::at(format!("{at}.{key}"), msg))?;
            Ok(ProcessorSpec::Symbolize(c))
        }
        other => Err(ConfigError::at(
            at,
            format!("processor type {other:?} is not available in this version of profilink"),
        )),
    }
}
