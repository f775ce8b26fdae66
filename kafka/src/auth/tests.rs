//! The `auth` and `tls` settings through the receiver's and the exporter's configs: every key
//! parses, each combination's librdkafka properties, bad configs refused by key, and the
//! password never shown.

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
