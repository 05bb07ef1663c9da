//! The request pipeline, independent of pingora: a classified [`Route`] and
//! an [`HttpRequest`] in, exactly one [`HttpResponse`] out. Every failure
//! becomes an answer through `Error` (the one status table).

use regex::Regex;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::front::http::{HttpRequest, HttpResponse};
use crate::front::route::Route;
use crate::upstream::{ModelCache, Upstream, UpstreamSettings};
use crate::wire::v2_request::DecodeLimits;

/// Everything a request needs, shared by all requests.
pub struct Gateway {
    pub(crate) config: Config,
    pub(crate) upstream: Upstream,
    pub(crate) models: ModelCache,
    pub(crate) forward_pattern: Option<Regex>,
}

impl Gateway {
    /// Builds the gateway from a validated config.
    pub fn new(config: Config) -> Result<Gateway, String> {
        config.validate()?;
        let forward_pattern = match &config.http.header_forward_pattern {
            // Triton prefixes the pattern with (?i) and matches partially.
            Some(p) => Some(Regex::new(&format!("(?i){p}")).map_err(|e| e.to_string())?),
            None => None,
        };
        let upstream = Upstream::new(UpstreamSettings {
            address: config.upstream.address.clone(),
            connect_timeout: config.upstream.connect_timeout(),
            request_timeout: config.upstream.request_timeout(),
            max_message_bytes: config.upstream.max_message_bytes,
        });
        Ok(Gateway {
            models: ModelCache::new(config.upstream.model_info_ttl()),
            upstream,
            forward_pattern,
            config,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub(crate) fn decode_limits(&self) -> DecodeLimits {
        DecodeLimits {
            max_input_size: self.config.limits.max_input_size,
            max_json_depth: self.config.limits.max_json_depth,
        }
    }

    /// Classifies and answers one request (method check included).
    pub async fn handle(&self, req: HttpRequest) -> HttpResponse {
        let Some(route) = Route::classify_target(&req.path, &self.config.v1.path_prefix) else {
            return HttpResponse::error(&Error::route_not_found());
        };
        self.handle_route(&route, &req).await
    }

    /// Answers a request whose route is already known.
    pub async fn handle_route(&self, route: &Route, req: &HttpRequest) -> HttpResponse {
        if let Route::V1(v1) = route {
            return self.v1(v1, req).await;
        }
        if !route.allows(&req.method) {
            let mut error = Error::method_not_allowed();
            if !route.plain_before_body() {
                error.ct = crate::error::ErrorCt::Json;
            }
            return HttpResponse::error(&error);
        }
        match self.dispatch(route, req).await {
            Ok(response) => response,
            Err(error) => {
                tracing::debug!(status = error.status(), message = %error.message, "request failed");
                HttpResponse::error(&error)
            }
        }
    }

    async fn dispatch(&self, route: &Route, req: &HttpRequest) -> Result<HttpResponse> {
        match route {
            Route::Infer(model) => self.infer(model, req).await,
            _ => self.endpoint(route, req).await,
        }
    }
}
