//! TLS on the listeners (rustls), with a client trusting the test CA.

use crate::common::*;
use hyper_util::rt::TokioIo;
use profilink_proto::otlp::profiles_service_client::ProfilesServiceClient;
use profilink_receiver::{OtlpGrpcConfig, OtlpHttpConfig, SentryReceiverConfig, TlsConfig};
use profilink_tls::test_pki::{CertPair, TestCa};
use reqwest::StatusCode;
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;

fn tls_config() -> TlsConfig {
    TlsConfig::new(
        format!("{TLS_DIR}/server.pem"),
        format!("{TLS_DIR}/server.key"),
    )
}

fn ca_pem() -> Vec<u8> {
    std::fs::read(format!("{TLS_DIR}/ca.pem")).expect("test CA")
}

fn https_client() -> reqwest::Client {
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca_pem()).unwrap())
        .build()
        .unwrap()
}

#[tokio::test]
async fn https_receivers_answer_over_tls_only() {
    let mut http = start_http(
        OtlpHttpConfig {
            tls: Some(tls_config()),
            ..OtlpHttpConfig::default()
        },
        4,
    )
    .await;
    let mut sentry = start_sentry(
        SentryReceiverConfig {
            tls: Some(tls_config()),
            ..SentryReceiverConfig::default()
        },
        4,
    )
    .await;
    let (_, proto, req) = otlp_fixtures().remove(0);
    let client = https_client();
    let r = client
        .post(format!(
            "https://localhost:{}/v1development/profiles",
            http.addr.port()
        ))
        .header("content-type", "application/x-protobuf")
        .body(proto.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(otlp_payload(http.next_batch().await), expected_data(&req));

    let (_, envelope) = envelope_fixtures().remove(0);
    let r = client
        .post(format!(
            "https://127.0.0.1:{}/api/1/envelope/",
            sentry.addr.port()
        ))
        .header("x-sentry-auth", sdk_auth(KEY))
        .body(envelope)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(sentry_payload(sentry.next_batch().await).chunks.len(), 1);

    // Plaintext to a TLS port fails; so does a client that does not trust the CA.
    let plain = reqwest::Client::new()
        .post(format!(
            "http://127.0.0.1:{}/v1development/profiles",
            http.addr.port()
        ))
        .header("content-type", "application/x-protobuf")
        .body(proto.clone())
        .send()
        .await;
    assert!(plain.is_err() || plain.is_ok_and(|r| !r.status().is_success()));
    let untrusted = reqwest::Client::new()
        .post(format!(
            "https://localhost:{}/v1development/profiles",
            http.addr.port()
        ))
        .body(proto)
        .send()
        .await;
    assert!(untrusted.is_err());
    http.assert_no_batch();
    http.stop().await;
    sentry.stop().await;
}

#[tokio::test]
async fn grpc_over_tls() {
    let mut server = start_grpc(
        OtlpGrpcConfig {
            tls: Some(tls_config()),
            ..OtlpGrpcConfig::default()
        },
        4,
    )
    .await;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&ca_pem()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let addr = server.addr;
    let channel = tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_uri| {
            let connector = connector.clone();
            async move {
                let tcp = tokio::net::TcpStream::connect(addr).await?;
                let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
                let tls = connector.connect(name, tcp).await?;
                Ok::<_, std::io::Error>(TokioIo::new(tls))
            }
        }))
        .await
        .expect("TLS connection");
    let req = otlp_fixture("ebpf-profile.pb");
    ProfilesServiceClient::new(channel)
        .export(req.clone())
        .await
        .expect("accepted over TLS");
    assert_eq!(otlp_payload(server.next_batch().await), expected_data(&req));
    server.stop().await;
}

/// POSTs the first OTLP fixture to the HTTP receiver at `port` (host `localhost`).
async fn post_profiles(client: &reqwest::Client, port: u16) -> reqwest::Result<reqwest::Response> {
    let (_, proto, _) = otlp_fixtures().remove(0);
    client
        .post(format!("https://localhost:{port}/v1development/profiles"))
        .header("content-type", "application/x-protobuf")
        .body(proto)
        .send()
        .await
}

/// A fresh client (no pooled connection) trusting `ca`, presenting `identity` if given.
fn client_trusting(ca: &TestCa, identity: Option<&CertPair>) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap());
    if let Some(id) = identity {
        let pem = format!("{}{}", id.cert_pem, id.key_pem);
        b = b.identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap());
    }
    b.build().unwrap()
}

