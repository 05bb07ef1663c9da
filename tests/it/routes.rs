//! Upstream groups and routes (`[upstreams.NAME]`, `[[routes]]`) as a
//! platform team uses them: each model to its pool, a canary split that
//! holds its weights and keeps a client on one side on every replica, a
//! shadow mirror that changes no answer and judges the shadow, a model
//! renamed at the edge that never shows its upstream name, the version
//! asked for being the version served, a reload that changes weights
//! under load without losing a request, and the OpenAI front routed as a
//! front of its own. Each group is a demo upstream on a
//! runtime of its own (so it can be killed); configurations are written
//! as a user writes them, in TOML.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use tensorgate::config::Config;
use tensorgate::front::http::HttpResponse;
use tensorgate::proto::inference as pb;
use tensorgate::Gateway;
use tensorgate_demo::{DemoUpstream, Quirks};

use crate::grpc_passthrough::{add_sub, connect, serve};
use crate::support::{send, text};

const ADD_SUB: &str = "/v2/models/add_sub/infer";
const BODY: &str = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]},{"name":"INPUT1","datatype":"FP32","shape":[2],"data":[3,4]}]}"#;

/// One demo upstream per group name.
struct Groups {
    demos: BTreeMap<&'static str, Option<DemoUpstream>>,
}

impl Groups {
    fn start(names: &[&'static str]) -> Groups {
        let demos = names
            .iter()
            .map(|name| {
                let demo = DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap())
                    .expect("demo starts");
                (*name, Some(demo))
            })
            .collect();
        Groups { demos }
    }

    fn demo(&self, name: &str) -> &DemoUpstream {
        self.demos[name].as_ref().expect("running")
    }

    /// `[upstreams.NAME]` for each group (`default` as `[upstream]`),
    /// checked every 20 ms, then `rest`.
    fn toml(&self, rest: &str) -> String {
        let mut text = String::new();
        for (name, demo) in &self.demos {
            let addr = demo.as_ref().expect("running").local_addr();
            let table = match *name {
                "default" => "[upstream]".to_string(),
                name => format!("[upstreams.{name}]"),
            };
            text += &format!(
                "{table}\naddresses = [\"{addr}\"]\nhealth = {{ interval_ms = 20, timeout_ms = 200 }}\n\n"
            );
        }
        text + rest
    }

    fn config(&self, rest: &str) -> Config {
        Config::from_toml(&self.toml(rest)).expect("parses")
    }

    async fn gateway(&self, rest: &str) -> Arc<Gateway> {
        let gateway = Arc::new(Gateway::new(self.config(rest)).expect("valid"));
        gateway.started().await;
        gateway
    }

    /// Inferences each group has served.
    fn counts(&self) -> BTreeMap<&'static str, u64> {
        self.demos
            .iter()
            .map(|(name, d)| (*name, d.as_ref().map_or(0, DemoUpstream::infer_count)))
            .collect()
    }

    /// The group that served the one inference since `before`.
    fn served(&self, before: &BTreeMap<&'static str, u64>) -> &'static str {
        let after = self.counts();
        let moved: Vec<&'static str> = after
            .iter()
            .filter(|(name, n)| before[*name] != **n)
            .map(|(name, _)| *name)
            .collect();
        match moved.as_slice() {
            [one] => one,
            other => panic!("one group should have served, not {other:?}"),
        }
    }

    fn kill(&mut self, name: &str) {
        self.demos
            .get_mut(name)
            .and_then(Option::take)
            .expect("running")
            .kill();
    }
}

async fn post(
    gateway: &Arc<Gateway>,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> HttpResponse {
    let body = Bytes::copy_from_slice(body.as_bytes());
    send(gateway, Method::POST, path, headers, body).await
}

async fn get(gateway: &Arc<Gateway>, path: &str) -> HttpResponse {
    send(gateway, Method::GET, path, &[], Bytes::new()).await
}

/// The value of the series `name{labels}` in the gateway's metrics (0 when
/// it has none); its labels in any order (the exposition sorts them).
fn metric(gateway: &Gateway, series: &str) -> u64 {
    let labels = |s: &str| -> (String, Vec<String>) {
        let (name, rest) = s.split_once('{').unwrap_or((s, "}"));
        let mut labels: Vec<String> = rest
            .trim_end_matches('}')
            .split(',')
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        labels.sort();
        (name.to_string(), labels)
    };
    let wanted = labels(series);
    let text = String::from_utf8(gateway.metrics_text()).unwrap();
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            (labels(series) == wanted).then(|| value.parse::<f64>().unwrap() as u64)
        })
        .unwrap_or(0)
}

