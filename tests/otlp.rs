//! OTLP export: with `log.otlp_endpoint` set, each request's span reaches
//! an OpenTelemetry collector (a fake one here, on port 0), joined to the
//! client's trace, and the upstream receives that span as its parent.

mod support;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use support::Harness;
use tensorgate::config::Log;
use tensorgate::telemetry::Telemetry;
use tokio::sync::mpsc;

/// A span as the collector received it: name, trace id, span id, parent.
type Received = (String, String, String, String);

struct Collector(mpsc::UnboundedSender<Received>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        for resource in request.into_inner().resource_spans {
            for scope in resource.scope_spans {
                for span in scope.spans {
                    let received = (
                        span.name.clone(),
                        hex(&span.trace_id),
                        hex(&span.span_id),
                        hex(&span.parent_span_id),
                    );
                    let _ = self.0.send(received);
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_spans_reach_the_collector_in_the_clients_trace() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, mut spans) = mpsc::unbounded_channel();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(Collector(tx)))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let log = Log {
        otlp_endpoint: Some(format!("http://{addr}")),
        ..Log::default()
    };
    let telemetry = tokio::task::spawn_blocking(move || Telemetry::init(&log))
        .await
        .unwrap()
        .expect("telemetry starts");

    let h = Harness::start().await;
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = format!("00-{trace}-00f067aa0ba902b7-01");
    let body = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]},{"name":"INPUT1","datatype":"FP32","shape":[1],"data":[2]}]}"#;
    let r = h
        .send(
            http::Method::POST,
            "/v2/models/add_sub/infer",
            &[("traceparent", &parent)],
            body,
        )
        .await;
    assert_eq!(r.status, 200);
    let sent_upstream = h.demo.last_traceparent().expect("traceparent upstream");
    let telemetry = tokio::task::spawn_blocking(move || {
        telemetry.flush();
        telemetry
    })
    .await
    .unwrap();

    let span = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            let span = spans.recv().await.expect("collector open");
            if span.0 == "infer" {
                return span;
            }
        }
    })
    .await
    .expect("the request's span was exported");
    assert_eq!(span.1, trace, "the client's trace id");
    assert_eq!(
        span.3, "00f067aa0ba902b7",
        "the client's span is the parent"
    );
    assert_eq!(
        sent_upstream,
        format!("00-{trace}-{}-01", span.2),
        "upstream's parent is our span"
    );
    tokio::task::spawn_blocking(move || drop(telemetry))
        .await
        .unwrap();
}
