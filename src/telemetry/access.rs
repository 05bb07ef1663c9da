//! The access log's line: the one event that fires on every request
//! ([`record`]), and the formatter ([`Fast`]) that writes it in one pass,
//! byte for byte what `tracing_subscriber`'s own text or JSON formatter
//! writes for it.
//!
//! Hand-written (reason): the line is the only log output on the path of
//! every request (issue 28's goal 1: ≤ 5 µs), and the stock formatters
//! spend ~5 µs on it: each field goes through `core::fmt` with colour
//! wrappers that print nothing, the JSON one serializes through
//! `serde_json` into an `io::Write` adaptor that re-checks every chunk as
//! UTF-8, and the timestamp goes through padded `write!`s. Here the
//! values are copied as they are, with the stock escaping only where a
//! value needs it (then through the same `Debug` / `serde_json` code the
//! stock formatter uses, so rare values cannot diverge).
//!
//! It stays a [`FormatEvent`] inside the `fmt` layer, not a write of its
//! own beside `tracing`: the event still passes the global filter
//! (`log.level`, `TENSORGATE_LOG`, a directive for `tensorgate::access`),
//! reaches every other layer (the OTLP one), and is written through the
//! same writer as every other line, whole and in order. Anything it was
//! not made for — another target, a span around the event, a field of
//! another kind, colour — goes to the stock formatter it wraps.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::net::SocketAddr;

use opentelemetry::trace::TraceId;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::trace::hex_into;

/// The access line's target: the name a filter directive uses for it.
pub(crate) const TARGET: &str = "tensorgate::access";

/// One request as its access line tells it.
pub(crate) struct AccessLine<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub route: &'a str,
    /// `(unknown)` on a 404, empty for a route without a model.
    pub model: &'a str,
    pub status: u16,
    pub bytes_in: usize,
    pub bytes_out: usize,
    pub total_us: u64,
    pub upstream_us: u64,
    /// The backend that answered last; none when no upstream was called.
    pub backend: Option<SocketAddr>,
    /// The upstream group the request was routed to (empty: none), and
    /// the routing rule that sent it there (empty: no rule matched).
    pub group: &'a str,
    pub rule: &'a str,
    pub trace_id: TraceId,
}

/// Emits the access line, if the filter lets it through.
pub(crate) fn record(line: &AccessLine<'_>) {
    tracing::info!(
        target: TARGET,
        method = %line.method,
        path = %line.path,
        route = line.route,
        model = line.model,
        status = line.status,
        bytes_in = line.bytes_in,
        bytes_out = line.bytes_out,
        total_us = line.total_us,
        upstream_us = line.upstream_us,
        backend = %OrEmpty(line.backend),
        group = line.group,
        rule = line.rule,
        trace_id = %Hex(line.trace_id),
    );
}

/// A trace id as its own `Display` writes it, 32 lower-case hex digits,
/// made from its bytes ([`hex_into`]).
struct Hex(TraceId);

impl fmt::Display for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = [0u8; 32];
        hex_into(&self.0.to_bytes(), &mut text);
        f.write_str(std::str::from_utf8(&text).unwrap_or_default())
    }
}

/// Displays the value, or nothing: the text an empty `String` displayed,
/// without making one per request.
struct OrEmpty<T>(Option<T>);

impl<T: fmt::Display> fmt::Display for OrEmpty<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(value) => value.fmt(f),
            None => Ok(()),
        }
    }
}

/// The event formatter of the `fmt` layer: access lines written here,
/// everything else by `inner` (the stock text or JSON formatter the
/// layer was built with; `json` says which).
pub(crate) struct Fast<F> {
    inner: F,
    json: bool,
}

impl<F> Fast<F> {
    pub(crate) fn text(inner: F) -> Fast<F> {
        Fast { inner, json: false }
    }

    pub(crate) fn json(inner: F) -> Fast<F> {
        Fast { inner, json: true }
    }
}

