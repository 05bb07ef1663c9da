//! A model's chat template: the `chat_template` of its Hugging Face
//! `tokenizer_config.json`, compiled once with minijinja (Python's string
//! and dict methods from minijinja-contrib's pycompat, `raise_exception`
//! as HF's renderer has it) and rendered per request with the messages and
//! `add_generation_prompt`. A file that is not such a config, or a template
//! that does not compile, refuses the configuration before any port is
//! bound.

use minijinja::{context, Environment, ErrorKind};
use serde_json::Value;

use crate::error::{Error, Result};

/// The name the one template is kept under in its environment.
const NAME: &str = "chat";

/// A compiled chat template and the special tokens it may use.
pub(crate) struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// Reads `path` (a `tokenizer_config.json`) and compiles its template.
    pub(crate) fn load(path: &std::path::Path) -> Result<ChatTemplate, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        ChatTemplate::from_tokenizer_config(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The template of a `tokenizer_config.json`'s text: `chat_template`
    /// a string, or a list of named templates of which `default` is used.
    pub(crate) fn from_tokenizer_config(text: &str) -> Result<ChatTemplate, String> {
        let config: Value =
            serde_json::from_str(text).map_err(|e| format!("not a JSON tokenizer config: {e}"))?;
        let source = match config.get("chat_template") {
            Some(Value::String(source)) => source.clone(),
            Some(Value::Array(named)) => named
                .iter()
                .find(|t| t.get("name").and_then(Value::as_str) == Some("default"))
                .and_then(|t| t.get("template").and_then(Value::as_str))
                .ok_or("chat_template is a list without a \"default\" template")?
                .to_string(),
            _ => return Err("it has no chat_template".into()),
        };
        let mut env = Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_template_owned(NAME, source)
            .map_err(|e| format!("its chat_template does not compile: {e}"))?;
        Ok(ChatTemplate {
            env,
            bos_token: special_token(&config, "bos_token"),
            eos_token: special_token(&config, "eos_token"),
        })
    }

    /// The prompt of `messages`, ending where the assistant's turn begins.
    /// A template that raises (a role it does not take, say) is the
    /// client's 400 with the template's words.
    pub(crate) fn render(&self, messages: &[Value]) -> Result<String> {
        let template = self
            .env
            .get_template(NAME)
            .map_err(|e| Error::internal(e.to_string()))?;
        let context = context! {
            messages => messages,
            add_generation_prompt => true,
            bos_token => &self.bos_token,
            eos_token => &self.eos_token,
        };
        template.render(context).map_err(|e| {
            let message = match e.kind() {
                ErrorKind::InvalidOperation => {
                    e.detail().unwrap_or("invalid operation").to_string()
                }
                _ => e.to_string(),
            };
            Error::invalid(format!("the chat template refused the messages: {message}"))
                .about("messages")
        })
    }
}

/// HF's `raise_exception(message)`: the template refuses its input.
fn raise_exception(message: String) -> Result<String, minijinja::Error> {
    Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
}

/// A special token as `tokenizer_config.json` writes it: a string, or an
/// `AddedToken` object with its `content`; empty when absent.
fn special_token(config: &Value, key: &str) -> String {
    match config.get(key) {
        Some(Value::String(token)) => token.clone(),
        Some(token) => token
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_template_renders_with_python_methods_and_the_generation_prompt() {
        let config = json!({
            "bos_token": {"content": "<s>", "lstrip": false},
            "eos_token": "</s>",
            "chat_template": "{{ bos_token }}{% for m in messages %}[{{ m['role'].upper() }}] {{ m['content'].strip() }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}[ASSISTANT]{% endif %}"
        });
        let template = ChatTemplate::from_tokenizer_config(&config.to_string()).unwrap();
        let messages = [json!({"role":"user","content":"  hi  "})];
        assert_eq!(
            template.render(&messages).unwrap(),
            "<s>[USER] hi</s>[ASSISTANT]"
        );
    }

    #[test]
    fn raise_exception_is_a_400_and_bad_configs_are_refused() {
        let config = json!({"chat_template": "{% if messages[0]['role'] != 'user' %}{{ raise_exception('Conversation roles must start with user') }}{% endif %}ok"});
        let template = ChatTemplate::from_tokenizer_config(&config.to_string()).unwrap();
        let error = template
            .render(&[json!({"role":"system","content":"x"})])
            .unwrap_err();
        assert_eq!(error.status(), 400);
        assert!(
            error
                .message
                .contains("Conversation roles must start with user"),
            "{}",
            error.message
        );
        let named = json!({"chat_template": [{"name": "default", "template": "d"}, {"name": "tool_use", "template": "t"}]});
        let template = ChatTemplate::from_tokenizer_config(&named.to_string()).unwrap();
        assert_eq!(template.render(&[]).unwrap(), "d");
        for bad in [
            "{}",
            "[",
            r#"{"chat_template": "{% for %}"}"#,
            r#"{"chat_template": [{"name":"x","template":"t"}]}"#,
        ] {
            assert!(ChatTemplate::from_tokenizer_config(bad).is_err(), "{bad}");
        }
    }
}
