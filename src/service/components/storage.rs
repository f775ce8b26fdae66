//! The `file_storage` extension (the Collector's, from contrib) and the exporters'
//! `sending_queue.storage` references to it.
//!
//! In the Collector `sending_queue.storage` is the id of a storage extension; in profilink it
//! was, and still is, the queue's directory. Both work: a value that is the id of a
//! `file_storage` extension (`file_storage` or `file_storage/<name>`) puts the exporter's queue
//! in `<directory>/exporter_<type>_<name>_profiles`, named as the Collector names the file of
//! a component's data (unsafe characters replaced by `~` and their code point in hex); any
//! other value is a path. A `file_storage...` value naming no configured extension is an error
//! (write `./file_storage/x` for a directory of that name).
//!
//! `profile_linking.storage` takes the same two forms ([`resolve_processor_storage`]); a
//! pipeline's join log lives in `<that directory>/processor_<type>_<name>_<pipeline>`
//! ([`join_log_dir`]).

use crate::config::{ConfigError, component_type};
use serde::Deserialize;
use serde_yaml_ng::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `extensions.file_storage[/name]`, in the Collector's keys and defaults.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileStorageConfig {
    /// The directory the queues of the exporters referring to it live under (default
    /// `/var/lib/otelcol/file_storage`, as the Collector). Must exist unless
    /// `create_directory`.
    pub directory: PathBuf,
    /// The Collector's wait for a file lock (default 1 s): accepted, no effect (each queue
    /// directory belongs to one exporter of one process).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// fsync every write: when given, the `sending_queue.fsync` of the queues under it (whose
    /// own default is true, unlike the Collector's false).
    pub fsync: Option<bool>,
    /// Create the directory at start (default false, as the Collector).
    pub create_directory: bool,
    /// Permissions of a created directory, an octal string (default `0750`), minus the umask.
    pub directory_permissions: String,
    /// The Collector's compaction of its database: accepted, no effect (the queue deletes
    /// whole delivered segment files, so there is nothing to compact).
    pub compaction: CompactionConfig,
}

impl Default for FileStorageConfig {
    fn default() -> Self {
        FileStorageConfig {
            directory: PathBuf::from("/var/lib/otelcol/file_storage"),
            timeout: Duration::from_secs(1),
            fsync: None,
            create_directory: false,
            directory_permissions: "0750".into(),
            compaction: CompactionConfig::default(),
        }
    }
}

/// `file_storage.compaction`: the Collector's keys, accepted with no effect.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactionConfig {
    /// Compact on start.
    pub on_start: bool,
    /// Compact online after the storage shrank.
    pub on_rebound: bool,
    /// Where compaction writes its temporary files.
    pub directory: Option<PathBuf>,
    /// Largest compaction transaction.
    pub max_transaction_size: Option<i64>,
    /// Size marking that compaction is needed.
    pub rebound_needed_threshold_mib: Option<i64>,
    /// Size below which a needed compaction starts.
    pub rebound_trigger_threshold_mib: Option<i64>,
    /// How often the rebound conditions are checked.
    #[serde(with = "humantime_serde")]
    pub check_interval: Option<Duration>,
    /// Remove temporary files of an interrupted compaction on start.
    pub cleanup_on_start: bool,
}

impl FileStorageConfig {
    /// The permissions of a created directory.
    pub fn permissions(&self) -> u32 {
        u32::from_str_radix(&self.directory_permissions, 8).unwrap_or(0o750)
    }

    /// Checks the settings at `at` (`extensions.file_storage`): a usable directory (existing
    /// unless `create_directory`, as the Collector checks) and octal permissions.
    pub fn check(&self, at: &str) -> Result<(), ConfigError> {
        if self.directory.as_os_str().is_empty() {
            return Err(ConfigError::at(format!("{at}.directory"), "is empty"));
        }
        match std::fs::metadata(&self.directory) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(ConfigError::at(
                    format!("{at}.directory"),
                    format!("{} is not a directory", self.directory.display()),
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && self.create_directory => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ConfigError::at(
                    format!("{at}.directory"),
                    format!(
                        "directory {} must exist (set create_directory: true to create it at \
                         start)",
                        self.directory.display()
                    ),
                ));
            }
            Err(e) => {
                return Err(ConfigError::at(
                    format!("{at}.directory"),
                    format!("cannot access {}", self.directory.display()),
                )
                .with_source(e));
            }
        }
        match u32::from_str_radix(&self.directory_permissions, 8) {
            Ok(p) if p <= 0o777 => Ok(()),
            _ => Err(ConfigError::at(
                format!("{at}.directory_permissions"),
                format!(
                    "{:?} is not an octal permission such as 0750",
                    self.directory_permissions
                ),
            )),
        }
    }
}

