//! `POST /v1/completions` and `POST /v1/chat/completions`: the body
//! decoded (`wire::openai`), the model resolved (`app::openai`: its name
//! upstream, convention and template), the chat rendered, the model's
//! inputs made (`translate::to_grpc::openai`), and one `ModelStreamInfer`
//! stream opened through the door for the model's v2 name, on the route
//! its signature took. The
//! answer is read whole, or streamed event by event (`stream`); each
//! response's text and token counts come from
//! `translate::from_grpc::openai`. [`Tally`] keeps the usage, the finish
//! reason and the generation's metrics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::app::door::{self, Aim};
use crate::app::{openai, Gateway};
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::front::http::handlers::generate::Generating;
use crate::front::http::plan::Plan;
use crate::front::http::{HttpRequest, HttpResponse};
use crate::metrics::Metrics;
use crate::translate::from_grpc::openai::{piece, Piece};
use crate::translate::from_grpc::stream::{self, StreamItem};
use crate::translate::to_grpc;
use crate::wire::openai::{decode, Answering, Endpoint, Generation, Prompt, Usage};
use prometheus::Histogram;

/// The target of the line each generation's end logs.
const LOG_TARGET: &str = "tensorgate::openai";

/// A generation's request made and its stream open.
pub(super) struct Opened {
    pub(super) upstream: Generating,
    pub(super) answering: Answering,
    pub(super) tally: Tally,
    pub(super) include_usage: bool,
}

/// Decodes one generation request, resolves its model, makes its inputs
/// and opens the stream; and whether the client asked for the answer to
/// stream.
pub(super) async fn open(
    gateway: &Gateway,
    ctx: &RequestContext,
    plan: &Plan,
    endpoint: Endpoint,
    req: &HttpRequest,
) -> Result<(Opened, bool)> {
    if !plan.body_identity() {
        return Err(Error::invalid(
            "Unsupported content-encoding, only 'identity' is supported.",
        ));
    }
    // Time to first token counts from here: the body in hand.
    let started = Instant::now();
    let generation = decode(endpoint, &req.body)?;
    let opened = opened(gateway, ctx, &generation, started).await?;
    Ok((opened, generation.stream))
}

/// The model resolved, its inputs made, its stream open.
async fn opened(
    gateway: &Gateway,
    ctx: &RequestContext,
    generation: &Generation,
    started: Instant,
) -> Result<Opened> {
    let served = openai::resolve(gateway, ctx, &generation.model).await?;
    let prompt = match &generation.prompt {
        Prompt::Text(text) => text.clone(),
        Prompt::Chat(messages) => {
            let Some(template) = &served.template else {
                return Err(Error::invalid(format!(
                    "model '{}' has no chat template: set openai.models.{}.chat_template to its tokenizer_config.json, or use /v1/completions",
                    generation.model, generation.model
                ))
                .about("messages"));
            };
            let prompt = template.render(messages)?;
            tracing::debug!(model = %generation.model, %prompt, "chat template rendered");
            prompt
        }
    };
    let config = &gateway.config().openai;
    let max_tokens = generation.max_tokens.unwrap_or(config.default_max_tokens);
    let request = to_grpc::openai::model_inputs(
        served.backend,
        &served.upstream,
        &served.info,
        generation,
        prompt,
        max_tokens,
    )?;
    let message = to_grpc::model_infer(&request);
    let aim = Aim::model(&served.upstream).on(&served.routed);
    let requests = tokio_stream::once(message);
    let replies = door::open_stream(gateway, ctx, aim, None, requests)
        .await
        .map_err(|e| openai::named_back(e, &served.upstream, &generation.model))?;
    Ok(Opened {
        upstream: Generating::new(replies, request.id),
        answering: Answering::new(
            generation.endpoint,
            answer_id(generation.endpoint),
            super::now_seconds(),
            generation.model.clone(),
        ),
        tally: Tally::new(
            gateway.metrics(),
            (&generation.model, &served.upstream),
            max_tokens,
            started,
        ),
        include_usage: generation.include_usage,
    })
}

/// Reads the stream to its end: the texts joined, the one answer.
pub(super) async fn whole(metrics: &Metrics, mut opened: Opened) -> Result<HttpResponse> {
    let mut text = String::new();
    loop {
        let item = opened.upstream.next().await;
        match opened.tally.take(item) {
            Ok(Taken::Piece(piece, last)) => {
                text.push_str(&piece.text);
                if last {
                    opened.upstream.drain().await;
                    break;
                }
            }
            Ok(Taken::End) => break,
            Err(error) => {
                opened.tally.end(metrics, Outcome::Failed(&error.message));
                return Err(error);
            }
        }
    }
    opened.tally.end(metrics, Outcome::Done);
    let tally = &opened.tally;
    let body = opened.answering.whole(&text, tally.finish(), tally.usage());
    Ok(HttpResponse::json(body))
}

/// How a generation ended.
#[derive(Debug, Clone, Copy)]
pub(super) enum Outcome<'a> {
    /// To its last response.
    Done,
    /// The upstream failed it (its text).
    Failed(&'a str),
    /// The client went away first.
    Cancelled,
}

