//! The request pipeline's entry, independent of pingora: a request's
//! [`Plan`] and its [`HttpRequest`] in, exactly one [`HttpResponse`] out:
//! access rules, dispatch to the route's answer, metrics and the access
//! log. Every failure
//! becomes an answer through `Error` (the one status table).

use tracing::Instrument;

use crate::app::guard::bearer;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::front::http::pipeline::Pipeline;
use crate::front::http::plan::Plan;
use crate::front::http::route::Route;
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
impl Pipeline {
    /// Plans and answers one request (method check included).
    pub async fn handle(&self, req: HttpRequest) -> HttpResponse {
        let Some(plan) = self.plan(&req.path, &req) else {
            return HttpResponse::error(&Error::route_not_found());
        };
        self.handle_planned(&plan, req).await
    }

    /// Answers a planned request as one complete response (a
    /// `/generate_stream` answer is collected).
    pub async fn handle_planned(&self, plan: &Plan, req: HttpRequest) -> HttpResponse {
        match self.answer(plan, req).await {
            Answer::Full(response) => response,
            Answer::Streamed(streamed) => streamed.collect().await,
        }
    }

    /// The entry point of the pingora glue: answers (a `/generate_stream`
    /// answer streamed) and accounts for it: its trace context (sent
    /// upstream), its span, metrics, one access-log line. For a streamed
    /// answer the times and bytes are those up to the first event. The
    /// request is the pipeline's: `/infer` lets go of the body as soon as
    /// it is decoded.
    pub async fn answer(&self, plan: &Plan, mut req: HttpRequest) -> Answer {
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
        let ctx = RequestContext::traced(trace);
        let answer = self.answer_route(&ctx, plan, &mut req);
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
        self.account(
            route.name(),
            model,
            (bytes_in, status, bytes_out),
            took,
            upstream.time,
        );
        if self.gateway.config().log.access_log {
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
                trace_id,
            });
        }
        answer
    }

    fn account(
        &self,
        name: &str,
        model: &str,
        (bytes_in, status, bytes_out): (usize, u16, usize),
        took: std::time::Duration,
        upstream: std::time::Duration,
    ) {
        let m = &self.gateway.metrics();
        let mut status_text = itoa::Buffer::new();
        let status = status_text.format(status);
        m.requests.with_label_values(&[name, model, status]).inc();
        m.request_seconds
            .with_label_values(&[name])
            .observe(took.as_secs_f64());
        m.gateway_seconds
            .with_label_values(&[name])
            .observe(took.saturating_sub(upstream).as_secs_f64());
        m.bytes_in
            .with_label_values(&[name])
            .inc_by(bytes_in as u64);
        m.bytes_out
            .with_label_values(&[name])
            .inc_by(bytes_out as u64);
    }

    /// Access rules, then the route's answer; every failure an answer.
    async fn answer_route(
        &self,
        ctx: &RequestContext,
        plan: &Plan,
        req: &mut HttpRequest,
    ) -> Answer {
        let route = &plan.route;
        let credential = bearer(plan.authorization.as_deref());
        let guard = self.gateway.guard();
        let _permit = match guard
            .restricted(
                route.group(),
                |name| req.header(name),
                self.gateway.metrics(),
            )
            .and_then(|()| guard.admit(route.group(), credential, req.peer, self.gateway.metrics()))
        {
            Ok(permit) => permit,
            Err(error) => {
                return Answer::Full(crate::front::http::v1::refusal(
                    &self.gateway,
                    route,
                    &error,
                ))
            }
        };
        if let Route::V1(v1) = route {
            return Answer::Full(self.v1(ctx, v1, req).await);
        }
        if !route.allows(&req.method) {
            return Answer::Full(HttpResponse::error(&Error::method_not_allowed()));
        }
        match self.dispatch(ctx, plan, req).await {
            Ok(answer) => answer,
            Err(error) => {
                tracing::debug!(status = error.status(), message = %error.message, "request failed");
                Answer::Full(HttpResponse::error(&error))
            }
        }
    }

    async fn dispatch(
        &self,
        ctx: &RequestContext,
        plan: &Plan,
        req: &mut HttpRequest,
    ) -> Result<Answer> {
        match &plan.route {
            Route::Infer(model) => self.infer(ctx, plan, model, req).await,
            Route::Generate(model) => self
                .generate_once(ctx, plan, model, req)
                .await
                .map(Answer::Full),
            Route::GenerateStream(model) => self.generate_stream(ctx, plan, model, req).await,
            route => self.endpoint(ctx, route, req).await.map(Answer::Full),
        }
    }
}
