//! What a request asks of the gateway's admission (`app::admission`), read
//! from its Triton parameters the same way whether they come from an HTTP
//! body (`InferRequest`) or a gRPC `ModelInferRequest`'s map (the
//! passthrough reads them from a relayed message's leading fields):
//! `priority` (a level, 1 the highest; 0: none), `timeout` (microseconds,
//! Triton's queueing timeout) and whether the request continues a
//! sequence already started (`sequence_id` non-zero, `sequence_start`
//! not set).

use std::collections::HashMap;
use std::time::Duration;

use crate::model::{InferRequest, Param};
use crate::proto::inference::infer_parameter::ParameterChoice;
use crate::proto::inference::InferParameter;

/// A request's own words about its admission.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Asks {
    /// Its priority level (`None`: it names none, or 0).
    pub(crate) priority: Option<u32>,
    /// Its `timeout` parameter (`None`: none, or 0).
    pub(crate) timeout: Option<Duration>,
    /// It continues a sequence already started.
    pub(crate) continues_sequence: bool,
}

/// A parameter's value as these rules read it.
enum Value<'a> {
    Int(i128),
    Bool(bool),
    Text(&'a str),
    Other,
}

impl Asks {
    fn read<'a>(get: impl Fn(&str) -> Option<Value<'a>>) -> Asks {
        let positive = |name: &str| match get(name) {
            Some(Value::Int(n)) if n > 0 => Some(n),
            _ => None,
        };
        let in_sequence = match get("sequence_id") {
            Some(Value::Int(n)) => n != 0,
            Some(Value::Text(s)) => !s.is_empty(),
            _ => false,
        };
        let starts = matches!(get("sequence_start"), Some(Value::Bool(true)));
        Asks {
            priority: positive("priority").map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            timeout: positive("timeout").map(|us| Duration::from_micros(clamp(us))),
            continues_sequence: in_sequence && !starts,
        }
    }

    /// The asks of a gRPC message's parameters.
    pub(crate) fn of_parameters(parameters: &HashMap<String, InferParameter>) -> Asks {
        Asks::read(|name| {
            Some(match parameters.get(name)?.parameter_choice.as_ref()? {
                ParameterChoice::Int64Param(n) => Value::Int(i128::from(*n)),
                ParameterChoice::Uint64Param(n) => Value::Int(i128::from(*n)),
                ParameterChoice::BoolParam(b) => Value::Bool(*b),
                ParameterChoice::StringParam(s) => Value::Text(s),
                _ => Value::Other,
            })
        })
    }

    /// The asks of a decoded request (the last of repeated names, as the
    /// message it becomes keeps).
    pub(crate) fn of_request(request: &InferRequest) -> Asks {
        Asks::read(|name| {
            let (_, value) = request.parameters.iter().rev().find(|(n, _)| n == name)?;
            Some(match value {
                Param::Int64(n) => Value::Int(i128::from(*n)),
                Param::Uint64(n) => Value::Int(i128::from(*n)),
                Param::Bool(b) => Value::Bool(*b),
                Param::String(s) => Value::Text(s),
                Param::Double(_) => Value::Other,
            })
        })
    }
}

fn clamp(n: i128) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(parameters: &[(&str, Param)]) -> InferRequest {
        InferRequest {
            parameters: parameters
                .iter()
                .map(|(n, v)| (n.to_string(), v.clone()))
                .collect(),
            ..InferRequest::default()
        }
    }

    #[test]
    fn priority_timeout_and_sequence_are_read_alike_from_both_forms() {
        let params = [
            ("priority", Param::Uint64(1)),
            ("timeout", Param::Int64(2_500)),
            ("sequence_id", Param::Uint64(7)),
        ];
        let http = Asks::of_request(&request(&params));
        let grpc = Asks::of_parameters(
            &params
                .iter()
                .map(|(n, v)| (n.to_string(), crate::translate::to_grpc::param(v)))
                .collect(),
        );
        let want = Asks {
            priority: Some(1),
            timeout: Some(Duration::from_micros(2_500)),
            continues_sequence: true,
        };
        assert_eq!(http, want);
        assert_eq!(grpc, want);
    }

    #[test]
    fn zero_negative_and_starts_ask_nothing() {
        let asks = Asks::of_request(&request(&[
            ("priority", Param::Int64(0)),
            ("timeout", Param::Int64(-5)),
            ("sequence_id", Param::String("s1".into())),
            ("sequence_start", Param::Bool(true)),
        ]));
        assert_eq!(asks, Asks::default());
        assert_eq!(
            Asks::of_request(&request(&[("sequence_id", Param::Uint64(0))])),
            Asks::default()
        );
        let huge = Asks::of_request(&request(&[("priority", Param::Uint64(u64::MAX))]));
        assert_eq!(huge.priority, Some(u32::MAX));
    }
}
