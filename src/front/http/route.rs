//! Classifies a request once, from its method and raw path, into a
//! [`Route`] (v2 §0.3). Nothing downstream looks at the path again.
//! Matching is on the raw, un-percent-decoded path; the query is ignored.

use http::Method;

use crate::config::Group;
use crate::front::http::openai::route::OpenAiRoute;
use crate::front::http::v1::route::V1Route;

pub use crate::model::ModelRef;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShmAction {
    Status,
    Register,
    Unregister,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    HealthLive,
    HealthReady,
    ServerMetadata,
    ModelMetadata(ModelRef),
    ModelReady(ModelRef),
    ModelConfig(ModelRef),
    /// `None` = statistics of every model.
    ModelStats(Option<ModelRef>),
    Infer(ModelRef),
    Generate(ModelRef),
    GenerateStream(ModelRef),
    /// `None` = global trace settings.
    TraceSetting(Option<String>),
    Logging,
    RepositoryIndex,
    /// `repository` is the optional explicit repository segment.
    RepositoryLoad {
        model: String,
        repository: Option<String>,
    },
    RepositoryUnload {
        model: String,
        repository: Option<String>,
    },
    SystemShm {
        region: Option<String>,
        action: ShmAction,
    },
    CudaShm {
        region: Option<String>,
        action: ShmAction,
    },
    /// tensorgate's own extension: the backends of the upstream group.
    Backends,
    /// The legacy v1 API (`[prefix]/api/...`), answered by `front::http::v1`.
    V1(V1Route),
    /// The OpenAI API (`/v1/...`), answered by `front::http::openai`.
    OpenAi(OpenAiRoute),
}

impl Route {
    /// Classifies a raw request target (path and query): the legacy v1 API
    /// at `/api/...` and under `v1_prefix`, else a v2 route of the path,
    /// else (only then, and when `openai` is on) the OpenAI API's.
    pub fn classify_target(target: &str, v1_prefix: &str, openai: bool) -> Option<Route> {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let v1_path = match path.strip_prefix(v1_prefix) {
            Some(rest) if !v1_prefix.is_empty() && rest.starts_with("/api/") => rest,
            _ => path,
        };
        if let Some(route) = V1Route::classify(v1_path, query) {
            return Some(Route::V1(route));
        }
        match Route::classify(path) {
            None if openai => OpenAiRoute::classify(path).map(Route::OpenAi),
            route => route,
        }
    }

    /// Classifies `path` (query already stripped). `None` = 404 Not Found.
    pub fn classify(path: &str) -> Option<Route> {
        match path {
            "/v2/models/stats" => return Some(Route::ModelStats(None)),
            "/v2/logging" => return Some(Route::Logging),
            "/v2" => return Some(Route::ServerMetadata),
            "/v2/health/live" => return Some(Route::HealthLive),
            "/v2/health/ready" => return Some(Route::HealthReady),
            "/v2/trace/setting" => return Some(Route::TraceSetting(None)),
            "/v2/tensorgate/backends" => return Some(Route::Backends),
            _ => {}
        }
        let rest = path.strip_prefix("/v2/")?;
        // Held in place, not collected (an allocation on every request):
        // the longest route has five segments, so a path with more than
        // `MAX_SEGMENTS` is no route, as a path with an empty one is not.
        const MAX_SEGMENTS: usize = 8;
        let mut held = [""; MAX_SEGMENTS];
        let mut n = 0;
        for segment in rest.split('/') {
            if segment.is_empty() || n == MAX_SEGMENTS {
                return None;
            }
            held[n] = segment;
            n += 1;
        }
        let segments = &held[..n];
        match segments[0] {
            "models" => model_route(&segments[1..]),
            "systemsharedmemory" => shm_route(&segments[1..])
                .map(|(region, action)| Route::SystemShm { region, action }),
            "cudasharedmemory" => {
                shm_route(&segments[1..]).map(|(region, action)| Route::CudaShm { region, action })
            }
            "repository" => repository_route(&segments[1..]),
            _ => None,
        }
    }

    /// Methods each route accepts (others get 405).
    pub fn allows(&self, method: &Method) -> bool {
        let get = method == Method::GET;
        let post = method == Method::POST;
        match self {
            Route::HealthLive
            | Route::HealthReady
            | Route::ServerMetadata
            | Route::ModelMetadata(_)
            | Route::ModelReady(_)
            | Route::ModelConfig(_)
            | Route::ModelStats(_)
            | Route::Backends => get,
            Route::TraceSetting(_) | Route::Logging => get || post,
            Route::V1(route) => route.allows(method),
            Route::OpenAi(route) => route.allows(method),
            Route::SystemShm { action, .. } | Route::CudaShm { action, .. } => match action {
                ShmAction::Status => get,
                _ => post,
            },
            Route::Infer(_)
            | Route::Generate(_)
            | Route::GenerateStream(_)
            | Route::RepositoryIndex
            | Route::RepositoryLoad { .. }
            | Route::RepositoryUnload { .. } => post,
        }
    }

