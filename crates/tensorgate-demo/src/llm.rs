//! Two demo language models, one per convention the gateway's OpenAI front
//! speaks: `llm_vllm` takes the inputs of Triton's vLLM backend (settings
//! in the `sampling_parameters` JSON), `llm_trtllm` those of its
//! TensorRT-LLM backend (each setting an input, batching shapes). Both
//! "generate" deterministically: the prompt's words, one token each, in
//! order, up to `max_tokens`; streamed one response per token (paced, so
//! a cancellation shows in the count of responses sent) or whole. A
//! prompt word `FAIL` makes the model fail at that token, in the middle
//! of its stream. Each response carries `num_input_tokens` (the prompt's
//! words) and `num_output_tokens` (the tokens in that response).

use bytes::Bytes;
use tonic::Status;

use tensorgate_proto::inference::DataType;

use super::models::{ModelSpec, Pacing, Responses, Tensor, TensorSpec};

/// Between two streamed tokens: quick for tests, slow enough that a
/// cancelled stream stops well before a long prompt is through.
const TOKEN_INTERVAL_MS: u64 = 2;

/// The two models.
pub(crate) fn models() -> Vec<ModelSpec> {
    use DataType::*;
    let t = |name, dtype, dims: &[i64]| TensorSpec::new(name, dtype, dims);
    let outputs = vec![
        t("text_output", TypeString, &[-1]),
        t("num_input_tokens", TypeUint32, &[1]),
        t("num_output_tokens", TypeUint32, &[1]),
    ];
    let flags = |prefix: Vec<TensorSpec>| {
        let mut inputs = prefix;
        for name in [
            "stream",
            "exclude_input_in_output",
            "return_num_input_tokens",
            "return_num_output_tokens",
        ] {
            inputs.push(t(name, TypeBool, &[1]).optional());
        }
        inputs
    };
    let mut trtllm_inputs = flags(vec![
        t("text_input", TypeString, &[1]),
        t("max_tokens", TypeInt32, &[1]),
    ]);
    for name in [
        "temperature",
        "top_p",
        "frequency_penalty",
        "presence_penalty",
    ] {
        trtllm_inputs.push(t(name, TypeFp32, &[1]).optional());
    }
    trtllm_inputs.push(t("seed", TypeUint64, &[1]).optional());
    trtllm_inputs.push(t("stop_words", TypeString, &[-1]).optional());
    vec![
        ModelSpec {
            name: "llm_vllm",
            max_batch_size: 0,
            inputs: flags(vec![
                t("text_input", TypeString, &[1]),
                t("sampling_parameters", TypeString, &[1]).optional(),
            ]),
            outputs: outputs.clone(),
            decoupled: true,
            pacing: Pacing::Interval(TOKEN_INTERVAL_MS),
            compute: vllm,
        },
        ModelSpec {
            name: "llm_trtllm",
            max_batch_size: 8,
            inputs: trtllm_inputs,
            outputs,
            decoupled: true,
            pacing: Pacing::Interval(TOKEN_INTERVAL_MS),
            compute: trtllm,
        },
    ]
}

/// What a request asks of the model.
struct Asked {
    prompt: String,
    max_tokens: usize,
    stream: bool,
    echo: bool,
    /// The batch dimension of the outputs' shapes, if the model batches.
    batch: bool,
}

fn vllm(inputs: &[Tensor]) -> Result<Responses, Status> {
    let json = text(inputs, "sampling_parameters").unwrap_or_default();
    let max_tokens = json_number(&json, "max_tokens").unwrap_or(16);
    generate(asked(inputs, max_tokens, false)?)
}

fn trtllm(inputs: &[Tensor]) -> Result<Responses, Status> {
    let max_tokens = find(inputs, "max_tokens")
        .and_then(|t| t.data.first_chunk::<4>())
        .map(|b| i32::from_le_bytes(*b))
        .ok_or_else(|| Status::invalid_argument("max_tokens is required"))?;
    let max_tokens = usize::try_from(max_tokens).unwrap_or(0);
    generate(asked(inputs, max_tokens, true)?)
}

fn asked(inputs: &[Tensor], max_tokens: usize, batch: bool) -> Result<Asked, Status> {
    let prompt =
        text(inputs, "text_input").ok_or_else(|| Status::invalid_argument("no text_input"))?;
    let flag = |name| find(inputs, name).and_then(|t| t.data.first().copied());
    Ok(Asked {
        prompt,
        max_tokens,
        stream: flag("stream") == Some(1),
        echo: flag("exclude_input_in_output") == Some(0),
        batch,
    })
}

/// The responses: one per token when streaming, else one with them all.
fn generate(asked: Asked) -> Result<Responses, Status> {
    let words: Vec<String> = asked.prompt.split_whitespace().map(str::to_owned).collect();
    let prompt_tokens = words.len() as u32;
    let count = asked.max_tokens.min(words.len());
    let tokens: Vec<Result<String, Status>> = words
        .into_iter()
        .take(count)
        .enumerate()
        .map(|(i, word)| match (word.as_str(), i) {
            ("FAIL", _) => Err(Status::internal(format!(
                "the demo model failed at token {i}"
            ))),
            (_, 0) => Ok(word),
            _ => Ok(format!(" {word}")),
        })
        .collect();
    let echoed = asked.echo.then(|| asked.prompt.clone());
    let batch = asked.batch;
    if !asked.stream {
        let text: Result<String, Status> = tokens.into_iter().collect();
        let text = text.map(|t| echoed.unwrap_or_default() + &t);
        let response = text.map(|t| outputs(&t, prompt_tokens, count as u32, batch));
        return Ok(Box::new(std::iter::once(response)));
    }
    let mut echoed = echoed;
    Ok(Box::new(tokens.into_iter().map(move |token| {
        let token = token?;
        let text = echoed.take().unwrap_or_default() + &token;
        Ok(outputs(&text, prompt_tokens, 1, batch))
    })))
}

fn outputs(text: &str, prompt_tokens: u32, tokens: u32, batch: bool) -> Vec<Tensor> {
    let shape = if batch { vec![1, 1] } else { vec![1] };
    let mut framed = (text.len() as u32).to_le_bytes().to_vec();
    framed.extend_from_slice(text.as_bytes());
    let tensor = |name: &str, dtype, data: Vec<u8>| Tensor {
        name: name.to_owned(),
        dtype,
        shape: shape.clone(),
        data: Bytes::from(data),
    };
    vec![
        tensor("text_output", DataType::TypeString, framed),
        tensor(
            "num_input_tokens",
            DataType::TypeUint32,
            prompt_tokens.to_le_bytes().to_vec(),
        ),
        tensor(
            "num_output_tokens",
            DataType::TypeUint32,
            tokens.to_le_bytes().to_vec(),
        ),
    ]
}

fn find<'a>(inputs: &'a [Tensor], name: &str) -> Option<&'a Tensor> {
    inputs.iter().find(|t| t.name == name)
}

/// The first element of a BYTES input, as text.
fn text(inputs: &[Tensor], name: &str) -> Option<String> {
    let data = &find(inputs, name)?.data;
    let (len, rest) = data.split_first_chunk::<4>()?;
    let bytes = rest.get(..u32::from_le_bytes(*len) as usize)?;
    String::from_utf8(bytes.to_vec()).ok()
}

/// The unsigned number after `"key":` in a flat JSON object (the demo has
/// no JSON parser; the gateway writes `sampling_parameters` compactly).
fn json_number(json: &str, key: &str) -> Option<usize> {
    let at = json.find(&format!("\"{key}\":"))? + key.len() + 3;
    let digits: String = json[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}