/// The file (here: directory) name the Collector's `file_storage` gives the data of component
/// `id` of `kind` for `signal`: `<kind>_<type>_<name>_<signal>`, unsafe characters replaced.
pub fn component_file_name(kind: &str, id: &str, signal: &str) -> String {
    let (ty, name) = id.split_once('/').unwrap_or((id, ""));
    sanitize(&format!("{kind}_{ty}_{name}_{signal}"))
}

/// Replaces characters other than `A-Z a-z 0-9 . - _` by `~` and their code point in hex
/// (`/` -> `~002F`), as the Collector's `file_storage` does (`~` itself too).
fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
            out.push(c);
        } else {
            out.push_str(&format!("~{:04X}", c as u32));
        }
    }
    out
}

/// `exporters.<id>` with a `sending_queue.storage` that names a `file_storage` extension
/// replaced by the queue's directory under it (and the extension's `fsync`, when given,
/// applied to the queue); other values unchanged. `storages` are the configured
/// `file_storage` extensions, `started` the ids in `service.extensions`.
pub fn resolve_queue_storage(
    id: &str,
    value: &Value,
    storages: &BTreeMap<String, FileStorageConfig>,
    started: &[String],
) -> Result<Value, ConfigError> {
    let at = format!("exporters.{id}.sending_queue");
    let Some(queue) = value.get("sending_queue").and_then(Value::as_mapping) else {
        return Ok(value.clone());
    };
    let Some(storage) = queue.get("storage").and_then(Value::as_str) else {
        return Ok(value.clone());
    };
    let Some(ext) = storage_extension(&format!("{at}.storage"), storage, storages, started)? else {
        return Ok(value.clone());
    };
    let dir: PathBuf = ext
        .directory
        .join(component_file_name("exporter", id, "profiles"));
    let mut queue = queue.clone();
    queue.insert(
        Value::from("storage"),
        Value::from(dir.to_string_lossy().into_owned()),
    );
    if let Some(fsync) = ext.fsync {
        match queue.get("fsync").map(Value::as_bool) {
            Some(Some(own)) if own != fsync => {
                return Err(ConfigError::at(
                    format!("{at}.fsync"),
                    format!(
                        "{own} disagrees with extensions.{storage}.fsync: {fsync}; give one of them"
                    ),
                ));
            }
            Some(_) => {}
            None => {
                queue.insert(Value::from("fsync"), Value::from(fsync));
            }
        }
    }
    let mut value = value.clone();
    if let Some(map) = value.as_mapping_mut() {
        map.insert(Value::from("sending_queue"), Value::Mapping(queue));
    }
    Ok(value)
}

/// The `file_storage` extension a `storage` value at `at` names, when it is an extension id
/// (it must be configured and in `service.extensions`); `None` for a path.
fn storage_extension<'a>(
    at: &str,
    storage: &str,
    storages: &'a BTreeMap<String, FileStorageConfig>,
    started: &[String],
) -> Result<Option<&'a FileStorageConfig>, ConfigError> {
    if component_type(storage) != "file_storage" {
        return Ok(None);
    }
    let Some(ext) = storages.get(storage) else {
        return Err(ConfigError::at(
            at,
            format!(
                "extension {storage:?} is not defined under extensions (for a directory of \
                 that name write ./{storage})"
            ),
        ));
    };
    if !started.iter().any(|s| s == storage) {
        return Err(ConfigError::at(
            at,
            format!("extension {storage:?} is not in service.extensions; add it there"),
        ));
    }
    Ok(Some(ext))
}

/// `processors.<id>` with a `storage` that names a `file_storage` extension replaced by the
/// extension's directory (other values unchanged): where `profile_linking` keeps the join
/// logs of its pipelines.
pub fn resolve_processor_storage(
    id: &str,
    value: &Value,
    storages: &BTreeMap<String, FileStorageConfig>,
    started: &[String],
) -> Result<Value, ConfigError> {
    let Some(storage) = value.get("storage").and_then(Value::as_str) else {
        return Ok(value.clone());
    };
    let at = format!("processors.{id}.storage");
    let Some(ext) = storage_extension(&at, storage, storages, started)? else {
        return Ok(value.clone());
    };
    let mut value = value.clone();
    if let Some(map) = value.as_mapping_mut() {
        map.insert(
            Value::from("storage"),
            Value::from(ext.directory.to_string_lossy().into_owned()),
        );
    }
    Ok(value)
}

