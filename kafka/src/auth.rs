//! `auth` and `tls` of the kafka receiver and exporter: SASL and TLS to the brokers, with the
//! keys and meaning of the OpenTelemetry Collector's `configkafka` (`AuthenticationConfig`,
//! `SASLConfig`, and `configtls.ClientConfig` for `tls`), turned into librdkafka properties
//! ([`ClientConfig::security_properties`](crate::config::ClientConfig::security_properties)).
//!
//! ```yaml
//! tls:                      # (or the deprecated auth.tls, used only without tls)
//!   ca_file: /etc/kafka/ca.pem
//!   cert_file: client.pem   # mutual TLS, with key_file
//!   key_file: client.key
//! auth:
//!   sasl:
//!     mechanism: SCRAM-SHA-512   # PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
//!     username: profilink
//!     password: ${env:KAFKA_PASSWORD}
//! ```
//!
//! * **TLS** is used when `tls` (or `auth.tls`) is present, unless it says `insecure: true`
//!   without a CA (the Collector's rule). The server's certificate is verified against
//!   `ca_file` / `ca_pem` (else the system's CAs: OpenSSL's default paths, `SSL_CERT_FILE` /
//!   `SSL_CERT_DIR` when set) and its host name against the broker's address, as Go's TLS does;
//!   `insecure_skip_verify: true` turns both off.
//! * **SASL**: `PLAIN`, `SCRAM-SHA-256` and `SCRAM-SHA-512`, over TLS when TLS is on
//!   (`SASL_SSL`), else in clear (`SASL_PLAINTEXT`). `auth.plain_text` (deprecated in the
//!   Collector) is `sasl` with `PLAIN`.
//! * Refused with a message naming the key: `AWS_MSK_IAM_OAUTHBEARER` and `OIDCFILE`
//!   mechanisms, `auth.kerberos` (librdkafka is built without GSSAPI), and the `tls` keys
//!   librdkafka has no setting for (`server_name_override`, `min_version: "1.3"`,
//!   `include_system_ca_certs_pool` beside a CA).
//!
//! The password is a [`Secret`]: `Debug` shows `<redacted>`, and a password of the wrong type
//! is refused without repeating it.

use profilink_tls::{ClientTlsConfig, TlsVersion};
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, Visitor};
use std::fmt;

