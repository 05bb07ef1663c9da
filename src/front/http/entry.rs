//! The HTTP front's entry, independent of pingora: a request's [`Plan`]
//! is made once ([`plan`]), then [`answer`] takes the plan and the
//! [`HttpRequest`] and gives exactly one [`Answer`]: the access rules,
//! the route's handler (`handlers::dispatch`, or the v1 API's), metrics,
//! the request's span and one access-log line. Every failure becomes an
//! answer through `Error` (the one status table). [`handle`] is the same
//! for a caller that cannot stream (tests, benches): the answer collected.

use std::sync::Arc;

use tracing::Instrument;

use crate::app::guard::bearer;
use crate::app::Gateway;
use crate::config::FrontKind;
use crate::context::{RequestContext, RouteFacts};
use crate::error::Error;
use crate::front::http::openai::route::OpenAiRoute;
use crate::front::http::plan::Plan;
use crate::front::http::route::Route;
use crate::front::http::v1;
use crate::front::http::{handlers, openai};
use crate::front::http::{Answer, HttpRequest, HttpResponse};
use crate::telemetry::access::{self, AccessLine};
use crate::trace::TraceContext;

/// The span of one request (`route`'s name and model; status, backend and
/// upstream time recorded when it is answered), at `level`.
macro_rules! request_span {
    ($level:expr, $route:expr) => {
        tracing::span!(
            $level,
            "request",
            otel.name = $route.name(),
            otel.kind = "server",
            route = $route.name(),
            model = $route.model().unwrap_or_default(),
            http.status = tracing::field::Empty,
            backend = tracing::field::Empty,
            upstream_us = tracing::field::Empty,
        )
    };
}

/// The plan of `req` for its raw `target` (path and query: the v1 API
/// reads its format there); `None` when no route has that path (404).
pub fn plan(gateway: &Gateway, target: &str, req: &HttpRequest) -> Option<Plan> {
    plan_for(gateway, Routes::All, target, req)
}

/// Which routes a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Routes {
    /// The HTTP listener's: v2, v1 and (when on) the OpenAI API.
    All,
    /// `openai.listen`'s: only the OpenAI API; any other path is its 404.
    OpenAi,
}

/// [`plan`] on a listener that serves `routes`.
pub(crate) fn plan_for(
    gateway: &Gateway,
    routes: Routes,
    target: &str,
    req: &HttpRequest,
) -> Option<Plan> {
    let config = gateway.config();
    let route = match routes {
        Routes::All => {
            Route::classify_target(target, &config.v1.path_prefix, config.openai.enabled)?
        }
        Routes::OpenAi => Route::OpenAi(OpenAiRoute::classify_target(target)),
    };
    Some(Plan::new(route, &req.method, &req.headers, &config.limits))
}

/// Plans and answers one request as one complete response (a streamed
/// answer collected).
pub async fn handle(gateway: &Arc<Gateway>, req: HttpRequest) -> HttpResponse {
    let Some(plan) = plan(gateway, &req.path, &req) else {
        return HttpResponse::error(&Error::route_not_found());
    };
    match answer(gateway, &plan, req).await {
        Answer::Full(response) => response,
        Answer::Streamed(streamed) => streamed.collect().await,
    }
}