/// The join log directory of pipeline `pipeline` under `base` (the `profile_linking`
/// processor's `storage`, or the durable queue directory of the pipeline's first OTLP exporter
/// that has one): `<base>/processor_<type>_<name>_<pipeline>`, named as the Collector names a
/// component's data, with `processor` the pipeline's `profile_linking` id (`profile_linking`
/// when it has none). Pipeline names are unique, so no two pipelines share one.
pub fn join_log_dir(base: &Path, processor: &str, pipeline: &str) -> PathBuf {
    base.join(component_file_name("processor", processor, pipeline))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn storages(dir: &str, fsync: Option<bool>) -> BTreeMap<String, FileStorageConfig> {
        let c = FileStorageConfig {
            directory: dir.into(),
            fsync,
            ..Default::default()
        };
        BTreeMap::from([("file_storage/q".to_string(), c)])
    }

    fn exporter(yaml: &str) -> Value {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn names_follow_the_collectors_file_names() {
        assert_eq!(
            component_file_name("exporter", "sentry", "profiles"),
            "exporter_sentry__profiles"
        );
        assert_eq!(
            component_file_name("exporter", "sentry/eu", "profiles"),
            "exporter_sentry_eu_profiles"
        );
        assert_eq!(
            component_file_name("exporter", "file/a/b c~", "profiles"),
            "exporter_file_a~002Fb~0020c~007E_profiles"
        );
    }

    #[test]
    fn an_extension_id_becomes_a_directory_under_it_and_paths_stay_paths() {
        let started = vec!["file_storage/q".to_string()];
        let s = storages("/var/q", Some(false));
        let v = resolve_queue_storage(
            "sentry/eu",
            &exporter("{dsn: x, sending_queue: {storage: file_storage/q}}"),
            &s,
            &started,
        )
        .unwrap();
        assert_eq!(
            v["sending_queue"]["storage"].as_str(),
            Some("/var/q/exporter_sentry_eu_profiles")
        );
        assert_eq!(v["sending_queue"]["fsync"].as_bool(), Some(false));
        let path = exporter("{sending_queue: {storage: ./data/queue}}");
        assert_eq!(
            resolve_queue_storage("file", &path, &s, &started).unwrap(),
            path
        );
        let none = exporter("{dsn: x}");
        assert_eq!(
            resolve_queue_storage("file", &none, &s, &started).unwrap(),
            none
        );
    }

    #[test]
    fn bad_references_name_the_key() {
        let s = storages("/var/q", Some(true));
        let started = vec!["file_storage/q".to_string()];
        let e = resolve_queue_storage(
            "sentry",
            &exporter("{sending_queue: {storage: file_storage/x}}"),
            &s,
            &started,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with(
                "exporters.sentry.sending_queue.storage: extension \"file_storage/x\" is not defined under extensions"
            ),
            "{e}"
        );
        let e = resolve_queue_storage(
            "sentry",
            &exporter("{sending_queue: {storage: file_storage/q}}"),
            &s,
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("is not in service.extensions"), "{e}");
        let e = resolve_queue_storage(
            "sentry",
            &exporter("{sending_queue: {storage: file_storage/q, fsync: false}}"),
            &s,
            &started,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "exporters.sentry.sending_queue.fsync: false disagrees with extensions.file_storage/q.fsync: true; give one of them"
        );
    }

    #[test]
    fn profile_linking_storage_names_a_directory_or_an_extension() {
        let started = vec!["file_storage/q".to_string()];
        let s = storages("/var/q", None);
        let v = resolve_processor_storage(
            "profile_linking",
            &exporter("{join_window: 5s, storage: file_storage/q}"),
            &s,
            &started,
        )
        .unwrap();
        assert_eq!(v["storage"].as_str(), Some("/var/q"));
        let path = exporter("{storage: ./data/join}");
        assert_eq!(
            resolve_processor_storage("profile_linking", &path, &s, &started).unwrap(),
            path
        );
        let e = resolve_processor_storage(
            "profile_linking/x",
            &exporter("{storage: file_storage/none}"),
            &s,
            &started,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("processors.profile_linking/x.storage: extension \"file_storage/none\""),
            "{e}"
        );
        assert_eq!(
            join_log_dir(
                Path::new("/var/q"),
                "profile_linking",
                "profiles/from_sentry"
            ),
            Path::new("/var/q/processor_profile_linking__profiles~002Ffrom_sentry")
        );
    }

    #[test]
    fn the_directory_must_exist_unless_created() {
        let dir = tempfile::tempdir().unwrap();
        let ok = FileStorageConfig {
            directory: dir.path().into(),
            ..Default::default()
        };
        ok.check("extensions.file_storage").unwrap();
        let missing = FileStorageConfig {
            directory: dir.path().join("nope"),
            ..Default::default()
        };
        let e = missing
            .check("extensions.file_storage")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("extensions.file_storage.directory: directory ")
                && e.contains("create_directory: true"),
            "{e}"
        );
        let created = FileStorageConfig {
            create_directory: true,
            ..missing.clone()
        };
        created.check("extensions.file_storage").unwrap();
        let bad = FileStorageConfig {
            directory_permissions: "rwx".into(),
            ..created
        };
        let e = bad
            .check("extensions.file_storage")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("extensions.file_storage.directory_permissions:"),
            "{e}"
        );
    }
}
