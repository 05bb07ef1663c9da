//! Classifies a legacy v1 path (v1 §7.1) once into a [`V1Route`]:
//! TRTIS matched `/api/(health|infer|status|modelcontrol|sharedmemorycontrol|repository)(.*)`
//! and answered anything else under `/api/` with 400. The `format` query
//! parameter is read here too, so nothing downstream looks at the URL.

use http::Method;

use crate::model::ModelRef;
use crate::wire::v1::Format;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum V1Route {
    HealthLive,
    HealthReady,
    /// `None` = every model.
    Status {
        model: Option<String>,
        format: Format,
    },
    Infer {
        model: ModelRef,
        format: Format,
    },
    ModelLoad(String),
    ModelUnload(String),
    RepositoryIndex(Format),
    /// Shared-memory control: not translated (400 UNSUPPORTED).
    SharedMemoryControl,
    /// Under `/api/` but no endpoint, or a bad `format` (400).
    Invalid(String),
}

impl V1Route {
    /// The endpoint group, as for the v2 routes (auth and limits).
    pub fn group(&self) -> &'static str {
        match self {
            V1Route::HealthLive | V1Route::HealthReady => "health",
            V1Route::Status { .. } | V1Route::Invalid(_) => "metadata",
            V1Route::Infer { .. } => "inference",
            V1Route::ModelLoad(_) | V1Route::ModelUnload(_) | V1Route::RepositoryIndex(_) => {
                "model-repository"
            }
            V1Route::SharedMemoryControl => "shared-memory",
        }
    }

    /// The model the route is about, if any.
    pub fn model(&self) -> Option<&str> {
        match self {
            V1Route::Infer { model, .. } => Some(&model.name),
            V1Route::Status { model, .. } => model.as_deref(),
            V1Route::ModelLoad(m) | V1Route::ModelUnload(m) => Some(m),
            _ => None,
        }
    }

    /// `path` is the path without any configured prefix; `None` when it is
    /// not under `/api/` at all.
    pub fn classify(path: &str, query: &str) -> Option<V1Route> {
        let rest = path.strip_prefix("/api/")?;
        let Some(format) = Format::from_query(query) else {
            return Some(V1Route::Invalid(format!(
                "unsupported format in query '{query}'"
            )));
        };
        let segments: Vec<&str> = rest.split('/').collect();
        let route = match segments.as_slice() {
            ["health", "live"] => V1Route::HealthLive,
            ["health", "ready"] => V1Route::HealthReady,
            ["status"] | ["status", ""] => V1Route::Status {
                model: None,
                format,
            },
            ["status", model] => V1Route::Status {
                model: Some((*model).to_string()),
                format,
            },
            ["infer", model, version @ ..] if !model.is_empty() => {
                let version = match version {
                    [] => String::new(),
                    // Digits as TRTIS parsed them: `007` is version 7.
                    [v] if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => {
                        match v.trim_start_matches('0') {
                            "" => "0".to_string(),
                            digits => digits.to_string(),
                        }
                    }
                    _ => return Some(invalid(path)),
                };
                V1Route::Infer {
                    model: ModelRef {
                        name: (*model).to_string(),
                        version,
                    },
                    format,
                }
            }
            ["modelcontrol", "load", model] if !model.is_empty() => {
                V1Route::ModelLoad((*model).to_string())
            }
            ["modelcontrol", "unload", model] if !model.is_empty() => {
                V1Route::ModelUnload((*model).to_string())
            }
            ["repository", "index"] => V1Route::RepositoryIndex(format),
            ["sharedmemorycontrol", ..] => V1Route::SharedMemoryControl,
            _ => invalid(path),
        };
        Some(route)
    }

    /// Methods each route accepts (others get 405).
    pub fn allows(&self, method: &Method) -> bool {
        match self {
            V1Route::HealthLive
            | V1Route::HealthReady
            | V1Route::Status { .. }
            | V1Route::RepositoryIndex(_) => method == Method::GET,
            V1Route::Infer { .. } | V1Route::ModelLoad(_) | V1Route::ModelUnload(_) => {
                method == Method::POST
            }
            V1Route::SharedMemoryControl | V1Route::Invalid(_) => true,
        }
    }
}

fn invalid(path: &str) -> V1Route {
    V1Route::Invalid(format!("no v1 endpoint for '{path}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn infer(name: &str, version: &str, format: Format) -> Option<V1Route> {
        Some(V1Route::Infer {
            model: ModelRef {
                name: name.into(),
                version: version.into(),
            },
            format,
        })
    }

    #[test]
    fn classifies_the_captured_paths() {
        let cases = [
            ("/api/health/live", "", Some(V1Route::HealthLive)),
            ("/api/health/ready", "", Some(V1Route::HealthReady)),
            (
                "/api/status",
                "format=binary",
                Some(V1Route::Status {
                    model: None,
                    format: Format::Binary,
                }),
            ),
            (
                "/api/status/simple",
                "format=binary",
                Some(V1Route::Status {
                    model: Some("simple".into()),
                    format: Format::Binary,
                }),
            ),
            (
                "/api/infer/simple",
                "format=binary",
                infer("simple", "", Format::Binary),
            ),
            (
                "/api/infer/simple/1",
                "",
                infer("simple", "1", Format::Text),
            ),
            (
                "/api/infer/simple/007",
                "",
                infer("simple", "7", Format::Text),
            ),
            (
                "/api/infer/simple/0",
                "",
                infer("simple", "0", Format::Text),
            ),
            (
                "/api/modelcontrol/load/m",
                "",
                Some(V1Route::ModelLoad("m".into())),
            ),
            (
                "/api/modelcontrol/unload/m",
                "",
                Some(V1Route::ModelUnload("m".into())),
            ),
            (
                "/api/repository/index",
                "",
                Some(V1Route::RepositoryIndex(Format::Text)),
            ),
            (
                "/api/sharedmemorycontrol/status",
                "",
                Some(V1Route::SharedMemoryControl),
            ),
            ("/v2/health/live", "", None),
            ("/apix", "", None),
        ];
        for (path, query, want) in cases {
            assert_eq!(V1Route::classify(path, query), want, "{path}?{query}");
        }
        for path in [
            "/api/nothing",
            "/api/infer/m/x",
            "/api/infer/m/1/2",
            "/api/health",
        ] {
            assert!(
                matches!(V1Route::classify(path, ""), Some(V1Route::Invalid(_))),
                "{path}"
            );
        }
        assert!(matches!(
            V1Route::classify("/api/status", "format=xml"),
            Some(V1Route::Invalid(_))
        ));
    }
}
