//! A model renamed at the edge (`upstream_model` of a route): the client
//! names it one way, the upstream serves it under another. A call's
//! message is renamed toward the upstream, and its answer — and any error
//! text that quotes the name — back toward the client, so the client never
//! sees the upstream's name. [`Renamed`] knows, for each message type,
//! the fields that hold a model's name; a message about no model has none.

use crate::proto::inference as pb;

/// A message whose fields may name a model.
pub(crate) trait Renamed {
    /// Every field naming the model `from` now names `to`.
    fn rename(&mut self, from: &str, to: &str);
}

/// `field` named `from`: now `to`.
fn swap(field: &mut String, from: &str, to: &str) {
    if field == from {
        to.clone_into(field);
    }
}

/// `Renamed` for messages about a model, by the path of their one name
/// field; for the others (server-wide), nothing to rename.
macro_rules! renamed {
    ($($message:ident: $($field:ident).+;)*) => {$(
        impl Renamed for pb::$message {
            fn rename(&mut self, from: &str, to: &str) {
                swap(&mut self.$($field).+, from, to);
            }
        }
    )*};
    (none: $($message:ident),* $(,)?) => {$(
        impl Renamed for pb::$message {
            fn rename(&mut self, _: &str, _: &str) {}
        }
    )*};
}

renamed! {
    ModelReadyRequest: name;
    ModelMetadataRequest: name;
    ModelMetadataResponse: name;
    ModelConfigRequest: name;
    ModelStatisticsRequest: name;
    ModelInferRequest: model_name;
    ModelInferResponse: model_name;
    RepositoryModelLoadRequest: model_name;
    RepositoryModelUnloadRequest: model_name;
}

renamed!(none:
    ServerMetadataRequest,
    ServerMetadataResponse,
    ModelReadyResponse,
    RepositoryIndexRequest,
    RepositoryModelLoadResponse,
    RepositoryModelUnloadResponse,
    SystemSharedMemoryStatusRequest,
    SystemSharedMemoryStatusResponse,
    SystemSharedMemoryRegisterRequest,
    SystemSharedMemoryRegisterResponse,
    SystemSharedMemoryUnregisterRequest,
    SystemSharedMemoryUnregisterResponse,
    CudaSharedMemoryStatusRequest,
    CudaSharedMemoryStatusResponse,
    CudaSharedMemoryRegisterRequest,
    CudaSharedMemoryRegisterResponse,
    CudaSharedMemoryUnregisterRequest,
    CudaSharedMemoryUnregisterResponse,
    TraceSettingRequest,
    TraceSettingResponse,
    LogSettingsRequest,
    LogSettingsResponse,
);

impl Renamed for pb::ModelConfigResponse {
    /// The model's name, and the instance groups Triton names after it
    /// (`<model>_<n>`).
    fn rename(&mut self, from: &str, to: &str) {
        let Some(config) = &mut self.config else {
            return;
        };
        swap(&mut config.name, from, to);
        for group in &mut config.instance_group {
            let numbered = group
                .name
                .strip_prefix(from)
                .and_then(|rest| rest.strip_prefix('_'))
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if let Some(n) = numbered {
                group.name = format!("{to}_{n}");
            }
        }
    }
}

impl Renamed for pb::ModelStatisticsResponse {
    fn rename(&mut self, from: &str, to: &str) {
        for stats in &mut self.model_stats {
            swap(&mut stats.name, from, to);
        }
    }
}

impl Renamed for pb::RepositoryIndexResponse {
    fn rename(&mut self, from: &str, to: &str) {
        for model in &mut self.models {
            swap(&mut model.name, from, to);
        }
    }
}

impl Renamed for pb::ModelStreamInferResponse {
    fn rename(&mut self, from: &str, to: &str) {
        if let Some(response) = &mut self.infer_response {
            response.rename(from, to);
        }
        self.error_message = text(&self.error_message, from, to);
    }
}

/// An error text with the quoted model name `'from'` as `'to'` (Triton
/// quotes names so: `Request for unknown model: 'x' is not found`).
pub(crate) fn text(message: &str, from: &str, to: &str) -> String {
    message.replace(&format!("'{from}'"), &format!("'{to}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_about_the_model_is_renamed_and_no_other_name() {
        let mut request = pb::ModelInferRequest {
            model_name: "classifier".into(),
            ..Default::default()
        };
        request.rename("classifier", "classifier_v2");
        assert_eq!(request.model_name, "classifier_v2");
        let mut stats = pb::ModelStatisticsResponse {
            model_stats: vec![
                pb::ModelStatistics {
                    name: "classifier_v2".into(),
                    ..Default::default()
                },
                pb::ModelStatistics {
                    name: "other".into(),
                    ..Default::default()
                },
            ],
        };
        stats.rename("classifier_v2", "classifier");
        let names: Vec<&str> = stats.model_stats.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["classifier", "other"]);
        assert_eq!(
            text(
                "Request for unknown model: 'classifier_v2' is not found",
                "classifier_v2",
                "classifier"
            ),
            "Request for unknown model: 'classifier' is not found"
        );
    }
}