impl Outcome<'_> {
    fn label(self) -> &'static str {
        match self {
            Outcome::Done => "ok",
            Outcome::Failed(_) => "error",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// What one upstream message gave.
pub(super) enum Taken {
    /// A response's piece, and whether it was the last.
    Piece(Piece, bool),
    /// The stream ended.
    End,
}

/// The usage, finish reason and metrics of one generation, kept as its
/// responses arrive.
pub(super) struct Tally {
    /// The OpenAI model id, as the client called it.
    model: String,
    /// Its v2 name, which an upstream's failure text may quote.
    upstream: String,
    /// The model's two latency series, looked up once, not per token.
    first_token: Histogram,
    inter_token: Histogram,
    max_tokens: u32,
    started: Instant,
    /// When the last response with text arrived (none yet: the next is
    /// the first token).
    last_text: Option<Instant>,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

impl Tally {
    fn new(
        metrics: &Metrics,
        (model, upstream): (&str, &str),
        max_tokens: u32,
        started: Instant,
    ) -> Tally {
        let llm = &metrics.llm;
        Tally {
            model: model.to_string(),
            upstream: upstream.to_string(),
            first_token: llm.first_token_seconds.with_label_values(&[model]),
            inter_token: llm.inter_token_seconds.with_label_values(&[model]),
            max_tokens,
            started,
            last_text: None,
            prompt_tokens: None,
            completion_tokens: None,
        }
    }

    /// Takes one message: a response's piece counted (time to first
    /// token, inter-token time), a failed or refused one as its error
    /// (naming the OpenAI id).
    pub(super) fn take(&mut self, item: Option<StreamItem>) -> Result<Taken> {
        let named = |error| openai::named_back(error, &self.upstream, &self.model);
        let (response, last) = match item {
            None => return Ok(Taken::End),
            Some(StreamItem::Response { response, last }) => (response, last),
            Some(StreamItem::Failed { message, .. }) => {
                return Err(named(stream::failure(&message)))
            }
            Some(StreamItem::Refused { message }) => return Err(named(stream::refusal(&message))),
        };
        let piece = piece(&response)?;
        if !piece.text.is_empty() {
            let now = Instant::now();
            let (histogram, since) = match self.last_text {
                None => (&self.first_token, self.started),
                Some(before) => (&self.inter_token, before),
            };
            histogram.observe(now.duration_since(since).as_secs_f64());
            self.last_text = Some(now);
        }
        // The prompt's count once (every response repeats it), the
        // completion's added up (each response counts its own tokens).
        self.prompt_tokens = self.prompt_tokens.or(piece.input_tokens);
        if let Some(n) = piece.output_tokens {
            self.completion_tokens = Some(self.completion_tokens.unwrap_or(0).saturating_add(n));
        }
        Ok(Taken::Piece(piece, last))
    }

    /// The usage, when the model returned both counts.
    pub(super) fn usage(&self) -> Option<Usage> {
        Some(Usage::new(self.prompt_tokens?, self.completion_tokens?))
    }

    /// `length` when the completion reached its `max_tokens`, else `stop`.
    pub(super) fn finish(&self) -> &'static str {
        match self.completion_tokens {
            Some(n) if n >= u64::from(self.max_tokens) => "length",
            _ => "stop",
        }
    }

    /// Counts the generation's end (its tokens, its outcome) and logs it:
    /// one line per generation (target `tensorgate::openai`), at `warn`
    /// when the upstream failed it, so a failure after the answer's head
    /// (whose access line said 200) is seen too.
    pub(super) fn end(&self, metrics: &Metrics, outcome: Outcome<'_>) {
        let model = &self.model;
        if let Some(n) = self.completion_tokens {
            metrics
                .llm
                .output_tokens
                .with_label_values(&[model])
                .inc_by(n);
        }
        let label = outcome.label();
        metrics
            .llm
            .generations
            .with_label_values(&[model, label])
            .inc();
        let total_us = self.started.elapsed().as_micros() as u64;
        let tokens = self.completion_tokens.unwrap_or(0);
        match outcome {
            Outcome::Failed(error) => tracing::warn!(
                target: LOG_TARGET, model = %model, outcome = label, completion_tokens = tokens,
                total_us, error, "generation failed"
            ),
            _ => tracing::info!(
                target: LOG_TARGET, model = %model, outcome = label, completion_tokens = tokens,
                total_us, finish_reason = self.finish(), "generation ended"
            ),
        }
    }
}

/// A new answer id: `cmpl-` or `chatcmpl-` and 24 hex digits, unique in
/// the process (a counter) and unlikely to repeat across restarts (the
/// start time mixed in).
fn answer_id(endpoint: Endpoint) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let count = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let prefix = match endpoint {
        Endpoint::Completions => "cmpl",
        Endpoint::Chat => "chatcmpl",
    };
    format!("{prefix}-{nanos:016x}{count:08x}")
}