impl<S, N, F> FormatEvent<S, N> for Fast<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        // The stock formatters print the spans around an event; the access
        // line is recorded outside the request's span, so it has none.
        let plain = meta.target() == TARGET
            && !writer.has_ansi_escapes()
            && ctx.parent_span().is_none()
            && ctx.lookup_current().is_none();
        if plain {
            let written = LINE.with(|line| {
                let mut line = line.try_borrow_mut().ok()?;
                line.clear();
                write_line(&mut line, event, self.json)?;
                Some(writer.write_str(&line))
            });
            if let Some(result) = written {
                #[cfg(test)]
                tests::FAST_LINES.with(|n| n.set(n.get() + 1));
                return result;
            }
        }
        self.inner.format_event(ctx, writer, event)
    }
}

thread_local! {
    /// The line being made: kept per thread so a line allocates nothing,
    /// and complete before any of it reaches the layer's writer (a field
    /// of another kind hands the event to the stock formatter instead).
    static LINE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The whole line, `None` if the event has something the stock formatter
/// must write. Text: `<timestamp>  INFO <target>: name=value ...`; JSON:
/// `{"timestamp":..,"level":..,"fields":{..},"target":..}`.
fn write_line(line: &mut String, event: &Event<'_>, json: bool) -> Option<()> {
    let meta = event.metadata();
    let (padded, level) = level_names(*meta.level());
    if json {
        line.push_str("{\"timestamp\":\"");
        timestamp(line);
        line.push_str("\",\"level\":\"");
        line.push_str(level);
        line.push_str("\",\"fields\":{");
    } else {
        timestamp(line);
        line.push(' ');
        line.push_str(padded);
        line.push(' ');
        line.push_str(meta.target());
        line.push_str(": ");
    }
    let mut fields = Fields {
        line,
        json,
        first: true,
        supported: true,
    };
    event.record(&mut fields);
    if !fields.supported {
        return None;
    }
    if json {
        line.push_str("},\"target\":");
        json_string(line, meta.target());
        line.push('}');
    }
    line.push('\n');
    Some(())
}

/// A level as the text format pads it and as JSON names it.
fn level_names(level: Level) -> (&'static str, &'static str) {
    match level {
        Level::TRACE => ("TRACE", "TRACE"),
        Level::DEBUG => ("DEBUG", "DEBUG"),
        Level::INFO => (" INFO", "INFO"),
        Level::WARN => (" WARN", "WARN"),
        Level::ERROR => ("ERROR", "ERROR"),
    }
}

/// Writes each field as the stock visitors do, in the event's order:
/// text `name=value` apart by a space (a `&str` quoted as `Debug` quotes
/// it, a `%` value as it displays, a number in decimal); JSON
/// `"name":value` apart by a comma (a string escaped as `serde_json`
/// escapes it).
struct Fields<'a> {
    line: &'a mut String,
    json: bool,
    first: bool,
    /// Cleared by a field kind this writer was not made for.
    supported: bool,
}

impl Fields<'_> {
    /// The separator and the name, or `None` for a name the stock text
    /// visitor treats specially (`message`, `log.*`, `r#*`).
    fn name(&mut self, field: &Field) -> Option<()> {
        let name = field.name();
        if name == "message" || name.starts_with("log.") || name.starts_with("r#") {
            self.supported = false;
            return None;
        }
        if !self.first {
            self.line.push(if self.json { ',' } else { ' ' });
        }
        self.first = false;
        if self.json {
            json_string(self.line, name);
            self.line.push(':');
        } else {
            self.line.push_str(name);
            self.line.push('=');
        }
        Some(())
    }

    fn number(&mut self, field: &Field, value: impl itoa::Integer) {
        if self.supported && self.name(field).is_some() {
            self.line.push_str(itoa::Buffer::new().format(value));
        }
    }
}

