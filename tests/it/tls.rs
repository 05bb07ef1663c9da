//! TLS on both sides, with certificates made at test time (rcgen): HTTPS
//! (and h2 by ALPN) on the client side with a certificate renewed without a
//! restart, and mutual TLS toward an upstream that demands client
//! certificates.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::{text, GatewayProcess};
use pingora_rustls::{ClientConfig, RootCertStore, ServerName, TlsConnector};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tensorgate::config::Config;
use tensorgate::Gateway;
use tensorgate_demo::DemoUpstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BODY: &str = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]},{"name":"INPUT1","datatype":"FP32","shape":[1],"data":[2]}]}"#;

/// A test CA that signs leaf certificates for `localhost` / `127.0.0.1`.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A PEM certificate and key.
struct Leaf {
    cert: String,
    key: String,
    der: Vec<u8>,
}

impl Ca {
    fn new() -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    fn leaf(&self) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }
}

/// A fresh directory for this test's files.
fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tensorgate-tls-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

async fn gateway_over(upstream: &DemoUpstream, tweak: impl FnOnce(&mut Config)) -> Arc<Gateway> {
    let mut config = Config::default();
    config.upstream.addresses = vec![upstream.local_addr().to_string()];
    tweak(&mut config);
    let gateway = Gateway::new(config).expect("valid config");
    gateway.started().await;
    Arc::new(gateway)
}

async fn infer(gateway: &Arc<Gateway>) -> (u16, String) {
    let body = bytes::Bytes::from_static(BODY.as_bytes());
    let path = "/v2/models/add_sub/infer";
    let r = crate::support::send(gateway, http::Method::POST, path, &[], body).await;
    (r.status, text(&r))
}

#[tokio::test]
async fn mutual_tls_toward_the_upstream() {
    let ca = Ca::new();
    let server = ca.leaf();
    let client = ca.leaf();
    let files = dir("upstream");
    let ca_file = write(&files, "ca.pem", &ca.pem);
    let cert_file = write(&files, "client.pem", &client.cert);
    let key_file = write(&files, "client.key", &client.key);
    let addr = "127.0.0.1:0".parse().unwrap();
    let demo = DemoUpstream::start_tls(
        addr,
        server.cert.as_bytes(),
        server.key.as_bytes(),
        Some(ca.pem.as_bytes()),
    )
    .await
    .unwrap();

    let with_identity = gateway_over(&demo, |c| {
        c.upstream.tls.ca_file = Some(ca_file.clone());
        c.upstream.tls.cert_file = Some(cert_file.clone());
        c.upstream.tls.key_file = Some(key_file.clone());
    })
    .await;
    let (status, body) = infer(&with_identity).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("[3.0]"), "{body}");

    // Without a client certificate the upstream refuses the handshake:
    // the backend is never seen ready.
    let without = gateway_over(&demo, |c| c.upstream.tls.ca_file = Some(ca_file.clone())).await;
    let (status, body) = infer(&without).await;
    assert_eq!(status, 503, "{body}");
    // Plain h2c against a TLS upstream fails the same way.
    let plain = gateway_over(&demo, |_| {}).await;
    assert_eq!(infer(&plain).await.0, 503);
    assert_eq!(demo.infer_count(), 1);
    let _ = std::fs::remove_dir_all(&files);
}

#[tokio::test]
async fn a_large_passthrough_call_is_relayed_to_a_tls_upstream() {
    use tensorgate::proto::inference::grpc_inference_service_client::GrpcInferenceServiceClient;
    use tensorgate::proto::inference::model_infer_request::InferInputTensor;
    use tensorgate::proto::inference::ModelInferRequest;

    let ca = Ca::new();
    let server = ca.leaf();
    let files = dir("large");
    let ca_file = write(&files, "ca.pem", &ca.pem);
    let demo = DemoUpstream::start_tls(
        "127.0.0.1:0".parse().unwrap(),
        server.cert.as_bytes(),
        server.key.as_bytes(),
        None,
    )
    .await
    .unwrap();
    let gateway = gateway_over(&demo, |c| c.upstream.tls.ca_file = Some(ca_file.clone())).await;
    let addr = serve_passthrough(gateway).await;
    let mut client = GrpcInferenceServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
        .max_decoding_message_size(64 << 20);
    // 8 MiB: relayed as it arrives (`front::grpc::relayed_infer`), through
    // tonic's `Channel`, which TLS backends use.
    let data = bytes::Bytes::from(vec![7u8; 8 << 20]);
    let request = ModelInferRequest {
        model_name: "identity_uint8".into(),
        inputs: vec![InferInputTensor {
            name: "INPUT0".into(),
            datatype: "UINT8".into(),
            shape: vec![1, 8 << 20],
            ..Default::default()
        }],
        raw_input_contents: vec![data.clone()],
        ..Default::default()
    };
    let response = client.model_infer(request).await.expect("relayed");
    assert_eq!(response.into_inner().raw_output_contents, [data]);
    assert_eq!(demo.infer_count(), 1);
    let _ = std::fs::remove_dir_all(&files);
}