/// The one answer to a planned request, accounted for: its trace context
/// (sent upstream), its span, metrics, one access-log line. For a
/// streamed answer the times and bytes are those up to its head. The
/// request is the handler's: `/infer` lets go of the body as soon as it is
/// decoded.
pub async fn answer(gateway: &Arc<Gateway>, plan: &Plan, mut req: HttpRequest) -> Answer {
    let route = &plan.route;
    let started = std::time::Instant::now();
    let bytes_in = req.body_len() as usize;
    // At `info` only when an OTLP exporter takes it: otherwise the log
    // layer's bookkeeping of a span it never prints (its fields
    // formatted, entered and left on every poll) cost ~10 µs of every
    // request (docs/performance.md, "The cost budget").
    let span = if crate::telemetry::exports_spans() {
        request_span!(tracing::Level::INFO, route)
    } else {
        request_span!(tracing::Level::DEBUG, route)
    };
    let (parent, state) = &plan.trace;
    let trace = TraceContext::from_headers(parent.as_deref(), state.as_deref()).joined(&span);
    let trace_id = trace.trace_id();
    let mut ctx = RequestContext::traced(trace);
    let answer = admitted(gateway, &mut ctx, plan, &mut req);
    let answer = answer.instrument(span.clone()).await;
    let upstream = ctx.upstream_use();
    let (status, bytes_out) = match &answer {
        Answer::Full(response) => (response.status, response.body_len()),
        Answer::Streamed(streamed) => (streamed.status, 0),
    };
    span.record("http.status", status);
    span.record("upstream_us", upstream.time.as_micros() as u64);
    if let Some(backend) = upstream.backend {
        // Formatted only by a subscriber that keeps the span: a
        // `to_string` here cost every request ~2k instructions.
        span.record("backend", tracing::field::display(backend));
    }
    let took = started.elapsed();
    let model = match route.model() {
        Some(_) if status == 404 => "(unknown)",
        Some(model) => model,
        None => "",
    };
    account(
        gateway,
        route.name(),
        model,
        (bytes_in, status, bytes_out),
        took,
        upstream.time,
    );
    if gateway.config().log.access_log {
        let routed = ctx.route_note();
        access::record(&AccessLine {
            method: req.method.as_str(),
            path: &req.path,
            route: route.name(),
            model,
            status,
            bytes_in,
            bytes_out,
            total_us: took.as_micros() as u64,
            upstream_us: upstream.time.as_micros() as u64,
            backend: upstream.backend,
            group: routed.group.as_deref().unwrap_or_default(),
            rule: routed.rule.as_deref().unwrap_or_default(),
            trace_id,
        });
    }
    answer
}

fn account(
    gateway: &Gateway,
    name: &'static str,
    model: &str,
    (bytes_in, status, bytes_out): (usize, u16, usize),
    took: std::time::Duration,
    upstream: std::time::Duration,
) {
    let m = gateway.metrics();
    let mut status_text = itoa::Buffer::new();
    let status = status_text.format(status);
    m.requests.with_label_values(&[name, model, status]).inc();
    m.route_series(name, |series| {
        series.request_seconds.observe(took.as_secs_f64());
        let own = took.saturating_sub(upstream);
        series.gateway_seconds.observe(own.as_secs_f64());
        series.bytes_in.inc_by(bytes_in as u64);
        series.bytes_out.inc_by(bytes_out as u64);
    });
}

/// The answer to a request refused before its handler ran (access rules,
/// body limits), in its API's words: v1 style for v1 routes, OpenAI's
/// shape for the OpenAI routes, the v2 error otherwise.
pub(crate) fn refusal(gateway: &Gateway, route: &Route, error: &Error) -> HttpResponse {
    match route {
        Route::V1(_) => v1::refusal(gateway, error),
        Route::OpenAi(_) => openai::error_response(error),
        _ => HttpResponse::error(error),
    }
}

/// Access rules, then the route's handler; every failure an answer.
async fn admitted(
    gateway: &Arc<Gateway>,
    ctx: &mut RequestContext,
    plan: &Plan,
    req: &mut HttpRequest,
) -> Answer {
    let route = &plan.route;
    let credential = bearer(plan.authorization.as_deref());
    let guard = gateway.guard();
    let metrics = gateway.metrics();
    let permit = match guard
        .restricted(route.group(), |name| req.header(name), metrics)
        .and_then(|()| guard.admit(route.group(), credential, req.peer, metrics))
    {
        Ok(permit) => permit,
        Err(error) => return Answer::Full(refusal(gateway, route, &error)),
    };
    let front = match route {
        Route::V1(_) => FrontKind::V1,
        Route::OpenAi(_) => FrontKind::OpenAi,
        _ => FrontKind::Http,
    };
    // The headers the routing rules read, each once (none without rules
    // that read one).
    let headers = gateway.route_headers(|name| {
        let value = req
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name));
        value.map(|(_, v)| bytes::Bytes::copy_from_slice(v.as_bytes()))
    });
    ctx.set_facts(RouteFacts {
        headers,
        key_name: permit.key_name().cloned(),
        ..RouteFacts::of(front)
    });
    let ctx = &*ctx;
    let _permit = permit;
    match route {
        Route::V1(v1_route) => return Answer::Full(v1::answer(gateway, ctx, v1_route, req).await),
        Route::OpenAi(openai_route) => {
            return openai::answer(gateway, ctx, plan, openai_route, req).await
        }
        _ => {}
    }
    if !route.allows(&req.method) {
        return Answer::Full(HttpResponse::error(&Error::method_not_allowed()));
    }
    match handlers::dispatch(gateway, ctx, plan, req).await {
        Ok(answer) => answer,
        Err(error) => {
            tracing::debug!(status = error.status(), message = %error.message, "request failed");
            Answer::Full(HttpResponse::error(&error))
        }
    }
}