impl Visit for Fields<'_> {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.number(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.number(field, value);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if !self.supported || self.name(field).is_none() {
            return;
        }
        if self.json {
            json_string(self.line, value);
        } else if value.bytes().all(plain_in_debug) {
            self.line.push('"');
            self.line.push_str(value);
            self.line.push('"');
        } else {
            let _ = write!(self.line, "{value:?}");
        }
    }

    /// A `%` value: its `Debug` is its `Display`. Text prints it as it is,
    /// JSON as a string.
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if !self.supported || self.name(field).is_none() {
            return;
        }
        if self.json {
            // Written in place behind its opening quote, escaped again
            // only if it needs it.
            let start = self.line.len();
            self.line.push('"');
            let _ = write!(self.line, "{value:?}");
            if self.line.as_bytes()[start + 1..]
                .iter()
                .all(|&b| plain_in_json(b))
            {
                self.line.push('"');
            } else {
                let raw = self.line.split_off(start);
                json_string(self.line, &raw[1..]);
            }
        } else {
            let _ = write!(self.line, "{value:?}");
        }
    }

    // Kinds the access line does not have: the stock formatter writes
    // them (floats, big integers, bools and errors each have their own
    // text in the stock visitors).
    fn record_f64(&mut self, _: &Field, _: f64) {
        self.supported = false;
    }

    fn record_bool(&mut self, _: &Field, _: bool) {
        self.supported = false;
    }

    fn record_i128(&mut self, _: &Field, _: i128) {
        self.supported = false;
    }

    fn record_u128(&mut self, _: &Field, _: u128) {
        self.supported = false;
    }

    fn record_error(&mut self, _: &Field, _: &(dyn std::error::Error + 'static)) {
        self.supported = false;
    }

    fn record_bytes(&mut self, _: &Field, _: &[u8]) {
        self.supported = false;
    }
}