/// The gateway's gRPC passthrough on a port-0 listener, until the test ends.
async fn serve_passthrough(gateway: Arc<Gateway>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(tensorgate::front::grpc::serve(
        gateway,
        listener,
        std::future::pending(),
    ));
    addr
}

/// One HTTPS GET trusting only `ca_file`: the status line and the
/// server's certificate (DER).
async fn https_get(addr: std::net::SocketAddr, ca_file: &Path, path: &str) -> (String, Vec<u8>) {
    let mut roots = RootCertStore::empty();
    pingora_rustls::load_ca_file_into_store(ca_file, &mut roots).unwrap();
    pingora_rustls::install_default_crypto_provider();
    let mut config = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.expect("handshake");
    let peer = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    (answer.lines().next().unwrap_or_default().to_string(), peer)
}

#[tokio::test]
async fn https_serves_and_a_renewed_certificate_needs_no_restart() {
    let ca = Ca::new();
    let first = ca.leaf();
    let files = dir("front");
    let ca_file = write(&files, "ca.pem", &ca.pem);
    let cert = write(&files, "server.pem", &first.cert);
    let key = write(&files, "server.key", &first.key);
    // Port 0: the gateway binds it and its log line says which port it got
    // (a port chosen here could be taken before the gateway binds it, by
    // the demo upstream among others).
    let config = write(
        &files,
        "tensorgate.toml",
        &format!(
            "[tls]\nlisten = \"127.0.0.1:0\"\ncert_file = \"{}\"\nkey_file = \"{}\"\nreload_check_ms = 0\n",
            cert.display(),
            key.display()
        ),
    );
    let gw = GatewayProcess::demo(&["--config", config.to_str().unwrap()]);
    let tls_addr = gw.https.expect("the HTTPS listener in the log line");
    let (status, peer) = https_get(tls_addr, &ca_file, "/v2/health/ready").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(peer, first.der);

    // Renew: write the new pair aside, then rename it into place.
    let second = ca.leaf();
    write(&files, "next.key", &second.key);
    write(&files, "next.pem", &second.cert);
    std::fs::rename(files.join("next.key"), &key).unwrap();
    std::fs::rename(files.join("next.pem"), &cert).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, peer) = https_get(tls_addr, &ca_file, "/v2/health/live").await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        if peer == second.der {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the renewed certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = std::fs::remove_dir_all(&files);
}

#[tokio::test]
async fn grpc_passthrough_over_tls() {
    use tensorgate::proto::inference::grpc_inference_service_client::GrpcInferenceServiceClient;
    use tensorgate::proto::inference::ServerLiveRequest;
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

    let ca = Ca::new();
    let server = ca.leaf();
    let files = dir("grpc");
    let cert = write(&files, "server.pem", &server.cert);
    let key = write(&files, "server.key", &server.key);
    let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let gateway = gateway_over(&demo, |c| {
        c.grpc.tls = true;
        c.tls.cert_file = Some(cert.clone());
        c.tls.key_file = Some(key.clone());
    })
    .await;
    let addr = serve_passthrough(gateway).await;
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&ca.pem))
        .domain_name("localhost");
    let channel = Endpoint::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .expect("TLS handshake");
    let mut client = GrpcInferenceServiceClient::new(channel);
    let live = client.server_live(ServerLiveRequest {}).await.unwrap();
    assert!(live.into_inner().live);
    // A plain h2c client cannot talk to it.
    let plain = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await;
    if let Ok(channel) = plain {
        let mut client = GrpcInferenceServiceClient::new(channel);
        assert!(client.server_live(ServerLiveRequest {}).await.is_err());
    }
    let _ = std::fs::remove_dir_all(&files);
}
