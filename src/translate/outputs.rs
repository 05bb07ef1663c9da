//! The outputs a request names, enforced whatever the upstream does with
//! them (v2 §2.4). Triton's core refuses an output the model does not
//! have and answers only the outputs named; KServe's gRPC server ignores
//! `outputs` and answers every output. So the front checks the names
//! against the model's signature before the call, when it knows one, and
//! keeps only the named outputs of the answer after it, refusing a named
//! output the answer lacks. Against Triton both are no-ops: same answer,
//! same refusal text.

use crate::error::{Error, Result};
use crate::model::{InferRequest, InferResponse, ModelInfo};

/// Triton's refusal of an output the model does not have (`J26`), without
/// a request-id prefix, as the core words it.
fn unexpected_output(name: &str, model: &str) -> Error {
    Error::invalid(format!(
        "unexpected inference output '{name}' for model '{model}'"
    ))
}

/// The first of `names` (by byte order: the core keeps the requested
/// outputs in a `std::set`) for which `known` is false.
fn first_unknown<'a>(
    names: impl Iterator<Item = &'a str>,
    known: impl Fn(&str) -> bool,
) -> Option<&'a str> {
    names.filter(|name| !known(name)).min()
}

/// Before the call: every output `request` names is in the model's
/// signature. Nothing is checked when the signature is unknown or lists no
/// outputs (the answer is checked instead: [`keep_requested`]).
pub(crate) fn check_requested(request: &InferRequest, info: Option<&ModelInfo>) -> Result<()> {
    let Some(info) = info.filter(|info| !info.outputs.is_empty()) else {
        return Ok(());
    };
    let names = request.outputs.iter().map(|o| o.name.as_str());
    match first_unknown(names, |name| info.output(name).is_some()) {
        Some(name) => Err(unexpected_output(name, &request.model_name)),
        None => Ok(()),
    }
}

/// After the call: for each output of `answer`, in its order, whether the
/// client gets it (every one when `request` names none). A named output
/// the answer lacks is one the model does not have: refused as Triton
/// refuses it.
pub(crate) fn requested_mask(answer: &InferResponse, request: &InferRequest) -> Result<Vec<bool>> {
    let answered = |name: &str| answer.outputs.iter().any(|o| o.name == name);
    let named = request.outputs.iter().map(|o| o.name.as_str());
    if let Some(name) = first_unknown(named, answered) {
        return Err(unexpected_output(name, &request.model_name));
    }
    Ok(answer
        .outputs
        .iter()
        .map(|o| request.outputs.is_empty() || request.outputs.iter().any(|r| r.name == o.name))
        .collect())
}

/// [`requested_mask`] applied: `answer` keeps only the outputs asked for.
pub(crate) fn keep_requested(answer: &mut InferResponse, request: &InferRequest) -> Result<()> {
    let mut mask = requested_mask(answer, request)?.into_iter();
    answer.outputs.retain(|_| mask.next().unwrap_or(false));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{OutputKind, OutputTensor, RequestedOutput, TensorInfo};

    fn request(names: &[&str]) -> InferRequest {
        InferRequest {
            model_name: "add_sub".into(),
            outputs: names
                .iter()
                .map(|name| RequestedOutput {
                    name: name.to_string(),
                    classification: 0,
                    kind: OutputKind::Json,
                    shared_memory: None,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn answer(names: &[&str]) -> InferResponse {
        InferResponse {
            outputs: names
                .iter()
                .map(|name| OutputTensor {
                    name: name.to_string(),
                    datatype: crate::model::DataType::Fp32.into(),
                    shape: vec![1],
                    data: bytes::Bytes::from_static(&[0; 4]),
                })
                .collect(),
            ..Default::default()
        }
    }

    fn signature(names: &[&str]) -> ModelInfo {
        let tensor = |name: &&str| TensorInfo {
            name: name.to_string(),
            datatype: None,
            dims: vec![-1],
            optional: false,
        };
        ModelInfo {
            outputs: names.iter().map(tensor).collect(),
            ..Default::default()
        }
    }

    fn names(answer: &InferResponse) -> Vec<&str> {
        answer.outputs.iter().map(|o| o.name.as_str()).collect()
    }

    #[test]
    fn unknown_names_are_refused_before_the_call_first_by_byte_order() {
        let info = signature(&["OUTPUT0", "OUTPUT1"]);
        assert_eq!(check_requested(&request(&["OUTPUT1"]), Some(&info)), Ok(()));
        let refused = check_requested(&request(&["OUTPUT9", "OUTPUT0", "OUTPUT8"]), Some(&info));
        assert_eq!(
            refused.unwrap_err().message,
            "unexpected inference output 'OUTPUT8' for model 'add_sub'"
        );
        // Without a signature (or one listing no outputs) the answer decides.
        assert_eq!(check_requested(&request(&["OUTPUT9"]), None), Ok(()));
        let empty = signature(&[]);
        assert_eq!(
            check_requested(&request(&["OUTPUT9"]), Some(&empty)),
            Ok(())
        );
    }

    #[test]
    fn the_answer_keeps_the_named_outputs_in_its_own_order() {
        let mut all = answer(&["OUTPUT0", "OUTPUT1", "OUTPUT2"]);
        keep_requested(&mut all, &request(&["OUTPUT2", "OUTPUT0"])).unwrap();
        assert_eq!(names(&all), ["OUTPUT0", "OUTPUT2"]);
        let mut all = answer(&["OUTPUT0", "OUTPUT1"]);
        keep_requested(&mut all, &request(&[])).unwrap();
        assert_eq!(names(&all), ["OUTPUT0", "OUTPUT1"]);
    }

    #[test]
    fn a_named_output_the_answer_lacks_is_refused() {
        let mut all = answer(&["OUTPUT0", "OUTPUT1"]);
        let refused = keep_requested(&mut all, &request(&["OUTPUT1", "OUTPUT9"]));
        assert_eq!(
            refused.unwrap_err(),
            Error::invalid("unexpected inference output 'OUTPUT9' for model 'add_sub'")
        );
    }
}
