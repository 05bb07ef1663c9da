//! `ModelStreamInfer` replies (v2 §6.4) to protocol-neutral items. The
//! stream's own marker, response parameter `triton_final_response`, is
//! taken off the response and tells whether more will come; an error
//! without it was raised before the request was scheduled.

use crate::error::{Error, Kind};
use crate::model::InferResponse;
use crate::proto::inference::{infer_parameter::ParameterChoice, ModelStreamInferResponse};

/// Response parameter the gRPC front adds to every streamed response.
pub(crate) const FINAL_RESPONSE: &str = "triton_final_response";

/// One message of the response stream, for one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StreamItem {
    /// A response; `last` when it carried `triton_final_response: true`.
    Response { response: InferResponse, last: bool },
    /// The model (or the core, after scheduling) failed this response.
    Failed { message: String, last: bool },
    /// Refused before scheduling: no other message follows for the request.
    Refused { message: String },
}

/// `request_id` is our own copy of the client's id (see `model_infer`).
pub(crate) fn stream_item(message: ModelStreamInferResponse, request_id: &[u8]) -> StreamItem {
    let mut response = message.infer_response.unwrap_or_default();
    let flag = response.parameters.remove(FINAL_RESPONSE);
    let last = match flag.and_then(|p| p.parameter_choice) {
        Some(ParameterChoice::BoolParam(b)) => Some(b),
        _ => None,
    };
    match (message.error_message.is_empty(), last) {
        (true, last) => StreamItem::Response {
            response: super::model_infer(response, request_id),
            last: last.unwrap_or(false),
        },
        (false, Some(last)) => StreamItem::Failed {
            message: message.error_message,
            last,
        },
        (false, None) => StreamItem::Refused {
            message: message.error_message,
        },
    }
}

/// A refusal before scheduling as an error: the stream carries only the
/// text. The signature was fetched just before, so the model existed: the
/// core's validation (`INVALID_ARG`) is what remains, unless the model
/// vanished meanwhile.
pub(crate) fn refusal(message: &str) -> Error {
    let kind = if message.starts_with("Request for unknown model") {
        Kind::NotFound
    } else {
        Kind::InvalidArg
    };
    Error::new(kind, message)
}

/// A response the model (or the core, after scheduling) failed, as an
/// error: gRPC streams carry no code, taken as `UNKNOWN`, the code of the
/// Python backend's errors (400, as Triton answers them).
pub(crate) fn failure(message: &str) -> Error {
    Error::new(Kind::ClientOther(tonic::Code::Unknown), message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::{InferParameter, ModelInferResponse};

    fn flagged(error: &str, flag: Option<bool>) -> ModelStreamInferResponse {
        let mut response = ModelInferResponse {
            model_name: "m".into(),
            model_version: "1".into(),
            ..Default::default()
        };
        if let Some(b) = flag {
            response.parameters.insert(
                FINAL_RESPONSE.into(),
                InferParameter {
                    parameter_choice: Some(ParameterChoice::BoolParam(b)),
                },
            );
        }
        ModelStreamInferResponse {
            error_message: error.into(),
            infer_response: Some(response),
        }
    }

    #[test]
    fn the_final_flag_is_consumed_and_classifies_errors() {
        match stream_item(flagged("", Some(true)), b"x") {
            StreamItem::Response { response, last } => {
                assert!(last);
                assert!(response.parameters.is_empty(), "flag removed");
                assert_eq!(response.id, b"x");
            }
            other => panic!("{other:?}"),
        }
        let failed = stream_item(flagged("boom", Some(false)), b"");
        assert_eq!(
            failed,
            StreamItem::Failed {
                message: "boom".into(),
                last: false
            }
        );
        let refused = stream_item(flagged("bad", None), b"");
        assert_eq!(
            refused,
            StreamItem::Refused {
                message: "bad".into()
            }
        );
    }
}