/// Waits (polling, 10 s at most) until `series` reaches `n`.
async fn metric_reaches(gateway: &Gateway, series: &str, n: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while metric(gateway, series) < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{series} stayed at {} (waited for {n})",
            metric(gateway, series)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn each_model_goes_to_the_group_its_route_names() {
    let groups = Groups::start(&["default", "gpu"]);
    let gateway = groups
        .gateway("[[routes]]\nmodels = [\"add_*\"]\ngroup = \"gpu\"\n")
        .await;
    let before = groups.counts();
    let r = post(&gateway, ADD_SUB, &[], BODY).await;
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(groups.served(&before), "gpu");
    // Metadata follows the same route; another model the default group.
    assert_eq!(get(&gateway, "/v2/models/add_sub").await.status, 200);
    assert_eq!(groups.demo("gpu").calls("ModelMetadata"), 1);
    let before = groups.counts();
    let simple = r#"{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}]}"#;
    let r = post(&gateway, "/v2/models/simple/infer", &[], simple).await;
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(groups.served(&before), "default");
    // Each side of the rule is counted.
    assert_eq!(
        metric(
            &gateway,
            r#"tensorgate_route_calls_total{rule="routes[0]",group="gpu",outcome="ok"}"#
        ),
        1
    );
    assert_eq!(
        metric(
            &gateway,
            r#"tensorgate_route_calls_total{rule="default",group="default",outcome="ok"}"#
        ),
        1
    );
}

#[tokio::test]
async fn no_route_and_no_default_group_is_a_404_naming_the_model() {
    let groups = Groups::start(&["stable"]);
    let gateway = groups
        .gateway("[[routes]]\nmodels = [\"add_sub\"]\ngroup = \"stable\"\n")
        .await;
    let r = post(&gateway, "/v2/models/simple/infer", &[], BODY).await;
    assert_eq!(r.status, 404);
    assert_eq!(text(&r), r#"{"error":"no route matches model 'simple'"}"#);
    assert_eq!(post(&gateway, ADD_SUB, &[], BODY).await.status, 200);
    // The gRPC front says the same.
    let addresses = vec![groups.demo("stable").local_addr().to_string()];
    let toml = groups.toml("[[routes]]\nmodels = [\"add_sub\"]\ngroup = \"stable\"\n");
    let (_gateway, addr, _server) =
        serve(addresses, |c| *c = Config::from_toml(&toml).unwrap()).await;
    let mut client = connect(addr).await;
    let mut request = add_sub(&[1.0], &[2.0]);
    request.model_name = "simple".into();
    let status = client.model_infer(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert_eq!(status.message(), "no route matches model 'simple'");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_90_10_split_lands_10_percent_over_20000_requests() {
    let groups = Groups::start(&["stable", "canary"]);
    let gateway = groups
        .gateway("[[routes]]\nsplit = { stable = 90, canary = 10 }\n")
        .await;
    let n = 20_000;
    let clients = 16;
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let gateway = gateway.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..n / clients {
                let r = post(&gateway, ADD_SUB, &[], BODY).await;
                assert_eq!(r.status, 200, "{}", text(&r));
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let counts = groups.counts();
    assert_eq!(counts["stable"] + counts["canary"], n as u64);
    let share = counts["canary"] as f64 / n as f64;
    assert!(
        (share - 0.10).abs() <= 0.005,
        "canary took {:.2} %",
        share * 100.0
    );
}

#[tokio::test]
async fn a_keyed_client_stays_on_one_side_on_every_replica() {
    let groups = Groups::start(&["stable", "canary"]);
    let rule =
        "[[routes]]\nsplit = { stable = 50, canary = 50 }\nsticky_header = \"x-session-id\"\n";
    let one = groups.gateway(rule).await;
    // The other replica lists the groups, and the split, the other way.
    let reversed = {
        let text = groups.toml("");
        let (canary, stable) = text.split_at(text.find("[upstreams.stable]").unwrap());
        format!(
            "{stable}{canary}[[routes]]\nsplit = {{ canary = 50, stable = 50 }}\nsticky_header = \"X-Session-ID\"\n"
        )
    };
    let other = Arc::new(Gateway::new(Config::from_toml(&reversed).unwrap()).unwrap());
    other.started().await;
    let mut sides = BTreeMap::<&str, usize>::new();
    for session in 0..100 {
        let key = format!("user-{session}");
        let headers = [("X-Session-Id", key.as_str())];
        let mut seen = Vec::new();
        for gateway in [&one, &other, &one] {
            let before = groups.counts();
            let r = post(gateway, ADD_SUB, &headers, BODY).await;
            assert_eq!(r.status, 200, "{}", text(&r));
            seen.push(groups.served(&before));
        }
        assert!(seen.iter().all(|s| *s == seen[0]), "{key}: {seen:?}");
        *sides.entry(seen[0]).or_default() += 1;
    }
    assert_eq!(sides.len(), 2, "both sides get clients: {sides:?}");
    // A sequence sticks to one side too (and there, to one backend).
    let sequence = |start: bool| {
        format!(
            r#"{{"parameters":{{"sequence_id":77,"sequence_start":{start}}},"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}},{{"name":"INPUT1","datatype":"FP32","shape":[1],"data":[2]}}]}}"#
        )
    };
    let mut seen = Vec::new();
    for (i, gateway) in [&one, &other, &one, &other].into_iter().enumerate() {
        let before = groups.counts();
        let r = post(gateway, ADD_SUB, &[], &sequence(i == 0)).await;
        assert_eq!(r.status, 200, "{}", text(&r));
        seen.push(groups.served(&before));
    }
    assert!(seen.iter().all(|s| *s == seen[0]), "{seen:?}");
}

#[tokio::test]
async fn a_mirror_changes_no_answer_judges_the_shadow_and_survives_its_death() {
    let mut groups = Groups::start(&["stable", "shadow"]);
    let plain = groups.gateway("[[routes]]\ngroup = \"stable\"\n").await;
    let mirrored = groups
        .gateway("[[routes]]\nname = \"shadowed\"\ngroup = \"stable\"\nmirror = { group = \"shadow\", percent = 100 }\n")
        .await;
    let expected = post(&plain, ADD_SUB, &[], BODY).await;
    assert_eq!(expected.status, 200);
    let agree = r#"tensorgate_mirror_agreement_total{rule="shadowed",verdict="agree"}"#;
    let differ = r#"tensorgate_mirror_agreement_total{rule="shadowed",verdict="differ"}"#;
    let uncompared = r#"tensorgate_mirror_agreement_total{rule="shadowed",verdict="uncompared"}"#;
    let failed = r#"tensorgate_mirror_calls_total{rule="shadowed",group="shadow",outcome="error"}"#;
    let n = 100;
    let run = |gateway: Arc<Gateway>, expected: Vec<u8>| async move {
        for _ in 0..n {
            let r = post(&gateway, ADD_SUB, &[], BODY).await;
            assert_eq!(r.status, 200, "{}", text(&r));
            assert_eq!(
                r.body_bytes(),
                expected,
                "the primary answer, byte for byte"
            );
        }
    };
    // A shadow that answers alike agrees.
    run(mirrored.clone(), expected.body_bytes()).await;
    metric_reaches(&mirrored, agree, n).await;
    assert_eq!(groups.demo("shadow").infer_count(), n);
    // One that answers otherwise shows in the agreement metric.
    groups.demo("shadow").set_quirks(Quirks {
        skew_outputs: true,
        ..Quirks::default()
    });
    run(mirrored.clone(), expected.body_bytes()).await;
    metric_reaches(&mirrored, differ, n).await;
    assert_eq!(metric(&mirrored, agree), n);
    // Killed mid-run: not one primary answer fails.
    let load = tokio::spawn(run(mirrored.clone(), expected.body_bytes()));
    groups.kill("shadow");
    load.await.unwrap();
    run(mirrored.clone(), expected.body_bytes()).await;
    assert!(metric(&mirrored, failed) > 0);
    metric_reaches(&mirrored, uncompared, metric(&mirrored, failed)).await;
    assert_eq!(groups.demo("stable").infer_count(), 4 * n + 1);
}

#[tokio::test]
async fn a_mirror_holds_no_more_than_its_bounds() {
    let groups = Groups::start(&["stable", "shadow"]);
    let gateway = groups
        .gateway("[[routes]]\ngroup = \"stable\"\nmirror = { group = \"shadow\", percent = 100, max_bytes = 64 }\n")
        .await;
    let large: Vec<String> = (0..64).map(|i| i.to_string()).collect();
    let large = format!(
        r#"{{"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":[64],"data":[{0}]}},{{"name":"INPUT1","datatype":"FP32","shape":[64],"data":[{0}]}}]}}"#,
        large.join(",")
    );
    let r = post(&gateway, ADD_SUB, &[], &large).await;
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(
        metric(
            &gateway,
            r#"tensorgate_mirror_skipped_total{rule="routes[0]",reason="size"}"#
        ),
        1
    );
    // A stream (`/generate_stream`, one `ModelStreamInfer`) is never
    // copied: its requests come as the client sends them.
    let r = post(
        &gateway,
        "/v2/models/add_sub/generate_stream",
        &[],
        r#"{"INPUT0":[1,2],"INPUT1":[3,4]}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(
        metric(
            &gateway,
            r#"tensorgate_mirror_skipped_total{rule="routes[0]",reason="streamed"}"#
        ),
        1
    );
    assert_eq!(groups.demo("shadow").infer_count(), 0);
}

/// A v1 binary infer of add_sub's two inputs, to the model named `model`.
async fn v1_add_sub(gateway: &Arc<Gateway>, model: &str) -> HttpResponse {
    let header = r#"batch_size: 1 input { name: "INPUT0" dims: 2 } input { name: "INPUT1" dims: 2 } output { name: "OUTPUT0" } output { name: "OUTPUT1" }"#;
    let tensors: Vec<u8> = [1f32, 2.0, 3.0, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let path = format!("/api/infer/{model}?format=binary");
    let headers = [("NV-InferRequest", header)];
    send(gateway, Method::POST, &path, &headers, Bytes::from(tensors)).await
}

/// Every part of an answer a client reads.
fn shown(response: &HttpResponse) -> String {
    let headers: Vec<String> = response
        .headers
        .iter()
        .map(|(n, v)| format!("{n}: {v}"))
        .collect();
    format!(
        "{}\n{}",
        headers.join("\n"),
        String::from_utf8_lossy(&response.body_bytes())
    )
}

#[tokio::test]
async fn a_renamed_model_never_shows_its_upstream_name() {
    let groups = Groups::start(&["default"]);
    let rule =
        "[[routes]]\nmodels = [\"adder\"]\ngroup = \"default\"\nupstream_model = \"add_sub\"\n";
    let gateway = groups.gateway(rule).await;
    let body = BODY;
    for (method, path, body) in [
        (Method::POST, "/v2/models/adder/infer", body),
        (Method::GET, "/v2/models/adder", ""),
        (Method::GET, "/v2/models/adder/config", ""),
        (Method::GET, "/v2/models/adder/ready", ""),
        (Method::GET, "/v2/models/adder/stats", ""),
        (Method::POST, "/v2/models/adder/versions/9/infer", body),
        (Method::GET, "/v2/models/adder/versions/9", ""),
        (Method::POST, "/v2/repository/index", ""),
        (Method::GET, "/api/status/adder", ""),
    ] {
        let r = send(
            &gateway,
            method.clone(),
            path,
            &[],
            Bytes::copy_from_slice(body.as_bytes()),
        )
        .await;
        // A label file is a file's name, not the model's.
        let seen = shown(&r).replace("add_sub_labels.txt", "");
        assert!(!seen.contains("add_sub"), "{method} {path}: {seen}");
        if !path.contains("/versions/9") {
            assert!(r.status < 300, "{method} {path}: {seen}");
        }
    }
    let r = post(&gateway, "/v2/models/adder/infer", &[], BODY).await;
    assert!(
        text(&r).starts_with(r#"{"model_name":"adder","model_version":"1""#),
        "{}",
        text(&r)
    );
    let r = post(&gateway, "/v2/models/adder/versions/9/infer", &[], BODY).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        text(&r),
        r#"{"error":"Request for unknown model: 'adder' version 9 is not found"}"#
    );
    // The upstream was asked under its own name.
    assert_eq!(
        groups.demo("default").last_request().unwrap().model_name,
        "add_sub"
    );
    // v1 over HTTP.
    let r = v1_add_sub(&gateway, "adder").await;
    assert_eq!(r.status, 200, "{}", shown(&r));
    assert!(!shown(&r).contains("add_sub"), "{}", shown(&r));
    // gRPC: the decoded way, every answer renamed back.
    let addresses = vec![groups.demo("default").local_addr().to_string()];
    let toml = groups.toml(rule);
    let (_g, addr, _server) = serve(addresses, |c| *c = Config::from_toml(&toml).unwrap()).await;
    let mut client = connect(addr).await;
    let mut request = add_sub(&[1.0, 2.0], &[3.0, 4.0]);
    request.model_name = "adder".into();
    let answer = client
        .model_infer(request.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.model_name, "adder");
    let metadata = client
        .model_metadata(pb::ModelMetadataRequest {
            name: "adder".into(),
            version: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(metadata.name, "adder");
    let config = client
        .model_config(pb::ModelConfigRequest {
            name: "adder".into(),
            version: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(config.config.unwrap().name, "adder");
    let mut versioned = request.clone();
    versioned.model_version = "9".into();
    let status = client.model_infer(versioned).await.unwrap_err();
    assert_eq!(
        status.message(),
        "Request for unknown model: 'adder' version 9 is not found"
    );
    let mut stream = client
        .model_stream_infer(tokio_stream::iter(vec![request]))
        .await
        .unwrap()
        .into_inner();
    let reply = stream.message().await.unwrap().expect("one reply");
    assert_eq!(reply.infer_response.unwrap().model_name, "adder");
}

#[tokio::test]
async fn an_answer_of_another_version_than_asked_is_never_passed_on() {
    let groups = Groups::start(&["default"]);
    // KServe's gRPC ignores the version and answers with its own.
    groups.demo("default").set_quirks(Quirks {
        ignore_versions: true,
        ..Quirks::default()
    });
    let gateway = groups.gateway("").await;
    let r = post(&gateway, "/v2/models/add_sub/versions/9/infer", &[], BODY).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        text(&r),
        r#"{"error":"Request for unknown model: 'add_sub' version 9 is not found"}"#
    );
    let r = post(&gateway, "/v2/models/add_sub/versions/1/infer", &[], BODY).await;
    assert_eq!(r.status, 200, "{}", text(&r));
    // `01` is version 1, as Triton reads it.
    let r = post(&gateway, "/v2/models/add_sub/versions/01/infer", &[], BODY).await;
    assert_eq!(r.status, 200, "{}", text(&r));
    // The gRPC front: the answer is decoded to be checked.
    let addresses = vec![groups.demo("default").local_addr().to_string()];
    let (_g, addr, _server) = serve(addresses, |_| {}).await;
    let mut client = connect(addr).await;
    let mut request = add_sub(&[1.0], &[2.0]);
    request.model_version = "9".into();
    let status = client.model_infer(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert_eq!(
        status.message(),
        "Request for unknown model: 'add_sub' version 9 is not found"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_moves_the_weights_under_load_and_loses_nothing() {
    let groups = Groups::start(&["stable", "canary"]);
    let all_stable = "[[routes]]\nsplit = { stable = 100, canary = 0 }\n";
    let all_canary = "[[routes]]\nsplit = { stable = 0, canary = 100 }\n";
    let gateway = groups.gateway(all_stable).await;
    let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (gateway, sent, stopped) = (gateway.clone(), sent.clone(), stopped.clone());
        tasks.push(tokio::spawn(async move {
            while !*stopped.borrow() {
                let r = post(&gateway, ADD_SUB, &[], BODY).await;
                assert_eq!(r.status, 200, "{}", text(&r));
                sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }));
    }
    while groups.counts()["stable"] < 200 {
        tokio::task::yield_now().await;
    }
    let ignored = gateway.reload(&groups.config(all_canary)).expect("reloads");
    assert!(ignored.is_empty(), "{ignored:?}");
    let canary_then = groups.counts()["canary"];
    while groups.counts()["canary"] < canary_then + 200 {
        tokio::task::yield_now().await;
    }
    let stable_after = groups.counts()["stable"];
    stop.send_replace(true);
    for task in tasks {
        task.await.unwrap();
    }
    let counts = groups.counts();
    let total = sent.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        counts["stable"] + counts["canary"],
        total,
        "every request answered once"
    );
    // After the reload (and the requests already on their way), stable
    // gets nothing more.
    assert!(counts["stable"] <= stable_after + 8, "{counts:?}");
    // The live weights are the listing's.
    let view = text(&get(&gateway, "/v2/tensorgate/backends").await);
    assert!(
        view.contains(r#""split":{"canary":100,"stable":0}"#),
        "{view}"
    );
}

#[tokio::test]
async fn a_reload_with_a_mistake_keeps_the_routes_in_force() {
    let groups = Groups::start(&["stable", "canary"]);
    let gateway = groups.gateway("[[routes]]\ngroup = \"canary\"\n").await;
    let bad = Config::from_toml(&groups.toml("[[routes]]\n\ngroup = \"canarry\"\n")).unwrap();
    let error = gateway.reload(&bad).unwrap_err();
    assert_eq!(
        error,
        "routes[0] (line 9): no group is named \"canarry\" (the groups: canary, stable)"
    );
    let before = groups.counts();
    assert_eq!(post(&gateway, ADD_SUB, &[], BODY).await.status, 200);
    assert_eq!(groups.served(&before), "canary");
}

#[tokio::test]
async fn the_index_lists_every_groups_models_with_its_group() {
    let groups = Groups::start(&["default", "gpu"]);
    let gateway = groups
        .gateway("[[routes]]\nmodels = [\"add_sub\"]\ngroup = \"gpu\"\n")
        .await;
    let r = post(&gateway, "/v2/repository/index", &[], "").await;
    assert_eq!(r.status, 200, "{}", text(&r));
    let index = text(&r);
    assert!(
        index.contains(r#"{"name":"add_sub","group":"default","#),
        "{index}"
    );
    assert!(
        index.contains(r#"{"name":"add_sub","group":"gpu","#),
        "{index}"
    );
    // One group down: the index is the other's, the gateway stays ready.
    let mut groups = groups;
    groups.kill("gpu");
    gateway.passes_reach(gateway.passes() + 3).await;
    let r = post(&gateway, "/v2/repository/index", &[], "").await;
    assert_eq!(r.status, 200, "{}", text(&r));
    assert!(!text(&r).contains(r#""group":"gpu""#), "{}", text(&r));
    assert_eq!(get(&gateway, "/v2/health/ready").await.status, 200);
}

#[tokio::test]
async fn rules_match_headers_and_api_key_names_on_both_fronts() {
    let groups = Groups::start(&["default", "blue", "team"]);
    let rules = r#"
[auth]
keys = [{ key = "s3cret", name = "team-a" }]
open_groups = ["health", "inference", "metadata", "model-config", "statistics", "model-repository"]

[[routes]]
header = { name = "x-tenant", value = "blue" }
group = "blue"

[[routes]]
api_key = "team-a"
group = "team"
"#;
    let gateway = groups.gateway(rules).await;
    for (headers, group) in [
        (vec![("X-Tenant", "blue")], "blue"),
        (vec![("Authorization", "Bearer s3cret")], "team"),
        (vec![("X-Tenant", "green")], "default"),
    ] {
        let before = groups.counts();
        let r = post(&gateway, ADD_SUB, &headers, BODY).await;
        assert_eq!(r.status, 200, "{}", text(&r));
        assert_eq!(groups.served(&before), group, "{headers:?}");
    }
    let addresses = vec![groups.demo("default").local_addr().to_string()];
    let toml = groups.toml(rules);
    let (_g, addr, _server) = serve(addresses, |c| *c = Config::from_toml(&toml).unwrap()).await;
    let mut client = connect(addr).await;
    for (key, value, group) in [
        ("x-tenant", "blue", "blue"),
        ("authorization", "Bearer s3cret", "team"),
        ("x-tenant", "green", "default"),
    ] {
        let mut request = tonic::Request::new(add_sub(&[1.0], &[2.0]));
        request.metadata_mut().insert(key, value.parse().unwrap());
        let before = groups.counts();
        client.model_infer(request).await.unwrap();
        assert_eq!(groups.served(&before), group, "{key}: {value}");
    }
}

/// The binary, as an operator runs it: `tensorgate demo --config FILE`
/// whose file adds two groups (this test's demos) and a split between
/// them; the file's weights changed and SIGHUP sent while a client sends
/// request after request on one connection. Not one request is lost, the
/// new weights take the traffic, and each access line names its group
/// and rule.
#[test]
fn sighup_moves_the_weights_under_load_and_the_access_log_names_group_and_rule() {
    use crate::process::{access_lines_at_exit, connect, infer, signal};
    use crate::support::GatewayProcess;

    let groups = Groups::start(&["blue", "green"]);
    let dir = std::env::temp_dir();
    let pid = std::process::id();
    let config = dir.join(format!("tensorgate-routes-{pid}.toml"));
    let log = dir.join(format!("tensorgate-routes-{pid}.log"));
    let weights = |blue: u32, green: u32| {
        groups.toml(&format!(
            "[log]\nformat = \"json\"\n\n[[routes]]\nname = \"rollout\"\nmodels = [\"add_sub\"]\nsplit = {{ blue = {blue}, green = {green} }}\n"
        ))
    };
    std::fs::write(&config, weights(100, 0)).unwrap();
    let gw = GatewayProcess::demo_logging(&["--config", config.to_str().unwrap()], Some(&log));
    let mut client = connect(&gw);
    let mut sent = 0;
    while groups.counts()["green"] == 0 {
        if sent == 100 {
            std::fs::write(&config, weights(0, 100)).unwrap();
            signal(gw.child.id(), "-HUP");
        }
        assert_eq!(infer(&mut client, "").status(), 200);
        sent += 1;
        assert!(sent < 100_000, "the new weights never applied");
    }
    // After the reload: green only.
    let blue = groups.counts()["blue"];
    for _ in 0..50 {
        assert_eq!(infer(&mut client, "").status(), 200);
        sent += 1;
    }
    let counts = groups.counts();
    assert_eq!(counts["blue"], blue);
    assert_eq!(counts["blue"] + counts["green"], sent);
    drop(client);
    let mut gw = gw;
    let (text, access) = access_lines_at_exit(&mut gw, &log);
    assert_eq!(access.len() as u64, sent, "{text}");
    for (group, n) in [("blue", counts["blue"]), ("green", counts["green"])] {
        let named = format!(r#""group":"{group}","rule":"rollout""#);
        let lines = access.iter().filter(|l| l.contains(&named)).count() as u64;
        assert_eq!(lines, n, "{named}");
    }
    let _ = std::fs::remove_file(&config);
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn generate_load_unload_and_v1_follow_the_routes() {
    let groups = Groups::start(&["default", "gpu", "legacy"]);
    let gateway = groups
        .gateway(
            "[[routes]]\nfront = \"v1\"\ngroup = \"legacy\"\n\n[[routes]]\nmodels = [\"add_sub\"]\ngroup = \"gpu\"\n",
        )
        .await;
    // /generate and /generate_stream: the stream goes to the rule's group.
    for path in [
        "/v2/models/add_sub/generate",
        "/v2/models/add_sub/generate_stream",
    ] {
        let before = groups.counts();
        let r = post(&gateway, path, &[], r#"{"INPUT0":[1,2],"INPUT1":[3,4]}"#).await;
        assert_eq!(r.status, 200, "{path}: {}", text(&r));
        assert_eq!(groups.served(&before), "gpu", "{path}");
    }
    // An unload goes to the group the model's route names, and only there.
    let r = post(&gateway, "/v2/repository/models/add_sub/unload", &[], "").await;
    assert_eq!(r.status, 200, "{}", text(&r));
    let index = text(&post(&gateway, "/v2/repository/index", &[], "").await);
    assert!(
        index.contains(r#"{"name":"add_sub","group":"default","version":"1","state":"READY"}"#),
        "{index}"
    );
    assert!(
        index.contains(r#"{"name":"add_sub","group":"gpu","version":"1","state":"UNAVAILABLE""#),
        "{index}"
    );
    assert_eq!(get(&gateway, "/v2/models/add_sub/ready").await.status, 400);
    let r = post(&gateway, "/v2/repository/models/add_sub/load", &[], "").await;
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(get(&gateway, "/v2/models/add_sub/ready").await.status, 200);
    // The v1 API is a front of its own.
    let before = groups.counts();
    let r = v1_add_sub(&gateway, "add_sub").await;
    assert_eq!(r.status, 200, "{}", shown(&r));
    assert_eq!(groups.served(&before), "legacy");
}

/// The `model` of every answer and chunk an OpenAI answer holds, and the
/// answer's text whole.
fn openai_models(response: &HttpResponse) -> (Vec<String>, String) {
    let body = String::from_utf8_lossy(&response.body_bytes()).to_string();
    let payloads: Vec<&str> = match body.strip_prefix("data: ") {
        Some(_) => body
            .split_terminator("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .filter(|e| *e != "[DONE]")
            .collect(),
        None => vec![body.as_str()],
    };
    let models = payloads
        .iter()
        .map(|p| {
            let value: serde_json::Value = serde_json::from_str(p).expect("JSON");
            value["model"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    (models, body)
}

#[tokio::test]
async fn the_openai_front_is_routed_at_the_door_under_its_own_front() {
    let groups = Groups::start(&["blue", "default", "llm", "shadow"]);
    // The OpenAI id `chat` is the v2 model `chatbot`; the second rule, for
    // this front only, sends `chatbot` to the group `llm` as `llm_vllm`,
    // and would mirror it; the first sends the blue tenant's OpenAI
    // requests to `blue`.
    let gateway = groups
        .gateway(
            "[openai.models.chat]\nupstream_model = \"chatbot\"\n\n\
             [[routes]]\nfront = \"openai\"\nheader = { name = \"x-tenant\", value = \"blue\" }\n\
             group = \"blue\"\n\n\
             [[routes]]\nname = \"openai-llm\"\nfront = \"openai\"\nmodels = [\"chatbot\"]\n\
             group = \"llm\"\nupstream_model = \"llm_vllm\"\n\
             mirror = { group = \"shadow\", percent = 100 }\n",
        )
        .await;
    for stream in [false, true] {
        let before = groups.counts();
        let body = serde_json::json!({"model": "chat", "prompt": "a b c", "max_tokens": 3, "stream": stream});
        let r = post(&gateway, "/v1/completions", &[], &body.to_string()).await;
        assert_eq!(r.status, 200, "{}", text(&r));
        assert_eq!(groups.served(&before), "llm", "stream: {stream}");
        let (models, body) = openai_models(&r);
        assert!(
            !models.is_empty() && models.iter().all(|m| m == "chat"),
            "{body}"
        );
        assert!(
            !body.contains("chatbot") && !body.contains("llm_vllm"),
            "{body}"
        );
    }
    assert_eq!(
        groups.demo("llm").last_request().unwrap().model_name,
        "llm_vllm"
    );
    assert_eq!(
        metric(
            &gateway,
            r#"tensorgate_route_calls_total{rule="openai-llm",group="llm",outcome="ok"}"#
        ),
        2
    );
    // A stream is never mirrored: counted as skipped, nothing sent.
    assert_eq!(
        metric(
            &gateway,
            r#"tensorgate_mirror_skipped_total{rule="openai-llm",reason="streamed"}"#
        ),
        2
    );
    assert_eq!(groups.demo("shadow").infer_count(), 0);
    // The rule is this front's: the v2 front's `chatbot` goes to default,
    // which has no such model; an OpenAI id no rule names goes there too.
    let r = post(
        &gateway,
        "/v2/models/chatbot/generate",
        &[],
        r#"{"text_input":"a"}"#,
    )
    .await;
    assert_eq!(r.status, 404, "{}", text(&r));
    let before = groups.counts();
    let body = serde_json::json!({"model": "llm_trtllm", "prompt": "a", "max_tokens": 1});
    let r = post(&gateway, "/v1/completions", &[], &body.to_string()).await;
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(groups.served(&before), "default");
    // The headers the rules read are the OpenAI request's too.
    let before = groups.counts();
    let tenant = [("x-tenant", "blue")];
    let r = post(&gateway, "/v1/completions", &tenant, &body.to_string()).await;
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(groups.served(&before), "blue");
    // The listing names the OpenAI id (and the v2 name the rule takes).
    let listing = text(&get(&gateway, "/v1/models").await);
    assert!(
        listing.contains(r#""id":"chat""#) && listing.contains(r#""id":"chatbot""#),
        "{listing}"
    );
    // An upstream's error quotes its own name of the model: the client
    // reads the OpenAI id it sent.
    groups.demo("llm").set_loaded("llm_vllm", false);
    for stream in [false, true] {
        let body = serde_json::json!({"model": "chat", "prompt": "a", "stream": stream});
        let r = post(&gateway, "/v1/completions", &[], &body.to_string()).await;
        let shown = text(&r);
        assert!(r.status >= 400, "{shown}");
        assert!(shown.contains("'chat'"), "{shown}");
        assert!(
            !shown.contains("chatbot") && !shown.contains("llm_vllm"),
            "{shown}"
        );
    }
}
