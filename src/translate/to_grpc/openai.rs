//! An OpenAI generation → the inputs of a model of Triton's vLLM backend or
//! of its TensorRT-LLM backend (the two conventions, `config::OpenAiBackend`),
//! as the protocol-neutral request `to_grpc::model_infer` sends. The same
//! inputs Triton's own OpenAI frontend sends for each backend; which one a
//! model follows is configured or recognised from its inputs
//! ([`recognise`]). An input is sent only when the model declares it,
//! except `text_input`; a sampling field the client set that the model has
//! no input for is refused by name, never dropped.

use bytes::Bytes;

use crate::config::OpenAiBackend as Backend;
use crate::error::{Error, Result};
use crate::model::{DataType, DeclaredType, InferRequest, InputData, InputTensor, ModelInfo};
use crate::wire::openai::Generation;

/// The model's convention from its inputs: `sampling_parameters` is the
/// vLLM backend's, a `max_tokens` input TensorRT-LLM's; both need
/// `text_input`. `None`: neither (the model is not served as an LLM).
pub fn recognise(info: &ModelInfo) -> Option<Backend> {
    info.input("text_input")?;
    if info.input("sampling_parameters").is_some() {
        Some(Backend::Vllm)
    } else if info.input("max_tokens").is_some() {
        Some(Backend::Tensorrtllm)
    } else {
        None
    }
}

/// One input's value before it meets the model's declared type.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    Texts(Vec<String>),
}

/// The request for `model` (its upstream name) carrying `prompt` (the
/// rendered chat, or the completion's prompt) and `generation`'s settings,
/// within `max_tokens`.
pub fn model_inputs(
    backend: Backend,
    model: &str,
    info: &ModelInfo,
    generation: &Generation,
    prompt: String,
    max_tokens: u32,
) -> Result<InferRequest> {
    let values = match backend {
        Backend::Vllm => vllm(generation, max_tokens),
        Backend::Tensorrtllm => tensorrtllm(generation, max_tokens),
    };
    let prompt = Value::Texts(vec![prompt]);
    let mut inputs = vec![tensor(info, "text_input", prompt, Some("prompt"))?];
    for (name, value, field) in values {
        match (info.input(name), field) {
            (Some(_), _) => inputs.push(tensor(info, name, value, field)?),
            (None, Some(field)) => {
                return Err(Error::invalid(format!(
                    "model '{}' has no input '{name}' for the request's '{field}'",
                    generation.model
                ))
                .about(field))
            }
            (None, None) => {}
        }
    }
    Ok(InferRequest {
        model_name: model.to_string(),
        inputs,
        ..InferRequest::default()
    })
}

/// An input's name, its value, and the request field the client set it
/// with (`None`: the gateway's own, sent only when the model has it).
type Setting = (&'static str, Value, Option<&'static str>);

/// The inputs both conventions share.
fn common(g: &Generation) -> [Setting; 4] {
    [
        ("stream", Value::Bool(g.stream), None),
        (
            "exclude_input_in_output",
            Value::Bool(!g.echo),
            g.echo.then_some("echo"),
        ),
        ("return_num_input_tokens", Value::Bool(true), None),
        ("return_num_output_tokens", Value::Bool(true), None),
    ]
}

/// The vLLM backend's: the sampling settings as one JSON input.
fn vllm(g: &Generation, max_tokens: u32) -> Vec<Setting> {
    let json = Value::Texts(vec![g.sampling.vllm_json(max_tokens)]);
    let mut values = vec![("sampling_parameters", json, None)];
    values.extend(common(g));
    values
}

/// TensorRT-LLM's: every setting an input of its own.
fn tensorrtllm(g: &Generation, max_tokens: u32) -> Vec<Setting> {
    let s = &g.sampling;
    let max_tokens = Value::Int(i64::from(max_tokens));
    let mut values = vec![("max_tokens", max_tokens, g.max_tokens.map(|_| "max_tokens"))];
    values.extend(common(g));
    let floats = [
        ("temperature", s.temperature),
        ("top_p", s.top_p),
        ("frequency_penalty", s.frequency_penalty),
        ("presence_penalty", s.presence_penalty),
        ("repetition_penalty", s.repetition_penalty),
        ("min_p", s.min_p),
    ];
    values.extend(
        floats
            .into_iter()
            .filter_map(|(name, v)| Some((name, Value::Float(v?), Some(name)))),
    );
    let ints = [
        ("top_k", s.top_k),
        ("min_tokens", s.min_tokens.map(i64::from)),
        ("seed", s.seed.and_then(|n| i64::try_from(n).ok())),
    ];
    values.extend(
        ints.into_iter()
            .filter_map(|(name, v)| Some((name, Value::Int(v?), Some(name)))),
    );
    if !s.stop.is_empty() {
        values.push(("stop_words", Value::Texts(s.stop.clone()), Some("stop")));
    }
    values
}

