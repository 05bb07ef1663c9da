//! The legacy TensorRT Inference Server v1 HTTP wire format (v1 §7;
//! v1 §2–3), pure and synchronous: the protobuf text format
//! of its headers and bodies (`text`, generic over the messages, which
//! `translate::v1` supplies) and the request body split per input (`body`).

pub mod body;
pub mod text;

/// How a status or infer answer encodes its message (`?format=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Protobuf text (`DebugString`), the default.
    Text,
    /// Serialized protobuf.
    Binary,
    /// Protobuf JSON (status only).
    Json,
}

impl Format {
    /// The `format` query parameter; the last one wins, absent = text.
    /// `None` for a value v1 servers do not know.
    pub fn from_query(query: &str) -> Option<Format> {
        let mut format = Format::Text;
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if key == "format" {
                format = match value {
                    "text" => Format::Text,
                    "binary" => Format::Binary,
                    "json" => Format::Json,
                    _ => return None,
                };
            }
        }
        Some(format)
    }
}

#[cfg(test)]
mod tests {
    use super::Format;

    #[test]
    fn format_comes_from_the_query() {
        let cases = [
            ("", Some(Format::Text)),
            ("format=binary", Some(Format::Binary)),
            ("a=1&format=json", Some(Format::Json)),
            ("format=text&x", Some(Format::Text)),
            ("format=xml", None),
        ];
        for (query, want) in cases {
            assert_eq!(Format::from_query(query), want, "{query}");
        }
    }
}
