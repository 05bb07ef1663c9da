//! The request pipeline's entry, independent of pingora: a classified
//! [`Route`] and an [`HttpRequest`] in, exactly one [`HttpResponse`] out:
//! access rules, dispatch to the route's answer, metrics and the access
//! log. Every failure
//! becomes an answer through `Error` (the one status table).

use tracing::Instrument;

use crate::app::guard::bearer;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::front::http::{Answer, HttpRequest, HttpResponse};
use crate::front::pipeline::Pipeline;
use crate::front::route::Route;
use crate::trace::TraceContext;

impl Pipeline {
    /// Classifies and answers one request (method check included).
    pub async fn handle(&self, req: HttpRequest) -> HttpResponse {
        let Some(route) = Route::classify_target(&req.path, &self.gateway.config().v1.path_prefix)
        else {
            return HttpResponse::error(&Error::route_not_found());
        };
        self.handle_route(&route, req).await
    }

    /// Answers a request whose route is already known, as one complete
    /// response (a `/generate_stream` answer is collected).
    pub async fn handle_route(&self, route: &Route, req: HttpRequest) -> HttpResponse {
        match self.answer(route, req).await {
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
    pub async fn answer(&self, route: &Route, mut req: HttpRequest) -> Answer {
        let started = std::time::Instant::now();
        let bytes_in = req.body_len() as usize;
        let span = tracing::info_span!(
            "request",
            otel.name = route.name(),
            otel.kind = "server",
            route = route.name(),
            model = route.model().unwrap_or_default(),
            http.status = tracing::field::Empty,
            backend = tracing::field::Empty,
            upstream_us = tracing::field::Empty,
        );
        let trace = TraceContext::from_headers(req.header("traceparent"), req.header("tracestate"))
            .joined(&span);
        let trace_id = trace.trace_id();
        let ctx = RequestContext::traced(trace);
        let answer = self.answer_route(&ctx, route, &mut req);
        let answer = answer.instrument(span.clone()).await;
        let upstream = ctx.upstream_use();
        let (status, bytes_out) = match &answer {
            Answer::Full(response) => (response.status, response.body_len()),
            Answer::Streamed(streamed) => (streamed.status, 0),
        };
        span.record("http.status", status);
        span.record("upstream_us", upstream.time.as_micros() as u64);
        if let Some(backend) = upstream.backend {
            span.record("backend", backend.to_string());
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
            tracing::info!(
                target: "tensorgate::access",
                method = %req.method,
                path = %req.path,
                route = route.name(),
                model,
                status,
                bytes_in,
                bytes_out,
                total_us = took.as_micros() as u64,
                upstream_us = upstream.time.as_micros() as u64,
                backend = %upstream.backend.map_or_else(String::new, |b| b.to_string()),
                trace_id = %trace_id,
            );
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
        let status = status.to_string();
        m.requests.with_label_values(&[name, model, &status]).inc();
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
        route: &Route,
        req: &mut HttpRequest,
    ) -> Answer {
        let credential = bearer(req.header("Authorization"));
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
                return Answer::Full(crate::front::v1::refusal(&self.gateway, route, &error))
            }
        };
        if let Route::V1(v1) = route {
            return Answer::Full(self.v1(ctx, v1, req).await);
        }
        if !route.allows(&req.method) {
            return Answer::Full(HttpResponse::error(&Error::method_not_allowed()));
        }
        match self.dispatch(ctx, route, req).await {
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
        route: &Route,
        req: &mut HttpRequest,
    ) -> Result<Answer> {
        match route {
            Route::Infer(model) => self.infer(ctx, model, req).await,
            Route::Generate(model) => self.generate_once(ctx, model, req).await.map(Answer::Full),
            Route::GenerateStream(model) => self.generate_stream(ctx, model, req).await,
            _ => self.endpoint(ctx, route, req).await.map(Answer::Full),
        }
    }
}