/// `value` as input `name` of the model: its declared type, and a shape
/// of the batch dimension (when the model batches) and the declared dims,
/// a variable one taking the element count.
fn tensor(
    info: &ModelInfo,
    name: &str,
    value: Value,
    field: Option<&'static str>,
) -> Result<InputTensor> {
    let declared = info.input(name);
    let datatype = match (declared.and_then(|t| t.datatype), &value) {
        (Some(datatype), _) => datatype,
        (None, Value::Texts(_)) => DataType::Bytes,
        (None, _) => return Err(Error::internal(format!("input '{name}' has no known type"))),
    };
    let count = match &value {
        Value::Texts(texts) => texts.len(),
        _ => 1,
    };
    let dims = declared.map_or(&[][..], |t| &t.dims[..]);
    let mut shape: Vec<i64> = (info.max_batch_size > 0).then_some(1).into_iter().collect();
    shape.extend(dims.iter().map(|d| if *d < 0 { count as i64 } else { *d }));
    if shape.is_empty() {
        shape.push(count as i64);
    }
    let data = encode(name, datatype, &value, field)?;
    Ok(InputTensor {
        name: name.to_string(),
        datatype: DeclaredType::Known(datatype),
        shape,
        data: InputData::Raw(data),
    })
}

/// `value`'s little-endian bytes as `datatype` (BYTES: each text with its
/// 4-byte length); a type the value cannot take is the model's mismatch.
fn encode(
    name: &str,
    datatype: DataType,
    value: &Value,
    field: Option<&'static str>,
) -> Result<Bytes> {
    use DataType as D;
    let mismatch = || {
        Error::internal(format!(
            "the model's input '{name}' is {}, which tensorgate cannot fill from the request",
            datatype.as_str()
        ))
    };
    let int = |n: i64| -> Option<Vec<u8>> {
        Some(match datatype {
            D::Int32 => i32::try_from(n).ok()?.to_le_bytes().to_vec(),
            D::Int64 => n.to_le_bytes().to_vec(),
            D::Uint32 => u32::try_from(n).ok()?.to_le_bytes().to_vec(),
            D::Uint64 => u64::try_from(n).ok()?.to_le_bytes().to_vec(),
            D::Fp32 => (n as f32).to_le_bytes().to_vec(),
            D::Fp64 => (n as f64).to_le_bytes().to_vec(),
            _ => return None,
        })
    };
    let bytes = match value {
        Value::Bool(b) if datatype == D::Bool => vec![u8::from(*b)],
        Value::Int(n) => int(*n).ok_or_else(|| {
            let error = Error::invalid(format!(
                "{n} does not fit the model's input '{name}' ({})",
                datatype.as_str()
            ));
            match field {
                Some(field) => error.about(field),
                None => error,
            }
        })?,
        Value::Float(x) => match datatype {
            D::Fp32 => (*x as f32).to_le_bytes().to_vec(),
            D::Fp64 => x.to_le_bytes().to_vec(),
            _ => return Err(mismatch()),
        },
        Value::Texts(texts) if datatype == D::Bytes => {
            let mut out = Vec::with_capacity(texts.iter().map(|t| t.len() + 4).sum());
            for text in texts {
                let len = u32::try_from(text.len()).map_err(|_| mismatch())?;
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
            out
        }
        _ => return Err(mismatch()),
    };
    Ok(Bytes::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TensorInfo;
    use crate::wire::openai::{decode, Endpoint};

    fn info(batch: i64, inputs: &[(&str, DataType, &[i64])]) -> ModelInfo {
        ModelInfo {
            max_batch_size: batch,
            decoupled: true,
            inputs: inputs
                .iter()
                .map(|(name, datatype, dims)| TensorInfo {
                    name: name.to_string(),
                    datatype: Some(*datatype),
                    dims: dims.to_vec(),
                    optional: true,
                })
                .collect(),
            outputs: Vec::new(),
        }
    }

    fn vllm_model() -> ModelInfo {
        use DataType::*;
        info(
            0,
            &[
                ("text_input", Bytes, &[1]),
                ("stream", Bool, &[1]),
                ("sampling_parameters", Bytes, &[1]),
                ("exclude_input_in_output", Bool, &[1]),
                ("return_num_input_tokens", Bool, &[1]),
                ("return_num_output_tokens", Bool, &[1]),
            ],
        )
    }

    fn trtllm_model() -> ModelInfo {
        use DataType::*;
        info(
            8,
            &[
                ("text_input", Bytes, &[1]),
                ("max_tokens", Int32, &[1]),
                ("stream", Bool, &[1]),
                ("temperature", Fp32, &[1]),
                ("stop_words", Bytes, &[-1]),
                ("seed", Uint64, &[1]),
            ],
        )
    }

    fn input<'a>(request: &'a InferRequest, name: &str) -> &'a InputTensor {
        request.inputs.iter().find(|i| i.name == name).expect(name)
    }

    fn raw(input: &InputTensor) -> &[u8] {
        match &input.data {
            InputData::Raw(bytes) => bytes,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn models_are_recognised_by_their_inputs() {
        assert_eq!(recognise(&vllm_model()), Some(Backend::Vllm));
        assert_eq!(recognise(&trtllm_model()), Some(Backend::Tensorrtllm));
        let plain = info(0, &[("INPUT0", DataType::Fp32, &[-1])]);
        assert_eq!(recognise(&plain), None);
    }

    #[test]
    fn vllm_gets_its_json_and_flags() {
        let body = br#"{"model":"m","prompt":"x","stream":true,"temperature":0.5}"#;
        let g = decode(Endpoint::Completions, body).unwrap();
        let r = model_inputs(Backend::Vllm, "up", &vllm_model(), &g, "Hi".into(), 4).unwrap();
        assert_eq!(r.model_name, "up");
        let text = input(&r, "text_input");
        assert_eq!(text.shape, [1]);
        assert_eq!(raw(text), b"\x02\0\0\0Hi");
        assert_eq!(raw(input(&r, "stream")), [1]);
        assert_eq!(raw(input(&r, "exclude_input_in_output")), [1]);
        let json = &raw(input(&r, "sampling_parameters"))[4..];
        let json: serde_json::Value = serde_json::from_slice(json).unwrap();
        assert_eq!(json, serde_json::json!({"temperature":0.5,"max_tokens":4}));
    }

    #[test]
    fn tensorrtllm_gets_typed_inputs_in_batch_shapes() {
        let body = br#"{"model":"m","prompt":"x","temperature":0.5,"stop":["a","bc"],"seed":7}"#;
        let g = decode(Endpoint::Completions, body).unwrap();
        let r = model_inputs(
            Backend::Tensorrtllm,
            "m",
            &trtllm_model(),
            &g,
            "p".into(),
            9,
        )
        .unwrap();
        assert_eq!(input(&r, "text_input").shape, [1, 1]);
        assert_eq!(raw(input(&r, "max_tokens")), 9i32.to_le_bytes());
        assert_eq!(raw(input(&r, "temperature")), 0.5f32.to_le_bytes());
        assert_eq!(raw(input(&r, "seed")), 7u64.to_le_bytes());
        let stop = input(&r, "stop_words");
        assert_eq!(stop.shape, [1, 2]);
        assert_eq!(raw(stop), b"\x01\0\0\0a\x02\0\0\0bc");
        assert!(
            r.inputs.iter().all(|i| i.name != "top_p"),
            "unset: not sent"
        );
    }

    #[test]
    fn a_setting_the_model_has_no_input_for_is_refused_by_name() {
        let body = br#"{"model":"m","prompt":"x","top_p":0.9}"#;
        let g = decode(Endpoint::Completions, body).unwrap();
        let error = model_inputs(
            Backend::Tensorrtllm,
            "m",
            &trtllm_model(),
            &g,
            "p".into(),
            9,
        )
        .unwrap_err();
        assert_eq!((error.status(), error.param), (400, Some("top_p")));
        let echo = decode(
            Endpoint::Completions,
            br#"{"model":"m","prompt":"x","echo":true}"#,
        )
        .unwrap();
        let error = model_inputs(
            Backend::Tensorrtllm,
            "m",
            &trtllm_model(),
            &echo,
            "p".into(),
            9,
        )
        .unwrap_err();
        assert_eq!(error.param, Some("echo"));
    }
}