    /// The route's name in metrics and logs (one per variant).
    pub fn name(&self) -> &'static str {
        match self {
            Route::HealthLive => "health_live",
            Route::HealthReady => "health_ready",
            Route::ServerMetadata => "server_metadata",
            Route::ModelMetadata(_) => "model_metadata",
            Route::ModelReady(_) => "model_ready",
            Route::ModelConfig(_) => "model_config",
            Route::ModelStats(_) => "model_stats",
            Route::Infer(_) => "infer",
            Route::Generate(_) => "generate",
            Route::GenerateStream(_) => "generate_stream",
            Route::TraceSetting(_) => "trace_setting",
            Route::Logging => "logging",
            Route::RepositoryIndex => "repository_index",
            Route::RepositoryLoad { .. } => "repository_load",
            Route::RepositoryUnload { .. } => "repository_unload",
            Route::SystemShm { .. } => "system_shared_memory",
            Route::CudaShm { .. } => "cuda_shared_memory",
            Route::Backends => "backends",
            Route::V1(_) => "v1",
            Route::OpenAi(route) => route.name(),
        }
    }

    /// The endpoint group (Triton's `--http-restricted-api` groups, plus
    /// `admin` for tensorgate's own).
    pub fn group(&self) -> Group {
        match self {
            Route::HealthLive | Route::HealthReady | Route::ModelReady(_) => Group::Health,
            Route::ServerMetadata | Route::ModelMetadata(_) => Group::Metadata,
            Route::ModelConfig(_) => Group::ModelConfig,
            Route::ModelStats(_) => Group::Statistics,
            Route::Infer(_) | Route::Generate(_) | Route::GenerateStream(_) => Group::Inference,
            Route::TraceSetting(_) => Group::Trace,
            Route::Logging => Group::Logging,
            Route::RepositoryIndex
            | Route::RepositoryLoad { .. }
            | Route::RepositoryUnload { .. } => Group::ModelRepository,
            Route::SystemShm { .. } | Route::CudaShm { .. } => Group::SharedMemory,
            Route::Backends => Group::Admin,
            Route::V1(v1) => v1.group(),
            Route::OpenAi(route) => route.group(),
        }
    }

    /// The model a route is about, if any.
    pub fn model(&self) -> Option<&str> {
        match self {
            Route::ModelMetadata(m)
            | Route::ModelReady(m)
            | Route::ModelConfig(m)
            | Route::ModelStats(Some(m))
            | Route::Infer(m)
            | Route::Generate(m)
            | Route::GenerateStream(m) => Some(&m.name),
            Route::RepositoryLoad { model, .. } | Route::RepositoryUnload { model, .. } => {
                Some(model)
            }
            Route::V1(v1) => v1.model(),
            _ => None,
        }
    }

    /// `/generate`, `/generate_stream` and the OpenAI generations:
    /// long-running, maybe streamed.
    pub fn is_generate(&self) -> bool {
        match self {
            Route::Generate(_) | Route::GenerateStream(_) => true,
            Route::OpenAi(route) => route.generates(),
            _ => false,
        }
    }
}

/// `/v2/models/{m}[/versions/{v}][/suffix]` (v2 §0.3 rule 3).
fn model_route(segs: &[&str]) -> Option<Route> {
    let (name, rest) = segs.split_first()?;
    let (version, rest) = match rest {
        ["versions", v, rest @ ..] if v.bytes().all(|b| b.is_ascii_digit()) => (*v, rest),
        _ => ("", rest),
    };
    let model = ModelRef {
        name: (*name).to_string(),
        version: normalize_version(version),
    };
    let versioned = !version.is_empty();
    Some(match rest {
        [] => Route::ModelMetadata(model),
        ["infer"] => Route::Infer(model),
        ["generate"] => Route::Generate(model),
        ["generate_stream"] => Route::GenerateStream(model),
        ["ready"] => Route::ModelReady(model),
        ["config"] => Route::ModelConfig(model),
        ["stats"] => Route::ModelStats(Some(model)),
        ["trace", "setting"] if !versioned => Route::TraceSetting(Some(model.name)),
        _ => return None,
    })
}