/// A byte `str`'s `Debug` copies as it is: printable ASCII but `"` and
/// `\` (everything else may be escaped; those strings go through
/// `Debug` itself).
fn plain_in_debug(b: u8) -> bool {
    (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\'
}

/// A byte `serde_json` copies into a string as it is: all but controls,
/// `"` and `\` (non-ASCII included).
fn plain_in_json(b: u8) -> bool {
    b >= 0x20 && b != b'"' && b != b'\\'
}

/// `value` as a quoted JSON string, escaped by `serde_json` itself when
/// it needs escaping at all.
fn json_string(line: &mut String, value: &str) {
    if value.bytes().all(plain_in_json) {
        line.push('"');
        line.push_str(value);
        line.push('"');
    } else if let Ok(quoted) = serde_json::to_string(value) {
        line.push_str(&quoted);
    }
}

/// Now, as the stock `SystemTime` timer writes it: RFC 3339 in UTC with
/// microseconds, `2026-11-28T17:32:56.123456Z`. A clock before 1970 or
/// after 9999 (written with a sign) is left to the stock timer.
fn timestamp(line: &mut String) {
    let now = std::time::SystemTime::now();
    match now.duration_since(std::time::UNIX_EPOCH) {
        Ok(since) if since.as_secs() < YEAR_10000 => {
            rfc3339_micros(line, since.as_secs(), since.subsec_micros());
        }
        _ => {
            use tracing_subscriber::fmt::time::FormatTime;
            let _ = tracing_subscriber::fmt::time::SystemTime.format_time(&mut Writer::new(line));
        }
    }
}

/// 10000-01-01T00:00:00Z in seconds since the epoch.
const YEAR_10000: u64 = 253_402_300_800;

/// Seconds since the epoch (before year 10000) and microseconds as
/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`. The civil date from the day number is
/// the usual proleptic-Gregorian arithmetic in 400-year eras.
fn rfc3339_micros(line: &mut String, secs: u64, micros: u32) {
    let days = secs / 86_400;
    let of_day = secs % 86_400;
    let (year, month, day) = civil_date(days);
    let mut text = *b"0000-00-00T00:00:00.000000Z";
    digits(&mut text[0..4], year);
    digits(&mut text[5..7], month);
    digits(&mut text[8..10], day);
    digits(&mut text[11..13], of_day / 3600);
    digits(&mut text[14..16], of_day / 60 % 60);
    digits(&mut text[17..19], of_day % 60);
    digits(&mut text[20..26], u64::from(micros));
    // Only ASCII digits were written over an ASCII template.
    line.push_str(std::str::from_utf8(&text).unwrap_or_default());
}

/// `value`'s last `out.len()` decimal digits, zero-padded.
fn digits(out: &mut [u8], mut value: u64) {
    for place in out.iter_mut().rev() {
        *place = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// Year, month (1-12) and day (1-31) of a day number since 1970-01-01.
fn civil_date(days: u64) -> (u64, u64, u64) {
    // Days since 0000-03-01, so that a year ends with February's leap day.
    let z = days + 719_468;
    let era = z / 146_097;
    let of_era = z % 146_097;
    let year_of_era = (of_era - of_era / 1_460 + of_era / 36_524 - of_era / 146_096) / 365;
    let of_year = of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * of_year + 2) / 153;
    let day = of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;
    use crate::config::LogFormat;

    thread_local! {
        /// Lines this thread's `Fast` wrote itself (not the stock formatter).
        pub(super) static FAST_LINES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn fast_lines() -> usize {
        FAST_LINES.with(|n| n.replace(0))
    }

    /// A writer that keeps what the layer writes, for the test to read
    /// (as `buffer::Buffered` does for the process).
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<Vec<u8>>>);

    impl Write for Kept {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Kept {
        type Writer = Kept;

        fn make_writer(&'a self) -> Kept {
            self.clone()
        }
    }

    /// What the gateway's log layer (`fast`, or the stock one) writes for
    /// what `emit` records, under `filter`.
    fn written(format: LogFormat, fast: bool, filter: &str, emit: impl FnOnce()) -> String {
        let kept = Kept::default();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new(filter))
            .with(super::super::log_layer(format, false, kept.clone(), fast));
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = kept.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    /// The line with its timestamp's value blanked (text: the line's
    /// start; JSON: the first member), after checking its shape.
    fn without_time(line: &str, format: LogFormat) -> String {
        let at = match format {
            LogFormat::Text => 0,
            LogFormat::Json => r#"{"timestamp":""#.len(),
        };
        let stamp = &line[at..at + 27];
        let shape: String = stamp
            .chars()
            .map(|c| if c.is_ascii_digit() { '9' } else { c })
            .collect();
        assert_eq!(shape, "9999-99-99T99:99:99.999999Z", "{line}");
        format!("{}<time>{}", &line[..at], &line[at + 27..])
    }

    fn lines() -> Vec<AccessLine<'static>> {
        let trace_id = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
        let ordinary = AccessLine {
            method: "POST",
            path: "/v2/models/add_sub/infer",
            route: "infer",
            model: "add_sub",
            status: 200,
            bytes_in: 594,
            bytes_out: 300,
            total_us: 1234,
            upstream_us: 987,
            backend: Some("127.0.0.1:8001".parse().unwrap()),
            group: "default",
            rule: "",
            trace_id,
        };
        vec![
            AccessLine { ..ordinary },
            AccessLine {
                method: "GET",
                path: "/v2/models/\"q\"\\x/in\u{1}fer\u{1b}[31m\t\n\u{7f}\u{85}",
                route: "model_ready",
                model: "(unknown)",
                status: 404,
                bytes_in: 0,
                bytes_out: 0,
                total_us: 0,
                upstream_us: 0,
                backend: None,
                group: "",
                rule: "",
                trace_id: TraceId::INVALID,
            },
            AccessLine {
                path: "/v2/models/модель/infer",
                trace_id: TraceId::from_hex("00f067aa0ba902b7000000000000000a").unwrap(),
                model: "модель",
                backend: Some("[::1]:9".parse().unwrap()),
                group: "canary",
                rule: "routes[0]",
                ..ordinary
            },
            AccessLine {
                route: "",
                model: "q\"u\\o\u{1b}te\u{200b}\u{301}\u{85}\u{7f}\n",
                status: 503,
                bytes_in: usize::MAX,
                total_us: u64::MAX,
                ..ordinary
            },
        ]
    }

    #[test]
    fn access_lines_are_the_stock_formatters_text_byte_for_byte() {
        for format in [LogFormat::Text, LogFormat::Json] {
            for line in lines() {
                let stock = written(format, false, "info", || record(&line));
                fast_lines();
                let fast = written(format, true, "info", || record(&line));
                assert_eq!(fast_lines(), 1, "written by Fast itself");
                eprint!("{fast}");
                assert!(stock.ends_with('\n'), "{stock}");
                assert_eq!(
                    without_time(&fast, format),
                    without_time(&stock, format),
                    "{format:?}"
                );
            }
        }
    }

    #[test]
    fn other_lines_and_lines_in_a_span_are_left_to_the_stock_formatter() {
        let line = &lines()[0];
        for format in [LogFormat::Text, LogFormat::Json] {
            let emit = || {
                tracing::warn!(target: TARGET, reason = "x", ratio = 0.5, "a message");
                tracing::info!(count = 3_u64, ok = true, "elsewhere");
                let span = tracing::info_span!("request", route = "infer");
                span.in_scope(|| record(line));
            };
            let stock = written(format, false, "info", emit);
            fast_lines();
            let fast = written(format, true, "info", emit);
            assert_eq!(fast_lines(), 0);
            let stock: Vec<String> = stock.lines().map(|l| without_time(l, format)).collect();
            let fast: Vec<String> = fast.lines().map(|l| without_time(l, format)).collect();
            assert_eq!(stock.len(), 3);
            assert!(stock[2].contains("request"), "{}", stock[2]);
            assert_eq!(fast, stock, "{format:?}");
        }
    }

    #[test]
    fn the_filter_still_decides() {
        let line = &lines()[0];
        for format in [LogFormat::Text, LogFormat::Json] {
            for filter in ["warn", "info,tensorgate::access=off", "off"] {
                assert_eq!(
                    written(format, true, filter, || record(line)),
                    "",
                    "{filter}"
                );
            }
            for filter in ["info", "warn,tensorgate::access=info"] {
                assert_eq!(
                    written(format, true, filter, || record(line))
                        .lines()
                        .count(),
                    1
                );
            }
        }
    }

    #[test]
    fn the_timestamp_is_the_stock_timers() {
        use tracing_subscriber::fmt::time::FormatTime;
        let stock = || {
            let mut text = String::new();
            tracing_subscriber::fmt::time::SystemTime
                .format_time(&mut Writer::new(&mut text))
                .unwrap();
            text
        };
        let before = stock();
        let mut ours = String::new();
        timestamp(&mut ours);
        let after = stock();
        // Same width and layout, so text order is time order.
        assert_eq!(ours.len(), before.len());
        assert!(before <= ours && ours <= after, "{before} {ours} {after}");
        for (secs, micros, text) in [
            (0, 0, "1970-01-01T00:00:00.000000Z"),
            (951_782_400, 7, "2000-02-29T00:00:00.000007Z"),
            (4_107_542_399, 999_999, "2100-02-28T23:59:59.999999Z"),
            (1_795_887_176, 123_456, "2026-11-28T17:32:56.123456Z"),
            (YEAR_10000 - 1, 5, "9999-12-31T23:59:59.000005Z"),
        ] {
            let mut line = String::new();
            rfc3339_micros(&mut line, secs, micros);
            assert_eq!(line, text);
        }
    }

    /// Not a check: prints the cost of one access line through the whole
    /// `tracing` path (macro, filter, layer, formatter, a writer that
    /// drops it: `io::sink`), stock formatter against `Fast`, text and JSON. Run:
    /// `cargo test --release --lib access_line_cost -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn access_line_cost() {
        const LINES: u32 = 200_000;
        let line = &lines()[0];
        for format in [LogFormat::Text, LogFormat::Json] {
            let mut row = format!("{format:?}:");
            for fast in [false, true] {
                let subscriber = tracing_subscriber::registry()
                    .with(tracing_subscriber::EnvFilter::new("info"))
                    .with(super::super::log_layer(format, false, std::io::sink, fast));
                let best = tracing::subscriber::with_default(subscriber, || {
                    (0..7)
                        .map(|_| {
                            let started = std::time::Instant::now();
                            for _ in 0..LINES {
                                record(std::hint::black_box(line));
                            }
                            started.elapsed().as_nanos() / u128::from(LINES)
                        })
                        .min()
                        .unwrap_or_default()
                });
                row += &format!(" {} {best} ns/line", if fast { "fast" } else { "stock" });
            }
            println!("{row}");
        }
    }
}
