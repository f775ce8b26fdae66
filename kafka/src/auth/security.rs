//! The `auth` and `tls` settings in force, checked, and the librdkafka properties they make
//! ([`Security`]): which `security.protocol`, the SASL mechanism and credentials, the CA,
//! certificate and key, and certificate and host name verification; or why they cannot be
//! used, named by the key.

use super::{AuthConfig, SASL_MECHANISMS, Secret};
use profilink_tls::{ClientTlsConfig, TlsVersion};

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
