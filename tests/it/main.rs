//! The integration tests, one module per story, in one test binary: each
//! test binary links the whole gateway, so one binary instead of nineteen
//! saves about 1.7 GB of disk and as many links per build. `otlp.rs` stays
//! a binary of its own: it installs the process-wide tracing subscriber.
//!
//! Run one story with `cargo test --test it <module>::`, e.g.
//! `cargo test --test it faults:: -- --nocapture`.
//!
//! # Index
//!
//! Every module of this binary, by what it tests, one row each. The index
//! lives here, beside the `mod` lines it lists, so that a new story's row
//! goes into the same file and the same change as its `mod` line;
//! `test_index` fails when the two disagree.
//!
//! "Against" says what the tests drive:
//!
//! * *in-process*: the gateway's HTTP pipeline called as a function
//!   (`support::Harness`, `support::Fleet`: no HTTP socket), its upstream
//!   client on loopback;
//! * *gRPC front*: the passthrough (or the v1 gRPC service) served
//!   in-process on an ephemeral port, called by a gRPC client;
//! * *binary*: the real `tensorgate` process on loopback ports
//!   (`support::GatewayProcess`);
//! * *demo*: the embedded demo upstream (`tensorgate_demo::DemoUpstream`);
//!   *demos*: several, each on its own runtime so it can be killed
//!   (`support::Fleet`);
//! * *files*: the repository's files, read; nothing runs.
//!
//! ## HTTP v2 protocol (KServe v2 and Triton's extensions)
//!
//! | module | what it tests | against |
//! | --- | --- | --- |
//! | `v2_endpoints` | every v2 endpoint but infer, as a new user's tour of the server | in-process, demo |
//! | `v2_infer` | `/infer`: JSON, binary, mixed and raw tensors, compression, classification, parameters, the error texts of docs/protocol-v2.md | in-process, demo |
//! | `v2_generate` | `/generate` and `/generate_stream`: request mapping, Triton's answer objects, SSE framing, one response per request, v2 §1.6's errors | in-process (the stream collected), demo |
//! | `generate_stream` | `/generate_stream` while it streams: events arrive as produced, a disconnect cancels upstream, a slow reader holds the upstream back | binary, demo's counters; one case in-process |
//! | `streamed_body` | binary `/infer` bodies streamed upstream as they arrive: the same answer as a whole body; a body that ends early, runs long or breaks off never completes upstream | binary, demo's counters |
//! | `shared_memory` | bridge mode of system shared memory: register, status and unregister answered by the gateway, `/infer` through the regions, Triton's refusals; CUDA refused | in-process, demo; one case binary |
//! | `shared_memory_grpc` | bridge mode on the gRPC front: the shared-memory RPCs answered by the gateway, `ModelInfer` and `ModelStreamInfer` through the regions, one region table for both fronts, Triton's texts and codes | gRPC front, demo |
//! | `openai` | the OpenAI front: completions and chat, whole and streamed, for both backend conventions; usage, finish reasons, the chat template, every refusal in OpenAI's shape, keys, metrics, the first event at once and a disconnect that stops the model | in-process, demo's LLM models; one case binary, demo's counters |
//! | `codec_fixtures` | the v2 infer codecs against tests/fixtures/v2: requests decoded, upstream outputs encoded as Triton's answers | the codec functions, files |
//!
//! ## Legacy v1 API
//!
//! | module | what it tests | against |
//! | --- | --- | --- |
//! | `v1_api` | the v1 HTTP API: path prefix, text and JSON formats, classification, STRING and FP16, parameters, model control, repository index, `NV-Status` errors | in-process, demo |
//! | `v1_captures` | the v1 client's captured requests (tests/fixtures/v1/captures.txt), each answer checked against v1 §3 | in-process, and byte for byte on one keep-alive connection to the binary; demo |
//! | `v1_grpc` | the v1 gRPC service: health, status, infer (raw, classes, batch 2), errors in `request_status`, a stream | gRPC front, demo, a generated v1 client |
//!
//! ## gRPC front (the passthrough)
//!
//! | module | what it tests | against |
//! | --- | --- | --- |
//! | `grpc_passthrough` | balancing, sequences, statuses, deadlines, streams, health, limits, keys and repository fan-out as gRPC clients see them | gRPC front, two demos, a tonic client; `--grpc-listen` on the binary |
//! | `relayed_grpc` | small `ModelInfer` calls relayed as encoded, both ways: fields no schema knows survive | gRPC front, a bare HTTP/2 backend of the test's own |
//! | `streamed_grpc` | large `ModelInfer` calls relayed while they arrive: early bytes upstream, cut or overlong bodies, routing on the leading fields, whole decode where needed | gRPC front, demos' counters, a raw HTTP/2 client |
//!
//! ## Upstreams: the group, its faults, other servers
//!
//! | module | what it tests | against |
//! | --- | --- | --- |
//! | `pool` | balancing per request, sequences on one backend, models only where they are, load/unload on every backend, no traffic to new or sick backends | in-process, demos |
//! | `faults` | under load from eight clients, one backend killed and restarted, one hanging, one not ready: every request answered or a clear 503/504, none lost | in-process, three demos |
//! | `upstream_hardening` | backends at boot (an unreachable one named), the `timeout` parameter forwarded, which deadlines eject a backend, the 504 text | in-process and gRPC front, demo |
//! | `stream_accounting` | a unary call, an HTTP stream and a gRPC stream whose backend dies mid-way each count one unreachable call and eject it; a dropped stream blames nobody | in-process and gRPC front, a demo on its own runtime |
//! | `load_report` | load reported by the servers: picks avoid a backend whose metrics report a long queue, and are even again when the report fails, goes missing or goes stale; the gauge and the backends view | in-process, two demos on two loopback addresses, a metrics endpoint of the test's own |
//! | `interop` | upstreams that are not Triton (KServe's and MLServer's quirks) and what the gateway makes of each | in-process and binary, demo with `Quirks` |
//! | `admission` | admission control per group on every front: waits beyond the limit, a full queue's refusal at once in each front's form (HTTP 503 + `Retry-After`, gRPC `UNAVAILABLE`, v1, OpenAI), a higher priority taking the last place, deadlines bounding the wait, a started sequence never held back, the queue in the metrics and the backends view | in-process and gRPC front, a demo held hung |
//! | `routes` | upstream groups and routes: each model to its group, a 90/10 split over 20,000 requests, keyed clients on one side on two replicas, a mirror that changes no answer and judges the shadow (and survives its death), a renamed model never showing its upstream name, the version asked being the version served, weights moved by a reload under load with nothing lost, the OpenAI front routed as `front = "openai"` on its v2 names (its streams never mirrored, its answers naming the OpenAI id) | in-process and gRPC front, a demo per group |
//!
//! ## Connections and the process
//!
//! | module | what it tests | against |
//! | --- | --- | --- |
//! | `process` | the pingora glue over raw HTTP/1.1: body limits, chunked uploads, `Expect: 100-continue`, keep-alive, config validation | binary (`tensorgate demo`) |
//! | `edge` | deadlines for silent, trickling and idle connections, JSON refusals of malformed requests, the connection cap, the file limit, a taken port | binary (`tensorgate demo`) |
//! | `closing` | closing without losing a request: lingering closes, the SIGTERM drain (`Connection: close`, GOAWAY, a FIN at the grace period's end) | binary |
//! | `tls` | HTTPS and h2 by ALPN with a certificate renewed live, mutual TLS toward an upstream, the passthrough over TLS | binary and in-process, demo, certificates made by rcgen |
//!
//! ## Configuration, guard and metrics
//!
//! | module | what it tests | against |
//! | --- | --- | --- |
//! | `check_config` | `tensorgate check-config`: a good file prints its effective configuration, a bad one exits 1 naming the file | binary |
//! | `reload` | reloading the configuration: the upstream list changed under load with nothing lost, keys and limits at once, an invalid file refused | in-process, demos |
//! | `guard` | authentication and limits: each rule passing and refused, keys rotated without a restart, a burst let through to exactly the limit | in-process, demo |
//! | `metrics` | counters and histograms after a scripted mix of requests, ejections and unreachable calls: exactly the expected counts | in-process, demo |
//!
//! ## Docs and structure checks
//!
//! | module | what it tests | against |
//! | --- | --- | --- |
//! | `architecture_doc` | ARCHITECTURE.md true to the tree: a code-map line per `src/` module, cited paths and tests exist, every invariant names a test, every Rust item it names exists where its path says | files |
//! | `archive_doc` | docs/archive/ stays frozen: nothing dated after its freeze, no link to it from the pages on the reading path | files |
//! | `protocol_doc` | every `v2 §` / `v1 §` citation in code, tests and docs names a section (and row, rule, step or item) that docs/protocol-v2.md or docs/protocol-v1.md has; no citation of the old single page, none that leaves its page unsaid | files |
//! | `layering` | imports: no circle in any crate of the workspace; in the gateway, its layer table, who sees the protobuf types, impls beside their type | files (each crate's `src/`) |
//! | `test_index` | this index: every module declared here has a row, every row names a declared module | this file |
//!
//! ## Helpers (no tests of their own)
//!
//! | module | what it holds | against |
//! | --- | --- | --- |
//! | `support` | tests/support/mod.rs: `Harness`, `Fleet`, `GatewayProcess`, and `raw` HTTP/1.1 | used by the stories |
//! | `v1` | tests/support/v1.rs: the v1 captures and v1 §3's checks | used by the v1 stories |

#[path = "../support/mod.rs"]
mod support;
#[path = "../support/v1.rs"]
mod v1;

mod admission;
mod architecture_doc;
mod archive_doc;
mod check_config;
mod closing;
mod codec_fixtures;
mod edge;
mod faults;
mod generate_stream;
mod grpc_passthrough;
mod guard;
mod interop;
mod layering;
mod load_report;
mod metrics;
mod openai;
mod pool;
mod process;
mod protocol_doc;
mod relayed_grpc;
mod reload;
mod routes;
mod shared_memory;
mod shared_memory_grpc;
mod stream_accounting;
mod streamed_body;
mod streamed_grpc;
mod test_index;
mod tls;
mod upstream_hardening;
mod v1_api;
mod v1_captures;
mod v1_grpc;
mod v2_endpoints;
mod v2_generate;
mod v2_infer;
