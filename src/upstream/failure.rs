//! Why an upstream call or health check failed, in words an operator
//! reads in the backends listing, the 503 text and the log.

use crate::error::causes;

/// What went wrong, for operators (the backends view, the 503 text, the
/// logs): the socket error beneath a transport failure (`connection
/// refused`), else the deepest cause, else the status's own message.
pub(crate) fn failure_text(status: &tonic::Status) -> String {
    if let Some(io) = causes(status).find_map(|e| e.downcast_ref::<std::io::Error>()) {
        // "Connection refused (os error 111)" → "connection refused".
        let text = io.to_string();
        let text = text.split(" (os error").next().unwrap_or_default();
        let mut chars = text.chars();
        return chars
            .next()
            .map_or_else(String::new, |c| c.to_lowercase().chain(chars).collect());
    }
    match causes(status).last() {
        Some(deepest) => deepest.to_string(),
        None if status.message().is_empty() => format!("{:?}", status.code()),
        None => status.message().to_string(),
    }
}
