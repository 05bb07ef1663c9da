//! The sticky key of a sequence request: the same bytes whether it is read
//! from a `ModelInferRequest` (the gRPC passthrough, as received) or from
//! a request before its translation (the HTTP front, which routes before
//! it builds the message), so a sequence reaches the same backend
//! whichever protocol its requests arrive on.

use std::collections::HashMap;

use crate::model::InferRequest;
use crate::proto::inference::infer_parameter::ParameterChoice;
use crate::proto::inference::{InferParameter, ModelInferRequest};
use crate::translate::to_grpc;

/// The non-zero `sequence_id` parameter rendered as bytes (integers in
/// decimal, strings as they are); `None` for requests outside a sequence.
pub(crate) fn sequence_key(request: &ModelInferRequest) -> Option<Vec<u8>> {
    parameters_sequence_key(&request.parameters)
}

/// [`sequence_key`] from a message's parameters alone (a relayed call's
/// leading fields, `front::grpc::relayed_infer::Routing`).
pub(crate) fn parameters_sequence_key(
    parameters: &HashMap<String, InferParameter>,
) -> Option<Vec<u8>> {
    key_of(parameters.get("sequence_id")?)
}

/// [`sequence_key`] of the message `request` translates to, without
/// building it: the parameter as `to_grpc` renders it (the last of
/// repeated names, as the message's map keeps).
pub(crate) fn request_sequence_key(request: &InferRequest) -> Option<Vec<u8>> {
    let (_, value) = request
        .parameters
        .iter()
        .rev()
        .find(|(name, _)| name == "sequence_id")?;
    key_of(&to_grpc::param(value))
}

fn key_of(id: &InferParameter) -> Option<Vec<u8>> {
    match id.parameter_choice.as_ref()? {
        ParameterChoice::Uint64Param(0) | ParameterChoice::Int64Param(0) => None,
        ParameterChoice::Uint64Param(n) => Some(n.to_string().into_bytes()),
        ParameterChoice::Int64Param(n) => Some(n.to_string().into_bytes()),
        ParameterChoice::StringParam(s) if !s.is_empty() => Some(s.clone().into_bytes()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::InferParameter;

    fn with(choice: Option<ParameterChoice>) -> ModelInferRequest {
        let mut request = ModelInferRequest::default();
        request.parameters.insert(
            "sequence_id".into(),
            InferParameter {
                parameter_choice: choice,
            },
        );
        request
    }

    #[test]
    fn keys_render_the_id() {
        let key = |c| sequence_key(&with(Some(c)));
        assert_eq!(key(ParameterChoice::Uint64Param(42)), Some(b"42".to_vec()));
        assert_eq!(key(ParameterChoice::Int64Param(42)), Some(b"42".to_vec()));
        assert_eq!(key(ParameterChoice::Int64Param(-3)), Some(b"-3".to_vec()));
        assert_eq!(
            key(ParameterChoice::StringParam("s1".into())),
            Some(b"s1".to_vec())
        );
    }

    #[test]
    fn zero_empty_and_other_types_are_no_sequence() {
        let key = |c| sequence_key(&with(Some(c)));
        assert_eq!(key(ParameterChoice::Uint64Param(0)), None);
        assert_eq!(key(ParameterChoice::Int64Param(0)), None);
        assert_eq!(key(ParameterChoice::StringParam(String::new())), None);
        assert_eq!(key(ParameterChoice::BoolParam(true)), None);
        assert_eq!(sequence_key(&with(None)), None);
        assert_eq!(sequence_key(&ModelInferRequest::default()), None);
    }

    /// The key read before translation equals the key of the translated
    /// message, repeated names included.
    #[test]
    fn the_request_and_its_message_give_the_same_key() {
        use crate::model::Param;
        let cases: Vec<Vec<(&str, Param)>> = vec![
            vec![],
            vec![("sequence_id", Param::Uint64(42))],
            vec![("sequence_id", Param::Int64(-3))],
            vec![("sequence_id", Param::String("s1".into()))],
            vec![("sequence_id", Param::Int64(0))],
            vec![("sequence_id", Param::Bool(true))],
            vec![
                ("sequence_id", Param::Uint64(1)),
                ("sequence_id", Param::Uint64(2)),
            ],
            vec![
                ("sequence_start", Param::Bool(true)),
                ("sequence_id", Param::String(String::new())),
            ],
        ];
        for params in cases {
            let request = InferRequest {
                model_name: "m".into(),
                parameters: params.into_iter().map(|(n, p)| (n.to_owned(), p)).collect(),
                ..InferRequest::default()
            };
            let message = to_grpc::model_infer(&request);
            assert_eq!(
                request_sequence_key(&request),
                sequence_key(&message),
                "{:?}",
                request.parameters
            );
        }
    }
}