/// A secret setting (a SASL password): `Debug` shows `<redacted>`; a value that is not a
/// string is refused without being repeated in the error.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A secret holding `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the client that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when empty (not set).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() {
            "<empty>"
        } else {
            "<redacted>"
        })
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SecretVisitor;
        // serde's default messages quote the value they refused (`invalid type: integer
        // `1234`…`): every non-string is refused here with one that does not. It still starts
        // with `invalid type`, which the service's config reader takes as its cue to read a
        // `${env:…}` value as text.
        fn refuse<E: de::Error>(kind: &'static str) -> E {
            E::invalid_type(de::Unexpected::Other(kind), &"a string (not shown here)")
        }
        impl<'de> Visitor<'de> for SecretVisitor {
            type Value = Secret;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Secret, E> {
                Ok(Secret(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Secret, E> {
                Ok(Secret(v))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Secret, E> {
                Err(refuse("boolean"))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Secret, E> {
                Err(refuse("number"))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Secret, E> {
                Err(refuse("number"))
            }
            fn visit_i128<E: de::Error>(self, _: i128) -> Result<Secret, E> {
                Err(refuse("number"))
            }
            fn visit_u128<E: de::Error>(self, _: u128) -> Result<Secret, E> {
                Err(refuse("number"))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Secret, E> {
                Err(refuse("number"))
            }
            fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Secret, E> {
                Err(refuse("bytes"))
            }
            fn visit_none<E: de::Error>(self) -> Result<Secret, E> {
                Ok(Secret::default())
            }
            fn visit_unit<E: de::Error>(self) -> Result<Secret, E> {
                Ok(Secret::default())
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<Secret, A::Error> {
                Err(refuse("sequence"))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> Result<Secret, A::Error> {
                Err(refuse("map"))
            }
        }
        d.deserialize_any(SecretVisitor)
    }
}

/// A block accepted only to be refused or ignored by name (`auth.kerberos`,
/// `auth.sasl.aws_msk`, `auth.sasl.oidc_file`); its content is not kept (it may hold a
/// password).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Present;

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| Present)
    }
}

/// `auth.sasl` (the Collector's `SASLConfig`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SaslConfig {
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512` (required).
    pub mechanism: String,
    /// The user (required).
    pub username: String,
    /// The password (required).
    pub password: Secret,
    /// The Collector's SASL handshake version, 0 (default) or 1: accepted and ignored
    /// (librdkafka uses the handshake the broker supports).
    pub version: i64,
    /// The Collector's `AWS_MSK_IAM_OAUTHBEARER` settings: ignored with the other mechanisms
    /// (that one is refused).
    pub aws_msk: Option<Present>,
    /// The Collector's `OIDCFILE` settings: ignored with the other mechanisms (that one is
    /// refused).
    pub oidc_file: Option<Present>,
}

/// `auth.plain_text` (deprecated in the Collector: `sasl` with `mechanism: PLAIN`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlainTextConfig {
    /// The user (required).
    pub username: String,
    /// The password (required).
    pub password: Secret,
}

/// `auth` (the Collector's `AuthenticationConfig`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// SASL authentication.
    pub sasl: Option<SaslConfig>,
    /// Deprecated spelling of `sasl` with `mechanism: PLAIN`.
    pub plain_text: Option<PlainTextConfig>,
    /// Deprecated place of `tls` (the Collector's v0.124.0 moved it to the top level); used
    /// only when `tls` is not set.
    pub tls: Option<ClientTlsConfig>,
    /// Kerberos (GSSAPI): refused, librdkafka is built without it.
    pub kerberos: Option<Present>,
}

/// The SASL mechanisms profilink's librdkafka speaks.
pub const SASL_MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// The SASL settings in force, checked.
struct Sasl<'a> {
    mechanism: &'a str,
    username: &'a str,
    password: &'a Secret,
}

/// `auth` and `tls` together (the parts of the client settings they make).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Security<'a> {
    pub auth: &'a AuthConfig,
    pub tls: Option<&'a ClientTlsConfig>,
}

impl<'a> Security<'a> {
    /// The TLS settings in force and the key they are under: `tls`, else `auth.tls`.
    pub fn tls_settings(&self) -> Option<(&'static str, &'a ClientTlsConfig)> {
        match (self.tls, &self.auth.tls) {
            (Some(t), _) => Some(("tls", t)),
            (None, Some(t)) => Some(("auth.tls", t)),
            (None, None) => None,
        }
    }

    /// Whether connections use TLS: a `tls` section unless `insecure: true` without a CA
    /// (the Collector's `LoadTLSConfig` then returns no TLS config).
    pub fn uses_tls(&self) -> bool {
        self.tls_settings()
            .is_some_and(|(_, t)| !t.insecure || t.has_ca())
    }

    fn sasl(&self) -> Result<Option<Sasl<'a>>, String> {
        if self.auth.kerberos.is_some() {
            return Err(
                "auth.kerberos: not supported: profilink's Kafka client (librdkafka) is \
                        built without GSSAPI/Kerberos; use auth.sasl with PLAIN, SCRAM-SHA-256 \
                        or SCRAM-SHA-512"
                    .into(),
            );
        }
        match (&self.auth.sasl, &self.auth.plain_text) {
            (Some(_), Some(_)) => Err("auth.plain_text: set together with auth.sasl; keep \
                                       auth.sasl (plain_text is its deprecated spelling for \
                                       PLAIN)"
                .into()),
            (Some(s), None) => {
                let m = s.mechanism.as_str();
                match m {
                    "" => {
                        return Err(format!(
                            "auth.sasl.mechanism: is required: one of {}",
                            SASL_MECHANISMS.join(", ")
                        ));
                    }
                    "AWS_MSK_IAM_OAUTHBEARER" | "OIDCFILE" => {
                        return Err(format!(
                            "auth.sasl.mechanism: {m} is not supported by profilink's Kafka \
                             client (librdkafka); use one of {}",
                            SASL_MECHANISMS.join(", ")
                        ));
                    }
                    m if !SASL_MECHANISMS.contains(&m) => {
                        return Err(format!(
                            "auth.sasl.mechanism: {m:?} is not one of {}",
                            SASL_MECHANISMS.join(", ")
                        ));
                    }
                    _ => {}
                }
                if s.username.is_empty() {
                    return Err(format!(
                        "auth.sasl.username: is required with mechanism {m}"
                    ));
                }
                if s.password.is_empty() {
                    return Err(format!(
                        "auth.sasl.password: is required with mechanism {m}"
                    ));
                }
                if !matches!(s.version, 0 | 1) {
                    return Err("auth.sasl.version: must be 0 or 1".into());
                }
                Ok(Some(Sasl {
                    mechanism: m,
                    username: &s.username,
                    password: &s.password,
                }))
            }
            (None, Some(p)) => {
                if p.username.is_empty() {
                    return Err("auth.plain_text.username: is required".into());
                }
                if p.password.is_empty() {
                    return Err("auth.plain_text.password: is required".into());
                }
                Ok(Some(Sasl {
                    mechanism: "PLAIN",
                    username: &p.username,
                    password: &p.password,
                }))
            }
            (None, None) => Ok(None),
        }
    }

    /// The librdkafka properties, or why the settings cannot be used (`key: problem`). Reads
    /// no file: [`Security::check`] does.
    pub fn properties(&self) -> Result<Vec<(&'static str, String)>, String> {
        let sasl = self.sasl()?;
        let tls = if self.uses_tls() {
            self.tls_settings()
        } else {
            None
        };
        let protocol = match (tls.is_some(), sasl.is_some()) {
            (false, false) => "PLAINTEXT",
            (true, false) => "SSL",
            (false, true) => "SASL_PLAINTEXT",
            (true, true) => "SASL_SSL",
        };
        let mut p = vec![("security.protocol", protocol.to_string())];
        if let Some(s) = sasl {
            p.push(("sasl.mechanism", s.mechanism.to_string()));
            p.push(("sasl.username", s.username.to_string()));
            p.push(("sasl.password", s.password.expose().to_string()));
        }
        if let Some((key, t)) = tls {
            if let Some(name) = &t.server_name_override {
                return Err(format!(
                    "{key}.server_name_override: not supported by profilink's Kafka client \
                     (librdkafka verifies each broker's certificate against the host name the \
                     cluster advertises for it); {name:?} must be that name, so remove the key"
                ));
            }
            if t.min_version == TlsVersion::V1_3 {
                return Err(format!(
                    "{key}.min_version: \"1.3\" is not supported by profilink's Kafka client \
                     (librdkafka has no minimum version setting: it speaks TLS 1.2 and 1.3, as \
                     OpenSSL allows)"
                ));
            }
            if t.include_system_ca_certs_pool && t.has_ca() {
                return Err(format!(
                    "{key}.include_system_ca_certs_pool: not supported beside ca_file/ca_pem by \
                     profilink's Kafka client (librdkafka trusts either the configured CAs or \
                     the system's); put every CA in ca_file"
                ));
            }
            if let Some(f) = &t.ca_file {
                p.push(("ssl.ca.location", f.display().to_string()));
            }
            if let Some(pem) = &t.ca_pem {
                p.push(("ssl.ca.pem", pem.clone()));
            }
            if let Some(f) = &t.cert_file {
                p.push(("ssl.certificate.location", f.display().to_string()));
            }
            if let Some(f) = &t.key_file {
                p.push(("ssl.key.location", f.display().to_string()));
            }
            let verify = !t.insecure_skip_verify;
            p.push(("enable.ssl.certificate.verification", verify.to_string()));
            p.push((
                "ssl.endpoint.identification.algorithm",
                if verify { "https" } else { "none" }.to_string(),
            ));
        }
        Ok(p)
    }

    /// Checks the settings and reads every file they name (CA, certificate, key), so a
    /// missing or unusable one fails when the config is loaded, named by its key
    /// (`tls.ca_file: cannot read …`), not at the first connection.
    pub fn check(&self) -> Result<(), String> {
        self.properties()?;
        if self.uses_tls()
            && let Some((key, t)) = self.tls_settings()
        {
            // The TlsError's text starts with `tls.`.
            t.check().map_err(|e| {
                let text = e.to_string();
                match key {
                    "tls" => text,
                    other => format!("{other}{}", text.strip_prefix("tls").unwrap_or(&text)),
                }
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{KafkaExporterConfig, KafkaReceiverConfig};
    use profilink_tls::test_pki::TestCa;
    use serde_json::{Value, json};
    use std::path::Path;

    const PASSWORD: &str = "pa55-w0rd-xyz";

    fn receiver(v: Value) -> Result<KafkaReceiverConfig, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    fn exporter(v: Value) -> Result<KafkaExporterConfig, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    /// The properties of `auth`/`tls` in `v` (a receiver's), or the first error (the serde one,
    /// else the check's).
    fn props(v: Value) -> Result<Vec<(String, String)>, String> {
        let c = receiver(v)?;
        c.check()?;
        Ok(c.client()
            .security_properties()?
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect())
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// A CA, a client certificate and its key in `dir`: (ca, cert, key).
    fn pki(dir: &Path) -> (String, String, String) {
        let ca = TestCa::new("kafka test CA");
        let ca_path = ca.write(dir, "ca.pem");
        let (cert, key) = ca.client("profilink").write(dir, "client");
        let s = |p: &Path| p.display().to_string();
        (s(&ca_path), s(&cert), s(&key))
    }

    #[test]
    fn every_key_parses_on_the_receiver_and_the_exporter() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, key) = pki(dir.path());
        let block = json!({
            "brokers": ["kafka-1:9093"],
            "tls": {
                "ca_file": ca, "cert_file": cert, "key_file": key, "insecure": false,
                "insecure_skip_verify": false, "min_version": "1.2",
                "include_system_ca_certs_pool": false
            },
            "auth": {
                "sasl": {
                    "mechanism": "SCRAM-SHA-512", "username": "profilink",
                    "password": PASSWORD, "version": 1
                }
            }
        });
        let r = receiver(block.clone()).unwrap();
        let e = exporter(block).unwrap();
        r.check().unwrap();
        e.check().unwrap();
        assert_eq!(r.client(), e.client());
        let sasl = r.auth.sasl.as_ref().unwrap();
        assert_eq!(sasl.mechanism, "SCRAM-SHA-512");
        assert_eq!(sasl.username, "profilink");
        assert_eq!(sasl.password.expose(), PASSWORD);
        assert_eq!(sasl.version, 1);
        assert!(r.client().uses_tls());
        // The deprecated keys parse too.
        let old = receiver(json!({
            "auth": {
                "plain_text": {"username": "u", "password": PASSWORD},
                "tls": {"ca_file": ca}
            }
        }))
        .unwrap();
        old.check().unwrap();
        assert!(old.client().deprecated_auth_tls());
        // aws_msk and oidc_file are accepted (and ignored) beside a supported mechanism, as
        // the Collector ignores them.
        receiver(json!({"auth": {"sasl": {
            "mechanism": "PLAIN", "username": "u", "password": PASSWORD,
            "aws_msk": {"region": "eu-west-1"}, "oidc_file": {"token_url": "x"}
        }}}))
        .unwrap()
        .check()
        .unwrap();
    }

    #[test]
    fn the_librdkafka_properties_of_each_combination() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, key) = pki(dir.path());
        let verify = [
            ("enable.ssl.certificate.verification", "true"),
            ("ssl.endpoint.identification.algorithm", "https"),
        ];
        let cases: Vec<(Value, Vec<(&str, &str)>)> = vec![
            (json!({}), vec![("security.protocol", "PLAINTEXT")]),
            // An empty tls section: TLS, verified against the system's CAs.
            (
                json!({"tls": {}}),
                [vec![("security.protocol", "SSL")], verify.to_vec()].concat(),
            ),
            (
                json!({"tls": {"ca_file": ca}}),
                [
                    vec![("security.protocol", "SSL"), ("ssl.ca.location", &ca)],
                    verify.to_vec(),
                ]
                .concat(),
            ),
            (
                json!({"tls": {"ca_file": ca, "cert_file": cert, "key_file": key}}),
                [
                    vec![
                        ("security.protocol", "SSL"),
                        ("ssl.ca.location", &ca),
                        ("ssl.certificate.location", &cert),
                        ("ssl.key.location", &key),
                    ],
                    verify.to_vec(),
                ]
                .concat(),
            ),
            (
                json!({"tls": {"insecure_skip_verify": true}}),
                vec![
                    ("security.protocol", "SSL"),
                    ("enable.ssl.certificate.verification", "false"),
                    ("ssl.endpoint.identification.algorithm", "none"),
                ],
            ),
            // insecure without a CA: no TLS (the Collector's rule), its other keys unused.
            (
                json!({"tls": {"insecure": true, "cert_file": "/nowhere.pem"}}),
                vec![("security.protocol", "PLAINTEXT")],
            ),
            // insecure with a CA: TLS.
            (
                json!({"tls": {"insecure": true, "ca_file": ca}}),
                [
                    vec![("security.protocol", "SSL"), ("ssl.ca.location", &ca)],
                    verify.to_vec(),
                ]
                .concat(),
            ),
            (
                json!({"auth": {"sasl": {"mechanism": "PLAIN", "username": "u", "password": PASSWORD}}}),
                vec![
                    ("security.protocol", "SASL_PLAINTEXT"),
                    ("sasl.mechanism", "PLAIN"),
                    ("sasl.username", "u"),
                    ("sasl.password", PASSWORD),
                ],
            ),
            (
                json!({
                    "tls": {"ca_file": ca},
                    "auth": {"sasl": {"mechanism": "SCRAM-SHA-256", "username": "u", "password": PASSWORD}}
                }),
                [
                    vec![
                        ("security.protocol", "SASL_SSL"),
                        ("sasl.mechanism", "SCRAM-SHA-256"),
                        ("sasl.username", "u"),
                        ("sasl.password", PASSWORD),
                        ("ssl.ca.location", &ca),
                    ],
                    verify.to_vec(),
                ]
                .concat(),
            ),
            (
                json!({"auth": {"sasl": {"mechanism": "SCRAM-SHA-512", "username": "u", "password": PASSWORD}}}),
                vec![
                    ("security.protocol", "SASL_PLAINTEXT"),
                    ("sasl.mechanism", "SCRAM-SHA-512"),
                    ("sasl.username", "u"),
                    ("sasl.password", PASSWORD),
                ],
            ),
            // The deprecated spellings.
            (
                json!({"auth": {"plain_text": {"username": "u", "password": PASSWORD}, "tls": {"ca_file": ca}}}),
                [
                    vec![
                        ("security.protocol", "SASL_SSL"),
                        ("sasl.mechanism", "PLAIN"),
                        ("sasl.username", "u"),
                        ("sasl.password", PASSWORD),
                        ("ssl.ca.location", &ca),
                    ],
                    verify.to_vec(),
                ]
                .concat(),
            ),
            // tls wins over auth.tls (whose missing file is then not read), as in the Collector.
            (
                json!({"tls": {"ca_file": ca}, "auth": {"tls": {"ca_file": "/nowhere.pem"}}}),
                [
                    vec![("security.protocol", "SSL"), ("ssl.ca.location", &ca)],
                    verify.to_vec(),
                ]
                .concat(),
            ),
            (
                json!({"tls": {"ca_pem": TestCa::new("inline").pem()}}),
                vec![("security.protocol", "SSL")],
            ),
        ];
        for (config, want) in cases {
            let got = props(config.clone()).unwrap_or_else(|e| panic!("{config}: {e}"));
            if config["tls"]["ca_pem"].is_string() {
                assert_eq!(got[1].0, "ssl.ca.pem", "{config}");
                assert!(got[1].1.contains("BEGIN CERTIFICATE"), "{config}");
                assert_eq!(got.len(), 4, "{config}: {got:?}");
                continue;
            }
            assert_eq!(got, pairs(&want), "{config}");
        }
    }

    #[test]
    fn the_properties_reach_the_consumer_and_the_producer() {
        let v = json!({
            "brokers": ["a:1", "b:2"],
            "client_id": "me",
            "tls": {"insecure_skip_verify": true},
            "auth": {"sasl": {"mechanism": "PLAIN", "username": "u", "password": PASSWORD}}
        });
        let consumer = crate::receiver::consumer_config(&receiver(v.clone()).unwrap()).unwrap();
        let producer = crate::exporter::producer_config(&exporter(v).unwrap())
            .map_err(|e| e.to_string())
            .unwrap();
        for c in [consumer, producer] {
            assert_eq!(c.get("bootstrap.servers"), Some("a:1,b:2"));
            assert_eq!(c.get("client.id"), Some("me"));
            assert_eq!(c.get("security.protocol"), Some("SASL_SSL"));
            assert_eq!(c.get("sasl.mechanism"), Some("PLAIN"));
            assert_eq!(c.get("sasl.password"), Some(PASSWORD));
            assert_eq!(c.get("enable.ssl.certificate.verification"), Some("false"));
            // librdkafka takes them: the client is made (it connects lazily).
            let _: rdkafka::producer::BaseProducer = c.create().unwrap();
        }
    }

    #[test]
    fn bad_configs_are_refused_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, key) = pki(dir.path());
        let sasl = |extra: Value| {
            let mut s = json!({"mechanism": "PLAIN", "username": "u", "password": PASSWORD});
            for (k, v) in extra.as_object().unwrap() {
                s[k] = v.clone();
            }
            json!({"auth": {"sasl": s}})
        };
        let missing = dir.path().join("missing.pem").display().to_string();
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let junk = junk.display().to_string();
        let cases: Vec<(Value, &str)> = vec![
            // Unknown keys, by name (serde: `unknown field`).
            (json!({"auth": {"sals": {}}}), "unknown field `sals`"),
            (
                sasl(json!({"mechansim": "PLAIN"})),
                "unknown field `mechansim`",
            ),
            (json!({"tls": {"ca_flie": ca}}), "unknown field `ca_flie`"),
            (
                json!({"auth": {"tls": {"reload_interval": "1h"}}}),
                "unknown field `reload_interval`",
            ),
            (json!({"tls": {"min_version": "1.4"}}), "1.4"),
            // A password that is not a string: refused without being shown.
            (
                sasl(json!({"password": 918273645})),
                "invalid type: number, expected a string",
            ),
            // SASL.
            (
                sasl(json!({"username": ""})),
                "auth.sasl.username: is required with mechanism PLAIN",
            ),
            (
                json!({"auth": {"sasl": {"mechanism": "SCRAM-SHA-256", "username": "u"}}}),
                "auth.sasl.password: is required with mechanism SCRAM-SHA-256",
            ),
            (
                json!({"auth": {"sasl": {"username": "u", "password": PASSWORD}}}),
                "auth.sasl.mechanism: is required: one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
            ),
            (
                sasl(json!({"mechanism": "scram-sha-256"})),
                "auth.sasl.mechanism: \"scram-sha-256\" is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
            ),
            (
                sasl(json!({"mechanism": "GSSAPI"})),
                "auth.sasl.mechanism: \"GSSAPI\" is not one of",
            ),
            (
                json!({"auth": {"sasl": {"mechanism": "AWS_MSK_IAM_OAUTHBEARER", "aws_msk": {"region": "us-east-1"}}}}),
                "auth.sasl.mechanism: AWS_MSK_IAM_OAUTHBEARER is not supported by profilink's Kafka client",
            ),
            (
                json!({"auth": {"sasl": {"mechanism": "OIDCFILE"}}}),
                "auth.sasl.mechanism: OIDCFILE is not supported",
            ),
            (
                sasl(json!({"version": 2})),
                "auth.sasl.version: must be 0 or 1",
            ),
            (
                json!({"auth": {"kerberos": {"username": "u", "password": PASSWORD, "realm": "R"}}}),
                "auth.kerberos: not supported",
            ),
            (
                json!({"auth": {"plain_text": {"username": "u"}}}),
                "auth.plain_text.password: is required",
            ),
            (
                json!({"auth": {"plain_text": {"username": "u", "password": PASSWORD},
                             "sasl": {"mechanism": "PLAIN", "username": "u", "password": PASSWORD}}}),
                "auth.plain_text: set together with auth.sasl",
            ),
            // TLS settings librdkafka cannot honour.
            (
                json!({"tls": {"server_name_override": "kafka.internal"}}),
                "tls.server_name_override: not supported",
            ),
            (
                json!({"tls": {"min_version": "1.3"}}),
                "tls.min_version: \"1.3\" is not supported",
            ),
            (
                json!({"tls": {"ca_file": ca, "include_system_ca_certs_pool": true}}),
                "tls.include_system_ca_certs_pool: not supported beside ca_file/ca_pem",
            ),
            (
                json!({"auth": {"tls": {"server_name_override": "k"}}}),
                "auth.tls.server_name_override: not supported",
            ),
            // Files: read when the config is checked, named by key.
            (
                json!({"tls": {"ca_file": missing}}),
                "tls.ca_file: cannot read",
            ),
            (
                json!({"auth": {"tls": {"ca_file": missing}}}),
                "auth.tls.ca_file: cannot read",
            ),
            (json!({"tls": {"ca_file": junk}}), "tls.ca_file: "),
            (
                json!({"tls": {"ca_file": ca, "cert_file": cert}}),
                "tls.key_file: required with cert_file",
            ),
            (
                json!({"tls": {"ca_file": ca, "key_file": key}}),
                "tls.cert_file: required with key_file",
            ),
            (
                json!({"tls": {"ca_file": ca, "cert_file": cert, "key_file": missing}}),
                "tls.key_file: cannot read",
            ),
            (
                json!({"tls": {"ca_file": ca, "cert_file": ca, "key_file": key}}),
                "tls.key_file: does not fit cert_file",
            ),
        ];
        for (config, want) in cases {
            let e = props(config.clone()).expect_err(&config.to_string());
            assert!(e.contains(want), "{config}:\n  got  {e}\n  want {want}");
            assert!(
                !e.contains(PASSWORD),
                "{config}: the password is shown: {e}"
            );
            // The exporter says the same.
            let e2 = exporter(config.clone())
                .and_then(|c| c.check())
                .unwrap_err();
            assert_eq!(e, e2, "{config}");
        }
    }

    #[test]
    fn the_password_is_never_shown() {
        let c = receiver(json!({
            "auth": {
                "sasl": {"mechanism": "PLAIN", "username": "u", "password": PASSWORD},
                "plain_text": {"username": "u", "password": PASSWORD},
                "kerberos": {"password": PASSWORD}
            }
        }))
        .unwrap();
        for shown in [
            format!("{c:?}"),
            format!("{c:#?}"),
            format!("{:?}", c.client()),
            format!("{:?}", c.auth),
            format!(
                "{:?}",
                exporter(json!({"auth": {"sasl": {"password": PASSWORD}}})).unwrap()
            ),
        ] {
            assert!(!shown.contains(PASSWORD), "{shown}");
        }
        assert!(format!("{c:?}").contains("password: <redacted>"));
        assert_eq!(format!("{:?}", super::Secret::default()), "<empty>");
        // A YAML number as password (`password: 1234`) is refused without its digits.
        let e = receiver(json!({"auth": {"sasl": {"password": 73519}}})).unwrap_err();
        assert!(!e.contains("73519"), "{e}");
    }
}
