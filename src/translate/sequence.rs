//! The sticky key of a sequence request, read from the `ModelInferRequest`
//! both fronts send upstream (the HTTP front after translation, the gRPC
//! passthrough as received), so a sequence reaches the same backend
//! whichever protocol its requests arrive on.

use crate::proto::inference::infer_parameter::ParameterChoice;
use crate::proto::inference::ModelInferRequest;

/// The non-zero `sequence_id` parameter rendered as bytes (integers in
/// decimal, strings as they are); `None` for requests outside a sequence.
pub fn sequence_key(request: &ModelInferRequest) -> Option<Vec<u8>> {
    let id = request.parameters.get("sequence_id")?;
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
}