#[tokio::test]
async fn client_ca_file_refuses_clients_without_a_valid_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let server_ca = TestCa::new("server CA");
    let client_ca = TestCa::new("client CA");
    let (cert, key) = server_ca.server(&["localhost"]).write(dir.path(), "server");
    let mut tls = TlsConfig::new(cert, key);
    tls.client_ca_file = Some(client_ca.write(dir.path(), "clients.pem"));
    let mut http = start_http(
        OtlpHttpConfig {
            tls: Some(tls),
            ..OtlpHttpConfig::default()
        },
        4,
    )
    .await;
    let port = http.addr.port();

    let anonymous = post_profiles(&client_trusting(&server_ca, None), port).await;
    assert!(anonymous.is_err(), "no client certificate: {anonymous:?}");
    let stranger = TestCa::new("another CA").client("mallory");
    let foreign = post_profiles(&client_trusting(&server_ca, Some(&stranger)), port).await;
    assert!(foreign.is_err(), "a certificate of another CA: {foreign:?}");
    http.assert_no_batch();

    let agent = client_ca.client("agent");
    let r = post_profiles(&client_trusting(&server_ca, Some(&agent)), port)
        .await
        .expect("a client certificate of client_ca_file is accepted");
    assert_eq!(r.status(), StatusCode::OK);
    let (_, _, req) = otlp_fixtures().remove(0);
    assert_eq!(otlp_payload(http.next_batch().await), expected_data(&req));
    http.stop().await;
}

#[tokio::test]
async fn renewed_certificate_is_served_without_restart() {
    let dir = tempfile::tempdir().unwrap();
    let old_ca = TestCa::new("old CA");
    let new_ca = TestCa::new("new CA");
    let (cert, key) = old_ca.server(&["localhost"]).write(dir.path(), "server");
    let mut tls = TlsConfig::new(cert, key);
    tls.reload_interval = Some(Duration::from_millis(100));
    let mut http = start_http(
        OtlpHttpConfig {
            tls: Some(tls),
            ..OtlpHttpConfig::default()
        },
        4,
    )
    .await;
    let port = http.addr.port();
    let r = post_profiles(&client_trusting(&old_ca, None), port).await;
    assert_eq!(r.expect("the first certificate").status(), StatusCode::OK);
    http.next_batch().await;
    assert!(
        post_profiles(&client_trusting(&new_ca, None), port)
            .await
            .is_err(),
        "the renewed certificate is not there yet"
    );

    // Renewal: new files in place (as certbot or cert-manager would write them).
    new_ca.server(&["localhost"]).write(dir.path(), "server");
    tokio::time::sleep(Duration::from_millis(250)).await;
    let r = post_profiles(&client_trusting(&new_ca, None), port)
        .await
        .expect("the renewed certificate is served after reload_interval");
    assert_eq!(r.status(), StatusCode::OK);
    http.next_batch().await;
    assert!(
        post_profiles(&client_trusting(&old_ca, None), port)
            .await
            .is_err(),
        "the old certificate is gone"
    );
    http.stop().await;
}

#[tokio::test]
async fn min_version_refuses_older_clients() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("server CA");
    let (cert, key) = ca.server(&["localhost"]).write(dir.path(), "server");
    let mut tls = TlsConfig::new(cert, key);
    tls.min_version = profilink_tls::TlsVersion::V1_3;
    let mut http = start_http(
        OtlpHttpConfig {
            tls: Some(tls),
            ..OtlpHttpConfig::default()
        },
        4,
    )
    .await;
    let port = http.addr.port();
    let root = reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap();
    let tls12 = reqwest::Client::builder()
        .add_root_certificate(root)
        .max_tls_version(reqwest::tls::Version::TLS_1_2)
        .build()
        .unwrap();
    assert!(
        post_profiles(&tls12, port).await.is_err(),
        "TLS 1.2 refused"
    );
    let r = post_profiles(&client_trusting(&ca, None), port)
        .await
        .expect("TLS 1.3 accepted");
    assert_eq!(r.status(), StatusCode::OK);
    http.next_batch().await;
    http.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_sockets_cannot_hold_up_tls_handshakes() {
    // Issue 28: every accepted socket got its own handshake task for 10 s, without bound; now
    // at most MAX_HANDSHAKES run, the oldest abandoned for each new connection.
    let mut sentry = start_sentry(
        SentryReceiverConfig {
            tls: Some(tls_config()),
            ..SentryReceiverConfig::default()
        },
        4,
    )
    .await;
    let n = profilink_receiver::MAX_TLS_HANDSHAKES + 100;
    let mut silent = Vec::with_capacity(n);
    for _ in 0..n {
        silent.push(tokio::net::TcpStream::connect(sentry.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, envelope) = envelope_fixtures().remove(0);
    let start = std::time::Instant::now();
    let r = https_client()
        .post(format!(
            "https://127.0.0.1:{}/api/1/envelope/",
            sentry.addr.port()
        ))
        .header("x-sentry-auth", sdk_auth(KEY))
        .body(envelope)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .expect("answered within 5 s");
    assert_eq!(r.status(), StatusCode::OK);
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(sentry_payload(sentry.next_batch().await).chunks.len(), 1);
    // The oldest silent sockets were let go.
    let mut closed = 0;
    let mut buf = [0u8; 1];
    for s in silent.iter_mut().take(50) {
        if let Ok(Ok(0)) = tokio::time::timeout(
            Duration::from_millis(50),
            tokio::io::AsyncReadExt::read(s, &mut buf),
        )
        .await
        {
            closed += 1;
        }
    }
    assert!(closed > 0, "the oldest handshakes were abandoned");
    drop(silent);
    sentry.stop().await;
}