/// Triton parses the version with `stol`: `01` is version 1 (`Q05`).
fn normalize_version(v: &str) -> String {
    if v.is_empty() {
        return String::new();
    }
    let trimmed = v.trim_start_matches('0');
    if trimmed.is_empty() {
        "0".to_string()
    } else {
        trimmed.to_string()
    }
}

fn shm_route(segs: &[&str]) -> Option<(Option<String>, ShmAction)> {
    let (region, action) = match segs {
        ["region", r, a] => (Some((*r).to_string()), *a),
        [a] => (None, *a),
        _ => return None,
    };
    let action = match action {
        "status" => ShmAction::Status,
        "register" => ShmAction::Register,
        "unregister" => ShmAction::Unregister,
        _ => return None,
    };
    Some((region, action))
}

/// `/v2/repository[/{r}]/(index|models/{m}/(load|unload))` (rule 8).
fn repository_route(segs: &[&str]) -> Option<Route> {
    let (repository, rest) = match segs {
        ["index"] | ["models", ..] => (None, segs),
        [r, rest @ ..] => (Some((*r).to_string()), rest),
        [] => return None,
    };
    match rest {
        ["index"] => Some(Route::RepositoryIndex),
        ["models", m, "load"] => Some(Route::RepositoryLoad {
            model: (*m).to_string(),
            repository,
        }),
        ["models", m, "unload"] => Some(Route::RepositoryUnload {
            model: (*m).to_string(),
            repository,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str, version: &str) -> ModelRef {
        ModelRef {
            name: name.into(),
            version: version.into(),
        }
    }

    #[test]
    fn classifies_the_facts_sheet_paths() {
        let cases = [
            ("/v2", Some(Route::ServerMetadata)),
            ("/v2/health/live", Some(Route::HealthLive)),
            ("/v2/models/stats", Some(Route::ModelStats(None))),
            (
                "/v2/models/add_sub",
                Some(Route::ModelMetadata(m("add_sub", ""))),
            ),
            (
                "/v2/models/add_sub/versions/01/infer",
                Some(Route::Infer(m("add_sub", "1"))),
            ),
            (
                "/v2/models/add_sub/versions/0/ready",
                Some(Route::ModelReady(m("add_sub", "0"))),
            ),
            (
                "/v2/models/add%5Fsub/config",
                Some(Route::ModelConfig(m("add%5Fsub", ""))),
            ),
            (
                "/v2/models/a/trace/setting",
                Some(Route::TraceSetting(Some("a".into()))),
            ),
            ("/v2/models/a/versions/1/trace/setting", None),
            ("/v2/models/a/versions/x/infer", None),
            ("/v2/models/a/", None),
            ("/v2//models/a", None),
            ("/v2/repository/index", Some(Route::RepositoryIndex)),
            ("/v2/repository/any/index", Some(Route::RepositoryIndex)),
            (
                "/v2/repository/r/models/m/load",
                Some(Route::RepositoryLoad {
                    model: "m".into(),
                    repository: Some("r".into()),
                }),
            ),
            (
                "/v2/systemsharedmemory/region/r1/status",
                Some(Route::SystemShm {
                    region: Some("r1".into()),
                    action: ShmAction::Status,
                }),
            ),
            (
                "/v2/cudasharedmemory/unregister",
                Some(Route::CudaShm {
                    region: None,
                    action: ShmAction::Unregister,
                }),
            ),
            ("/v2/nothing", None),
        ];
        for (path, want) in cases {
            assert_eq!(Route::classify(path), want, "{path}");
        }
    }

    #[test]
    fn v1_paths_with_and_without_the_prefix() {
        let live = Some(Route::V1(V1Route::HealthLive));
        assert_eq!(Route::classify_target("/api/health/live", "", true), live);
        assert_eq!(Route::classify_target("/api/health/live", "/p", true), live);
        assert_eq!(
            Route::classify_target("/p/api/health/live", "/p", true),
            live
        );
        assert_eq!(Route::classify_target("/p/api/health/live", "", true), None);
        assert_eq!(
            Route::classify_target("/v2/health/live?x=1", "/p", true),
            Some(Route::HealthLive)
        );
    }

    #[test]
    fn openai_paths_only_when_the_front_is_on() {
        let chat = Some(Route::OpenAi(OpenAiRoute::ChatCompletions));
        assert_eq!(
            Route::classify_target("/v1/chat/completions?x", "", true),
            chat
        );
        assert_eq!(
            Route::classify_target("/v1/chat/completions", "", false),
            None
        );
        assert!(Route::classify_target("/v1/completions", "", true)
            .is_some_and(|r| r.is_generate() && r.group() == Group::Inference));
    }
}
